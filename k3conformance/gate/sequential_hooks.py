"""Where the sequential gate meets the pytest session: ordering the tests, feeding each finished
item, stopping a suite (skipping its remaining tests, cancelling its requests, recording
why), and putting the sequential verdicts into the gate's result. hooks.py calls these."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from k3conformance.gate.plan import a_a_partner
from k3conformance.gate.sequential_run import SequentialRun, verdict_lines
from k3conformance.gate.sequential_suite import BY_MAXIMUM
from k3conformance.gate.settings import GateSettings
from k3conformance.outcomes import USER_PROPERTY
from k3conformance.probes.probe import probe_of
from k3conformance.probes.selection import probe_kind
from k3conformance.runs.records import utc_now

if TYPE_CHECKING:
    from k3conformance.gate.decision import GateResult
    from k3conformance.session import RunState


def order_for_sequential_gate(config: pytest.Config, items: list[pytest.Item], state: RunState) -> SequentialRun | None:
    """Plan the gated suites on the collected items, put their tests in the committed order and
    deselect the items beyond each suite's maximum. None when no collected suite is gated."""
    assert state.baseline is not None
    collected: dict[str, dict[str, str]] = {}
    for item in items:
        probe = probe_of(item)
        if probe is not None:
            collected.setdefault(probe.suite, {})[probe.item] = probe_kind(probe)
    run = SequentialRun.start(
        state.baseline,
        GateSettings.from_options(state.settings),
        state.run_dir.name,
        collected,
        partner=a_a_partner(state.baseline),
    )
    if not run.suites:
        return None
    positions = [index for index, item in enumerate(items) if _gated(item, run)]
    gated = [items[index] for index in positions]

    def place(entry: tuple[int, pytest.Item]) -> tuple[int, int]:
        index, item = entry
        probe = probe_of(item)
        assert probe is not None
        rank = run.rank(probe.suite, probe.item)
        # Items the baseline did not score keep their place after the ordered ones.
        return (len(items) + index if rank is None else rank, index)

    ordered = [item for _, item in sorted(enumerate(gated), key=place)]
    for index, item in zip(positions, ordered, strict=True):
        items[index] = item
    deselected = [item for item in items if _beyond_maximum(item, run)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not _beyond_maximum(item, run)]
    _add_rounds(items, run)
    for item in items:
        probe = probe_of(item)
        if probe is not None:
            run.expect_tests(probe.suite, probe.item, probe.first_sample)
    return run


def _add_rounds(items: list[pytest.Item], run: SequentialRun) -> None:
    """For each suite sampled in rounds, a test per later round of every one of its tests, right after
    the suite's last test: round 2 of every item in the committed order, then round 3, and so on."""
    for suite in run.suites:
        counts = run.rounds_of(suite)
        if not counts:
            continue
        first_round = [item for item in items if (probe := probe_of(item)) is not None and probe.suite == suite]
        clones = [
            _round_test(item, start, end)
            for start, end in itertools.pairwise(counts)
            for item in first_round
            if isinstance(item, pytest.Function)
        ]
        for clone in clones:
            probe = probe_of(clone)
            assert probe is not None
            run.round_tests[clone.nodeid] = probe.first_sample
        after = items.index(first_round[-1]) + 1
        items[after:after] = clones


def _round_test(item: pytest.Function, start: int, end: int) -> pytest.Function:
    """A copy of a parametrized test whose probe sends samples start … end − 1 only, with the id
    `test_x[ID-samples-START-END]`. pytest has no public way to add a parametrized test after
    collection, so this does what its own collection does for each parameter set (`Function.from_parent`
    with a `CallSpec2`, in `_pytest.python.PyCollector._genfunctions`): the private parts pytest
    builds from are kept in this one function."""
    callspec = item.callspec
    probe = probe_of(item)
    assert probe is not None
    clone_id = f"{callspec.id}-samples-{start}-{end}"
    params = {
        name: replace(value, samples=end - start, first_sample=start) if value is probe else value
        for name, value in callspec.params.items()
    }
    spec = replace(callspec, params=params, _idlist=[clone_id])
    return pytest.Function.from_parent(
        item.parent,
        name=f"{item.originalname}[{clone_id}]",
        callspec=spec,
        callobj=item.obj,
        fixtureinfo=item._fixtureinfo,
        keywords={clone_id: True},
        originalname=item.originalname,
    )


