"""The hooks of a k3conformance run: registered by `activate` only when a session runs one.

`plugin.py` is loaded into every pytest session of the environment (a `pytest11` entry
point); it calls `activate` once a session shows that it runs k3conformance. Until then
none of this module, nor what it imports, is loaded.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from k3conformance.endpoint.url import is_reference
from k3conformance.formatting import terminal_safe
from k3conformance.options import Settings, check_separate_path_values, resolve_settings
from k3conformance.probes.probe import InfrastructureError, Probe, probe_of
from k3conformance.run.activation import STASH_KEY, SUITES_MARKER, has_suites_conftest
from k3conformance.run.ordering import MARKERS, conformance_first, load_lanes_last, mark_kinds, suite_kinds
from k3conformance.run.signals import interrupt_on_sigterm, restore_sigterm
from k3conformance.run.state import WORKERINPUT_KEY, WORKEROUTPUT_KEY, BaselineViews, RunState
from k3conformance.run.tally import USER_PROPERTY, classify, suite_of, tally_report
from k3conformance.run.terminal import (
    NO_BASELINE_NOTE,
    SIMULATOR_NOTICE,
    accuracy_table,
    check_table,
    failure_lines,
    header_lines,
    live_failure_line,
    metric_lines,
    suite_table,
)
from k3conformance.runs.records import STATUS_COMPLETE, STATUS_RUNNING, utc_now
from k3conformance.scoring.suite_tally import FAILED

# The suite whose tools run model-written code: the header says how it is isolated.
AGENT_SUITE = "agentic_coding"

if TYPE_CHECKING:
    from k3conformance.gate.verdict import GateResult
    from k3conformance.runs.schema import OutcomeRecord, RunSummary
    from k3conformance.runs.stored import StoredRun


def activate(config: pytest.Config) -> RunState:
    """Start this process's part of a k3conformance run: state, SIGTERM handling, baseline, hooks."""
    if hasattr(config, "workerinput") and WORKERINPUT_KEY not in config.workerinput:
        raise pytest.UsageError(
            "k3conformance suites were found only while collecting under xdist: mark the suites directory "
            f"with a conftest.py that sets {SUITES_MARKER} = True, or pass a --k3-* option"
        )
    config.addinivalue_line("markers", "k3_suite(name): the k3conformance suite a test belongs to")
    config.addinivalue_line("markers", "k3_vendor: a vendor-mode check, run only with --k3-vendor")
    config.addinivalue_line(
        "markers", "agentic_pool: the whole real-repository agentic pool (a sample runs by default)"
    )
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    if not hasattr(config, "workerinput"):
        check_separate_path_values(config)
    settings = resolve_settings(config)
    if not hasattr(config, "workerinput"):
        from k3conformance.run.admission import refuse_subset_up_front

        refuse_subset_up_front(config, settings)
    _check_reference_profile(settings)
    state = RunState.for_process(config, settings)
    config.stash[STASH_KEY] = state
    interrupt_on_sigterm(config)
    if state.role != "worker" and state.settings.server_args is not None:
        state.launch = _read_launch(state.settings.server_args, state.settings.api_key)
    if state.role != "worker" and state.settings.baseline is not None and not config.option.collectonly:
        state.baseline = _load_baseline(state.settings)
        state.baseline_views = BaselineViews(state.baseline)
    config.pluginmanager.register(RunHooks(state, config), "k3conformance-run")
    if config.pluginmanager.hasplugin("xdist") and state.role != "worker":
        from k3conformance.run.xdist import XdistHooks

        config.pluginmanager.register(XdistHooks(state, config), "k3conformance-xdist")
    return state


def _check_reference_profile(settings: Settings) -> None:
    if is_reference(settings.endpoint):
        from k3conformance.reference.profiles import endpoint_profile

        try:
            endpoint_profile(settings.endpoint)
        except KeyError as error:
            raise pytest.UsageError(f"--k3-endpoint: {error.args[0]}") from None


