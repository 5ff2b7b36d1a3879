"""Installed, the plugin is loaded into every pytest session of its environment (a `pytest11`
entry point). A project that does not run k3conformance must see no trace of it: no header,
no run folder, no SIGTERM handler, no scheduler in place of xdist's, no heavy imports."""

from __future__ import annotations

import pytest

UNRELATED_TESTS = """
import signal
import sys

HEAVY = ("numpy", "scipy", "jsonschema", "openai", "k3conformance.run.hooks", "k3conformance.run.state")


def test_sigterm_is_left_alone():
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_nothing_heavy_is_imported():
    assert [name for name in HEAVY if name in sys.modules] == []


def test_no_run_hooks(pytestconfig):
    names = {pytestconfig.pluginmanager.get_name(plugin) for plugin in pytestconfig.pluginmanager.get_plugins()}
    assert not {name for name in names if name and name.startswith("k3conformance-")}


def test_many_0(): pass
def test_many_1(): pass
def test_many_2(): pass
def test_many_3(): pass
"""

RECORD_SCHEDULER = """
import pathlib


def pytest_sessionfinish(session):
    dsession = session.config.pluginmanager.getplugin("dsession")
    if dsession is not None:
        pathlib.Path("scheduler.txt").write_text(type(dsession.sched).__name__)
"""


@pytest.mark.parametrize("xdist", [(), ("-n", "2"), ("-n", "2", "--dist", "load")], ids=["single", "n2", "n2-load"])
def test_an_unrelated_project_sees_no_trace_of_the_plugin(pytester: pytest.Pytester, xdist: tuple[str, ...]) -> None:
    pytester.makepyfile(test_unrelated=UNRELATED_TESTS)
    pytester.makeconftest(RECORD_SCHEDULER)
    result = pytester.runpytest_subprocess(*xdist, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=7)
    # pytest itself lists installed plugins ("plugins: xdist-3.8.0, k3conformance-0.1.0"); nothing else may name us.
    lines = (result.stdout.str() + result.stderr.str()).splitlines()
    assert [line for line in lines if "k3conformance" in line and not line.startswith("plugins:")] == []
    assert not (pytester.path / "results").exists()
    if xdist:
        assert (pytester.path / "scheduler.txt").read_text() == "LoadScheduling"


def test_a_k3_option_starts_the_run(pytester: pytest.Pytester) -> None:
    """The other side: a --k3-* option alone is enough to say this session runs k3conformance."""
    pytester.makepyfile(test_unrelated="def test_it(): pass")
    result = pytester.runpytest_subprocess("--k3-endpoint=reference:tp8", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "k3conformance: endpoint reference:tp8" in result.stdout.str()
