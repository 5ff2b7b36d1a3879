"""Runs stopped by SIGINT (Ctrl-C) or SIGTERM in the middle, in one process and under
`-n 2`: the finished records are on disk and readable, the summary says `interrupted`,
and `--k3-resume` sends only the requests that have no finished record."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from run_files import REPO, only_run, records_names, responses_by_key, summary_of

from k3conformance.gate.evidence import judged_on_records
from k3conformance.reference.profiles import get_profile
from k3conformance.reference.server import RunningServer, start_in_thread
from k3conformance.runs.records import SUMMARY_FILE, iter_records, read_records_text, record_files, write_json_atomic
from k3conformance.runs.stored import load_run

PROBES = 16
SAMPLES = 2
REQUESTS = PROBES * SAMPLES
# Enough finished requests that the signal lands mid-run, well before the last of them.
SIGNAL_AFTER = 4

SLOW_SUITE = f"""
import pytest
from k3conformance import Probe

PROBES = [
    Probe("slow", f"q{{i:02d}}", requests={{"ask": {{"messages": [{{"role": "user", "content": f"Say something about {{i}}."}}]}}}},
          samples={SAMPLES})
    for i in range({PROBES})
]

@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_answered(probe, k3_result):
    for completion in k3_result.completions("ask"):
        assert completion.content
