"""Where the sequential gate meets the pytest session: ordering the tests, feeding each finished
item, stopping a suite (skipping its remaining tests, cancelling its requests, recording
why). run/hooks.py calls these; the verdicts reach the gate's result through
`gate/sequential/apply.py`, which `k3conformance compare` uses too."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from k3conformance.gate.sequential.state import SequentialRun
from k3conformance.gate.settings import GateSettings
from k3conformance.probes.probe import Probe, probe_of
from k3conformance.probes.selection import probe_kind
from k3conformance.run.tally import USER_PROPERTY
from k3conformance.runs.records import utc_now

if TYPE_CHECKING:
    from k3conformance.run.state import RunState


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
        partner=state.baseline_views.partner if state.baseline_views else None,
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
    first_looks_first(items, run)
    _add_rounds(items, run)
    for item in items:
        probe = probe_of(item)
        if probe is not None:
            run.expect_tests(probe.suite, probe.item, probe.first_sample)
    return run


def first_looks_first(items: list[pytest.Item], run: SequentialRun) -> None:
    """The tests of every gated suite's first look go before all others, the suites interleaved by
    their place in each committed order: the evidence that can decide the gate soonest is sent
    first. A layout that loops (the MegaMoE case) is FAILed by a monitor within the first look; with
    the conformance suites first, most of the run had been sent before the first look's items were
    (1,584 of 2,229 requests); the conformance suites follow, then the later looks. The load lane
    stays last (it can take a deployment down)."""

    def first_look_rank(item: pytest.Item) -> int | None:
        probe = probe_of(item)
        if probe is None or probe.exclusive or not _gated(item, run):
            return None
        rank = run.rank(probe.suite, probe.item)
        return rank if rank is not None and rank < run.suites[probe.suite].design.sizes[0] else None

    ranked = [(rank, index) for index, item in enumerate(items) if (rank := first_look_rank(item)) is not None]
    if not ranked:
        return
    chosen = {index for _, index in ranked}
    first = [items[index] for _, index in sorted(ranked)]
    items[:] = first + [item for index, item in enumerate(items) if index not in chosen]


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
    if run.decided is not None:
        pytest.skip(f"not sent: {run.decided.reason}; --k3-stop-on-fail=off judges every suite")


def feed_report(state: RunState, report: pytest.TestReport) -> str | None:
    """Feed a finished test's item to the rule; when the rule stops its suite, cancel the rest. When
    the stop is a FAIL and --k3-stop-on-fail is on, the gate's verdict is decided: cancel every
    request not yet answered, of every suite, and return the line that says so."""
    run = state.sequential
    assert run is not None
    first_sample = run.round_tests.get(report.nodeid, 0)
    announcement = None
    for name, value in report.user_properties:
        if name != USER_PROPERTY or not isinstance(value, dict) or value.get("item") is None:
            continue
        suite, item = value["suite"], value["item"]
        tally = state.tallies.get(suite)
        score = tally.scores.get(item) if tally is not None else None
        stop = run.test_done(suite, item, score, first_sample)
        if stop is None or state.runner is None:
            continue
        reason = f"sequential gate: {suite} stopped with {stop.verdict} by the {stop.by} after {stop.items} items"
        _cancel(state, run, suite, lambda probe: run.used(probe.suite, probe.item, probe.first_sample), reason)
        decided = run.decide(suite, stop) if state.settings.stop_on_fail else None
        if decided is not None:
            announcement = _stop_sending(state, run, decided.reason)
    return announcement


def _cancel(state: RunState, run: SequentialRun, suite: str, keep: Callable[[Probe], bool], reason: str) -> int:
    """Cancel a suite's requests that `keep` turns down, each with a record saying why; returns how many."""
    assert state.runner is not None
    cancelled = state.runner.cancel(suite, keep)
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
    if cancelled and suite in run.suites:
        run.note_cancelled(suite, cancelled, state.runner.spent)
    return len(cancelled)


def _stop_sending(state: RunState, run: SequentialRun, reason: str) -> str:
    """Cancel every request not yet answered, of every suite; the line that says what was left unjudged."""
    assert state.runner is not None
    left: dict[str, int] = {}
    for suite in state.runner.planned_suites():
        cancelled = _cancel(state, run, suite, lambda probe: False, f"not sent: {reason}")
        if cancelled:
            left[suite] = cancelled
    unjudged = ", ".join(f"{suite} ({count} items)" for suite, count in sorted(left.items())) or "none"
    return (
        f"k3conformance: {reason}: stopped sending; left unjudged: {unjudged} "
        "(--k3-stop-on-fail=off sends them and judges every suite)"
    )