def _load_baseline(settings: Settings) -> StoredRun:
    from k3conformance.runs.stored import BaselineError, load_run

    try:
        return load_run(settings.baseline or "", settings.results_dir)
    except BaselineError as error:
        raise pytest.UsageError(f"--k3-baseline: {error}") from None


def _read_launch(path: Path, api_key: str | None) -> dict[str, Any]:
    from k3conformance.deployment.launch import LaunchFileError, read_launch_file

    try:
        return read_launch_file(path, (api_key,) if api_key else ())
    except LaunchFileError as error:
        raise pytest.UsageError(f"--k3-server-args: {error}") from None


def _sequential_plan(views: BaselineViews, settings: Settings) -> list[str]:
    """What a gated run will cost, as `k3conformance plan` prints it."""
    from k3conformance.gate.sequential.plan import plan_report
    from k3conformance.gate.settings import GateSettings

    return plan_report(views.baseline, GateSettings.from_options(settings), views.partner)


def _resolve_up_front(config: pytest.Config) -> bool:
    if config.option.collectonly:
        return False
    if config.getoption("k3_endpoint") is not None:
        return True
    return has_suites_conftest(config)


def _freeze_what_lives_to_the_end() -> None:
    """The collected items, modules and plans live to the session's end: out of the cyclic
    collector's sight, its full collections during the run, pytest's two at its end and the
    interpreter's at exit walk only what the tests make (0.3 s of a 2,000-request run,
    benchmarks/README.md). Only in the process's own session: one run inside another's test
    (pytester's inline runs) ends and leaves its objects to the collector of the process that goes on."""
    if "PYTEST_CURRENT_TEST" not in os.environ:
        gc.freeze()


def _check_datasets(settings: Settings) -> dict[str, dict[str, str]]:
    from k3conformance.agent.tasks import load_tasks
    from k3conformance.datasets.suite_items import DatasetUnavailable, check_datasets

    try:
        sources = check_datasets(settings)
    except DatasetUnavailable as error:
        raise pytest.UsageError(str(error)) from None
    # The agentic tasks are bundled: checked against the baseline's before the first request too.
    with contextlib.suppress(OSError, ValueError):
        tasks = load_tasks()
        sources["agentic_coding"] = {tasks.name: tasks.sha256}
    # And the real-repository pool, whose tasks the suite runs beside them.
    from k3conformance.datasets.pools import PoolUnavailable, pool_digest

    with contextlib.suppress(OSError, ValueError, PoolUnavailable):
        from k3conformance.agent.pool_tasks import pool_dir

        name, sha256 = pool_digest(pool_dir())
        sources.setdefault("agentic_coding", {})[f"pool:{name}"] = sha256
    return sources


def _check_baseline_datasets(baseline: StoredRun, sources: dict[str, dict[str, str]]) -> None:
    from k3conformance.runs.stored import BaselineError, check_same_datasets

    try:
        check_same_datasets(baseline, sources)
    except BaselineError as error:
        raise pytest.UsageError(f"--k3-baseline: {error}") from None


def _plan_requests(session: pytest.Session, state: RunState) -> None:
    if not any(probe_of(item) for item in session.items):
        return
    runner = state.ensure_runner()
    if state.role == "worker":
        from k3conformance.run.scheduling import share_of

        workerinput: dict[str, Any] = session.config.workerinput  # type: ignore[attr-defined]
        mine = share_of(session.items, workerinput) if state.share_known else []
    else:
        mine = session.items
    probes = [probe for probe in map(probe_of, mine) if probe is not None]
    for probe in probes:
        _note_dataset(state, probe)
    sequential = state.sequential
    if sequential is not None:
        runner.admit = lambda probe: sequential.may_send(probe.suite, probe.item, probe.first_sample)
    runner.plan(probes)


