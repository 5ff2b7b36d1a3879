"""Runs model-written Python programs (a solution followed by its tests) in a sandbox.

A program passes iff it exits with status 0. Everything it does is treated as hostile:
it runs in a fresh temporary directory, in its own process group (killed as a whole when
it ends or times out), under resource limits, with a scrubbed environment and no stdin.
Two backends:

* ``bubblewrap``: ``bwrap`` gives the program its own user, mount, PID, network, IPC and
  UTS namespaces; it sees read-only /usr and the interpreter's prefix, a small tmpfs /tmp,
  and its directory; it has no network, runs as uid 65534 inside, and everything it
  started dies with the namespace.
* ``rlimit``: the fallback when ``bwrap`` is missing or unusable. The same resource
  limits; as root it drops to a uid of its own and, where the kernel allows, enters an
  empty network namespace. It sees the host's filesystem as Unix permissions allow.

Every run goes through a small launcher (``python -I -S -c _LAUNCHER``) that applies the
limits, drops privileges and then execs the program (or ``bwrap``). Doing that in a
``preexec_fn`` instead would run Python code between fork and exec in a multi-threaded
process, which the ``subprocess`` documentation calls unsafe, and the pool is threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

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

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "wall_seconds", "memory_bytes", "file_size_bytes", "processes", "output_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxLimits.{name} must be positive, got {getattr(self, name)!r}")


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
    # caller gave it files and asked for them back; None otherwise.
    files: Mapping[str, str] | None = None


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


# ---------------------------------------------------------------- the launcher

_LAUNCHER = r"""
import os, resource, sys

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38


def libc_call(name, *args):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, name + ": " + os.strerror(errno))


def drop_to(uid, gid, workdir):
    for root, directories, names in os.walk(workdir):
        for name in [""] + directories + names:
            os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def lower(kind, soft, hard):
    current_hard = resource.getrlimit(kind)[1]
    if current_hard != resource.RLIM_INFINITY:
        hard = min(hard, current_hard)
    resource.setrlimit(kind, (min(soft, hard), hard))


def main(status, keep_status, workdir, cpu, memory, file_size, processes, uid, gid, unshare_net, orphan_guard,
         *command):
    status = int(status)
    try:
        try:
            with open("/proc/self/oom_score_adj", "w") as handle:
                handle.write("1000")
        except OSError:
            pass
        if unshare_net == "1":
            libc_call("unshare", CLONE_NEWNET)
        if uid:
            libc_call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            number = int(uid[1:]) + os.getpid() if uid.startswith("+") else int(uid)
            drop_to(number, int(gid), workdir)
        if orphan_guard == "1":
            libc_call("prctl", PR_SET_PDEATHSIG, 9, 0, 0, 0)
        lower(resource.RLIMIT_CORE, 0, 0)
        lower(resource.RLIMIT_CPU, int(cpu), int(cpu) + 1)
        lower(resource.RLIMIT_AS, int(memory), int(memory))
        lower(resource.RLIMIT_FSIZE, int(file_size), int(file_size))
        lower(resource.RLIMIT_NPROC, int(processes), int(processes))
        if keep_status != "1":
            os.set_inheritable(status, False)
        os.execv(command[0], command)
    except BaseException as error:
        os.write(status, ("E" + type(error).__name__ + ": " + str(error)).encode())
        os._exit(125)


