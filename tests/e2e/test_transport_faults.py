"""Whole runs of the smoke suite against reference deployments behind a failing transport.

For each transport fault: with retries the run completes; without them the hit requests
end as infrastructure errors (never as wrong answers), the finished records stay, the
run is marked incomplete, and `--k3-resume` sends only the missing requests. The last
test restarts a real server on the same port in the middle of a run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from run_files import REPO, copy_suites, only_run, responses_by_key, summary_of

from k3conformance.reference.catalogue import TRANSPORT_FAULTS
from k3conformance.reference.profiles import get_profile, profiles_of_kind
from k3conformance.reference.server import RunningServer, start_in_thread
from k3conformance.reference.transport import HANDLED_FAULTS
from k3conformance.runs.records import iter_records

SMOKE_REQUESTS = 6
SMOKE_TESTS = 9
# Requests of the smoke suite each fault hits on their first attempt: every other one (of
# the three streams, for stream-without-done); the restart cuts at least the request that
# meets it, and how many more depends on what is in flight.
HIT_REQUESTS = {
    "latency-spikes": 3,
    "dropped-connection": 3,
    "stream-without-done": 2,
    "malformed-frame": 3,
    "rate-limited": 3,
    "server-errors": 3,
    "server-restart": 1,
}
ERROR_KINDS = {
    "latency-spikes": {"Timeout", "ReadTimeout"},
    "dropped-connection": {"RemoteProtocolError", "ConnectionError", "ReadError"},
    "stream-without-done": {"IncompleteStream"},
    "malformed-frame": {"MalformedJSON"},
    "rate-limited": {"RateLimitError"},
    "server-errors": {"InternalServerError"},
    "server-restart": {"ConnectionError", "RemoteProtocolError", "ReadError"},
}
# Timing decides how many requests the restart and the spikes hit (a loaded machine can
# time out a healthy answer too); every other fault hits an exact count.
AT_LEAST = {"server-restart", "latency-spikes"}


def common_options(server: RunningServer, fault: str) -> list[str]:
    options = ["--k3-endpoint", server.url, "--k3-shape", "transport", "--k3-results-dir", "out", "--k3-backoff", "0"]
    if fault == "latency-spikes":
        # Shorter than the spike, so the stalled attempt times out and is retried.
        options += ["--k3-timeout", "1"]
    return options


@pytest.fixture
def smoke_project(suite_project: pytest.Pytester) -> pytest.Pytester:
    return suite_project


def outcome_records(run_dir: Path) -> list[dict[str, Any]]:
    return list(iter_records(run_dir, "outcome"))


def assert_hit_count(fault: str, got: int) -> None:
    if fault in AT_LEAST:
        assert got >= HIT_REQUESTS[fault], got
    else:
        assert got == HIT_REQUESTS[fault], got


def test_every_transport_fault_has_a_profile_and_a_behaviour() -> None:
    assert set(profiles_of_kind("transport")) == TRANSPORT_FAULTS == HANDLED_FAULTS
    for fault in TRANSPORT_FAULTS:
        profile = get_profile(fault)
        assert profile.base == "tp8" and profile.faults == {fault}
        assert profile.accuracy == get_profile("tp8").accuracy


@pytest.mark.parametrize("fault", sorted(HIT_REQUESTS))
def test_without_retries_hit_requests_are_infra_errors_and_resume_completes(
    smoke_project: pytest.Pytester, fault: str
) -> None:
    with start_in_thread(get_profile(fault)) as server:
        common = common_options(server, fault)
        first = smoke_project.runpytest(*common, "--k3-retries", "0")
        outcomes = first.parseoutcomes()
        assert "failed" not in outcomes, "an infrastructure error was scored as a wrong answer"
        assert outcomes.get("errors", 0) >= 3 and outcomes.get("passed", 0) + outcomes["errors"] == SMOKE_TESTS
        first.stdout.fnmatch_lines(
            ["*[[]layer: infra[]] smoke/*: not scored, the endpoint failed: *(after 1 attempt(s))*"]
        )
        first.stdout.fnmatch_lines(["*(incomplete): records in out/transport/*", "*rerun with --k3-resume*"])

        run_dir = only_run(smoke_project.path / "out")
        summary = summary_of(run_dir)
        assert summary["status"] == "incomplete"
        assert summary["suites"]["smoke"]["failed"] == 0
        failures = [r for records in responses_by_key(run_dir).values() for r in records if r["status"] != "ok"]
        assert_hit_count(fault, len(failures))
        assert summary["requests"]["infra_errors"] == len(failures)
        assert {r["status"] for r in failures} == {"infra_error"}
        assert {r["error"]["kind"] for r in failures} <= ERROR_KINDS[fault]
        assert all(r["error"]["error_class"] == "infra" and r["attempts"] == 1 for r in failures)
        finished = {key for key, records in responses_by_key(run_dir).items() if records[0]["status"] == "ok"}
        assert len(finished) == SMOKE_REQUESTS - len(failures)
        assert {r["outcome"] for r in outcome_records(run_dir)} <= {"passed", "infra_error"}

        resumed = smoke_project.runpytest(*common, "--k3-resume")
    resumed.assert_outcomes(passed=SMOKE_TESTS)
    assert only_run(smoke_project.path / "out") == run_dir
    summary = summary_of(run_dir)
    assert summary["status"] == "complete"
    assert summary["requests"]["sent"] == len(failures), "the resumed run sent more than the missing requests"
    assert summary["requests"]["resumed"] == len(finished)
    after = responses_by_key(run_dir)
    assert len(after) == SMOKE_REQUESTS
    for key, records in after.items():
        assert [r["status"] for r in records if r["status"] == "ok"] == ["ok"], key
        if key in finished:
            assert len(records) == 1, f"{key} was finished and sent again"


@pytest.mark.parametrize("fault", sorted(HIT_REQUESTS))
def test_retries_absorb_the_fault(smoke_project: pytest.Pytester, fault: str) -> None:
    # Backoff 0: a rate-limited request waits only as long as Retry-After says, and the
    # profile answers a retry that comes earlier with another 429.
    with start_in_thread(get_profile(fault)) as server:
        result = smoke_project.runpytest(*common_options(server, fault), "--k3-retries", "3")
    result.assert_outcomes(passed=SMOKE_TESTS)
    run_dir = only_run(smoke_project.path / "out")
    summary = summary_of(run_dir)
    assert summary["status"] == "complete"
    records = [r for records in responses_by_key(run_dir).values() for r in records]
    assert len(records) == SMOKE_REQUESTS and {r["status"] for r in records} == {"ok"}
    retried = [r for r in records if r["attempts"] > 1]
    assert_hit_count(fault, len(retried))
    if fault not in AT_LEAST:
        expected_attempts = 3 if fault == "server-errors" else 2
        assert {r["attempts"] for r in retried} == {expected_attempts}
    assert summary["requests"]["attempts"] == sum(r["attempts"] for r in records)


def test_a_request_still_failing_after_the_retry_budget_is_an_infra_error(smoke_project: pytest.Pytester) -> None:
    # A burst is a 503 then a 500: one retry is not enough.
    with start_in_thread(get_profile("server-errors")) as server:
        result = smoke_project.runpytest(*common_options(server, "server-errors"), "--k3-retries", "1")
    assert "failed" not in result.parseoutcomes()
    result.stdout.fnmatch_lines(["*[[]layer: infra[]] smoke/*: HTTP 500 InternalServerError: *(after 2 attempt(s))*"])
    run_dir = only_run(smoke_project.path / "out")
    failures = [r for records in responses_by_key(run_dir).values() for r in records if r["status"] != "ok"]
    assert len(failures) == 3
    assert {(r["attempts"], r["error"]["http_status"], r["error"]["error_class"]) for r in failures} == {
        (2, 500, "infra")
    }
    assert summary_of(run_dir)["status"] == "incomplete"


MANY_PROBES = """
import pytest
from k3conformance import Probe

