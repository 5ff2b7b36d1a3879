"""The gate on a real engine, in CI: llama.cpp's server serving SmolLM2-135M-Instruct runs
the small-model suite (suites/test_small_model.py) three times with the real plugin, on the
same seeded items at temperature 0: a baseline with llama.cpp's defaults, stored with
--k3-save-baseline; a setting that changes the arithmetic but not the model, gated against
it (must not FAIL); and a clear numerical regression, gated against it (must FAIL, on
accuracy). Nothing is simulated: which items flip is what llama.cpp computes.

The equivalent setting is flash attention off (llama.cpp's default, "auto", runs its fused
attention kernel on this CPU); the regression is RoPE frequency scale 0.5, which halves
every position's rotation angle. The gate's rules are the plugin's own. The whole matrix of
settings is benchmarks/bench_real_engine.py (docs/real-engine.md).

Both gated runs are llama.cpp deployments known whole (`/props` and the launch settings each
run records), so the shape policy requires the suite the baseline scored, not Kimi K3's
agentic_coding and math (gate/policy.py; before issue 22 every llama.cpp comparison was
INCOMPLETE for want of them). The equivalent run uses `--k3-gate warn`: at 48 items it cannot
PASS a setting that changes half the answers, so INCONCLUSIVE is what it can reach, and in warn
mode that exits 0.
"""

from __future__ import annotations

import pytest
from llamacpp_server import require_model

from k3conformance.deployment.llamacpp_gate_run import GatedRun, run_suites_on_llamacpp

SUITES = ("test_small_model.py",)
# Items drawn with --k3-seed (the same on all three runs): enough that the regression's loss
# is a FAIL, few enough that three runs fit in about four minutes on two cores.
ITEMS = 48
OPTIONS = ("--k3-temperature", "0", "--k3-limit", str(ITEMS))
BASELINE_SHAPE = "llamacpp-default"
EQUIVALENT = ("flash_attention=off",)
REGRESSION = ("rope_freq_scale=0.5",)
SUITE = "small_model"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, GatedRun]:
    model = require_model()
    project = tmp_path_factory.mktemp("llamacpp-gate")
    baseline = run_suites_on_llamacpp(
        project,
        SUITES,
        model=model,
        shape=BASELINE_SHAPE,
        # The seeded 48 items are the baseline on purpose: declared, as --k3-save-baseline asks.
        options=[*OPTIONS, "--k3-save-baseline", "--k3-subset-baseline"],
    )
    gated = {
        name: run_suites_on_llamacpp(
            project,
            SUITES,
            model=model,
            shape=name,
            params=params,
            options=[*OPTIONS, "--k3-baseline", BASELINE_SHAPE, *extra],
        )
        for name, params, extra in (
            ("flash-attention-off", EQUIVALENT, ("--k3-gate", "warn")),
            ("rope-scale-half", REGRESSION, ()),
        )
    }
    return {"baseline": baseline, **gated}


def _accuracy_verdict(run: GatedRun) -> str:
    assert run.gate is not None, run.diagnostics()
    comparison = run.gate["accuracy"].get(SUITE)
    assert comparison is not None, f"the gate compared no {SUITE} accuracy: {run.gate['reasons']}"
    return str(comparison["verdict"])


def test_baseline_scores_every_item(runs: dict[str, GatedRun]) -> None:
    baseline = runs["baseline"]
    summary = baseline.summary()
    assert summary["status"] == "complete", baseline.diagnostics()
    assert summary["simulator"] is False
    assert summary["suites"][SUITE]["items"] == ITEMS, summary["suites"][SUITE]
    assert summary["requests"]["infra_errors"] == 0, summary["requests"]


def test_an_equivalent_setting_does_not_fail(runs: dict[str, GatedRun]) -> None:
    run = runs["flash-attention-off"]
    assert run.gate is not None, run.diagnostics()
    assert run.gate["verdict"] in ("PASS", "INCONCLUSIVE"), run.gate["reasons"]
    assert _accuracy_verdict(run) != "FAIL", run.gate["reasons"]
    assert run.returncode == pytest.ExitCode.OK, run.diagnostics()


def test_the_shape_policy_reads_both_llamacpp_deployments(runs: dict[str, GatedRun]) -> None:
    """The one setting that changed is the one difference, and it requires the suite the
    baseline scored: nothing unknown, nothing of Kimi K3's."""
    for name, setting in (("flash-attention-off", "flash_attention"), ("rope-scale-half", "rope_freq_scale")):
        run = runs[name]
        assert run.gate is not None, run.diagnostics()
        shape = run.gate["shape"]
        assert len(shape["differences"]) == 1 and f"launch.args.{setting}" in shape["differences"][0], shape
        assert shape["required_suites"] == [SUITE] and shape["missing_suites"] == [], shape


def test_a_clear_regression_fails_on_accuracy(runs: dict[str, GatedRun]) -> None:
    run = runs["rope-scale-half"]
    assert run.gate is not None, run.diagnostics()
    assert run.gate["verdict"] == "FAIL", run.gate["reasons"]
    assert _accuracy_verdict(run) == "FAIL", run.gate["reasons"]
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.diagnostics()
