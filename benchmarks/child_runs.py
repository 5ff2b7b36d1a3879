"""What the client benchmarks share: a reference deployment in its own process, and the
plain `AsyncOpenAI` loop and pytest + k3conformance each run as a child process whose
wall time, CPU time and peak resident memory are measured from outside (`os.wait4`), so
every side pays its own interpreter start-up and none shares a GIL with another.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from plain_client import PROMPT

BENCHMARKS = Path(__file__).resolve().parent
REPO_ROOT = BENCHMARKS.parent
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# One test per request. The probes are planned at collection, as in the real suites.
SUITE = """
import pytest
from k3conformance import Probe

PROBES = [
    Probe("bench", f"r{{index:05d}}", requests={{"ask": {{"messages": [{{"role": "user", "content": {prompt!r}.format(index=index)}}], "stream": {stream}}}}}, samples=1)
    for index in range({requests})
]

@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_answered(probe, k3_result):
    completion = k3_result.completion("ask")
    assert completion.content
    assert len(completion.reasoning or "") >= {min_reasoning_chars}
"""

# With `--tracemalloc N` the run lists where its N largest live allocations were made
# at the end of the session: the evidence when memory grows with the number of items.
CONFTEST = """
import tracemalloc

def pytest_configure(config):
    if {tracemalloc_top}:
        tracemalloc.start(8)

def pytest_unconfigure(config):
    if {tracemalloc_top}:
        snapshot = tracemalloc.take_snapshot()
        current, peak = tracemalloc.get_traced_memory()
        with open("tracemalloc.txt", "w") as handle:
            handle.write(f"traced now {{current / 1e6:.1f}} MB, peak {{peak / 1e6:.1f}} MB\\n")
            for stat in snapshot.statistics("traceback")[: {tracemalloc_top}]:
                handle.write(f"{{stat.size / 1e6:.2f}} MB in {{stat.count}} blocks\\n")
                handle.write("\\n".join(stat.traceback.format(limit=8)) + "\\n\\n")
"""


@dataclass(frozen=True)
class ChildRun:
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    stdout: str


@dataclass(frozen=True)
class PlainRun:
    child: ChildRun
    requests_s: float
    completion_tokens: int


class ReferenceServer:
    """`k3conformance serve` in its own process; it exits when `close` closes its stdin."""

    def __init__(self, latency_s: float, output_bytes: int | None = None) -> None:
        command = [sys.executable, "-m", "k3conformance", "serve", "--latency", str(latency_s), "--exit-with-stdin"]
        if output_bytes is not None:
            command += ["--output-bytes", str(output_bytes)]
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO_ROOT
        )
        assert self._process.stdout is not None
        self.url = self._process.stdout.readline().strip()
        if not self.url:
            raise SystemExit("the reference server did not start")

    def cpu_s(self) -> float:
        """User and system CPU time the server has used so far."""
        fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(30)


def run_child(command: list[str], cwd: Path, what: str) -> ChildRun:
    """Run `command` to its end; its own peak RSS and CPU time come from `wait4`."""
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, stdout=stdout, stderr=stderr, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        output = stdout.read()
        if process.returncode != 0:
            raise SystemExit(f"{what} failed ({process.returncode}):\n{output[-3000:]}\n{stderr.read()[-3000:]}")
    # ru_maxrss is in KiB on Linux.
    return ChildRun(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, output)


def run_plain(
    url: str, *, requests: int, concurrency: int, stream: bool, effort: str, max_tokens: int | None = None
) -> PlainRun:
    command = [
        sys.executable, str(BENCHMARKS / "plain_client.py"), url, "--requests", str(requests),
        "--concurrency", str(concurrency), "--effort", effort,
    ]  # fmt: skip
    command += ["--max-tokens", str(max_tokens)] if max_tokens else []
    command += [] if stream else ["--no-stream"]
    child = run_child(command, REPO_ROOT, "the plain loop")
    report = json.loads(child.stdout.strip().splitlines()[-1])
    return PlainRun(child, report["requests_s"], report["completion_tokens"])


def run_plugin(
    url: str,
    *,
    requests: int,
    concurrency: int,
    stream: bool,
    effort: str,
    max_tokens: int | None = None,
    min_reasoning_chars: int = 0,
    tracemalloc_top: int = 0,
) -> tuple[ChildRun, str]:
    """pytest with the plugin on a generated suite of `requests` probes, records on disk in a
    temporary folder; returns the run and its tracemalloc report (empty unless asked for)."""
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        (folder / "test_bench.py").write_text(
            SUITE.format(prompt=PROMPT, stream=stream, requests=requests, min_reasoning_chars=min_reasoning_chars)
        )
        (folder / "conftest.py").write_text(CONFTEST.format(tracemalloc_top=tracemalloc_top))
        command = [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--k3-endpoint", url, "--k3-shape", "bench",
            "--k3-results-dir", str(folder / "results"), "--k3-concurrency", str(concurrency),
            "--k3-reasoning-effort", effort, "--k3-retries", "0",
        ]  # fmt: skip
        command += ["--k3-max-tokens", str(max_tokens)] if max_tokens else []
        child = run_child(command, folder, "the plugin run")
        allocations = (folder / "tracemalloc.txt").read_text() if tracemalloc_top else ""
    return child, allocations
