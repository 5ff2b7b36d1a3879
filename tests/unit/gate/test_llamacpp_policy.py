"""The shape policy for two llama.cpp deployments (issue 22). Before it, every llama.cpp
comparison was INCOMPLETE: no SGLang shape could be read from `/props`, so even a
bit-identical rerun counted as a different deployment and needed Kimi K3's agentic_coding and
math suites, which a 135M model cannot run. Now `/props` and the recorded launch settings are
the whole identity; a difference requires every suite the baseline scored. It still fails
closed: a side without its launch settings, a model that may be Kimi, or a baseline with no
accuracy suite gets K3's rule.
"""

from __future__ import annotations

import itertools
from typing import Any

from k3conformance.gate.identity import identity_differences, identity_of
from k3conformance.gate.policy import REQUIRED_SUITES
from k3conformance.gate.settings import GateSettings
from k3conformance.gate.verdict import GateResult, judge
from k3conformance.runs.schema import validate_summary
from k3conformance.runs.stored import StoredRun

_RUN_IDS = itertools.count(1)
MODEL_PATH = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"


def props(model_path: str | None = MODEL_PATH, marker: str = "<__media_a__>") -> dict[str, Any]:
    """llama.cpp's /props as a run records it (a few of its fields)."""
    recorded: dict[str, Any] = {
        "build_info": "b0-unknown",
        "total_slots": 2,
        "model_alias": "smollm2-135m-instruct",
        "default_generation_settings": {"n_ctx": 2048, "params": {"top_k": 40}},
        # Drawn at random by every launch, and the server's state at that moment.
        "media_marker": marker,
        "is_sleeping": False,
    }
    if model_path is not None:
        recorded["model_path"] = model_path
    return recorded


def llamacpp_run(
    args: dict[str, str] | None = None,
    *,
    suites: tuple[str, ...] = ("small_model",),
    model: str = "smollm2-135m-instruct",
    model_path: str | None = MODEL_PATH,
    launch: bool = True,
) -> dict[str, Any]:
    scores = {
        f"item-{i}": {"samples": 1, "correct": float(i < 900), "truncated": 0, "looping": 0, "no_answer": 0}
        for i in range(2000)
    }
    run_id = next(_RUN_IDS)
    summary: dict[str, Any] = {
        "run_id": f"llamacpp-{run_id}",
        "shape": f"llamacpp-{run_id}",
        "status": "complete",
        "simulator": False,
        "model": model,
        "server_info": {"props": props(model_path, marker=f"<__media_{run_id}__>")},
        "suites": {suite: {"scores": scores, "checks": {}} for suite in suites},
        "datasets": {suite: {"items": sorted(scores), "sources": {f"fixture:{suite}": "sha-1"}} for suite in suites},
    }
    if launch:
        summary["launch"] = {"args": args or {}, "env": {}}
    return summary


def gate(baseline: dict[str, Any], candidate: dict[str, Any]) -> GateResult:
    return judge(
        StoredRun(validate_summary(baseline, "b"), None),
        StoredRun(validate_summary(candidate, "c"), None),
        GateSettings(),
    )


def test_a_rerun_of_the_same_llamacpp_deployment_is_the_same_deployment() -> None:
    """Reproduction: the A/A rerun (0 of 40 answers changed) was INCOMPLETE; a launch's random
    media marker was one of its two "differences"."""
    result = gate(llamacpp_run(), llamacpp_run())
    assert result.shape is not None and result.shape.differences == [] and result.shape.required_suites == ()
    assert result.verdict == "PASS", result.reasons


def test_a_changed_setting_requires_the_suites_the_baseline_scored() -> None:
    """Reproduction: flash attention off was INCOMPLETE for want of agentic_coding and math."""
    result = gate(llamacpp_run(), llamacpp_run({"flash_attention": "off"}))
    assert result.shape is not None
    assert result.shape.differences == ['deployment: launch.args.flash_attention: (not recorded) → "off"']
    assert result.shape.required_suites == ("small_model",) and result.shape.missing_suites == ()
    assert "llama.cpp, launched with flash_attention=off" in result.shape.candidate
    assert result.verdict == "PASS", result.reasons


