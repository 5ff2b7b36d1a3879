"""One sandbox run per distinct program (sandbox/memo.py): identical programs share a repeatable
verdict, and a verdict that hung on the moment is never handed to a copy."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from concurrent.futures import Future

from k3conformance.sandbox import SandboxLimits, SandboxPool
from k3conformance.sandbox.limits import DEFAULT_LIMITS, ExecutionResult
from k3conformance.sandbox.memo import ProgramMemo, Verdict, is_repeatable
from k3conformance.sandbox.process import Collect

PASSING = "assert sorted([3, 1, 2]) == [1, 2, 3]\n"
FAILING = "assert sorted([3, 1, 2]) == [3, 2, 1]\n"


def _result(*, passed: bool = True, timed_out: bool = False, signal: int | None = None) -> ExecutionResult:
    exit_code = None if timed_out or signal is not None else (0 if passed else 1)
    reason = "passed" if passed else "timed out after 20 s" if timed_out else "assertion failed"
    return ExecutionResult(passed, reason, exit_code, signal, timed_out, 0.01, "", "")


class _ScriptedPool:
    """Answers each submission with the next scripted result, counting the runs."""

    def __init__(self, *results: ExecutionResult) -> None:
        self.results = list(results)
        self.runs = 0
        self.lock = threading.Lock()

    def submit(
        self,
        program: str,
        limits: SandboxLimits = DEFAULT_LIMITS,
        *,
        files: Mapping[str, str] | None = None,
        collect: Collect = False,
        seal: bool = False,
    ) -> Future[ExecutionResult]:
        with self.lock:
            result = self.results[min(self.runs, len(self.results) - 1)]
            self.runs += 1
        future: Future[ExecutionResult] = Future()
        future.set_result(result)
        return future


async def _run_all(memo: ProgramMemo, programs: list[str], *, seal: bool = False) -> list[bool]:
    verdicts = await asyncio.gather(*(memo.run(program, seal=seal) for program in programs))
    return [verdict.reused for verdict in verdicts]


def test_identical_programs_run_once_in_the_real_sandbox_and_keep_their_verdicts() -> None:
    with SandboxPool(max_workers=2) as pool:
        memo = ProgramMemo(pool)
        verdicts = asyncio.run(_verdicts(memo, [PASSING, FAILING, PASSING, FAILING, PASSING]))
    assert [verdict.result.passed for verdict in verdicts] == [True, False, True, False, True]
    assert sorted(verdict.reused for verdict in verdicts) == [False, False, True, True, True]
    assert (memo.ran, memo.reused) == (2, 3)


async def _verdicts(memo: ProgramMemo, programs: list[str]) -> list[Verdict]:
    return list(await asyncio.gather(*(memo.run(program, seal=True) for program in programs)))


def test_files_limits_collection_and_sealing_are_part_of_what_is_identical() -> None:
    pool = _ScriptedPool(_result())
    memo = ProgramMemo(pool)

    async def runs() -> list[bool]:
        first = await memo.run(PASSING, files={"repo/a.py": "x = 1\n"})
        return [
            first.reused,
            (await memo.run(PASSING, files={"repo/a.py": "x = 2\n"})).reused,
            (await memo.run(PASSING, files={"repo/a.py": "x = 1\n"}, seal=True)).reused,
            (await memo.run(PASSING, SandboxLimits(wall_seconds=5), files={"repo/a.py": "x = 1\n"})).reused,
            (await memo.run(PASSING, files={"repo/a.py": "x = 1\n"}, collect=("out.txt",))).reused,
            (await memo.run(PASSING, files={"repo/a.py": "x = 1\n"})).reused,
        ]

    assert asyncio.run(runs()) == [False, False, False, False, False, True]
    assert pool.runs == 5


def test_the_oldest_results_make_way_beyond_the_capacity() -> None:
    pool = _ScriptedPool(_result())
    memo = ProgramMemo(pool, capacity=2)
    programs = [f"x = {n}\n" for n in range(3)]
    assert asyncio.run(_run_all(memo, programs)) == [False, False, False]
    assert asyncio.run(_run_all(memo, [programs[0], programs[2]])) == [False, True]


def test_a_timed_out_or_killed_run_is_never_shared_and_its_copy_runs_again() -> None:
    for unrepeatable in (_result(passed=False, timed_out=True), _result(passed=False, signal=9)):
        assert not is_repeatable(unrepeatable)
        pool = _ScriptedPool(unrepeatable, _result())
        memo = ProgramMemo(pool)
        assert asyncio.run(_run_all(memo, [PASSING, PASSING])) == [False, False]
        assert pool.runs == 2


def test_a_failure_by_exit_status_is_shared_like_a_pass() -> None:
    pool = _ScriptedPool(_result(passed=False))
    memo = ProgramMemo(pool)
    assert is_repeatable(_result(passed=False))
    assert asyncio.run(_run_all(memo, [FAILING, FAILING, FAILING])) == [False, True, True]
    assert pool.runs == 1


def test_the_oldest_results_make_way_beyond_the_bytes_kept() -> None:
    big = ExecutionResult(True, "passed", 0, None, False, 0.01, "x" * 1000, "")
    pool = _ScriptedPool(big)
    memo = ProgramMemo(pool, max_bytes=1500)
    programs = [f"x = {n}\n" for n in range(2)]
    assert asyncio.run(_run_all(memo, programs)) == [False, False]
    assert asyncio.run(_run_all(memo, [programs[1]])) == [True]
    assert asyncio.run(_run_all(memo, [programs[0]])) == [False]
