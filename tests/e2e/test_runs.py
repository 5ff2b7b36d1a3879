"""Whole runs of the smoke suite against the reference deployment: what the terminal
shows, what lands on disk, xdist merging, resuming a killed run, and secrets."""

from __future__ import annotations

import pytest
from run_files import REPO, comparable, copy_suites, only_run, records_names, responses_by_key, run_dirs, summary_of

from k3conformance.reference.server import RunningServer
from k3conformance.runs.records import iter_records


def test_header_names_endpoint_model_shape_and_records(suite_project: pytest.Pytester) -> None:
    result = suite_project.runpytest("--k3-results-dir", "out", "--k3-reasoning-effort", "high")
    result.assert_outcomes(passed=9)
    result.stdout.fnmatch_lines(
        [
            "k3conformance: endpoint reference:tp8 at http://127.0.0.1:*/v1, model kimi-k3-simulator, shape reference-tp8",
            "k3conformance: think mode opensource, reasoning effort high, *",
            "k3conformance: records go to out/reference-tp8/*",
            "k3conformance: server reports SIMULATOR*",
            "k3conformance: NOTE the k3conformance reference deployment is a SIMULATOR*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["| smoke * 3 * 9 * 9 * 0 * 0 * 0 * 100.0% *", "*(complete): records in out/reference-tp8/*"]
    )


def test_explicit_shape_wins_over_the_reference_label(suite_project: pytest.Pytester) -> None:
    result = suite_project.runpytest("--k3-results-dir", "out", "--k3-shape", "tp8-candidate")
    result.assert_outcomes(passed=9)
    assert summary_of(only_run(suite_project.path / "out"))["shape"] == "tp8-candidate"


def test_records_and_summary_carry_provenance(suite_project: pytest.Pytester) -> None:
    suite_project.runpytest("--k3-results-dir", "out").assert_outcomes(passed=9)
    run_dir = only_run(suite_project.path / "out")
    summary = summary_of(run_dir)
    assert summary["status"] == "complete"
    assert summary["simulator"] is True
    assert summary["model"] == "kimi-k3-simulator"
    assert summary["server_info"]["get_server_info"]["simulator"] is True
    assert summary["datasets"]["smoke"]["dataset"] == "fixtures/smoke.json"
    assert len(summary["datasets"]["smoke"]["dataset_sha256"]) == 64
    assert summary["suites"]["smoke"]["passed"] == 9 and summary["suites"]["smoke"]["items"] == 3
    assert summary["requests"]["sent"] == 6
    responses = responses_by_key(run_dir)
    assert sorted(responses) == sorted(
        ("smoke", item, 0, step) for item in ("pong", "capital-of-france", "sum-17-25") for step in ("plain", "stream")
    )
    plain = responses[("smoke", "pong", 0, "plain")][0]
    assert plain["request"]["chat_template_kwargs"] == {
        "thinking": True,
        "preserve_thinking": True,
        "thinking_effort": "max",
    }
    assert plain["request"]["reasoning_effort"] == "max"
    assert plain["response"]["reasoning_field"] == "reasoning_content"
    assert plain["response"]["reasoning"]
    assert plain["response"]["latency_s"] > 0
    streamed = responses[("smoke", "pong", 0, "stream")][0]
    assert streamed["request"]["stream_options"] == {"include_usage": True}
    assert streamed["response"]["ttft_s"] is not None
    outcomes = list(iter_records(run_dir, "outcome"))
    assert sum(1 for record in outcomes if record["outcome"] == "passed") == 9


def test_kimi_think_mode_sends_the_thinking_object(suite_project: pytest.Pytester) -> None:
    suite_project.runpytest(
        "--k3-results-dir", "out", "--k3-think-mode", "kimi", "--k3-reasoning-effort", "low"
    ).assert_outcomes(passed=9)
    record = responses_by_key(only_run(suite_project.path / "out"))[("smoke", "pong", 0, "plain")][0]
    assert record["request"]["thinking"] == {"type": "enabled", "keep": "all", "effort": "low"}
    assert "chat_template_kwargs" not in record["request"]


@pytest.mark.parametrize("workers", [[], ["-n", "0"], ["-n", "2"]], ids=["no-xdist", "n0", "n2"])
def test_xdist_gives_the_same_records(suite_project: pytest.Pytester, workers: list[str]) -> None:
    baseline = suite_project.runpytest_subprocess("--k3-results-dir", "single", "-p", "no:xdist")
    baseline.assert_outcomes(passed=9)
    result = suite_project.runpytest_subprocess("--k3-results-dir", "out", *workers)
    result.assert_outcomes(passed=9)
    expected = {
        key: [comparable(r) for r in records]
        for key, records in responses_by_key(only_run(suite_project.path / "single")).items()
    }
    run_dir = only_run(suite_project.path / "out")
    got = {key: [comparable(r) for r in records] for key, records in responses_by_key(run_dir).items()}
    assert got == expected
    summary = summary_of(run_dir)
    assert summary["requests"]["sent"] == 6, "a probe shared by three tests must be sent once, whatever the worker"
    assert summary["suites"]["smoke"]["passed"] == 9
    assert sorted(summary["datasets"]["smoke"]["items"]) == ["capital-of-france", "pong", "sum-17-25"]
    if workers == ["-n", "2"]:
        assert records_names(run_dir) == ["records-gw0.jsonl", "records-gw1.jsonl"]


MANY_PROBES = """
import os, signal
import pytest
from k3conformance import Probe

PROBES = [
    Probe("many", f"q{i:02d}", requests={"ask": {"messages": [{"role": "user", "content": f"Say something about {i}."}]}}, samples=2)
    for i in range(24)
]

@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_answered(probe, k3_result):
    if probe.item == os.environ.get("KILL_AT"):
        os.kill(os.getpid(), signal.SIGKILL)
    for completion in k3_result.completions("ask"):
        assert completion.content
"""


def test_killed_run_resumes_without_resending_finished_requests(
    pytester: pytest.Pytester, slow_reference: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_many=MANY_PROBES)
    common = [
        "--k3-endpoint",
        slow_reference.url,
        "--k3-shape",
        "tp8",
        "--k3-results-dir",
        "out",
        "--k3-concurrency",
        "4",
    ]
    monkeypatch.setenv("KILL_AT", "q03")
    killed = pytester.runpytest_subprocess(*common)
    assert killed.ret == -9
    run_dir = only_run(pytester.path / "out")
    finished = responses_by_key(run_dir)
    assert 0 < len(finished) < 48, "the kill should land mid-run"
    before = {key: comparable(records[0]) for key, records in finished.items()}

    monkeypatch.delenv("KILL_AT")
    resumed = pytester.runpytest_subprocess(*common, "--k3-resume")
    resumed.assert_outcomes(passed=24)
    assert run_dirs(pytester.path / "out") == [run_dir]
    after = responses_by_key(run_dir)
    assert len(after) == 48
    assert all(len(records) == 1 for records in after.values()), "a finished request was sent again"
    assert {key: comparable(after[key][0]) for key in before} == before
    summary = summary_of(run_dir)
    assert summary["status"] == "complete"
    assert summary["requests"]["resumed"] == len(finished)
    assert summary["requests"]["sent"] == 48 - len(finished)
    resumed.stdout.fnmatch_lines(
        [f"requests: {48 - len(finished)} sent *, {len(finished)} reused from an earlier session*"]
    )


def test_resume_without_an_incomplete_run_is_a_usage_error(suite_project: pytest.Pytester) -> None:
    result = suite_project.runpytest("--k3-results-dir", "out", "--k3-resume")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--k3-resume: no incomplete run of shape 'reference-tp8' under out/reference-tp8*"])


def test_limit_and_samples(suite_project: pytest.Pytester) -> None:
    result = suite_project.runpytest("--k3-results-dir", "out", "--k3-limit", "2")
    result.assert_outcomes(passed=6, deselected=3)
    # Two of the three items, drawn with the seed (selection.py), not the first two.
    items = {key[1] for key in responses_by_key(only_run(suite_project.path / "out"))}
    assert len(items) == 2 and items < {"pong", "capital-of-france", "sum-17-25"}


def test_no_api_key_anywhere(suite_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-k3conformance-test-0123456789"
    # The reference deployment requires this key, the plugin sends it.
    monkeypatch.setenv("K3_REFERENCE_API_KEY", secret)
    result = suite_project.runpytest_subprocess("--k3-results-dir", "out", "--k3-api-key", secret, "-n", "2", "-rA")
    result.assert_outcomes(passed=9)
    assert secret not in result.stdout.str() + result.stderr.str()
    written = [path for path in (suite_project.path / "out").rglob("*") if path.is_file()]
    assert written
    for path in written:
        assert secret not in path.read_text(errors="replace"), path


def test_wrong_key_is_one_clear_error(suite_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K3_REFERENCE_API_KEY", "sk-right")
    result = suite_project.runpytest("--k3-results-dir", "out", "--k3-api-key", "sk-wrong")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: The endpoint rejected the credentials: GET http://127.0.0.1:*/v1/models answered HTTP 401*"]
    )
    assert "sk-wrong" not in result.stdout.str() + result.stderr.str()
    assert "Traceback" not in result.stderr.str()


def test_xdist_sends_each_probe_once_across_all_suites(pytester: pytest.Pytester) -> None:
    # Tests parametrized by probe and mode (`test_x[stream-pong]`) share one probe: under
    # xdist they must land on one worker, or the probe is sent by several.
    # Every suite that sends probes; the parser matrix sends none (it reads a corpus offline, and its
    # llama.cpp column alone takes minutes on one core).
    copy_suites(
        pytester.path, [path.name for path in (REPO / "suites").glob("test_*.py") if path.name != "test_parsers.py"]
    )
    single = pytester.runpytest_subprocess("--k3-results-dir", "single", "-p", "no:xdist", "--k3-limit", "6")
    spread = pytester.runpytest_subprocess("--k3-results-dir", "spread", "-n", "3", "--k3-limit", "6")
    assert single.ret == spread.ret == 0
    single_run, spread_run = only_run(pytester.path / "single"), only_run(pytester.path / "spread")
    assert summary_of(spread_run)["requests"]["sent"] == summary_of(single_run)["requests"]["sent"]
    assert sorted(responses_by_key(spread_run)) == sorted(responses_by_key(single_run))
    assert all(len(records) == 1 for records in responses_by_key(spread_run).values())