def _gated(item: pytest.Item, run: SequentialRun) -> bool:
    probe = probe_of(item)
    return probe is not None and probe.suite in run.suites


def _beyond_maximum(item: pytest.Item, run: SequentialRun) -> bool:
    probe = probe_of(item)
    return probe is not None and run.beyond_maximum(probe.suite, probe.item)


def skip_if_stopped(item: pytest.Item, run: SequentialRun) -> None:
    probe = probe_of(item)
    if probe is None:
        return
    stop = run.stopped(probe.suite)
    if stop is not None:
        pytest.skip(
            f"the sequential gate stopped {probe.suite}: {stop.verdict} by the {stop.by} after {stop.items} items"
        )


def feed_report(state: RunState, report: pytest.TestReport) -> None:
    """Feed a finished test's item to the rule; when the rule stops its suite, cancel the rest."""
    run = state.sequential
    assert run is not None
    first_sample = run.round_tests.get(report.nodeid, 0)
    for name, value in report.user_properties:
        if name != USER_PROPERTY or not isinstance(value, dict) or value.get("item") is None:
            continue
        suite, item = value["suite"], value["item"]
        tally = state.tallies.get(suite)
        score = tally.scores.get(item) if tally is not None else None
        stop = run.test_done(suite, item, score, first_sample)
        if stop is None or state.runner is None:
            continue
        cancelled = state.runner.cancel(suite, lambda probe: run.used(probe.suite, probe.item, probe.first_sample))
        reason = f"sequential gate: {suite} stopped with {stop.verdict} by the {stop.by} after {stop.items} items"
        if state.writer is not None:
            for probe in cancelled:
                state.writer.write(
                    {
                        "kind": "cancelled",
                        "suite": suite,
                        "item": probe.item,
                        # A later round's requests: the item's samples from this index on.
                        **({"first_sample": probe.first_sample} if probe.first_sample else {}),
                        "reason": reason,
                        "written_at": utc_now(),
                    }
                )
        run.note_cancelled(suite, cancelled, state.runner.spent)


def apply_sequential(result: GateResult, paths: Mapping[str, Any]) -> None:
    """The sequential verdicts take the place of the fixed-size accuracy verdicts of the suites they
    decided. `paths` is the run's sequential block (`SequentialRun.to_summary`, kept in summary.json),
    so `k3conformance compare` re-gates a stored sequential run as the run itself did."""
    from k3conformance.gate.decision import ABOUT_ACCURACY, ABOUT_COVERAGE, Finding, settle
    from k3conformance.gate.statistics import PASS

    result.sequential = dict(paths)
    findings = list(result.findings)
    for suite, path in paths.items():
        stop = path["stop"]
        superseded = set()
        if stop is not None:
            # A suite the sequential rule decided ran the items its plan asked for, in the committed
            # order: the baseline's other items are not missing evidence. An undecided suite (the run
            # was stopped before a decision) keeps its coverage finding: that evidence is missing.
            superseded.add(ABOUT_COVERAGE)
        if stop is not None and stop["by"] != BY_MAXIMUM:
            # The fixed-size comparison of a suite stopped early sees only the items it ran: the
            # sequential rule, whose error rates hold at its looks, is the one that decides it. A
            # suite that reached its maximum keeps the fixed-size comparison of the same items.
            superseded.add(ABOUT_ACCURACY)
        findings = [f for f in findings if f.suite != suite or f.about not in superseded]
        if ABOUT_ACCURACY in superseded and stop is not None and stop["verdict"] != PASS:
            text = f"{suite}: sequential {stop['verdict']} by the {stop['by']} after {stop['items']} items"
            findings.append(Finding(stop["verdict"], text, suite, ABOUT_ACCURACY))
    result.notes += verdict_lines(paths)
    settle(result, findings)
