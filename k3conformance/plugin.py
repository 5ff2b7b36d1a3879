"""The pytest entry point (`pytest11`): options always, everything else only when a session runs k3conformance.

An entry-point plugin is loaded into every pytest session of its environment. Until a
session shows that it runs k3conformance — a `--k3-*` option or a `k3_*` ini key, a suites
directory (a conftest setting `K3CONFORMANCE_SUITES = True`), or a test parametrized with a
`Probe` — this module adds its options and fixtures and nothing else: no header, no
scheduler, no signal handler, no files, no heavy imports. The run's hooks live in
`run/hooks.py` and are registered by `activate`; `run/activation.py` says whether a session runs k3conformance.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING

import pytest

from k3conformance.options import Settings, add_options, check_option_spelling
from k3conformance.probes.probe import Probe, probe_of
from k3conformance.run.activation import STASH_KEY, runs_k3conformance

if TYPE_CHECKING:
    from k3conformance.endpoint.resolved import ResolvedEndpoint
    from k3conformance.probes.probe import ProbeResult
    from k3conformance.run.state import RunState
    from k3conformance.scoring.item_score import ItemScore


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the --k3-* options and their ini keys."""
    add_options(parser)


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """A misspelt --k3-* option names the closest known one before anything else happens."""
    check_option_spelling(args)


def pytest_configure(config: pytest.Config) -> None:
    """Start a k3conformance run when the session asks for one; otherwise stay out of the way."""
    if runs_k3conformance(config):
        _activate(config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Probe tests outside a suites directory start the run once collected."""
    if STASH_KEY not in config.stash and any(probe_of(item) for item in items):
        _activate(config)


def _activate(config: pytest.Config) -> RunState:
    from k3conformance.run.hooks import activate

    return activate(config)


def _state(config: pytest.Config) -> RunState:
    state = config.stash.get(STASH_KEY, None)
    return state if state is not None else _activate(config)


def parametrize_probes(metafunc: pytest.Metafunc, test: str, build: Callable[[Settings], Iterable[Probe]]) -> None:
    """Parametrize `test` with the probes `build` makes from this run's settings (for datasets chosen by option)."""
    if metafunc.definition.name == test:
        metafunc.parametrize("probe", list(build(settings_of(metafunc.config))), ids=str)


def settings_of(config: pytest.Config) -> Settings:
    """The resolved options, for suites that build their items in `pytest_generate_tests`."""
    return _state(config).settings


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
    from k3conformance.run.tally import METRICS_KEY

    node: pytest.Item = request.node
    return node.stash.setdefault(METRICS_KEY, {})


@pytest.fixture
def k3_score(request: pytest.FixtureRequest) -> ItemScore:
    """This item's score in an accuracy suite: `add()` one entry per sample."""
    from k3conformance.run.tally import SCORE_KEY
    from k3conformance.scoring.item_score import ItemScore

    node: pytest.Item = request.node
    return node.stash.setdefault(SCORE_KEY, ItemScore())


@pytest.fixture
def k3_result(request: pytest.FixtureRequest) -> Generator[ProbeResult, None, None]:
    """The responses to this test's probe (the `Probe` it is parametrized with)."""
    probe = probe_of(request.node)
    if probe is None:
        raise TypeError(f"{request.node.nodeid}: k3_result needs a test parametrized with a k3conformance.Probe")
    from k3conformance.probes.probe import unscored

    # Collecting a test parametrized with a probe started the run (pytest_collection_modifyitems).
    state = request.config.stash[STASH_KEY]
    runner = state.ensure_runner()
    waiter = state.waiter
    result = (
        runner.result(probe, lambda future: waiter.wait(future, probe.suite, state.tallies.get(probe.suite), runner))
        if waiter is not None
        else runner.result(probe)
    )
    try:
        if result.infra_errors and not probe.judges_infra_errors:
            raise unscored(f"{probe.suite}/{probe.item}", result.infra_errors)
        yield result
    finally:
        runner.release(probe)