main(*sys.argv[1:])
"""


# ---------------------------------------------------------------- public API


def run_python(
    program: str,
    *,
    limits: SandboxLimits = SandboxLimits(),
    backend: str | None = None,
    files: Mapping[str, str] | None = None,
    collect: bool = False,
) -> ExecutionResult:
    """Run `program` (solution + tests) in the sandbox; it passes iff it exits with status 0.

    `files` (relative path -> text) are written next to the program first, a fresh copy
    for this run only; with `collect` the result carries the files as the program left
    them (`ExecutionResult.files`). Raises SandboxError only when the sandbox itself fails
    to start the program, SandboxUnavailable when `backend` does not work here, and
    ValueError for a file path that leaves the directory. Nothing the program does raises.
    """
    return _execute(program, limits, _isolation_for(backend), files or {}, collect)


def sandbox_backend() -> tuple[str, str]:
    """The backend run_python uses by default and a one-line notice of what it isolates (cached)."""
    bubblewrap = backend_info(BUBBLEWRAP)
    if bubblewrap.problem is None:
        return BUBBLEWRAP, bubblewrap.notice
    fallback = backend_info(RLIMIT)
    if fallback.problem is None:
        return RLIMIT, f"rlimit fallback ({bubblewrap.problem}): {fallback.notice}"
    raise SandboxUnavailable(f"no sandbox backend works here: {bubblewrap.problem}; rlimit: {fallback.problem}")


@dataclass(frozen=True)
class BackendInfo:
    name: str
    problem: str | None  # why the backend does not work here; None when it does
    notice: str  # what it isolates, in one line ("" when it does not work)
    network_isolated: bool
    # Whether processes that leave the program's process group (setsid) are killed too.
    contains_escapees: bool


def backend_info(backend: str) -> BackendInfo:
    """Whether `backend` works on this machine and what it really isolates (probed once, cached)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    isolation = _probe(backend)
    if isinstance(isolation, str):
        return BackendInfo(backend, isolation, "", network_isolated=False, contains_escapees=False)
    return BackendInfo(
        backend,
        None,
        _notice(isolation),
        network_isolated=backend == BUBBLEWRAP or isolation.unshare_net,
        contains_escapees=backend == BUBBLEWRAP or isolation.uid_mode == _PER_RUN,
    )


class SandboxPool:
    """Runs many programs at once without blocking the caller's thread or event loop.

    Each worker thread only waits on a child process, so threads are enough and the GIL
    is no bottleneck; `max_workers` defaults to the number of CPUs because each program
    is CPU-bound.
    """

    def __init__(self, max_workers: int | None = None, *, backend: str | None = None) -> None:
        self._backend = backend
        self._executor = ThreadPoolExecutor(
            max_workers=max_workers or os.cpu_count() or 1, thread_name_prefix="k3-sandbox"
        )

    def submit(
        self,
        program: str,
        limits: SandboxLimits = SandboxLimits(),
        *,
        files: Mapping[str, str] | None = None,
        collect: bool = False,
    ) -> Future[ExecutionResult]:
        return self._executor.submit(
            run_python, program, limits=limits, backend=self._backend, files=files, collect=collect
        )

    async def run(
        self,
        program: str,
        limits: SandboxLimits = SandboxLimits(),
        *,
        files: Mapping[str, str] | None = None,
        collect: bool = False,
    ) -> ExecutionResult:
        """The same as submit, awaited from an event loop."""
        return await asyncio.wrap_future(self.submit(program, limits, files=files, collect=collect))

    def close(self, *, cancel_pending: bool = False) -> None:
        """Wait for running programs (and, unless `cancel_pending`, queued ones) to finish."""
        self._executor.shutdown(wait=True, cancel_futures=cancel_pending)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close(cancel_pending=error is not None)


# ---------------------------------------------------------------- probing backends

_PROBE_PROGRAM = "print('ok')"
_PROBE_LIMITS = SandboxLimits(wall_seconds=15)
_probe_lock = threading.Lock()
_probed: dict[str, _Isolation | str] = {}


def _isolation_for(backend: str | None) -> _Isolation:
    name = sandbox_backend()[0] if backend is None else backend
    if name not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {name!r}; expected one of {', '.join(BACKENDS)}")
    isolation = _probe(name)
    if isinstance(isolation, str):
        raise SandboxUnavailable(f"the {name} backend does not work here: {isolation}")
    return isolation


