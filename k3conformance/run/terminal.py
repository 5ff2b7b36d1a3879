"""What the person at the terminal reads: the header and the closing tables."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tabulate import tabulate

from k3conformance.endpoint.resolved import ResolvedEndpoint
from k3conformance.endpoint.url import is_reference, strip_credentials
from k3conformance.formatting import percent
from k3conformance.options import Settings, key_lines
from k3conformance.scoring.call_matching import SchemaAccuracy, TriggerCounts
from k3conformance.scoring.item_score import summarize
from k3conformance.scoring.suite_tally import SuiteTally

SIMULATOR_NOTICE = (
    "the k3conformance reference deployment is a SIMULATOR of the Kimi K3 API, not the model: "
    "its scores say nothing about any real deployment"
)


def header_lines(
    settings: Settings, shape: str, run_dir: Path, endpoint: ResolvedEndpoint | None, resumed: bool
) -> list[str]:
    if endpoint is not None:
        where = endpoint.display_url
        if endpoint.reference_profile:
            where = f"reference:{endpoint.reference_profile} at {endpoint.display_url}"
        model = endpoint.model
    else:
        where = settings.endpoint if is_reference(settings.endpoint) else strip_credentials(settings.endpoint)
        model = settings.model or "(first from /v1/models, resolved when the first item runs)"
    lines = [
        f"k3conformance: endpoint {where}, model {model}, shape {shape}",
        (
            f"k3conformance: think mode {settings.think_mode}, reasoning effort {settings.reasoning_effort}, "
            f"temperature {settings.temperature}, top_p {settings.top_p}, concurrency {settings.concurrency}/process"
        ),
        f"k3conformance: records {'resume into' if resumed else 'go to'} {run_dir}",
        *(f"k3conformance: {line}" for line in key_lines(settings)),
    ]
    if settings.prompt_token_cases is not None:
        lines.append(
            f"k3conformance: prompt tokens also checked against the fixed counts in {settings.prompt_token_cases}"
        )
    if endpoint is not None and endpoint.server_info:
        lines.append(f"k3conformance: server reports {describe_server(endpoint.server_info)}")
    if endpoint is not None and endpoint.simulator:
        lines.append(f"k3conformance: NOTE {SIMULATOR_NOTICE}")
    return lines


def describe_server(info: Mapping[str, Any]) -> str:
    parts: list[str] = []
    server = info.get("get_server_info") or info.get("server_info")
    if isinstance(server, Mapping):
        for key in ("version", "model_path", "tp_size", "ep_size", "dp_size", "reasoning_parser", "tool_call_parser"):
            if key in server:
                parts.append(f"{key}={server[key]}")
        if server.get("simulator"):
            parts.insert(0, "SIMULATOR")
    props = info.get("props")
    if isinstance(props, Mapping):
        parts.extend(_describe_llamacpp(props))
    version = info.get("version")
    if isinstance(version, Mapping) and "version" in version:
        parts.append(f"version={version['version']}")
    return ", ".join(parts) or "nothing recognisable"


def _describe_llamacpp(props: Mapping[str, Any]) -> list[str]:
    """llama.cpp's `/props`: its build, the model file, the slots, and whether the chat
    template takes tools at all (for a template that does not, llama.cpp leaves the
    request's `tools` out of the prompt, so no tool-call check can pass)."""
    parts = ["llama.cpp"]
    parts += [
        f"{key}={props[key]}" for key in ("build_info", "model_alias", "model_path", "total_slots") if key in props
    ]
    settings = props.get("default_generation_settings")
    if isinstance(settings, Mapping) and "n_ctx" in settings:
        parts.append(f"n_ctx_per_slot={settings['n_ctx']}")
    capabilities = props.get("chat_template_caps")
    if isinstance(capabilities, Mapping) and "supports_tools" in capabilities:
        parts.append(f"chat_template supports_tools={capabilities['supports_tools']}")
    return parts


def suite_table(tallies: Mapping[str, SuiteTally]) -> str:
    rows = []
    for suite in sorted(tallies):
        tally = tallies[suite]
        # An accuracy suite measures: its tests pass whenever an answer could be scored, so a
        # share of passed tests would read as 100% at any accuracy. Its numbers are below.
        score = "measured" if tally.scores else percent(tally.score)
        rows.append(
            [suite, len(tally.items), tally.tests, tally.passed, tally.failed, tally.infra_errors, tally.errors, score]
        )
    headers = ["suite", "items", "tests", "passed", "failed", "infra errors", "errors", "checks passed"]
    return tabulate(rows, headers=headers, tablefmt="github")


def accuracy_table(tallies: Mapping[str, SuiteTally]) -> str:
    """The accuracy suites: what the gate compares across deployment shapes."""
    rows = []
    for suite in sorted(tallies):
        accuracy = summarize(tallies[suite].scores)
        if accuracy is None:
            continue
        rows.append(
            [
                suite,
                accuracy.items,
                accuracy.samples,
                f"{percent(accuracy.accuracy)} [{percent(accuracy.low)}, {percent(accuracy.high)}]",
                percent(accuracy.no_answer_rate),
                percent(accuracy.truncation_rate),
                percent(accuracy.looping_rate),
                f"{accuracy.mean_output_tokens:.0f}",
            ]
        )
    if not rows:
        return ""
    headers = [
        "suite",
        "items",
        "samples",
        "accuracy [95% Wilson]",
        "no answer",
        "truncated",
        "looping",
        "mean output tokens",
    ]
    return tabulate(rows, headers=headers, tablefmt="github")


NO_BASELINE_NOTE = (
    "accuracy suites: measured, not judged: no verdict on accuracy, looping or truncation is given without "
    "a baseline (gate against one with --k3-baseline SHAPE)"
)


def check_table(tallies: Mapping[str, SuiteTally]) -> str:
    rows = []
    for suite in sorted(tallies):
        for name, check in sorted(tallies[suite].checks.items()):
            layers = ", ".join(f"{layer} {count}" for layer, count in sorted(check.layers.items()))
            rows.append([suite, name, check.passed, check.failed, check.infra_errors + check.errors, layers])
    return tabulate(
        rows, headers=["suite", "check", "passed", "failed", "not scored", "failures by layer"], tablefmt="github"
    )


def live_failure_line(outcome: Mapping[str, Any], nodeid: str) -> str:
    """A conformance failure as it happens: suite, check, layer and the first line of the message."""
    check = str(outcome.get("test", "")).removeprefix("test_") + (f"[{outcome['mode']}]" if outcome.get("mode") else "")
    message = str(outcome.get("message") or "").splitlines()
    first = message[0] if message else ""
    return f"k3conformance: FAILED {outcome.get('suite')}/{check} [layer: {outcome.get('layer') or 'unattributed'}] {nodeid}: {first}"[
        :400
    ]


def failure_lines(tallies: Mapping[str, SuiteTally]) -> list[str]:
    """One excerpt per failing check and layer."""
    lines: list[str] = []
    for suite in sorted(tallies):
        for name, check in sorted(tallies[suite].checks.items()):
            for layer, excerpt in sorted(check.excerpts.items()):
                first_line = excerpt.splitlines()[0] if excerpt else ""
                lines.append(f"FAILED {suite} {name} [{layer}]: {first_line}"[:400])
    return lines


def metric_lines(tallies: Mapping[str, SuiteTally]) -> list[str]:
    lines: list[str] = []
    for suite in sorted(tallies):
        summary = describe_metrics(tallies[suite].metrics)
        if summary:
            lines.append(f"{suite}: {summary}")
    return lines


def describe_metrics(metrics: Mapping[str, float]) -> str:
    """K2-Vendor-Verifier's tool-call metrics and the cache agreement counts, when a suite
    reports them."""
    parts: list[str] = []
    trigger = TriggerCounts(
        true_positive=int(metrics.get("trigger_tp", 0)),
        false_positive=int(metrics.get("trigger_fp", 0)),
        false_negative=int(metrics.get("trigger_fn", 0)),
    )
    if trigger.true_positive + trigger.false_positive + trigger.false_negative:
        parts.append(
            f"tool-call trigger precision {percent(trigger.precision)}, recall {percent(trigger.recall)}, "
            f"F1 {percent(trigger.f1)}"
        )
    for kind, label in (("prefix", "same prompt again"), ("history", "continued history")):
        for mode in ("plain", "stream"):
            warm, cold = metrics.get(f"{kind}_warm_agree_{mode}"), metrics.get(f"{kind}_cold_agree_{mode}")
            if warm is not None and cold is not None:
                parts.append(f"{label} ({mode}): warm agrees {int(warm)}, cold copy agrees {int(cold)}")
    schema = SchemaAccuracy(valid_calls=int(metrics.get("valid_calls", 0)), calls=int(metrics.get("calls", 0)))
    if schema.calls:
        parts.append(f"schema accuracy {percent(schema.accuracy)} of {schema.calls} calls")
    return "; ".join(parts)
