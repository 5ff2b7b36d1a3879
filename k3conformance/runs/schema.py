"""The typed schema of what a run writes: `summary.json` and the lines of `records-*.jsonl`.

Writers build these `TypedDict`s (lm-evaluation-harness types its result files the same
way); the gate reads stored summaries back only through `validate_summary`, which rejects
what does not fit with one message naming the file, the place and what was expected,
instead of a traceback deep in the statistics or, worse, a silently skipped comparison.
Checked there: per-item totals are integers and numbers in range (0 <= correct <= samples,
events <= samples), every item carries every rate the gate compares, the status is one the
plugin writes, and a summary says whether it may serve as a baseline and what subset of
the items it ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict, cast

RunStatus = Literal["running", "complete", "incomplete", "interrupted"]
RUN_STATUSES: tuple[RunStatus, ...] = ("running", "complete", "incomplete", "interrupted")
# Per-item event counts the gate compares as rates, next to the scores.
ITEM_EVENTS = ("no_answer", "truncated", "looping")


class ItemTotalsEntry(TypedDict):
    """One item of an accuracy suite in one run: samples and what they came to."""

    samples: int
    correct: float
    no_answer: int
    truncated: int
    looping: int


class OutcomeCounts(TypedDict):
    """Test outcomes, of one check or of a whole suite."""

    passed: int
    failed: int
    infra_errors: int
    errors: int


class CheckEntry(OutcomeCounts):
    layers: dict[str, int]
    excerpts: dict[str, str]


class SuiteEntry(OutcomeCounts):
    tests: int
    skipped: int
    items: int
    checks: dict[str, CheckEntry]
    metrics: dict[str, float]
    scores: dict[str, ItemTotalsEntry]
    score: float | None
    accuracy: dict[str, Any] | None


class DatasetEntry(TypedDict, total=False):
    # The items of the suite this run selected (all of them unless -k or --k3-limit chose fewer).
    items: list[str]
    dataset: str
    dataset_sha256: str
    sources: dict[str, str]
    # Each selected item's content hash (probes/probe.py, Probe.content_sha256).
    item_sha256: dict[str, str]
    # Per pool the suite's items came from (datasets/pools.py): its hash, license and sources.
    pools: dict[str, dict[str, Any]]


class Selection(TypedDict):
    """How the run chose its tests: a subset run is never taken as a baseline by accident."""

    keyword: str | None  # -k
    markers: str | None  # -m
    limit: int | None  # --k3-limit
    deselected: int  # tests collected but not run
    subset: bool


class _Provenance(TypedDict, total=False):
    """Keys that summaries written before they existed lack; readers use `.get`."""

    # Stored on purpose as a baseline (--k3-save-baseline), and admitted as one (run/admission.py).
    baseline: bool
    # Why --k3-save-baseline refused the run, when it did.
    baseline_refused: list[str] | None
    # A subset of the items stored as a baseline on purpose (--k3-subset-baseline).
    subset_declared: bool
    # The gate's policy in force for the run (GateSettings.policy).
    policy: dict[str, Any]
    selection: Selection
    # Launch arguments and environment the user passed with --k3-server-args.
    launch: dict[str, Any] | None
    # The sequential gate's committed item order per suite (gate/sequential/state.py).
    sequential: dict[str, Any] | None
    # Per records file, the head of its chain and its record count (runs/chain.py).
    records_chain: dict[str, dict[str, Any]]


class RunSummary(_Provenance):
    run_id: str
    shape: str
    status: RunStatus
    simulator: bool
    endpoint: str | None
    reference_profile: str | None
    model: str | None
    served_models: list[str] | None
    server_info: dict[str, Any] | None
    shape_settings: dict[str, Any]
    settings: dict[str, Any]
    started_at: str
    finished_at: str | None
    sessions: list[dict[str, Any]]
    requests: dict[str, int]
    suites: dict[str, SuiteEntry]
    datasets: dict[str, DatasetEntry]
    plugin_version: str
    python: str
    pytest: str
    platform: str


class ResponseRecord(TypedDict, total=False):
    kind: Literal["response"]
    # Drawn for this request alone (runs/chain.py): what a replay of another run's records shares with it.
    k3_nonce: str
    suite: str
    item: str
    sample: int
    step: str
    fingerprint: str
    request: dict[str, Any]
    attempts: int
    finished_at: str
    status: Literal["ok", "infra_error", "api_error"]
    response: dict[str, Any]
    error: dict[str, Any]


class OutcomeRecord(TypedDict, total=False):
    kind: Literal["outcome"]
    nodeid: str
    written_at: str
    suite: str
    item: str | None
    test: str
    mode: str | None
    outcome: str
    layer: str | None
    message: str
    metrics: dict[str, float]
    score: dict[str, Any] | None


class SchemaError(ValueError):
    """A stored run that does not fit the schema; the message says where and what."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _item_problem(entry: object) -> str | None:
    if not isinstance(entry, Mapping):
        return "expected an object with samples, correct, " + ", ".join(ITEM_EVENTS)
    missing = [key for key in ("samples", "correct", *ITEM_EVENTS) if key not in entry]
    if missing:
        return f"has no {', '.join(missing)}"
    samples = entry["samples"]
    if not _is_int(samples) or samples < 0:
        return f"samples must be an integer >= 0, got {samples!r}"
    correct = entry["correct"]
    if not _is_number(correct) or not 0 <= correct <= samples:
        return f"correct must be a number between 0 and samples ({samples}), got {correct!r}"
    for event in ITEM_EVENTS:
        count = entry[event]
        if not _is_int(count) or not 0 <= count <= samples:
            return f"{event} must be an integer between 0 and samples ({samples}), got {count!r}"
    return None