def _probe(backend: str) -> _Isolation | str:
    """The strongest configuration of `backend` that runs a trivial program, or why none does (cached)."""
    with _probe_lock:
        if backend not in _probed:
            _probed[backend] = _find_working_isolation(backend)
        return _probed[backend]


def _find_working_isolation(backend: str) -> _Isolation | str:
    if backend == BUBBLEWRAP and _bwrap_path() is None:
        return "bwrap not installed"
    interpreters = _interpreters()
    if not interpreters:
        return "no usable python3 interpreter"
    failures: list[str] = []
    # Isolation first: a stronger uid mode with another interpreter beats a weaker one with
    # the harness's own interpreter (which may sit under an unreadable /root).
    for uid_mode in _uid_modes(backend):
        for interpreter in interpreters:
            for unshare_net in (True, False) if backend == RLIMIT else (True,):
                candidate = _Isolation(backend, interpreter, uid_mode, unshare_net)
                failure = _probe_failure(candidate)
                if failure is None:
                    return candidate
                failures.append(failure)
    prefix = f"bwrap {_bwrap_version()} failed its probe" if backend == BUBBLEWRAP else "probe failed"
    return f"{prefix}: {failures[-1]}"


def _uid_modes(backend: str) -> tuple[str, ...]:
    if os.geteuid() != 0:
        return (_UNCHANGED,)
    # Root without a user namespace is no sandbox at all, so the rlimit backend must drop.
    return (_PER_RUN, _NOBODY, _UNCHANGED) if backend == BUBBLEWRAP else (_PER_RUN, _NOBODY)


def _probe_failure(candidate: _Isolation) -> str | None:
    try:
        result = _execute(_PROBE_PROGRAM, _PROBE_LIMITS, candidate)
    except SandboxError as error:
        return str(error)
    if result.passed and result.stdout_excerpt.strip() == "ok":
        return None
    return result.reason


def _notice(isolation: _Isolation) -> str:
    interpreter = f"Python {isolation.interpreter.version_text} at {isolation.interpreter.executable}"
    if isolation.backend == BUBBLEWRAP:
        return (
            f"bubblewrap {_bwrap_version()}: own user/pid/mount/net/ipc/uts namespaces (no network; every "
            f"process dies with the sandbox), read-only /usr and interpreter prefix, tmpfs /tmp, uid 65534 "
            f"inside = {_outside_identity(isolation)} outside; rlimits; {interpreter}"
        )
    network = "an empty network namespace (no network)" if isolation.unshare_net else "NO network isolation"
    return (
        f"rlimits; runs as {_outside_identity(isolation)}; {network}; no namespaces otherwise: it sees the "
        f"host's files as Unix permissions allow; {_fallback_leftovers(isolation)}; {interpreter}"
    )


def _outside_identity(isolation: _Isolation) -> str:
    if isolation.uid_mode == _PER_RUN:
        return "a uid of its own per run, no new privileges"
    if isolation.uid_mode == _NOBODY:
        return "uid 65534, shared by concurrent runs (so is RLIMIT_NPROC), no new privileges"
    if os.geteuid() == 0:
        return "root without capabilities (only the mounts keep it from root-owned files)"
    return f"the invoking user (uid {os.geteuid()})"


def _fallback_leftovers(isolation: _Isolation) -> str:
    if isolation.uid_mode == _PER_RUN:
        return (
            "writes only its directory and world-writable dirs (its files in /tmp, /var/tmp, /dev/shm are removed "
            "afterwards); processes that leave its group are killed too"
        )
    if isolation.uid_mode == _NOBODY:
        return (
            "writes only its directory and world-writable dirs (leftovers stay); processes that leave its group "
            "survive, bounded by RLIMIT_CPU"
        )
    return (
        f"writes anything uid {os.geteuid()} may and can signal that user's processes; processes that leave "
        "its group survive, bounded by RLIMIT_CPU"
    )


