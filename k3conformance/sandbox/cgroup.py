"""A memory cap over the whole sandbox: one memory cgroup per run, a child of the harness's own.

`RLIMIT_AS` caps each process, and a run may start `processes` of them; tmpfs pages (the
sandbox's /tmp, /dev/shm and its work folder) belong to no address space at all. A cgroup
counts all of it together: every process the run starts is in it (the launcher joins it
before it execs the program or bubblewrap, and children inherit it), and the kernel's OOM
killer acts inside it when the run's `SandboxLimits.sandbox_memory_bytes` are used up.

The cgroup is made under the harness's own memory cgroup (read from /proc/self/cgroup), so
whatever limit a CI job or a container puts on the harness still holds over its sandboxes.
cgroup v1 (the `memory` hierarchy: `memory.limit_in_bytes`, and `memory.memsw.limit_in_bytes`
so swap is no way around it) and cgroup v2 (`memory.max`, `memory.swap.max`, and
`memory.oom.group` so an OOM kill takes the whole run) are both used where they are writable;
v2 only where the harness's cgroup already delegates the memory controller to its children
(its `cgroup.subtree_control` names it: v2 forbids enabling it over a cgroup that has
processes of its own). Where neither works, the caller falls back to fewer processes at a
lower per-process cap (`limits.fallback_limits`) and the backend's notice says so.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_V1 = 1


_V2 = 2


# How long removing a run's cgroup waits for its last processes to leave it (killed already).
_REMOVE_GRACE_S = 3.0


_PREFIX = "k3sandbox-"


@dataclass(frozen=True)
class CgroupParent:
    """Where this process may make memory cgroups: the directory and the cgroup version."""

    path: Path
    version: int

    @property
    def description(self) -> str:
        return f"cgroup v{self.version} memory controller"


@dataclass(frozen=True)
class RunCgroup:
    """The cgroup of one run."""

    path: Path
    version: int

    @property
    def procs_file(self) -> str:
        """The file the launcher writes its pid into to join."""
        return str(self.path / "cgroup.procs")

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(line) for line in text.split()]

    def kill_all(self) -> None:
        """SIGKILL every process in the cgroup (v2: atomically, through cgroup.kill)."""
        if self.version == _V2 and _write(self.path / "cgroup.kill", "1"):
            return
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def peak_bytes(self) -> int | None:
        """The most memory the run held at once (processes and the tmpfs pages they wrote)."""
        name = "memory.max_usage_in_bytes" if self.version == _V1 else "memory.peak"
        try:
            return int((self.path / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def oom_kills(self) -> int:
        """How many processes of the run the OOM killer took for the run's memory cap."""
        name = "memory.oom_control" if self.version == _V1 else "memory.events"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> bool:
        """Kill what is left in the cgroup and remove it; False when it could not be removed."""
        deadline = time.monotonic() + _REMOVE_GRACE_S
        while True:
            self.kill_all()
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.005)


def memory_cgroup_parent() -> CgroupParent | str:
    """Where run cgroups go, or why there is no such place here (probed once, cached)."""
    return _probed_parent()


def create_run_cgroup(parent: CgroupParent, memory_bytes: int) -> RunCgroup:
    """A fresh cgroup under `parent` capped at `memory_bytes`, swap included. Raises OSError."""
    path = parent.path / f"{_PREFIX}{os.getpid()}-{threading.get_ident() % 10**6}-{secrets.token_hex(4)}"
    path.mkdir(mode=0o755)
    cgroup = RunCgroup(path, parent.version)
    try:
        if parent.version == _V1:
            _write_or_raise(path / "memory.limit_in_bytes", str(memory_bytes))
            # Swap counts too where the kernel accounts it (memsw exists only then); set after
            # memory.limit_in_bytes, which memsw may never be below.
            if (path / "memory.memsw.limit_in_bytes").exists():
                _write_or_raise(path / "memory.memsw.limit_in_bytes", str(memory_bytes))
        else:
            _write_or_raise(path / "memory.max", str(memory_bytes))
            if (path / "memory.swap.max").exists():
                _write_or_raise(path / "memory.swap.max", "0")
            _write(path / "memory.oom.group", "1")
    except OSError:
        cgroup.remove()
        raise
    return cgroup


@functools.cache
def _probed_parent() -> CgroupParent | str:
    found = _own_memory_cgroup()
    if isinstance(found, str):
        return found
    # Only a cgroup actually made, capped, joined by a new process (as the launcher will) and
    # removed proves the place works: a launcher that cannot join would fail every run.
    try:
        probe = create_run_cgroup(found, 64 << 20)
    except OSError as error:
        return f"cannot make a memory cgroup in {found.path}: {error.strerror or error}"
    try:
        joined = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _JOIN, probe.procs_file], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"cannot start a process to join a memory cgroup: {error}"
    finally:
        removed = probe.remove()
    if joined.returncode != 0:
        last = joined.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        return f"a new process cannot join a memory cgroup in {found.path}: {last[0]}"
    if not removed:
        return f"cannot remove a memory cgroup in {found.path}"
    return found


_JOIN = "import os, sys\nwith open(sys.argv[1], 'w') as handle:\n    handle.write(str(os.getpid()))\n"


def _own_memory_cgroup() -> CgroupParent | str:
    """This process's memory cgroup directory (v1 memory hierarchy first, then v2), or why none."""
    try:
        memberships = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError as error:
        return f"cannot read the cgroup membership: {error.strerror or error}"
    v1_path = v2_path = None
    for line in memberships:
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    if v1_path is not None:
        mount = _mount_point(mounts, "cgroup", lambda options: "memory" in options.split(","))
        if mount is not None:
            return CgroupParent(Path(mount + v1_path), _V1)
    if v2_path is not None:
        mount = _mount_point(mounts, "cgroup2", lambda options: True)
        if mount is not None:
            directory = Path(mount + v2_path.rstrip("/")) if v2_path != "/" else Path(mount)
            try:
                delegated = "memory" in (directory / "cgroup.subtree_control").read_text().split()
            except OSError:
                delegated = False
            if delegated:
                return CgroupParent(directory, _V2)
            return f"the cgroup v2 memory controller is not delegated to {directory}'s children"
    return "no memory cgroup hierarchy is mounted"


def _mount_point(mounts: list[str], fstype: str, wanted: Callable[[str], bool]) -> str | None:
    for line in mounts:
        fields = line.split()
        try:
            separator = fields.index("-")
        except ValueError:
            continue
        kind, options = fields[separator + 1], fields[separator + 3] if len(fields) > separator + 3 else ""
        # The hierarchy's root as this process sees it: mounted whole (root "/") only.
        if kind == fstype and fields[3] == "/" and wanted(options):
            return fields[4]
    return None


def _write(path: Path, text: str) -> bool:
    try:
        _write_or_raise(path, text)
    except OSError:
        return False
    return True


def _write_or_raise(path: Path, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)