def validate_summary(data: object, where: str) -> RunSummary:
    """`data` as a RunSummary, or SchemaError with one message naming `where`."""
    if not isinstance(data, dict):
        raise SchemaError(f"the run summary {where} is corrupt (not a JSON object)")
    status = data.get("status")
    if status not in RUN_STATUSES:
        shown = "no status" if status is None else f"status {status!r}"
        raise SchemaError(
            f"the run summary {where} has {shown}: expected one of {', '.join(RUN_STATUSES)}; a run "
            "without a known status is not evidence of anything"
        )
    suites = data.get("suites")
    if not isinstance(suites, dict) or not suites:
        raise SchemaError(f"the run summary {where} records no suites: nothing to compare with")
    for name, suite in suites.items():
        scores = suite.get("scores") if isinstance(suite, dict) else None
        if not isinstance(scores, dict):
            raise SchemaError(
                f"the run summary {where} has no per-item scores for suite {name!r}: it was "
                "written by an older k3conformance; run it again"
            )
        for item, entry in scores.items():
            problem = _item_problem(entry)
            if problem is not None:
                raise SchemaError(f"the run summary {where} is malformed: suite {name!r} item {item!r}: {problem}")
        checks = suite.get("checks", {})
        if not isinstance(checks, dict) or any(
            not isinstance(check, dict)
            or not all(_is_int(check.get(key, 0)) for key in ("passed", "failed", "errors", "infra_errors"))
            or not isinstance(check.get("excerpts", {}), dict)
            for check in checks.values()
        ):
            raise SchemaError(f"the run summary {where} is malformed: suite {name!r} has unreadable check counts")
    for key in ("run_id", "shape"):
        value = data.get(key)
        if not isinstance(value, str) or not value:
            raise SchemaError(f"the run summary {where} is malformed: {key} must be a non-empty string, got {value!r}")
    for key in ("server_info", "launch", "shape_settings", "settings", "sequential", "policy"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise SchemaError(
                f"the run summary {where} is malformed: {key} must be an object, got {type(data[key]).__name__}"
            )
    contradictions = (data.get("shape_settings") or {}).get("contradictions") or []
    if not isinstance(contradictions, list):
        raise SchemaError(f"the run summary {where} is malformed: shape_settings.contradictions must be a list")
    datasets = data.get("datasets", {})
    if not isinstance(datasets, dict) or any(
        not isinstance(entry, dict)
        or not isinstance(entry.get("items", []), list)
        or not isinstance(entry.get("sources") or {}, dict)
        or not all(isinstance(value, str) for value in (entry.get("sources") or {}).values())
        or not isinstance(entry.get("dataset") or "", str)
        or not isinstance(entry.get("dataset_sha256") or "", str)
        or not isinstance(entry.get("item_sha256") or {}, dict)
        or not all(isinstance(value, str) for value in (entry.get("item_sha256") or {}).values())
        for entry in datasets.values()
    ):
        raise SchemaError(
            f"the run summary {where} is malformed: datasets must map suites to objects with item lists and "
            "sources mapping each dataset to its content hash"
        )
    selection = data.get("selection")
    if selection is not None and (not isinstance(selection, dict) or not isinstance(selection.get("subset"), bool)):
        raise SchemaError(f"the run summary {where} is malformed: selection must say whether the run was a subset")
    return cast(RunSummary, data)