"""


@pytest.fixture
def slow_server() -> Iterator[RunningServer]:
    with start_in_thread(get_profile("tp8"), latency_s=0.3) as server:
        yield server


def finished_response_lines(results: Path) -> int:
    return sum(
        1
        for run_dir in results.glob("*/*")
        for record in iter_records(run_dir, "response")
        if record.get("status") == "ok"
    )


def wait_for(condition: object, what: str, deadline_s: float = 90.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def assert_records_readable(run_dir: Path) -> None:
    """Every line parses, except at most a last one cut short by the stop (readers skip it)."""
    files = record_files(run_dir)
    assert files
    for path in files:
        data = read_records_text(path).encode()
        lines = data.split(b"\n")
        whole, tail = lines[:-1], lines[-1]
        for line in whole:
            json.loads(line)
        if tail:
            with pytest.raises(json.JSONDecodeError):
                json.loads(tail)


def _start_with_sigint_delivered(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A CI runner that starts pytest as a background job hands it SIGINT ignored, and an ignored
    disposition survives exec: the child would never see the Ctrl-C under test. A handled one is
    reset to the default by exec, so SIGINT is handled here while the child starts."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # A session of its own: a signal to its process group is what Ctrl-C at a terminal sends,
        # and it must not reach the pytest running this test.
        return subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupted_run(
    pytester: pytest.Pytester, server: RunningServer, stop: signal.Signals, workers: list[str], whole_group: bool
) -> tuple[subprocess.CompletedProcess[bytes], Path]:
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_slow.py", *workers,
        "--k3-endpoint", server.url, "--k3-shape", "tp8", "--k3-results-dir", "out", "--k3-concurrency", "2",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    with _start_with_sigint_delivered(command, pytester.path, env) as run:
        wait_for(lambda: finished_response_lines(pytester.path / "out") >= SIGNAL_AFTER, f"{SIGNAL_AFTER} records")
        if whole_group:
            os.killpg(run.pid, stop)
        else:
            os.kill(run.pid, stop)
        output, _ = run.communicate(timeout=120)
    completed = subprocess.CompletedProcess(command, run.returncode, output)
    return completed, only_run(pytester.path / "out")


@pytest.mark.parametrize(
    ("stop", "workers", "whole_group"),
    [
        (signal.SIGINT, ["-p", "no:xdist"], False),
        (signal.SIGTERM, ["-p", "no:xdist"], False),
        (signal.SIGINT, ["-n", "2"], True),
        (signal.SIGTERM, ["-n", "2"], False),
    ],
    # Ctrl-C at a terminal signals the whole process group; `kill PID`, and container
    # runtimes, signal the controller alone.
    ids=["sigint", "sigterm", "n2-sigint-group", "n2-sigterm-controller"],
)
def test_a_stopped_run_keeps_its_records_and_resumes(
    pytester: pytest.Pytester,
    slow_server: RunningServer,
    stop: signal.Signals,
    workers: list[str],
    whole_group: bool,
) -> None:
    pytester.makepyfile(test_slow=SLOW_SUITE)
    stopped, run_dir = interrupted_run(pytester, slow_server, stop, workers, whole_group)
    output = stopped.stdout.decode(errors="replace")
    assert stopped.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    assert "KeyboardInterrupt" in output
    assert "(interrupted): records in out/tp8/" in output
    summary = summary_of(run_dir)
    assert summary["status"] == "interrupted"
    assert [session["status"] for session in summary["sessions"]] == ["interrupted"]
    assert not list(run_dir.glob(f".{SUMMARY_FILE}.*.tmp")), "a temporary summary was left behind"
    assert_records_readable(run_dir)
    if "-n" in workers:
        assert records_names(run_dir) == ["records-gw0.jsonl", "records-gw1.jsonl"]
    finished = {key for key, records in responses_by_key(run_dir).items() if any(r["status"] == "ok" for r in records)}
    assert finished, "the records finished before the signal must be on disk"
    # The counts are taken when the summary is written (under xdist the controller reads
    # them back from the workers' records); requests still in flight may finish after that.
    recorded = sum(len(records) for records in responses_by_key(run_dir).values())
    assert 0 < summary["requests"]["sent"] <= recorded
    if workers == ["-p", "no:xdist"]:
        # A single process stops at once; xdist workers told by the controller alone
        # finish the share they were given before they go.
        assert len(finished) < REQUESTS, "the signal should land mid-run"

    resumed = pytester.runpytest(
        "-p", "no:xdist", "--k3-endpoint", slow_server.url, "--k3-shape", "tp8", "--k3-results-dir", "out",
        "--k3-concurrency", "8", "--k3-resume",
    )  # fmt: skip
    resumed.assert_outcomes(passed=PROBES)
    assert only_run(pytester.path / "out") == run_dir
    summary = summary_of(run_dir)
    assert summary["status"] == "complete"
    assert [session["status"] for session in summary["sessions"]] == ["interrupted", "complete"]
    assert summary["requests"]["sent"] == REQUESTS - len(finished), (
        "the resumed run sent more than the missing requests"
    )
    assert summary["requests"]["resumed"] == len(finished)
    after = responses_by_key(run_dir)
    assert len(after) == REQUESTS
    for key in finished:
        assert sum(r["status"] == "ok" for r in after[key]) == 1, f"{key} was finished and sent again"
    # The gate reads the resumed run's records as its evidence: each test's last outcome, under
    # the identity sealed by the first session.
    assert judged_on_records(load_run(str(run_dir), pytester.path / "out", baseline=False)).problems == ()


def test_a_resume_against_another_deployment_is_refused(pytester: pytest.Pytester, slow_server: RunningServer) -> None:
    """Issue 21, reproduction 6: a MegaMoE run resumed against tp8 reused the finished responses,
    answered the rest from tp8 and was stored as one complete run."""
    pytester.makepyfile(test_slow=SLOW_SUITE)
    common = ("-p", "no:xdist", "--k3-shape", "ep32", "--k3-results-dir", "out", "--k3-concurrency", "8")
    pytester.runpytest("--k3-endpoint", "reference:ep32-megamoe", *common).assert_outcomes(passed=PROBES)
    run_dir = only_run(pytester.path / "out")
    summary = summary_of(run_dir)
    write_json_atomic(run_dir / SUMMARY_FILE, {**summary, "status": "interrupted"})

    refused = pytester.runpytest("--k3-endpoint", slow_server.url, *common, "--k3-resume")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--k3-resume: the run * was started against another deployment*reference_profile*"])
    assert summary_of(run_dir)["status"] == "interrupted", "the refused resume wrote into the run"

    resumed = pytester.runpytest("--k3-endpoint", "reference:ep32-megamoe", *common, "--k3-resume")
    resumed.assert_outcomes(passed=PROBES)
    assert summary_of(run_dir)["status"] == "complete"


@pytest.mark.parametrize("earlier", ["default", "someone else's"])
def test_sigterm_handler_lasts_the_session_and_respects_another(pytester: pytest.Pytester, earlier: str) -> None:
    pytester.makepyfile(
        """
        import signal

        def test_sigterm_handler():
            module = getattr(signal.getsignal(signal.SIGTERM), "__module__", None)
            assert (module == "k3conformance.run.signals") is EXPECT_OURS
        """.replace("EXPECT_OURS", str(earlier == "default"))
    )

    def someone_elses(signal_number: int, frame: object) -> None:
        raise SystemExit(3)

    outer = signal.getsignal(signal.SIGTERM)
    installed = signal.SIG_DFL if earlier == "default" else someone_elses
    signal.signal(signal.SIGTERM, installed)
    try:
        # A --k3-* option makes this a k3conformance session; without one the plugin stays out of the way.
        pytester.runpytest("-p", "no:xdist", "--k3-concurrency=4").assert_outcomes(passed=1)
        assert signal.getsignal(signal.SIGTERM) is installed
    finally:
        signal.signal(signal.SIGTERM, outer)


def test_sigterm_twice_ends_the_process(tmp_path: Path) -> None:
    # The first SIGTERM asks for an orderly stop; a second, during it, is not swallowed.
    script = tmp_path / "twice.py"
    script.write_text(
        "import os, signal, time\n"
        "import pytest\n"
        "from k3conformance.run.signals import interrupt_on_sigterm\n"
        "class Config:\n"
        "    stash = pytest.Stash()\n"
        "interrupt_on_sigterm(Config())\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(5)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(5)\n"
        "print('survived', flush=True)\n"
    )
    done = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=60)
    assert done.stdout == "interrupted\n"
    assert done.returncode == -signal.SIGTERM


def test_a_summary_interrupted_while_written_leaves_the_old_one_whole(tmp_path: Path) -> None:
    class InterruptedWhileWritten:
        def __str__(self) -> str:
            raise KeyboardInterrupt

    summary = tmp_path / SUMMARY_FILE
    write_json_atomic(summary, {"status": "running"})
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(summary, {"status": "interrupted", "late": InterruptedWhileWritten()})
    assert json.loads(summary.read_text()) == {"status": "running"}
    assert [path.name for path in tmp_path.iterdir()] == [SUMMARY_FILE]
