"""One sandbox run per distinct program: the result of a program already run in this process is
reused for a byte-identical program with the same files, limits and files asked back, as a build
cache reuses a test's result for the same inputs (Bazel's cached test results).

Several samples of an item often return the same solution (a short function written the same
way; the reference deployment's right and wrong answers always are), and an agent's samples of
one task read the same files and run the same tests on the same repository. At the samples per
item a PASS needs (docs/sequential-gating.md, "What a PASS needs") the coding and agentic suites
otherwise spend most of their time running the same program again. Running it again tells
nothing new only when its result cannot depend on the moment: a run that ended by an exit status
of its own is kept; a time limit, a signal (the memory cap's kill) or a run that did not end are
not, since those depend on the machine's load, and the next identical program runs again. A
program whose result depends on chance or the clock (it draws random numbers, prints a duration)
gets its first run's result for every identical copy: the same verdict in expectation, only less
averaged. Callers use the memo only for programs that are a function of their inputs: a test run
or a file tool, never the agent's shell, whose commands may read the clock or count their calls.

Nothing crosses processes or runs: a baseline and a candidate each run their own programs. The
memo keeps the newest `capacity` results, and no more than `max_bytes` of their text (collected
files included), so memory stays bounded.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from typing import Protocol

from k3conformance.sandbox.limits import DEFAULT_LIMITS, ExecutionResult, SandboxLimits
from k3conformance.sandbox.process import Collect

# Results kept, by count and by the text they hold (a real repository's collected copy can be
# a few megabytes).
DEFAULT_CAPACITY = 1024
DEFAULT_BYTES = 256 << 20


def _weight(result: ExecutionResult) -> int:
    """Roughly what a kept result holds in memory: its output excerpts and collected files."""
    files = sum(len(path) + len(text) for path, text in (result.files or {}).items())
    return files + len(result.stdout_excerpt) + len(result.stderr_excerpt)


__all__ = ["ProgramMemo", "Verdict", "is_repeatable"]


def is_repeatable(result: ExecutionResult) -> bool:
    """Whether an identical program would get the same verdict again, whatever the load:
    it ran to an exit status of its own, within its time, and was not killed."""
    return not result.timed_out and result.signal is None and result.exit_code is not None


@dataclass(frozen=True)
class Verdict:
    result: ExecutionResult
    # True when `result` is an earlier run's: this program was not run again.
    reused: bool


class _Runner(Protocol):
    """What the memo needs of a sandbox pool (SandboxPool)."""

    def submit(
        self,
        program: str,
        limits: SandboxLimits = DEFAULT_LIMITS,
        *,
        files: Mapping[str, str] | None = None,
        collect: Collect = False,
        seal: bool = False,
    ) -> Future[ExecutionResult]: ...


@dataclass(frozen=True)
class _Run:
    """One program with everything its result depends on."""

    program: str
    limits: SandboxLimits
    files: Mapping[str, str]
    collect: Collect
    seal: bool

    def key(self) -> str:
        collect = self.collect if isinstance(self.collect, bool) else sorted(self.collect)
        described = json.dumps(
            [self.program, asdict(self.limits), sorted(self.files.items()), collect, self.seal], default=str
        )
        return hashlib.sha256(described.encode()).hexdigest()


class ProgramMemo:
    """Runs programs through `pool`, each distinct run (program, files, limits, files asked back,
    seal) once while its result is repeatable; safe across threads and event loops (the memo
    holds concurrent futures)."""

    def __init__(self, pool: _Runner, capacity: int = DEFAULT_CAPACITY, max_bytes: int = DEFAULT_BYTES) -> None:
        self._pool = pool
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._weights: dict[str, int] = {}
        self._bytes = 0
        # Reentrant: a future that is already done runs its callback (which takes the lock) at once.
        self._lock = threading.RLock()
        self._runs: OrderedDict[str, Future[ExecutionResult]] = OrderedDict()
        self.reused = 0
        self.ran = 0

    def _submit(self, run: _Run) -> Future[ExecutionResult]:
        return self._pool.submit(run.program, run.limits, files=run.files, collect=run.collect, seal=run.seal)

    def _start(self, key: str, run: _Run) -> Future[ExecutionResult]:
        future = self._submit(run)
        self._runs[key] = future
        self._evict()
        self.ran += 1

        def keep_if_repeatable(done: Future[ExecutionResult]) -> None:
            with self._lock:
                if self._runs.get(key) is not done:
                    return
                if done.exception() is not None or not is_repeatable(done.result()):
                    self._forget(key)
                    return
                self._weights[key] = _weight(done.result())
                self._bytes += self._weights[key]
                self._evict()

        future.add_done_callback(keep_if_repeatable)
        return future

    def _forget(self, key: str) -> None:
        del self._runs[key]
        self._bytes -= self._weights.pop(key, 0)

    def _evict(self) -> None:
        """Drop the oldest results beyond the count or the bytes (never the newest one)."""
        while len(self._runs) > 1 and (len(self._runs) > self._capacity or self._bytes > self._max_bytes):
            self._forget(next(iter(self._runs)))

    async def run(
        self,
        program: str,
        limits: SandboxLimits = DEFAULT_LIMITS,
        *,
        files: Mapping[str, str] | None = None,
        collect: Collect = False,
        seal: bool = False,
    ) -> Verdict:
        run = _Run(program, limits, dict(files or {}), collect, seal)
        key = run.key()
        with self._lock:
            earlier = self._runs.get(key)
            own = earlier is None
            if earlier is None:
                future = self._start(key, run)
            else:
                future = earlier
                self._runs.move_to_end(key)
        result = await asyncio.wrap_future(future)
        if own:
            return Verdict(result, reused=False)
        if is_repeatable(result):
            with self._lock:
                self.reused += 1
            return Verdict(result, reused=True)
        # The earlier run's verdict hung on the moment (it timed out or was killed): this copy
        # gets a run of its own, as if no identical program had come before it.
        with self._lock:
            self.ran += 1
        return Verdict(await asyncio.wrap_future(self._submit(run)), reused=False)
