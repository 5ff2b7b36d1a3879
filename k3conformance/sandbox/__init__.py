"""Runs model-written Python programs (a solution followed by its tests) in a sandbox.

A program passes iff it exits with status 0 and, when sealed, ran to its end (process.py:
a status 0 from os._exit on the way passes nothing). Files it leaves come back only when
asked for, after every process of the run is gone, never through a link, within caps
(collect.py). What this holds against a hostile model: docs/sandbox.md. Everything it does
is treated as hostile:
it runs in a fresh temporary directory (a tmpfs of its own size where the host may mount
one: workfolder.py), in its own process group (killed as a whole when it ends or times out)
and its own memory cgroup where one can be made (cgroup.py), under resource limits, with a
scrubbed environment and no stdin.
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
process, which the ``subprocess`` documentation calls unsafe, and the pool is threads."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

from k3conformance.sandbox.backends import BackendInfo, backend_info, sandbox_backend
from k3conformance.sandbox.limits import (
    BACKENDS,
    BUBBLEWRAP,
    DEFAULT_LIMITS,
    OUTPUT_TAIL_CHARS,
    RLIMIT,
    ExecutionResult,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
)

__all__ = [
    "BACKENDS",
    "BUBBLEWRAP",
    "OUTPUT_TAIL_CHARS",
    "RLIMIT",
    "BackendInfo",
    "ExecutionResult",
    "SandboxError",
    "SandboxLimits",
    "SandboxPool",
    "SandboxUnavailable",
    "backend_info",
    "run_python",
    "sandbox_backend",
]
from k3conformance.sandbox.backends import _isolation_for
from k3conformance.sandbox.process import Collect, _execute


def run_python(
    program: str,
    *,
    limits: SandboxLimits = DEFAULT_LIMITS,
    backend: str | None = None,
    files: Mapping[str, str] | None = None,
    collect: Collect = False,
    seal: bool = False,
) -> ExecutionResult:
    """Run `program` (solution + tests) in the sandbox; it passes iff it exits with status 0
    (and, when `seal`, only when it ran to its end: see `ExecutionResult.sealed`).

    `files` (relative path -> text) are written next to the program first, a fresh copy
    for this run only. `collect` brings files back as the program left them
    (`ExecutionResult.files`): True for every file, or a sequence of the relative paths
    (files or directories) the caller needs; they are read only once every process of the
    run is gone, never through a link, within `limits.collect_files` and `collect_bytes`.
    Raises SandboxError only when the sandbox itself fails to start the program,
    SandboxUnavailable when `backend` does not work here, and ValueError for a file path
    that leaves the directory. Nothing the program does raises.
    """
    return _execute(program, limits, _isolation_for(backend), files or {}, collect, seal)


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
        limits: SandboxLimits = DEFAULT_LIMITS,
        *,
        files: Mapping[str, str] | None = None,
        collect: Collect = False,
        seal: bool = False,
    ) -> Future[ExecutionResult]:
        return self._executor.submit(
            run_python, program, limits=limits, backend=self._backend, files=files, collect=collect, seal=seal
        )

    async def run(
        self,
        program: str,
        limits: SandboxLimits = DEFAULT_LIMITS,
        *,
        files: Mapping[str, str] | None = None,
        collect: Collect = False,
        seal: bool = False,
    ) -> ExecutionResult:
        """The same as submit, awaited from an event loop."""
        return await asyncio.wrap_future(self.submit(program, limits, files=files, collect=collect, seal=seal))

    def close(self, *, cancel_pending: bool = False) -> None:
        """Wait for running programs (and, unless `cancel_pending`, queued ones) to finish."""
        self._executor.shutdown(wait=True, cancel_futures=cancel_pending)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close(cancel_pending=error is not None)
