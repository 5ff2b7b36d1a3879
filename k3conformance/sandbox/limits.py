"""What a sandboxed run may use and what it leaves: limits, results, errors, and the constants the other modules share."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

BUBBLEWRAP = "bubblewrap"


RLIMIT = "rlimit"


BACKENDS = (BUBBLEWRAP, RLIMIT)


GIB = 1 << 30


MIB = 1 << 20


OUTPUT_TAIL_CHARS = 2000


NOBODY_UID = 65534


NOGROUP_GID = 65534


# A fallback run as root gets uid PER_RUN_UID_BASE + (its pid): no account owns such a
# uid, so RLIMIT_NPROC counts only this run's processes (65534 would be shared by every
# concurrent run, and one fork bomb would starve the others), and after the run "kill
# everything this uid owns" is exact. pid_max is at most 2**22, so the uid stays far
# below 2**32 - 1, which the kernel reserves.
PER_RUN_UID_BASE = 1 << 30


# Where bubblewrap mounts the work directory inside the sandbox.
SANDBOX_DIR = "/sandbox"


PROGRAM_FILE = "main.py"


SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


# Directories any uid may write to on a typical host; a fallback run's leftovers there
# are removed afterwards.
WORLD_WRITABLE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


_READ_CHUNK = 1 << 16


# Without a pidfd the watcher polls for the program's exit this often.
_EXIT_POLL_S = 0.02


# After the process group is killed, how long to wait for the pipes to reach EOF (a
# process that left the group may still hold them).
_DRAIN_GRACE_S = 0.5


# After the kill, how long to wait for every process of the run to be gone (bubblewrap's
# namespace init, the per-run uid's processes) before giving up on collecting its files.
_GONE_GRACE_S = 3.0


# A sealed run: the sandbox writes a random token here, the wrapper (main.py) reads and
# deletes it before the program starts, and prints it as the last line once the program
# has run to its end. The program itself goes into PROGRAM_BODY.
SEAL_FILE = ".k3-seal"


PROGRAM_BODY = "program.py"


SEAL_MARK = "k3-seal"


_LAUNCHER_FAILED = b"E"


# Uid modes: who the program runs as, outside any user namespace.
_PER_RUN = "per-run"


_NOBODY = "nobody"


_UNCHANGED = "unchanged"


class SandboxError(RuntimeError):
    """The sandbox could not start a program: a fault of the machine, never of the program."""


class SandboxUnavailable(SandboxError):
    """The requested backend does not work on this machine."""


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: float = 10
    wall_seconds: float = 20
    memory_bytes: int = 2 * GIB  # address space (RLIMIT_AS) of each process
    file_size_bytes: int = 16 * MIB
    processes: int = 64
    output_bytes: int = 1 * MIB  # captured per stream; more ends the run
    # What the host reads back of the files a run left, when the caller asks for them:
    # sparse files and file counts cost the program nothing, so the host caps both.
    collect_files: int = 1000
    collect_bytes: int = 16 * MIB
    # The whole run's memory (every process, and the tmpfs pages it writes), where a memory
    # cgroup can be made (cgroup.py); elsewhere fallback_limits lowers the per-process caps.
    sandbox_memory_bytes: int = 2 * GIB
    # The work folder's tmpfs, where the host may mount one (workfolder.py): its size and
    # how many files and directories it may hold.
    disk_bytes: int = 64 * MIB
    disk_files: int = 4096

    def __post_init__(self) -> None:
        for name in (
            "cpu_seconds",
            "wall_seconds",
            "memory_bytes",
            "file_size_bytes",
            "processes",
            "output_bytes",
            "collect_files",
            "collect_bytes",
            "sandbox_memory_bytes",
            "disk_bytes",
            "disk_files",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxLimits.{name} must be positive, got {getattr(self, name)!r}")

    @property
    def worst_case_memory_bytes(self) -> int:
        """The most memory one run can hold without a cgroup: RLIMIT_AS is per process, so
        every allowed process at the cap, plus the two tmpfs mounts (/tmp, /dev/shm) of the
        bubblewrap backend, which live in RAM outside any process's address space."""
        return self.processes * self.memory_bytes + 2 * 4 * self.file_size_bytes


# Without a memory cgroup a run holds up to processes x memory_bytes: these bound both.
FALLBACK_PROCESSES = 8


FALLBACK_MIN_MEMORY_BYTES = 512 * MIB


def fallback_limits(limits: SandboxLimits) -> SandboxLimits:
    """The limits a run gets where no memory cgroup caps the whole sandbox: at most
    FALLBACK_PROCESSES processes, each with at most half the sandbox's memory (but not under
    FALLBACK_MIN_MEMORY_BYTES, which a Python test program needs) as its address space."""
    memory = min(limits.memory_bytes, max(limits.sandbox_memory_bytes // 2, FALLBACK_MIN_MEMORY_BYTES))
    return dataclasses.replace(limits, processes=min(limits.processes, FALLBACK_PROCESSES), memory_bytes=memory)


@dataclass(frozen=True)
class ExecutionResult:
    passed: bool
    reason: str  # one short line: "passed", "assertion failed: …", "timed out after 20 s", …
    exit_code: int | None  # None when a signal ended the program or it timed out
    signal: int | None  # the signal that ended the program, if any
    timed_out: bool
    duration_s: float
    stdout_excerpt: str  # the last OUTPUT_TAIL_CHARS characters
    stderr_excerpt: str
    backend: str = ""
    # The files under the program's directory after the run (path -> text), when the
    # caller asked for them back and every process of the run was gone; None otherwise.
    files: Mapping[str, str] | None = None
    # Why `files` is None or incomplete although asked for (a cap reached, processes that
    # outlived the kill); None when everything asked for came back.
    collect_problem: str | None = None
    # A sealed run: what the program left in K3_SEAL_PAYLOAD when it ran to its end (""
    # when nothing); None when it did not reach its end or the run was not sealed.
    sealed: str | None = None
    # The most memory the whole run held at once, from its memory cgroup; None without one.
    memory_peak_bytes: int | None = None


@dataclass(frozen=True)
class _Interpreter:
    executable: str
    prefix: str
    version: tuple[int, int, int]

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))


@dataclass(frozen=True)
class _Isolation:
    """One working sandbox configuration, found by probing."""

    backend: str
    interpreter: _Interpreter
    uid_mode: str
    # The rlimit backend's empty network namespace; bubblewrap always unshares the network.
    unshare_net: bool


DEFAULT_LIMITS = SandboxLimits()
