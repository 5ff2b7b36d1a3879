"""The progress line while tests wait for a slow server (the reference deployment, a simulator,
answering after a delay): plain lines in a log, a redrawn line on a terminal, nothing under -q."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from k3conformance.reference.profiles import get_profile
from k3conformance.reference.server import RunningServer, start_in_thread

REPO = Path(__file__).resolve().parents[2]
LINE = re.compile(
    r"k3conformance: smoke \d+/9 done, \d+ in flight, \d+ retries, \d+ output tok/s, \d+ failures(, ~[\d:]+ left)?"
)


@pytest.fixture
def slow_server() -> Iterator[RunningServer]:
    with start_in_thread(get_profile("tp8"), latency_s=1.5) as server:
        yield server


def test_a_log_gets_plain_progress_lines_while_tests_wait(
    suite_project: pytest.Pytester, slow_server: RunningServer
) -> None:
    arguments = ("--k3-endpoint", slow_server.url, "--k3-results-dir", "out", "--k3-concurrency", "1")
    result = suite_project.runpytest(*arguments, "--k3-progress-interval", "1")
    result.assert_outcomes(passed=9)
    lines = [line for line in result.stdout.lines if LINE.fullmatch(line)]
    assert lines, result.stdout.str()
    assert any(" 1 in flight" in line for line in lines)
    quiet = suite_project.runpytest(*arguments, "--k3-progress-interval", "1", "-qq")
    assert not any(LINE.search(line) for line in quiet.stdout.lines)


def test_a_terminal_gets_one_redrawn_line_that_leaves_pytest_output_alone(
    suite_project: pytest.Pytester, slow_server: RunningServer
) -> None:
    controller, child = pty.openpty()
    environment = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--k3-endpoint",
            slow_server.url,
            "--k3-results-dir",
            "out",
            "--k3-concurrency",
            "1",
        ],
        cwd=suite_project.path,
        stdin=child,
        stdout=child,
        stderr=child,
        env=environment,
    )
    os.close(child)
    output = b""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 1)
        if ready:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    process.wait(timeout=30)
    os.close(controller)
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-3000:]
    drawn = re.findall(r"  (k3conformance: smoke [^\x1b\r\n]*)\x1b\[(\d+)D\x1b\[K", text)
    assert drawn, text[-3000:]
    # Each draw is erased by exactly its own width, so pytest's line is left as it was.
    assert all(int(width) == len(line) + 2 for line, width in drawn)
    assert "9 passed" in text