def _bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def _bwrap_version() -> str:
    path = _bwrap_path()
    if path is None:
        return "(not installed)"
    completed = subprocess.run([path, "--version"], capture_output=True, text=True, check=False, timeout=10)
    return completed.stdout.strip().removeprefix("bubblewrap ") or "(unknown version)"


_interpreter_lock = threading.Lock()
_interpreter_cache: list[tuple[_Interpreter, ...]] = []


def _interpreters() -> tuple[_Interpreter, ...]:
    """The harness's own base interpreter first, then the system's python3."""
    with _interpreter_lock:
        if not _interpreter_cache:
            candidates = [str(Path(sys.base_prefix) / "bin" / "python3"), sys.executable, "/usr/bin/python3"]
            found: dict[str, _Interpreter] = {}
            for candidate in candidates:
                real = os.path.realpath(candidate)
                if real not in found and os.access(real, os.X_OK):
                    described = _describe_interpreter(real)
                    if described is not None:
                        found[real] = described
            _interpreter_cache.append(tuple(found.values()))
        return _interpreter_cache[0]


def _describe_interpreter(executable: str) -> _Interpreter | None:
    query = "import sys; print(sys.prefix); print(*sys.version_info[:3])"
    try:
        completed = subprocess.run(
            [executable, "-I", "-S", "-c", query], capture_output=True, text=True, check=True, timeout=30
        )
        prefix, version = completed.stdout.splitlines()
        major, minor, micro = (int(part) for part in version.split())
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if major != 3:
        return None
    return _Interpreter(executable, os.path.realpath(prefix), (major, minor, micro))


# ---------------------------------------------------------------- one run


@dataclass
class _Watched:
    """What the watcher saw of one run."""

    outputs: dict[str, bytearray] = field(default_factory=lambda: {"stdout": bytearray(), "stderr": bytearray()})
    timed_out: bool = False
    overflowing_stream: str | None = None
    duration_s: float = 0.0


def _execute(
    program: str,
    limits: SandboxLimits,
    isolation: _Isolation,
    files: Mapping[str, str] | None = None,
    collect: bool = False,
) -> ExecutionResult:
    workdir = Path(tempfile.mkdtemp(prefix="k3sandbox-"))
    try:
        for relative, text in (files or {}).items():
            path = _inside(workdir, relative)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        (workdir / PROGRAM_FILE).write_text(program, encoding="utf-8")
        result = _run_in(workdir, limits, isolation)
        return dataclasses.replace(result, files=_collect(workdir, limits)) if collect else result
    finally:
        _remove_tree(workdir)


def _inside(workdir: Path, relative: str) -> Path:
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or ".." in parts or relative == PROGRAM_FILE:
        raise ValueError(f"sandbox file path must stay inside the program's directory: {relative!r}")
    return workdir.joinpath(*parts)


def _collect(workdir: Path, limits: SandboxLimits) -> dict[str, str]:
    """Regular files the program left (not links, not its own main.py), as text, each at
    most the file size limit."""
    found: dict[str, str] = {}
    for root, directories, names in os.walk(workdir):
        directories[:] = sorted(name for name in directories if name != "__pycache__")
        for name in sorted(names):
            path = Path(root) / name
            relative = path.relative_to(workdir).as_posix()
            if relative == PROGRAM_FILE or path.is_symlink() or not path.is_file():
                continue
            with path.open("rb") as handle:
                found[relative] = handle.read(limits.file_size_bytes).decode("utf-8", errors="replace")
    return found


