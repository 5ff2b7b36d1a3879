"""What the person at the terminal reads: the header and the closing tables."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tabulate import tabulate

from k3conformance.endpoint_info import ResolvedEndpoint
from k3conformance.endpoint_url import is_reference, strip_credentials
from k3conformance.options import Settings
from k3conformance.outcomes import SuiteTally

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
    ]
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
    version = info.get("version")
    if isinstance(version, Mapping) and "version" in version:
        parts.append(f"version={version['version']}")
    return ", ".join(parts) or "nothing recognisable"


def suite_table(tallies: Mapping[str, SuiteTally]) -> str:
    rows = []
    for suite in sorted(tallies):
        tally = tallies[suite]
        score = f"{tally.score:.1%}" if tally.score is not None else "-"
        rows.append([suite, len(tally.items), tally.tests, tally.passed, tally.failed, tally.infra_errors, tally.errors, score])
    headers = ["suite", "items", "tests", "passed", "failed", "infra errors", "errors", "score"]
    return tabulate(rows, headers=headers, tablefmt="github")


def failure_lines(tallies: Mapping[str, SuiteTally]) -> list[str]:
    lines: list[str] = []
    for suite in sorted(tallies):
        tally = tallies[suite]
        if tally.layers:
            layers = ", ".join(f"{layer}: {count}" for layer, count in sorted(tally.layers.items()))
            lines.append(f"{suite}: failures by layer: {layers}")
        for test, excerpt in sorted(tally.first_failures.items()):
            lines.append(f"  {test}: {excerpt.splitlines()[0] if excerpt else ''}"[:300])
    return lines
