"""The `k3conformance` command: tools that need no pytest session."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from k3conformance import __version__
from k3conformance.options import non_negative_float, positive_int

REFERENCE_API_KEY_ENV = "K3_REFERENCE_API_KEY"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port between 0 and 65535, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from k3conformance.reference.profiles import PROFILES

    parser = argparse.ArgumentParser(prog="k3conformance", description="Kimi K3 deployment conformance tools")
    parser.add_argument("--version", action="version", version=f"k3conformance {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="Run the reference deployment: a simulator of the K3 API, not the model",
        description=(
            "Serve the k3conformance reference deployment on loopback: an OpenAI-compatible server whose "
            "'model' is a deterministic simulator of Kimi K3's API surface. It prints its base URL on the "
            f"first line of stdout. Set ${REFERENCE_API_KEY_ENV} to make it require that API key."
        ),
    )
    profiles = ", ".join(f"{name} ({profile.description})" for name, profile in sorted(PROFILES.items()))
    serve.add_argument("--profile", default="tp8", choices=sorted(PROFILES), help=f"Deployment profile: {profiles}")
    serve.add_argument("--host", default="127.0.0.1", help="Address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=0, help="Port to bind; 0 picks a free one (default: 0)")
    serve.add_argument(
        "--latency", type=non_negative_float, default=None, help="Seconds to wait before answering each request"
    )
    serve.add_argument("--model-id", default=None, help="Model id to serve (default: kimi-k3-simulator)")
    serve.add_argument("--fixtures-dir", type=Path, default=None, help="Answer keys to load (default: fixtures/)")
    serve.add_argument("--exit-with-stdin", action="store_true", help="Exit when stdin closes (for parent processes)")
    serve.add_argument(
        "--output-bytes",
        type=positive_int,
        default=None,
        metavar="N",
        help="Reason about N bytes per answer at every effort, for load benchmarks (default: the profile's lengths)",
    )
    _add_compare(commands)
    _add_plan(commands)
    return parser


def _add_margins_and_alpha(parser: argparse.ArgumentParser) -> None:
    """The gate's level and margins, as `compare` and `plan` both take them."""
    from k3conformance.options import alpha, suite_margins

    parser.add_argument("--alpha", type=alpha, default=0.05, help="One-sided significance level (default: 0.05)")
    parser.add_argument(
        "--margin", type=non_negative_float, default=3.0, help="Accuracy points a suite may lose (default: 3)"
    )
    parser.add_argument("--margins", type=suite_margins, default=(), help="Per-suite margins: coding=3,math=2")


def _add_plan(commands: Any) -> None:
    plan = commands.add_parser(
        "plan",
        help="Print what a sequentially gated run against a stored baseline will cost, without an endpoint",
        description=(
            "Size the sequential gate from a stored baseline: per accuracy suite, the maximum items, the looks, "
            "the expected items to a decision for no change and for a loss of twice the margin, and the minimum "
            "detectable drop at the maximum. The spread of an unchanged deployment comes from an A/A pair (--aa, or "
            "another complete run stored next to the baseline), else from several samples per item, else an "
            "assumed 15% discordance. The header of a gated pytest run prints the same. Exit status: 0, or 2 on "
            "bad input."
        ),
    )
    plan.add_argument("baseline", metavar="BASELINE")
    plan.add_argument("--aa", metavar="RUN", default=None, help="A second run of the baseline's shape: the A/A pair")
    plan.add_argument(
        "--results-dir", type=Path, default=Path("results"), help="Where shapes are stored (default: results)"
    )
    _add_margins_and_alpha(plan)
    plan.add_argument("--looks", type=positive_int, default=5, help="Looks per suite (default: 5)")
    plan.add_argument(
        "--max-items", type=positive_int, default=None, help="Most items per suite (default: as the plan asks)"
    )
    plan.add_argument("--format", choices=("text", "json"), default="text", help="Output format (default: text)")


