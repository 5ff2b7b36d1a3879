"""The pytest plugin: options, hooks and fixtures, wired to the modules that do the work."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from k3conformance.endpoint.resolved import ResolvedEndpoint
from k3conformance.options import Settings, add_options, check_separate_path_values, resolve_settings
from k3conformance.outcomes import METRICS_KEY, SCORE_KEY, USER_PROPERTY, classify, probe_of, tally_report
from k3conformance.probes.probe import InfrastructureError, Probe, ProbeResult
from k3conformance.runs.records import STATUS_COMPLETE, STATUS_RUNNING, utc_now
from k3conformance.scoring.item_score import ItemScore
from k3conformance.session import STASH_KEY, WORKEROUTPUT_KEY, RunState
from k3conformance.signals import interrupt_on_sigterm, restore_sigterm
from k3conformance.terminal import (
    SIMULATOR_NOTICE,
    accuracy_table,
    check_table,
    failure_lines,
    header_lines,
    metric_lines,
    suite_table,
)

if TYPE_CHECKING:
    from k3conformance.gate.decision import GateResult
    from k3conformance.runs.stored import StoredRun

# A conftest that sets this marks its directory as k3conformance suites: the endpoint
# is then resolved and checked before anything runs, and shown in the header.
SUITES_MARKER = "K3CONFORMANCE_SUITES"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "k3_suite(name): the k3conformance suite a test belongs to")
    config.addinivalue_line("markers", "k3_vendor: a vendor-mode check, run only with --k3-vendor")
    if not hasattr(config, "workerinput"):
        check_separate_path_values(config)
    state = RunState.for_process(config, resolve_settings(config))
    config.stash[STASH_KEY] = state
    interrupt_on_sigterm(config)
    if state.role != "worker" and state.settings.baseline is not None and not config.option.collectonly:
        state.baseline = _load_baseline(state.settings)
    config.pluginmanager.register(RunHooks(state), "k3conformance-run")
    if config.pluginmanager.hasplugin("xdist") and state.role != "worker":
        from k3conformance.workers.hooks import XdistHooks

        config.pluginmanager.register(XdistHooks(state, config), "k3conformance-xdist")


def _load_baseline(settings: Settings) -> StoredRun:
    from k3conformance.runs.stored import BaselineError, load_run

    try:
        return load_run(settings.baseline or "", settings.results_dir)
    except BaselineError as error:
        raise pytest.UsageError(f"--k3-baseline: {error}") from None


def pytest_unconfigure(config: pytest.Config) -> None:
    restore_sigterm(config)
    state = config.stash.get(STASH_KEY, None)
    if state is not None:
        state.close()


def _state(config: pytest.Config) -> RunState:
    return config.stash[STASH_KEY]


def settings_of(config: pytest.Config) -> Settings:
    """The resolved options, for suites that build their items in `pytest_generate_tests`."""
    return _state(config).settings


def _resolve_up_front(config: pytest.Config) -> bool:
    if config.option.collectonly:
        return False
    if config.getoption("k3_endpoint") is not None:
        return True
    return any(getattr(plugin, SUITES_MARKER, False) for plugin in config.pluginmanager.get_plugins())


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    state = _state(session.config)
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
    state.ensure_results_dir()
    state.write_summary(STATUS_RUNNING)


def _check_datasets(settings: Settings) -> dict[str, dict[str, str]]:
    from k3conformance.datasets.suite_items import DatasetUnavailable, check_datasets

    try:
        return check_datasets(settings)
    except DatasetUnavailable as error:
        raise pytest.UsageError(str(error)) from None


def _check_baseline_datasets(baseline: StoredRun, sources: dict[str, dict[str, str]]) -> None:
    from k3conformance.runs.stored import BaselineError, check_same_datasets

    try:
        check_same_datasets(baseline, sources)
    except BaselineError as error:
        raise pytest.UsageError(f"--k3-baseline: {error}") from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = _state(config)
    lines = header_lines(state.settings, state.shape, state.run_dir, state.endpoint, state.resumed)
    if state.endpoint is not None:
        shape = state.shape_settings()
        if shape["described"]:
            origin = "the server's arguments" if shape["source"] == "server" else "the shape registry"
            lines.append(f"k3conformance: deployment settings {shape['described']} (from {origin})")
        lines += [f"k3conformance: WARNING {line}" for line in shape["contradictions"]]
    if state.baseline is not None:
        lines.append(f"k3conformance: gating against the baseline {state.baseline.label} ({state.settings.gate} mode)")
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from k3conformance.probes.selection import limited, vendor_only

    settings = _state(config).settings
    deselected: list[pytest.Item] = []
    if not settings.vendor:
        deselected = [item for item in items if vendor_only(item)]
        items[:] = [item for item in items if not vendor_only(item)]
    if settings.limit is not None:
        kept, dropped = limited(items, [probe_of(item) for item in items], settings.limit, settings.seed)
        items[:] = kept
        deselected += dropped
    if deselected:
        config.hook.pytest_deselected(items=deselected)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # tryfirst: before xdist's worker reports its collection to the scheduler.
    state = _state(session.config)
    if state.role == "worker" and state.share_known and state.groups_file is not None:
        from k3conformance.workers.scheduling import probe_groups, write_probe_groups

        write_probe_groups(state.groups_file, probe_groups(session.items))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    state = _state(session.config)
    if state.role != "controller" and not session.config.option.collectonly:
        _plan_requests(session, state)
    return (yield)


def _plan_requests(session: pytest.Session, state: RunState) -> None:
    if not any(probe_of(item) for item in session.items):
        return
    runner = state.ensure_runner()
    if state.role == "worker":
        from k3conformance.workers.scheduling import share_of

        workerinput: dict[str, Any] = session.config.workerinput  # type: ignore[attr-defined]
        mine = share_of(session.items, workerinput) if state.share_known else []
    else:
        mine = session.items
    probes = [probe for probe in map(probe_of, mine) if probe is not None]
    for probe in probes:
        _note_dataset(state, probe)
    runner.plan(probes)


def _note_dataset(state: RunState, probe: Probe) -> None:
    entry = state.datasets.setdefault(probe.suite, {"items": []})
    for key in ("dataset", "dataset_sha256"):
        if key in probe.data:
            entry[key] = probe.data[key]
    if "dataset" in probe.data:
        entry.setdefault("sources", {})[probe.data["dataset"]] = probe.data.get("dataset_sha256", "")
    if probe.item not in entry["items"]:
        entry["items"].append(probe.item)


@pytest.fixture(scope="session")
def k3_settings(pytestconfig: pytest.Config) -> Settings:
    """The resolved k3conformance options (the API key is not shown in its repr)."""
    return _state(pytestconfig).settings


@pytest.fixture(scope="session")
def k3_endpoint(pytestconfig: pytest.Config) -> ResolvedEndpoint:
    """The endpoint under test: URL, model, served models and what the server reports."""
    return _state(pytestconfig).ensure_endpoint()


@pytest.fixture
def k3_metrics(request: pytest.FixtureRequest) -> dict[str, float]:
    """Numbers this test contributes to its suite's totals (summed across items)."""
    node: pytest.Item = request.node
    return node.stash.setdefault(METRICS_KEY, {})