def _note_dataset(state: RunState, probe: Probe) -> None:
    from k3conformance.datasets.pools import load_pool

    entry = state.datasets.setdefault(probe.suite, {"items": []})
    for key in ("dataset", "dataset_sha256"):
        if key in probe.data:
            entry[key] = probe.data[key]
    if "dataset" in probe.data:
        dataset = str(probe.data["dataset"])
        entry.setdefault("sources", {})[dataset] = probe.data.get("dataset_sha256", "")
        if dataset.startswith("pool:") and dataset not in entry.get("pools", {}):
            # A pool's license and sources go into the run, so that its items' origin travels with its scores.
            entry.setdefault("pools", {})[dataset] = load_pool(dataset.partition(":")[2]).provenance()
    if probe.item not in entry["items"]:
        entry["items"].append(probe.item)
    entry.setdefault("item_sha256", {})[probe.item] = probe.content_sha256()


def _refuse_before_sending(state: RunState) -> None:
    """What the gate would find only after the whole run was sent, found before the first request:
    a setting, the model or the plugin's version differing from the baseline's (unless allowed with
    --k3-allow-differences), or a baseline whose own evidence does not hold (issue 35)."""
    from k3conformance.gate.evidence import judged_on_records
    from k3conformance.gate.identity import described
    from k3conformance.gate.policy import settings_differences

    assert state.baseline is not None
    allowed = state.settings.allow_differences
    current = state.summary(STATUS_RUNNING, None)
    differing = [
        difference
        for difference in settings_differences(state.baseline.summary, current)
        if difference.split(":")[0] not in allowed
    ]
    if differing:
        raise pytest.UsageError(
            f"--k3-baseline: this run would differ from the baseline {state.baseline.label} in "
            f"{described(differing)}: nothing was sent; run with the baseline's settings, or declare the difference "
            "with --k3-allow-differences"
        )
    problems = judged_on_records(state.baseline).problems
    if problems:
        raise pytest.UsageError(
            f"--k3-baseline: the baseline's evidence does not hold ({described(list(problems), 2)}): nothing was "
            "sent; store a new baseline with --k3-save-baseline"
        )


def _seal_identity(state: RunState) -> None:
    """Seal the run's identity as it starts; on a resume, refuse another identity (gate/identity.py)."""
    from k3conformance.gate.identity import described, identity_differences, identity_of, read_sealed, seal

    current = state.summary(STATUS_RUNNING, None)
    if state.resumed:
        sealed = read_sealed(state.run_dir)
        if sealed is None:
            raise pytest.UsageError(
                f"--k3-resume: the run {state.run_dir} has no sealed identity (identity.json), so nothing says what "
                "it ran against: start a new run without --k3-resume"
            )
        differences = identity_differences(sealed, identity_of(current))
        if differences:
            raise pytest.UsageError(
                f"--k3-resume: the run {state.run_dir} was started against another deployment or under other "
                f"settings ({described(differences)}); a resume must send the rest of the same run: resume with "
                "the first session's endpoint and options, or start a new run without --k3-resume"
            )
    seal(state.run_dir, current)


def _start_progress(session: pytest.Session, state: RunState) -> None:
    """The progress line's totals: each suite's tests, as finally selected."""
    from collections import Counter

    from k3conformance.run.progress import Progress, Waiter

    config = session.config
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None:
        return
    totals = Counter(suite for suite in map(suite_of, session.items) if suite is not None)
    capture = config.pluginmanager.get_plugin("capturemanager")
    state.waiter = Waiter(Progress(totals), terminal, capture, config.get_verbosity(), state.settings.progress_interval)


def _run_gate(state: RunState, summary: RunSummary) -> GateResult:
    from k3conformance.gate.report import write_reports
    from k3conformance.gate.settings import GateSettings
    from k3conformance.gate.verdict import judge
    from k3conformance.runs.stored import StoredRun

    assert state.baseline is not None
    result = judge(state.baseline, StoredRun(summary, state.run_dir), GateSettings.from_options(state.settings))
    if state.sequential is not None:
        from k3conformance.gate.sequential.apply import apply_sequential

        apply_sequential(result, state.sequential.to_summary(), state.baseline)
    if state.run_dir.is_dir():
        write_reports(result, state.run_dir, state.baseline.summary, summary)
    return result