def _run_in(workdir: Path, limits: SandboxLimits, isolation: _Isolation) -> ExecutionResult:
    # The launcher reports a failed setup through this pipe; exec closes it on success.
    # bubblewrap keeps it (--info-fd) and writes its namespace info once the sandbox exists.
    status_read, status_write = os.pipe()
    try:
        started = time.monotonic()
        process = subprocess.Popen(
            _launcher_argv(workdir, limits, isolation, status_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_environment(SANDBOX_DIR if isolation.backend == BUBBLEWRAP else str(workdir)),
            cwd=workdir,
            start_new_session=True,
            pass_fds=(status_write,),
        )
    except BaseException:
        os.close(status_read)
        raise
    finally:
        os.close(status_write)
    try:
        watched = _watch(process, limits, started, isolation, workdir)
        status = _read_status(status_read)
    finally:
        os.close(status_read)
    _raise_if_setup_failed(status, watched, isolation)
    return _result(process.returncode, watched, limits, isolation)


def _environment(home: str) -> dict[str, str]:
    # Built from nothing: no K3_API_KEY, OPENAI_API_KEY or anything else from the parent.
    return {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": home, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}


def _launcher_argv(workdir: Path, limits: SandboxLimits, isolation: _Isolation, status_fd: int) -> list[str]:
    in_bubblewrap = isolation.backend == BUBBLEWRAP
    uid_spec = {_PER_RUN: f"+{PER_RUN_UID_BASE}", _NOBODY: str(NOBODY_UID), _UNCHANGED: ""}[isolation.uid_mode]
    settings = [
        str(status_fd),
        "1" if in_bubblewrap else "0",
        str(workdir),
        str(max(1, int(limits.cpu_seconds + 0.999))),
        str(limits.memory_bytes),
        str(limits.file_size_bytes),
        str(_process_limit(limits, isolation)),
        uid_spec,
        str(NOGROUP_GID),
        "1" if isolation.unshare_net and not in_bubblewrap else "0",
        "0" if in_bubblewrap else "1",  # bwrap --die-with-parent already guards against orphans
    ]
    command = (
        _bubblewrap_command(workdir, limits, isolation, status_fd)
        if in_bubblewrap
        else _python_command(isolation.interpreter, str(workdir / PROGRAM_FILE))
    )
    # The launcher runs on the program's own interpreter: known to work here (probed), and
    # often a faster start than a virtual environment's.
    return [isolation.interpreter.executable, "-I", "-S", "-c", _LAUNCHER, *settings, *command]


def _python_command(interpreter: _Interpreter, script: str) -> list[str]:
    # -I would also ignore PYTHONHASHSEED and PYTHONDONTWRITEBYTECODE; the environment is
    # built from nothing, so -s (no user site) and -P (no script dir on sys.path, 3.11+)
    # give the rest of -I while keeping hashing deterministic.
    safe_path = ["-P"] if interpreter.version >= (3, 11, 0) else []
    return [interpreter.executable, "-s", "-B", *safe_path, script]


def _bubblewrap_command(workdir: Path, limits: SandboxLimits, isolation: _Isolation, status_fd: int) -> list[str]:
    bwrap = _bwrap_path()
    if bwrap is None:
        raise SandboxUnavailable("bwrap is no longer on PATH")
    # tmpfs lives in RAM outside RLIMIT_AS; a few files' worth is plenty for a test program.
    tmpfs_bytes = str(4 * limits.file_size_bytes)
    runs_as_root = os.geteuid() == 0 and isolation.uid_mode == _UNCHANGED
    return [
        bwrap,
        "--unshare-all",
        "--unshare-user",  # explicit, so that --disable-userns is accepted
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--ro-bind", "/usr", "/usr",
        *_top_level_system_links(),
        *_interpreter_binds(isolation.interpreter),
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", tmpfs_bytes, "--tmpfs", "/tmp",
        "--size", tmpfs_bytes, "--tmpfs", "/dev/shm",
        "--bind", str(workdir), SANDBOX_DIR,
        "--chdir", SANDBOX_DIR,
        "--remount-ro", "/",
        "--uid", str(NOBODY_UID),
        "--gid", str(NOGROUP_GID),
        "--info-fd", str(status_fd),
        *(["--cap-drop", "ALL"] if runs_as_root else []),
        "--",
        *_python_command(isolation.interpreter, f"{SANDBOX_DIR}/{PROGRAM_FILE}"),
    ]  # fmt: skip


@functools.cache
def _top_level_system_links() -> tuple[str, ...]:
    """/bin, /lib, … as the host has them: symlinks into /usr (merged /usr) or read-only binds."""
    arguments: list[str] = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            arguments += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            arguments += ["--ro-bind", str(path), str(path)]
    return tuple(arguments)


def _interpreter_binds(interpreter: _Interpreter) -> list[str]:
    needed = {interpreter.prefix, os.path.dirname(interpreter.executable)}
    outside_usr = sorted(path for path in needed if not (path == "/usr" or path.startswith("/usr/")))
    # A directory inside another one is already covered by the outer bind.
    roots = [path for path in outside_usr if not any(path.startswith(other + "/") for other in outside_usr)]
    return [argument for path in roots for argument in ("--ro-bind", path, path)]


def _process_limit(limits: SandboxLimits, isolation: _Isolation) -> int:
    """RLIMIT_NPROC counts every task of the uid, so a shared uid needs headroom for the others."""
    root_owned_namespace = isolation.backend == BUBBLEWRAP and isolation.uid_mode == _UNCHANGED and os.geteuid() == 0
    if isolation.uid_mode == _PER_RUN or root_owned_namespace:
        # Counted per run: a fresh uid, or (root's bwrap) per user namespace.
        return limits.processes
    uid = NOBODY_UID if isolation.uid_mode == _NOBODY else os.geteuid()
    return limits.processes + _tasks_owned_by(uid)


def _tasks_owned_by(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue  # it exited meanwhile
    return count


# ---------------------------------------------------------------- watching a run


def _watch(
    process: subprocess.Popen[bytes], limits: SandboxLimits, started: float, isolation: _Isolation, workdir: Path
) -> _Watched:
    """Collect output until the program exits, times out or floods a stream; then kill what is left."""
    assert process.stdout is not None and process.stderr is not None
    watched = _Watched()
    streams = {process.stdout.fileno(): "stdout", process.stderr.fileno(): "stderr"}
    exit_fd = _open_pidfd(process.pid)
    try:
        with selectors.DefaultSelector() as selector:
            for fd in streams:
                selector.register(fd, selectors.EVENT_READ)
            if exit_fd is not None:
                selector.register(exit_fd, selectors.EVENT_READ)
            _watch_until_exit(process.pid, selector, streams, exit_fd, watched, limits, started)
            watched.duration_s = time.monotonic() - started
            # The leader is not reaped yet, so its group id cannot have been reused.
            _kill_group(process.pid)
            process.wait()
            if isolation.backend == RLIMIT and isolation.uid_mode == _PER_RUN:
                _sweep_uid(PER_RUN_UID_BASE + process.pid, keep=workdir)
            if watched.overflowing_stream is None:
                _drain(selector, streams, watched, limits)
    finally:
        if exit_fd is not None:
            os.close(exit_fd)
        process.stdout.close()
        process.stderr.close()
    return watched


def _watch_until_exit(
    pid: int,
    selector: selectors.BaseSelector,
    streams: dict[int, str],
    exit_fd: int | None,
    watched: _Watched,
    limits: SandboxLimits,
    started: float,
) -> None:
    deadline = started + limits.wall_seconds
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            watched.timed_out = True
            return
        for key, _ in selector.select(remaining if exit_fd is not None else min(remaining, _EXIT_POLL_S)):
            if key.fd == exit_fd:
                return
            if not _read_chunk(key.fd, streams[key.fd], watched, limits):
                selector.unregister(key.fd)
            if watched.overflowing_stream is not None:
                return
        if exit_fd is None and _has_exited(pid):
            return


def _drain(selector: selectors.BaseSelector, streams: dict[int, str], watched: _Watched, limits: SandboxLimits) -> None:
    deadline = time.monotonic() + _DRAIN_GRACE_S
    while any(fd in streams for fd in selector.get_map()):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        for key, _ in selector.select(remaining):
            if key.fd in streams and not _read_chunk(key.fd, streams[key.fd], watched, limits):
                selector.unregister(key.fd)
            if watched.overflowing_stream is not None:
                return


def _read_chunk(fd: int, stream: str, watched: _Watched, limits: SandboxLimits) -> bool:
    """Read what `fd` has into its buffer; False at end of file."""
    chunk = os.read(fd, _READ_CHUNK)
    if not chunk:
        return False
    buffer = watched.outputs[stream]
    room = limits.output_bytes - len(buffer)
    buffer += chunk[:room]
    if len(chunk) > room:
        watched.overflowing_stream = stream
    return True


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None  # kernel before 5.3: poll instead


def _has_exited(pid: int) -> bool:
    # WNOWAIT leaves the zombie in place, so the process group stays reserved until we kill it.
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _sweep_uid(uid: int, keep: Path) -> None:
    """Kill every process of a per-run uid (those that left the group too) and remove its files
    from world-writable directories, except its own directory `keep` (removed by its owner)."""
    kill = shutil.which("kill", path=SAFE_PATH)
    # kill(-1) as that uid reaches exactly its processes, atomically, without pid races.
    # "-9 -1" is the one spelling procps, util-linux and busybox kill all accept.
    command = [kill, "-9", "-1"] if kill else [sys.executable, "-I", "-S", "-c", _KILL_ALL]
    subprocess.run(
        command,
        user=uid,
        group=NOGROUP_GID,
        extra_groups=[],
        env={"PATH": SAFE_PATH},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    for directory in WORLD_WRITABLE_DIRS:
        _remove_entries_owned_by(uid, directory, keep)


_KILL_ALL = "import os\ntry:\n    os.kill(-1, 9)\nexcept OSError:\n    pass\n"


def _remove_entries_owned_by(uid: int, directory: str, keep: Path) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.path == str(keep) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            continue


def _read_status(status_fd: int) -> bytes:
    # Non-blocking: a process outside the group could still hold the write end.
    os.set_blocking(status_fd, False)
    try:
        return os.read(status_fd, _READ_CHUNK)
    except BlockingIOError:
        return b""


def _raise_if_setup_failed(status: bytes, watched: _Watched, isolation: _Isolation) -> None:
    if status.startswith(_LAUNCHER_FAILED):
        raise SandboxError(f"sandbox setup failed: {status[1:].decode(errors='replace')}")
    if isolation.backend == BUBBLEWRAP and not status.lstrip().startswith(b"{"):
        stderr = watched.outputs["stderr"].decode(errors="replace").strip()
        first_line = stderr.splitlines()[0] if stderr else "no message"
        raise SandboxError(f"bubblewrap did not start the sandbox: {first_line}")


def _remove_tree(path: Path) -> None:
    try:
        shutil.rmtree(path)
    except OSError:
        # The program may have taken the write bit off its own directories.
        _make_directories_writable(path)
        shutil.rmtree(path, ignore_errors=True)


def _make_directories_writable(path: Path) -> None:
    try:
        os.chmod(path, 0o700, follow_symlinks=False)
        children = list(os.scandir(path))
    except OSError:
        return
    for child in children:
        if child.is_dir(follow_symlinks=False):
            _make_directories_writable(Path(child.path))


# ---------------------------------------------------------------- describing the outcome


def _result(returncode: int, watched: _Watched, limits: SandboxLimits, isolation: _Isolation) -> ExecutionResult:
    exit_code, signal_number = _exit_status(returncode, isolation.backend)
    if watched.timed_out or watched.overflowing_stream is not None:
        exit_code, signal_number = None, None  # we killed it; its status says nothing about the program
    stderr = watched.outputs["stderr"].decode(errors="replace")
    reason = _reason(watched, exit_code, signal_number, stderr, limits)
    return ExecutionResult(
        passed=reason == "passed",
        reason=reason,
        exit_code=exit_code,
        signal=signal_number,
        timed_out=watched.timed_out,
        duration_s=watched.duration_s,
        stdout_excerpt=_excerpt(watched.outputs["stdout"].decode(errors="replace")),
        stderr_excerpt=_excerpt(stderr),
        backend=isolation.backend,
    )


def _exit_status(returncode: int, backend: str) -> tuple[int | None, int | None]:
    if returncode < 0:
        return None, -returncode
    # bwrap exits with 128 + N when the program died of signal N.
    if backend == BUBBLEWRAP and 128 < returncode <= 128 + 64:
        return None, returncode - 128
    return returncode, None


def _reason(
    watched: _Watched, exit_code: int | None, signal_number: int | None, stderr: str, limits: SandboxLimits
) -> str:
    if watched.overflowing_stream is not None:
        return f"output limit exceeded ({watched.overflowing_stream} over {_size(limits.output_bytes)})"
    if watched.timed_out:
        return f"timed out after {limits.wall_seconds:g} s"
    if signal_number is not None:
        return _signal_reason(signal_number, limits)
    if exit_code == 0:
        return "passed"
    return _one_line(_failure_reason(exit_code, stderr, limits))


def _signal_reason(signal_number: int, limits: SandboxLimits) -> str:
    if signal_number == signal.SIGXCPU:
        return f"killed: CPU time limit ({limits.cpu_seconds:g} s)"
    if signal_number == signal.SIGXFSZ:
        return f"killed: file size limit ({_size(limits.file_size_bytes)})"
    try:
        name = signal.Signals(signal_number).name
    except ValueError:
        name = f"signal {signal_number}"
    if signal_number == signal.SIGKILL:
        return f"killed by {name} (CPU hard limit, out of memory, or the program itself)"
    return f"killed by {name}"


def _failure_reason(exit_code: int | None, stderr: str, limits: SandboxLimits) -> str:
    lines = stderr.rstrip().splitlines()
    exception = _final_exception(lines)
    if exception is None:
        return f"exit status {exit_code}"
    name = exception.split(":", 1)[0]
    if name == "AssertionError":
        message = exception.partition(":")[2].strip()
        return f"assertion failed: {message or _failing_line(lines) or 'assert'}"
    if name == "MemoryError":
        return f"killed: memory limit ({_size(limits.memory_bytes)} address space): {exception}"
    if "[Errno 27]" in exception:  # EFBIG: Python ignores SIGXFSZ, so the write raises
        return f"killed: file size limit ({_size(limits.file_size_bytes)}): {exception}"
    if "[Errno 11]" in exception and ("fork" in stderr or "thread" in stderr):
        return f"killed: process limit ({limits.processes}): {exception}"
    return f"exit status {exit_code}: {exception}"


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?::.*)?$")


def _final_exception(lines: list[str]) -> str | None:
    """The "Name: message" line a Python traceback ends with."""
    for line in reversed(lines):
        if line.startswith("Traceback (most recent call last)"):
            # A traceback cut off while written (a forked child killed mid-write): an earlier,
            # whole one from the same run says why.
            continue
        if line.strip() and not line[0].isspace():
            return line if _EXCEPTION_LINE.match(line) else None
    return None


def _failing_line(lines: list[str]) -> str | None:
    """The source line a traceback shows last: the assert statement that failed."""
    for line in reversed(lines[:-1]):
        text = line.strip()
        if text and not text.startswith("File ") and set(text) - set("^~ "):
            return text
    return None


def _excerpt(text: str) -> str:
    return text if len(text) <= OUTPUT_TAIL_CHARS else "…" + text[-(OUTPUT_TAIL_CHARS - 1) :]


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _size(count: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} bytes"