def _add_compare(commands: Any) -> None:
    from k3conformance.options import GATE_MODES, rate

    compare = commands.add_parser(
        "compare",
        help="Gate a stored candidate run against a stored baseline run, without an endpoint",
        description=(
            "Re-gate stored runs: the same comparison, verdicts and exit status as pytest --k3-baseline. "
            "BASELINE and CANDIDATE are shapes under the results directory (a baseline's newest complete run, "
            "a candidate's newest run), run folders, or summary.json files. Exit status: 0 when the gate does "
            "not fail, 1 when it fails, 2 on bad input."
        ),
    )
    compare.add_argument("baseline", metavar="BASELINE")
    compare.add_argument("candidate", metavar="CANDIDATE")
    compare.add_argument(
        "--format", choices=("text", "markdown", "json"), default="text", help="Report format (default: text)"
    )
    compare.add_argument(
        "--results-dir", type=Path, default=Path("results"), help="Where shapes are stored (default: results)"
    )
    compare.add_argument(
        "--gate", choices=GATE_MODES, default="warn", help="warn: INCONCLUSIVE passes; strict: it fails"
    )
    _add_margins_and_alpha(compare)
    compare.add_argument("--repetition-floor", type=rate, default=0.02, help="Looping rate floor (default: 0.02)")
    compare.add_argument("--truncation-floor", type=rate, default=0.05, help="Truncation rate floor (default: 0.05)")
    compare.add_argument(
        "--write",
        action="store_true",
        help="Also write gate.json, gate.md (and gate.png) into the candidate's run folder",
    )


def main(argv: Sequence[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    if arguments.command == "serve":
        return _serve(arguments)
    if arguments.command == "compare":
        return _compare(arguments)
    if arguments.command == "plan":
        return _plan(arguments)
    return 2


def _plan(arguments: argparse.Namespace) -> int:
    import json

    from k3conformance.gate.plan import a_a_partner, plan_baseline, report_lines
    from k3conformance.runs.stored import BaselineError, load_run

    try:
        baseline = load_run(arguments.baseline, arguments.results_dir)
        partner = load_run(arguments.aa, arguments.results_dir) if arguments.aa else a_a_partner(baseline)
    except BaselineError as error:
        print(f"k3conformance plan: {error}", file=sys.stderr)
        return 2
    try:
        plans = plan_baseline(baseline, arguments, partner)
    except ValueError as error:
        print(f"k3conformance plan: {error}", file=sys.stderr)
        return 2
    if arguments.format == "json":
        print(json.dumps({"baseline": baseline.label, "suites": [plan.to_dict() for plan in plans]}, indent=2))
    else:
        print("\n".join(report_lines(baseline, arguments, plans)))
    return 0


def _compare(arguments: argparse.Namespace) -> int:
    from k3conformance.gate.decision import gate, settings_for
    from k3conformance.gate.report import json_report, markdown_report, text_report, write_reports
    from k3conformance.runs.stored import BaselineError, load_run

    try:
        baseline = load_run(arguments.baseline, arguments.results_dir)
        candidate = load_run(arguments.candidate, arguments.results_dir, require_complete=False)
    except BaselineError as error:
        print(f"k3conformance compare: {error}", file=sys.stderr)
        return 2
    result = gate(baseline, candidate, settings_for(arguments))
    if arguments.format == "json":
        print(json_report(result))
    elif arguments.format == "markdown":
        print(markdown_report(result, baseline.summary, candidate.summary))
    else:
        print("\n".join(text_report(result, baseline.summary, candidate.summary)))
    if arguments.write and candidate.path is not None:
        write_reports(result, candidate.path.parent, baseline.summary, candidate.summary)
    return 1 if result.fails() else 0


def _serve(arguments: argparse.Namespace) -> int:
    from k3conformance.reference.identity import DEFAULT_MODEL_ID
    from k3conformance.reference.profiles import get_profile
    from k3conformance.reference.server import serve

    try:
        serve(
            host=arguments.host,
            port=arguments.port,
            profile=get_profile(arguments.profile),
            latency_s=arguments.latency,
            # From the environment, never argv: command lines show up in process listings.
            api_key=os.environ.get(REFERENCE_API_KEY_ENV) or None,
            model_id=arguments.model_id or DEFAULT_MODEL_ID,
            exit_with_stdin=arguments.exit_with_stdin,
            fixtures_dir=arguments.fixtures_dir,
            output_bytes=arguments.output_bytes,
        )
    except OSError as error:
        print(f"k3conformance serve: cannot listen on {arguments.host}:{arguments.port}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