@pytest.fixture
def k3_score(request: pytest.FixtureRequest) -> ItemScore:
    """This item's score in an accuracy suite: `add()` one entry per sample."""
    node: pytest.Item = request.node
    return node.stash.setdefault(SCORE_KEY, ItemScore())


@pytest.fixture
def k3_result(request: pytest.FixtureRequest) -> Generator[ProbeResult, None, None]:
    """The responses to this test's probe (the `Probe` it is parametrized with)."""
    probe = probe_of(request.node)
    if probe is None:
        raise TypeError(f"{request.node.nodeid}: k3_result needs a test parametrized with a k3conformance.Probe")
    state = _state(request.config)
    runner = state.ensure_runner()
    result = runner.result(probe)
    try:
        if result.infra_errors:
            details = "; ".join(error.describe() for error in result.infra_errors[:3])
            raise InfrastructureError(
                f"[layer: infra] {probe.suite}/{probe.item}: not scored, the endpoint failed: {details}. "
                "The run is marked incomplete; rerun with --k3-resume to send only the missing requests."
            )
        yield result
    finally:
        runner.release(probe)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    outcome = classify(item, call, report)
    if outcome is not None:
        report.user_properties.append((USER_PROPERTY, outcome))
    if call.excinfo is not None and call.excinfo.errisinstance(InfrastructureError):
        # The endpoint failed, not our code: the message is the whole story.
        report.longrepr = str(call.excinfo.value)
    return report