class RunHooks:
    """The hooks of a k3conformance run, registered by `activate` only in sessions that run one."""

    def __init__(self, state: RunState, config: pytest.Config) -> None:
        self.state = state
        self.config = config
        # (suite, check, layer) already shown as it happened: one line each, the rest are counted in the tables.
        self._shown_failures: set[tuple[str, str, str]] = set()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Know our xdist role; check datasets, baseline and endpoint before anything runs."""
        state = self.state
        if state.role == "worker":
            return
        # xdist registers its controller during configure, possibly after our configure ran.
        state.role = "controller" if session.config.pluginmanager.hasplugin("dsession") else "single"
        if not _resolve_up_front(session.config):
            return
        sources = _check_datasets(state.settings)
        if state.baseline is not None:
            _check_baseline_datasets(state.baseline, sources)
        state.ensure_endpoint()
        if state.baseline is not None:
            _refuse_before_sending(state)
        state.ensure_results_dir()
        _seal_identity(state)
        state.write_summary(STATUS_RUNNING)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        """Say what is in force: endpoint, model, shape, settings, records, baseline."""
        state = self.state
        lines = header_lines(state.settings, state.shape, state.run_dir, state.endpoint, state.resumed)
        if state.endpoint is not None:
            shape = state.shape_settings()
            if shape["described"]:
                origin = "the server's arguments" if shape["source"] == "server" else "the shape registry"
                lines.append(f"k3conformance: deployment settings {shape['described']} (from {origin})")
            lines += [f"k3conformance: WARNING {line}" for line in shape["contradictions"]]
        if state.baseline is not None and state.baseline_views is not None:
            lines.append(
                f"k3conformance: gating against the baseline {state.baseline.label}, {state.baseline.origin} "
                f"({state.settings.gate} mode)"
            )
            lines += [f"k3conformance: {line}" for line in _sequential_plan(state.baseline_views, state.settings)]
            if state.settings.sequential and state.role == "controller":
                lines.append(
                    "k3conformance: sequential gating runs in a single process only: under xdist the run is fixed-size"
                )
            elif not state.settings.sequential:
                lines.append("k3conformance: --k3-sequential=off: a fixed-size run")
        if state.settings.save_baseline:
            lines.append(f"k3conformance: this run is stored as a baseline of shape {state.shape} if it completes")
        return lines

    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        """Which isolation the agent's tools get, when the agentic coding suite is collected."""
        if not any(suite_of(item) == AGENT_SUITE for item in items):
            return []
        from k3conformance.agent.isolation import agent_isolation

        return [f"k3conformance: {agent_isolation(self.state.settings.agent_unisolated).describe()}"]

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Mark each suite's tests conformance or accuracy (before `-m` deselects), put the conformance
        suites first and the load lane last; --k3-vendor checks only with it; --k3-limit keeps N items per
        suite (every item kind a check needs); then the sequential gate's committed order."""
        from k3conformance.probes.selection import limited, vendor_only

        settings = self.state.settings
        kinds = suite_kinds(items)
        mark_kinds(items, kinds)
        if settings.conformance_first:
            conformance_first(items, kinds)
        load_lanes_last(items)
        deselected: list[pytest.Item] = []
        if not settings.vendor:
            deselected = [item for item in items if vendor_only(item)]
            items[:] = [item for item in items if not vendor_only(item)]
            self.state.vendor_deselected += len(deselected)
        if settings.limit is not None:
            kept, dropped = limited(items, [probe_of(item) for item in items], settings.limit, settings.seed)
            items[:] = kept
            deselected += dropped
        if deselected:
            config.hook.pytest_deselected(items=deselected)
        state = self.state
        if state.baseline is not None and settings.sequential and state.role == "single":
            from k3conformance.run.sequential import order_for_sequential_gate

            state.sequential = order_for_sequential_gate(config, items, state)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Skip, before it waits for its requests, a test of a suite the sequential gate has stopped."""
        if self.state.sequential is not None:
            from k3conformance.run.sequential import skip_if_stopped

            skip_if_stopped(item, self.state.sequential)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """Counted for the summary: a run that left tests out is a subset, not a baseline by accident."""
        if items:
            self.state.note_selection(items[0].config, len(items))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Tell our xdist scheduler which probe each test uses."""
        # tryfirst: before xdist's worker reports its collection to the scheduler.
        state = self.state
        if state.role == "single" and not session.config.option.collectonly:
            _start_progress(session, state)
        if state.role == "worker" and state.share_known and state.groups_file is not None:
            from k3conformance.run.scheduling import probe_groups, write_probe_groups

            write_probe_groups(state.groups_file, probe_groups(session.items))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """Send this process's requests ahead of its tests."""
        state = self.state
        if state.role != "controller" and not session.config.option.collectonly:
            _plan_requests(session, state)
            _freeze_what_lives_to_the_end()
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Attach each outcome (layer, message, metrics, score) to its report."""
        report = yield
        outcome = classify(item, call, report)
        if outcome is not None:
            report.user_properties.append((USER_PROPERTY, outcome))
            from k3conformance.run.junit import mark_item

            mark_item(item, report, outcome, self.state.settings.fail_unsolved)
        if call.excinfo is not None and call.excinfo.errisinstance(InfrastructureError):
            # The endpoint failed, not our code: the message is the whole story.
            report.longrepr = str(call.excinfo.value)
        return report

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Put SIGTERM back and close the run's connections, loop and files."""
        restore_sigterm(config)
        self.state.close()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Write each outcome record (worker or single process) and tally it (controller or single)."""
        # Under xdist this runs on the worker (which writes the record) and again on the
        # controller (which tallies); a single process does both.
        state = self.state
        for name, value in report.user_properties:
            if name == USER_PROPERTY and isinstance(value, dict) and state.role != "controller":
                record = cast(
                    "OutcomeRecord", {"kind": "outcome", "nodeid": report.nodeid, "written_at": utc_now(), **value}
                )
                state.ensure_writer().write(record)
        if state.role != "worker":
            tally_report(state.tallies, report)
            self._show_failure(report)
        if state.sequential is not None:
            from k3conformance.run.sequential import feed_report

            announcement = feed_report(state, report)
            terminal = self.config.pluginmanager.get_plugin("terminalreporter") if announcement else None
            if announcement is not None and terminal is not None:
                terminal.ensure_newline()
                terminal.write_line(announcement, bold=True)

    def _show_failure(self, report: pytest.TestReport) -> None:
        """Print a conformance failure when it happens, not only in the closing tables: the first of each
        check and layer, with its excerpt (quiet only under -qq)."""
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None or self.config.get_verbosity() < -1:
            return
        for name, value in report.user_properties:
            if name != USER_PROPERTY or not isinstance(value, dict) or value.get("outcome") != FAILED:
                continue
            key = (str(value["suite"]), str(value["test"]) + str(value.get("mode") or ""), str(value.get("layer")))
            if key in self._shown_failures:
                continue
            self._shown_failures.add(key)
            terminal.ensure_newline()
            terminal.write_line(live_failure_line(value, report.nodeid), red=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write the summary, run the gate, and set the exit status from its verdict."""
        state = self.state
        if state.role == "worker":
            workeroutput: dict[str, Any] = session.config.workeroutput  # type: ignore[attr-defined]
            workeroutput[WORKEROUTPUT_KEY] = {
                "stats": vars(state.stats),
                "datasets": state.datasets,
                "records_chain": state.sealed_heads(),
            }
            return
        state.note_selection(session.config, 0)
        stopped_early = bool(session.shouldstop or session.shouldfail)
        if state.role == "controller" and exitstatus == pytest.ExitCode.INTERRUPTED and not state.stats.sent:
            state.recount_requests()
        state.status = state.final_status(exitstatus, stopped_early)
        summary = state.write_summary(state.status, int(exitstatus))
        if state.baseline is not None and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            state.gate_result = _run_gate(state, summary)
            if state.gate_result.fails():
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            from k3conformance.run.junit import report_gate_case

            report_gate_case(session.config, state.gate_result)
        if state.settings.save_baseline:
            from k3conformance.run.admission import end_reasons

            state.baseline_refused = end_reasons(summary, state.gate_result)
            if state.baseline_refused:
                # Kept as a run, not as a baseline; the session fails, so no pipeline goes on as if it were one.
                state.write_summary(state.status, int(exitstatus))
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the suite and check tables, the requests, the run folder and the gate."""
        state = self.state
        if state.role == "worker" or not (state.tallies or state.stats.sent or state.stats.resumed):
            return

        def write(line: str, **markup: bool) -> None:
            # Excerpts, check names and server strings in these lines came from outside.
            terminalreporter.write_line(terminal_safe(line), **markup)

        terminalreporter.section("k3conformance")
        if state.tallies:
            for line in suite_table(state.tallies).splitlines():
                write(line)
            write("")
            for line in check_table(state.tallies).splitlines():
                write(line)
            accuracy = accuracy_table(state.tallies)
            if accuracy:
                write("")
                for line in accuracy.splitlines():
                    write(line)
                if state.baseline is None:
                    write(NO_BASELINE_NOTE, yellow=True)
            for line in [*metric_lines(state.tallies), *failure_lines(state.tallies)]:
                write(line)
        stats = state.stats
        refused = f", {stats.parser_refusals} refused by the server's parser" if stats.parser_refusals else ""
        write(
            f"requests: {stats.sent} sent ({stats.attempts} attempts), {stats.resumed} reused from an earlier "
            f"session, {stats.infra_errors} infrastructure errors, {stats.api_errors} rejected (4xx){refused}"
        )
        write(f"run {state.run_dir.name} ({state.status}): records in {state.run_dir}")
        if state.status != STATUS_COMPLETE:
            write("the run is not complete: rerun with --k3-resume to send only the missing requests", yellow=True)
        if state.baseline_refused:
            write(
                f"NOT stored as a baseline of shape {state.shape} (--k3-save-baseline): "
                + "; ".join(state.baseline_refused),
                red=True,
            )
        if state.gate_result is not None:
            self._write_gate(terminalreporter, state.gate_result)
        elif state.baseline is not None:
            write("gate: not evaluated, the session did not finish its tests", yellow=True)
        if state.endpoint is not None and state.endpoint.simulator:
            write(f"NOTE: {SIMULATOR_NOTICE}", yellow=True)

    def _write_gate(self, terminalreporter: Any, result: GateResult) -> None:
        from k3conformance.gate.report import text_report

        terminalreporter.section("k3conformance gate")
        colour = {"red": True} if result.fails() else {"yellow": True} if result.verdict != "PASS" else {"green": True}
        lines = [terminal_safe(line) for line in text_report(result)]
        terminalreporter.write_line(lines[0], bold=True, **colour)
        for line in lines[1:]:
            terminalreporter.write_line(line)
        if result.verdict == "INCONCLUSIVE" and not result.fails():
            terminalreporter.write_line(
                "WARNING: the gate is INCONCLUSIVE and --k3-gate warn lets the session pass (strict, the default, "
                "would fail it): see the minimum detectable drop above",
                yellow=True,
            )
        from k3conformance.gate.report import GATE_CHART

        chart = (
            ", gate.png"
            if (self.state.run_dir / GATE_CHART).is_file()
            else " (gate.png not drawn: matplotlib, the plot extra, is not installed)"
        )
        terminalreporter.write_line(f"gate reports: {self.state.run_dir}/gate.md, gate.json{chart}")
