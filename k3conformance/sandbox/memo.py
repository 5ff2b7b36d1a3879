"""One sandbox run per distinct program: the verdict of a program already run in this process is
reused for a byte-identical program under the same limits.

Several samples of an item often return the same solution (a short function written the same
way; the reference deployment's right and wrong answers always are), and at the samples per item
a PASS needs (docs/sequential-gating.md, "What a PASS needs") the coding suite otherwise spends
most of its time running the same program again. Running it again tells nothing new only when
its verdict cannot depend on the moment: a pass, or a failure by exit status, are kept; a time
limit, a signal (the memory cap's kill) or a run that did not end are not, since those depend
on the machine's load, and the next identical program runs again. A program whose verdict
depends on chance (it draws random numbers) gets its first run's verdict for every identical
copy: the same verdict in expectation, only less averaged.

Nothing crosses processes or runs: a baseline and a candidate each run their own programs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from typing import Protocol

from k3conformance.sandbox.limits import DEFAULT_LIMITS, ExecutionResult, SandboxLimits

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
        self, program: str, limits: SandboxLimits = DEFAULT_LIMITS, *, seal: bool = False
    ) -> Future[ExecutionResult]: ...


class ProgramMemo:
    """Runs programs through `pool`, each distinct (program, limits, seal) once while its verdict
    is repeatable; safe across threads and event loops (the memo holds concurrent futures)."""

    def __init__(self, pool: _Runner) -> None:
        self._pool = pool
        # Reentrant: a future that is already done runs its callback (which takes the lock) at once.
        self._lock = threading.RLock()
        self._runs: dict[str, Future[ExecutionResult]] = {}
        self.reused = 0
        self.ran = 0

    @staticmethod
    def _key(program: str, limits: SandboxLimits, seal: bool) -> str:
        described = json.dumps([program, asdict(limits), seal], sort_keys=True, default=str)
        return hashlib.sha256(described.encode()).hexdigest()

    def _start(self, key: str, program: str, limits: SandboxLimits, seal: bool) -> Future[ExecutionResult]:
        future = self._pool.submit(program, limits, seal=seal)
        self._runs[key] = future
        self.ran += 1

        def forget_unrepeatable(done: Future[ExecutionResult]) -> None:
            if done.exception() is not None or not is_repeatable(done.result()):
                with self._lock:
                    if self._runs.get(key) is done:
                        del self._runs[key]

        future.add_done_callback(forget_unrepeatable)
        return future

    async def run(self, program: str, limits: SandboxLimits = DEFAULT_LIMITS, *, seal: bool = False) -> Verdict:
        key = self._key(program, limits, seal)
        with self._lock:
            earlier = self._runs.get(key)
            own = earlier is None
            future = self._start(key, program, limits, seal) if earlier is None else earlier
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
        return Verdict(await asyncio.wrap_future(self._pool.submit(program, limits, seal=seal)), reused=False)