def _run_gate(state: RunState, summary: dict[str, Any]) -> GateResult:
    from k3conformance.gate.decision import gate, settings_for
    from k3conformance.gate.report import write_reports
    from k3conformance.runs.stored import StoredRun

    assert state.baseline is not None
    result = gate(state.baseline, StoredRun(summary, state.run_dir), settings_for(state.settings))
    if state.run_dir.is_dir():
        write_reports(result, state.run_dir, state.baseline.summary, summary)
    return result


class RunHooks:
    """Hooks that need the run state but receive no config (reports, summaries); one
    instance is registered per pytest config."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Under xdist this runs on the worker (which writes the record) and again on the
        # controller (which tallies); a single process does both.
        state = self.state
        for name, value in report.user_properties:
            if name == USER_PROPERTY and isinstance(value, dict) and state.role != "controller" and state.writer:
                state.writer.write({"kind": "outcome", "nodeid": report.nodeid, "written_at": utc_now(), **value})
        if state.role != "worker":
            tally_report(state.tallies, report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.state
        if state.role == "worker":
            workeroutput: dict[str, Any] = session.config.workeroutput  # type: ignore[attr-defined]
            workeroutput[WORKEROUTPUT_KEY] = {"stats": vars(state.stats), "datasets": state.datasets}
            return
        stopped_early = bool(session.shouldstop or session.shouldfail)
        if state.role == "controller" and exitstatus == pytest.ExitCode.INTERRUPTED and not state.stats.sent:
            state.recount_requests()
        state.status = state.final_status(exitstatus, stopped_early)
        summary = state.write_summary(state.status, int(exitstatus))
        if state.baseline is not None and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            state.gate_result = _run_gate(state, summary)
            if state.gate_result.fails():
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        state = self.state
        if state.role == "worker" or not (state.tallies or state.stats.sent or state.stats.resumed):
            return
        write = terminalreporter.write_line
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
            for line in [*metric_lines(state.tallies), *failure_lines(state.tallies)]:
                write(line)
        stats = state.stats
        write(
            f"requests: {stats.sent} sent ({stats.attempts} attempts), {stats.resumed} reused from an earlier "
            f"session, {stats.infra_errors} infrastructure errors, {stats.api_errors} rejected (4xx)"
        )
        write(f"run {state.run_dir.name} ({state.status}): records in {state.run_dir}")
        if state.status != STATUS_COMPLETE:
            write("the run is not complete: rerun with --k3-resume to send only the missing requests", yellow=True)
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
        lines = text_report(result)
        terminalreporter.write_line(lines[0], bold=True, **colour)
        for line in lines[1:]:
            terminalreporter.write_line(line)
        if result.verdict == "INCONCLUSIVE" and not result.fails():
            terminalreporter.write_line(
                "WARNING: the gate is INCONCLUSIVE (--k3-gate strict would fail the session): see the minimum "
                "detectable drop above",
                yellow=True,
            )
        terminalreporter.write_line(f"gate reports: {self.state.run_dir}/gate.md, gate.json")