def test_a_candidate_without_a_suite_the_baseline_scored_is_incomplete() -> None:
    baseline = llamacpp_run(suites=("small_model", "math"))
    result = gate(baseline, llamacpp_run({"flash_attention": "off"}))
    assert result.verdict == "INCOMPLETE"
    assert result.shape is not None and result.shape.missing_suites == ("math",)


def test_a_side_without_its_launch_settings_gets_kimi_k3s_rule() -> None:
    """/props does not report flash attention, the KV cache type or RoPE scaling: without the
    --k3-server-args record the deployment is not known whole."""
    for baseline, candidate in (
        (llamacpp_run(), llamacpp_run(launch=False)),
        (llamacpp_run(launch=False), llamacpp_run()),
    ):
        result = gate(baseline, candidate)
        assert result.verdict == "INCOMPLETE"
        assert result.shape is not None and result.shape.required_suites == REQUIRED_SUITES


def test_a_model_that_may_be_kimi_keeps_kimi_k3s_suites() -> None:
    changed: tuple[dict[str, str | None], ...] = (
        {"model": "moonshotai/Kimi-K3"},
        {"model_path": "/models/Kimi-K3-Q2_K.gguf"},
        # An alias alone does not rule Kimi out: the model file is not known.
        {"model_path": None},
    )
    for changes in changed:
        model, path = str(changes.get("model", "smollm2-135m-instruct")), changes.get("model_path", MODEL_PATH)
        result = gate(
            llamacpp_run(model=model, model_path=path), llamacpp_run({"kv_type": "q8_0"}, model=model, model_path=path)
        )
        assert result.verdict == "INCOMPLETE", changes
        assert result.shape is not None and result.shape.required_suites == REQUIRED_SUITES


def test_an_unchanged_kimi_deployment_on_llamacpp_needs_nothing_more() -> None:
    kimi = llamacpp_run(model="moonshotai/Kimi-K3", model_path="/models/Kimi-K3-Q2_K.gguf")
    again = llamacpp_run(model="moonshotai/Kimi-K3", model_path="/models/Kimi-K3-Q2_K.gguf")
    result = gate(kimi, again)
    assert result.shape is not None and result.shape.required_suites == ()


def test_a_baseline_with_no_accuracy_suite_gets_kimi_k3s_suites() -> None:
    """Conformance checks alone: nothing to hold the changed candidate to is not a pass."""
    checks = {"reasoning": {"scores": {}, "checks": {"answer_follows_reasoning": {"passed": 10, "failed": 0}}}}
    baseline, candidate = llamacpp_run(suites=()), llamacpp_run({"flash_attention": "off"}, suites=())
    baseline["suites"], candidate["suites"] = checks, checks
    result = gate(baseline, candidate)
    assert result.verdict == "INCOMPLETE"
    assert result.shape is not None and result.shape.required_suites == REQUIRED_SUITES


def test_llamacpp_against_sglang_is_not_a_llamacpp_comparison() -> None:
    sglang = llamacpp_run()
    sglang["server_info"] = {"get_server_info": {"tp_size": 1}}
    result = gate(llamacpp_run(), sglang)
    assert result.verdict == "INCOMPLETE"
    assert result.shape is not None and result.shape.required_suites == REQUIRED_SUITES


def test_a_resume_against_the_same_llamacpp_server_relaunched_is_the_same_run() -> None:
    """Reproduction: a run resumed after llama.cpp was relaunched was refused, its one sealed
    "difference" the launch's random media marker; a real change of the server still is one."""
    first = llamacpp_run()
    sealed = identity_of(first)
    relaunched = llamacpp_run()
    # A resume is the same run: its id and shape are the first session's (the id is sealed too).
    relaunched["shape"], relaunched["run_id"] = first["shape"], first["run_id"]
    assert identity_differences(sealed, identity_of(relaunched)) == []
    relaunched["server_info"]["props"]["total_slots"] = 4
    assert identity_differences(sealed, identity_of(relaunched)) == ["deployment.props.total_slots: 2 → 4"]
