"""The sequential gate end to end on the reference deployment (a simulator): a tp8 baseline,
then candidates. The MegaMoE-like profile must FAIL after a small share of the requests a
fixed-size run sends, whatever makes its outputs loop; an unchanged deployment runs to a PASS
or to the maximum; the DeepEP-like profile (a loss inside the margin) must not FAIL."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from run_files import copy_suites

from k3conformance.cli import main as cli_main
from k3conformance.runs.records import iter_records
from k3conformance.runs.spend import spend_by_suite

# The long-output suite the gate requires on a changed deployment, and math, which stays fine.
LONG = "agentic_coding"
COMMON = (
    "test_agentic_coding.py",
    "test_math.py",
    "--k3-results-dir",
    "out",
    "-p",
    "no:cacheprovider",
)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_suites(pytester.path, ["test_agentic_coding.py", "test_math.py"])
    result = pytester.runpytest("--k3-endpoint", "reference:tp8", "--k3-shape", "tp8", "--k3-save-baseline", *COMMON)
    assert result.ret == 0
    return pytester


def candidate(project: pytest.Pytester, profile: str, *arguments: str) -> tuple[pytest.RunResult, Path]:
    result = project.runpytest("--k3-endpoint", f"reference:{profile}", "--k3-baseline", "tp8", *COMMON, *arguments)
    shape = next((value for flag, value in itertools.pairwise(arguments) if flag == "--k3-shape"), None)
    return result, run_of(project, shape or f"reference-{profile}")


def run_of(project: pytest.Pytester, shape: str) -> Path:
    (run_dir,) = (path for path in (project.path / "out" / shape).iterdir() if path.is_dir())
    return run_dir


def items_sent(run_dir: Path, suite: str) -> int:
    return len({record["item"] for record in iter_records(run_dir, "response") if record["suite"] == suite})


def gate_file(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "gate.json").read_text())
    return data


def test_megamoe_fails_after_a_small_share_of_the_requests(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    # The fixed-size run of the same candidate: what the sequential run is measured against.
    fixed_result, fixed_dir = candidate(project, "ep32-megamoe", "--k3-sequential=off", "--k3-shape", "fixed")
    assert fixed_result.ret == 1
    fixed = spend_by_suite(fixed_dir)[LONG]
    result, run_dir = candidate(project, "ep32-megamoe", "--k3-concurrency", "4")
    assert result.ret == 1
    output = result.stdout.str()
    assert "gate: FAIL" in output
    assert "k3conformance: sequential plan against the baseline tp8/" in output
    long = gate_file(run_dir)["sequential"][LONG]
    assert long["stop"]["verdict"] == "FAIL" and long["stopped_early"]
    stopped_at = long["stop"]["items"]
    sent = spend_by_suite(run_dir)[LONG]
    print(
        f"MegaMoE: FAIL by the {long['stop']['by']} after {stopped_at} items; {sent.requests} of the fixed-size "
        f"run's {fixed.requests} {LONG} requests ({sent.requests / fixed.requests:.1%}), {sent.output_tokens} of "
        f"its {fixed.output_tokens} output tokens"
    )
    # Requests run ahead of the tests only up to the next look: nothing past the look at or after
    # the stop was sent, so the run spent at most what a fixed-size run spends on those items.
    summary = json.loads((run_dir / "summary.json").read_text())
    order = summary["sequential"][LONG]["order"]
    reach = next(size for size in long["design"]["sizes"] if size >= stopped_at)
    assert {record["item"] for record in iter_records(run_dir, "response") if record["suite"] == LONG} <= set(
        order[:reach]
    )
    reached = set(order[:reach])
    fixed_on_reach = sum(1 for r in iter_records(fixed_dir, "response") if r["suite"] == LONG and r["item"] in reached)
    assert sent.requests <= fixed_on_reach < fixed.requests
    assert sent.output_tokens < fixed.output_tokens
    cancelled = [record for record in iter_records(run_dir, "cancelled") if record["suite"] == LONG]
    # Those not sent are cancelled; so are those in flight at the stop (one that had finished is not).
    assert set(order[reach : long["max_items"]]) <= {record["item"] for record in cancelled} <= set(order[stopped_at:])
    assert all(f"sequential gate: {LONG} stopped with FAIL" in record["reason"] for record in cancelled)
    # The estimate in the verdict is of the same order as what was measured (it is not a count).
    assert long["requests_saved"] > 0
    assert f"{LONG}: sequential FAIL by the {long['stop']['by']} after {stopped_at} of" in output
    # The per-look chart: the looks taken before the stop, against their bounds.
    assert f"{LONG}: FAIL by the {long['stop']['by']} after {stopped_at} items" in output
    # The FAIL decided the gate: math, not yet judged, is left unjudged and its requests are not sent
    # (--k3-stop-on-fail, on by default), and the gate says so for that suite.
    assert f"k3conformance: the gate's verdict was already FAIL ({LONG}: sequential FAIL by the" in output
    assert "stopped sending; left unjudged: math (" in output
    math = gate_file(run_dir)["sequential"]["math"]
    assert math["stop"] is None and math["left_unjudged"].startswith("the gate's verdict was already FAIL")
    not_sent = [record for record in iter_records(run_dir, "cancelled") if record["suite"] == "math"]
    assert not_sent and all(record["reason"].startswith("not sent: the gate's verdict") for record in not_sent)
    assert items_sent(run_dir, "math") + len(not_sent) >= math["max_items"]
    assert any(reason.startswith("INCOMPLETE: math: left unjudged") for reason in gate_file(run_dir)["reasons"])
    assert "math: no sequential decision (left unjudged: the gate's verdict was already FAIL" in output
    # The committed order is in the summary, and the items the rule used are its first ones.
    assert summary["sequential"][LONG]["order_seed"] == long["order_seed"]
    # Each item has several tests (its score, its in-loop conformance): the order is of items.
    scored = list(
        dict.fromkeys(
            record["item"]
            for record in iter_records(run_dir, "outcome")
            if record["suite"] == LONG and record["outcome"] != "skipped"
        )
    )
    assert scored[:stopped_at] == order[:stopped_at]
    # `compare` re-gates the stored sequential run by replaying its rule: the same path, the same verdict.
    capsys.readouterr()
    results = str(project.path / "out")
    compare = ["compare", "tp8", run_dir.parent.name, "--results-dir", results, "--format", "json"]
    assert cli_main(compare) == 1
    compared, stored = json.loads(capsys.readouterr().out), gate_file(run_dir)
    assert compared["verdict"] == stored["verdict"] == "FAIL" and compared["reasons"] == stored["reasons"]
    for key in ("design", "looks", "monitors", "stop", "items"):
        assert compared["sequential"][LONG][key] == long[key], key
    # A stored decision is not trusted: one edited to PASS is replayed to the FAIL the records show.
    summary["sequential"][LONG]["stop"] = {"verdict": "PASS", "by": "look", "items": stopped_at, "look": 1}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    assert cli_main(compare) == 1
    assert json.loads(capsys.readouterr().out)["sequential"][LONG]["stop"] == long["stop"]
    # At another margin the design's bounds do not hold: no sequential decision, and the suite
    # stopped early is judged fixed-size on the items it ran, so its unrun items are missing.
    assert cli_main([*compare, "--margin", "5"]) == 1
    other = json.loads(capsys.readouterr().out)
    assert LONG not in other["sequential"]
    assert any(note.startswith(f"{LONG}: the run's sequential design was made for margin 3") for note in other["notes"])
    assert any(reason.startswith(f"INCOMPLETE: {LONG}:") for reason in other["reasons"]), other["reasons"]


def test_stop_on_fail_off_judges_every_suite(project: pytest.Pytester) -> None:
    result, run_dir = candidate(project, "ep32-megamoe", "--k3-stop-on-fail=off")
    assert result.ret == 1
    assert "left unjudged" not in result.stdout.str()
    paths = gate_file(run_dir)["sequential"]
    assert paths[LONG]["stop"]["verdict"] == "FAIL"
    assert "left_unjudged" not in paths["math"] and paths["math"]["stop"] is not None
    # Math may stop at its own decision; nothing of it is cancelled for another suite's FAIL.
    reasons = {record["reason"] for record in iter_records(run_dir, "cancelled") if record["suite"] == "math"}
    assert all(reason.startswith("sequential gate: math stopped with") for reason in reasons), reasons


def test_an_unchanged_deployment_runs_to_a_pass_or_the_maximum_and_deepep_does_not_fail(
    project: pytest.Pytester,
) -> None:
    baseline = run_of(project, "tp8")
    result, run_dir = candidate(project, "tp8", "--k3-shape", "tp8-again")
    # Strict by default (issue 21): a suite that reached its maximum undecided fails the session.
    assert result.ret == (0 if gate_file(run_dir)["verdict"] == "PASS" else 1)
    assert gate_file(run_dir)["verdict"] in ("PASS", "INCONCLUSIVE"), gate_file(run_dir)["reasons"]
    for suite, path in gate_file(run_dir)["sequential"].items():
        stop = path["stop"]
        assert stop["verdict"] == "PASS" or stop["by"] == "maximum reached", (suite, stop)
        assert stop["verdict"] != "FAIL"
    assert spend_by_suite(run_dir)[LONG].requests <= spend_by_suite(baseline)[LONG].requests
    result, run_dir = candidate(project, "ep32-deepep")
    gate = gate_file(run_dir)
    assert gate["verdict"] != "FAIL", gate["reasons"]
    assert all(path["stop"]["verdict"] != "FAIL" for path in gate["sequential"].values())


def test_sequential_off_is_a_fixed_size_run(project: pytest.Pytester) -> None:
    result, run_dir = candidate(project, "ep32-megamoe", "--k3-sequential=off")
    assert result.ret == 1
    assert "k3conformance: --k3-sequential=off: a fixed-size run" in result.stdout.str()
    assert gate_file(run_dir)["sequential"] is None
    # A conversation's length depends on the deployment (a looping turn ends it): count items.
    assert items_sent(run_dir, LONG) == items_sent(run_of(project, "tp8"), LONG)
    # Under xdist the looks are not held across workers: the run is fixed-size and says so.
    result, run_dir = candidate(project, "ep32-megamoe", "-n", "2", "--k3-shape", "xdist")
    assert result.ret == 1
    assert "sequential gating runs in a single process only: under xdist the run is fixed-size" in result.stdout.str()
    assert gate_file(run_dir)["sequential"] is None
    assert items_sent(run_dir, LONG) == items_sent(run_of(project, "tp8"), LONG)


def test_the_first_looks_go_before_the_conformance_suites(pytester: pytest.Pytester) -> None:
    """In a sequentially gated run every gated suite's first look runs first, then the conformance
    suites, then the later looks: the evidence that can decide the gate soonest is sent first."""
    copy_suites(pytester.path, ["test_smoke.py", "test_math.py"])
    math_only = ("--k3-math-dataset", "fixture:math", "--k3-results-dir", "out", "-p", "no:cacheprovider")
    stored = pytester.runpytest("--k3-endpoint", "reference:tp8", "--k3-shape", "tp8", "--k3-save-baseline", *math_only)
    assert stored.ret == 0
    result = pytester.runpytest(
        "--k3-endpoint", "reference:tp8", "--k3-shape", "tp8", "--k3-baseline", "tp8", "--k3-seed", "7",
        "--k3-allow-differences", "seed", "-v", *math_only,
    )  # fmt: skip
    suites = [line.split("::")[0] for line in result.stdout.lines if "::" in line and " PASSED" in line]
    # 41 math items, looks of 8: the first 8 math tests, then the smoke suite, then math again.
    assert suites[:8] == ["test_math.py"] * 8, suites[:12]
    assert suites[8].startswith("test_smoke") and suites[-1] == "test_math.py"