PROBES = [Probe("many", f"q{i:02d}", requests={"ask": {"messages": [{"role": "user", "content": f"Say something about {i}."}]}}, samples=1)
          for i in range(24)]

@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_answered(probe, k3_result):
    assert k3_result.completion("ask").content
"""


def wait_for(condition: Any, what: str, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def response_lines(results: Path) -> int:
    return sum(1 for run_dir in results.glob("*/*") for _ in iter_records(run_dir, "response"))


@pytest.fixture
def restartable_server() -> Iterator[list[RunningServer]]:
    servers = [start_in_thread(get_profile("tp8"), latency_s=0.2)]
    yield servers
    for server in servers:
        server.stop()


def test_a_server_restarted_mid_run_on_the_same_port(
    pytester: pytest.Pytester, restartable_server: list[RunningServer]
) -> None:
    pytester.makepyfile(test_many=MANY_PROBES)
    first = restartable_server[0]
    port = int(first.url.rsplit(":", 1)[1].split("/")[0])
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "test_many.py",
        "--k3-endpoint", first.url, "--k3-shape", "tp8", "--k3-results-dir", "out", "--k3-concurrency", "2",
        "--k3-retries", "10", "--k3-backoff", "0.2",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    with subprocess.Popen(command, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as run:
        wait_for(lambda: response_lines(pytester.path / "out") >= 3, "three finished requests")
        first.stop()
        restartable_server.append(start_in_thread(get_profile("tp8"), port=port, latency_s=0.2))
        output, _ = run.communicate(timeout=120)
    assert run.returncode == 0, output.decode(errors="replace")[-3000:]
    run_dir = only_run(pytester.path / "out")
    records = [r for records in responses_by_key(run_dir).values() for r in records]
    assert len(records) == 24 and {r["status"] for r in records} == {"ok"}
    assert any(r["attempts"] > 1 for r in records), "the restart should have refused some attempts"
    assert summary_of(run_dir)["status"] == "complete"


def test_a_rate_limited_validation_request_is_not_scored(pytester: pytest.Pytester) -> None:
    copy_suites(pytester.path, ["test_request_validation.py"])
    with start_in_thread(get_profile("rate-limited")) as server:
        result = pytester.runpytest("--k3-endpoint", server.url, "--k3-results-dir", "out", "--k3-retries", "0")
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) > 0
    assert "failed" not in outcomes, "a 429 was scored as the server's answer to an invalid request"
