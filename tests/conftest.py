"""Fixtures for the plugin's own tests: a pytester project holding the smoke suite, and a
reference deployment in a thread; and the xdist scheduling that keeps the llama.cpp tests
on one worker."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# pytester's in-process runs unload whatever was first imported during a run; `datasets`
# (with numpy and pyarrow) refuses to be loaded twice in a process, so it is loaded first.
import datasets  # noqa: F401
import pytest

# The same holds for SciPy (the gate's statistics) and matplotlib (its chart).
import scipy.stats  # noqa: F401

with contextlib.suppress(ImportError):
    import matplotlib.pyplot  # noqa: F401

# The tests' shared helpers (tests/support/) are imported by name from every folder of the tree.
sys.path.insert(0, str(Path(__file__).parent / "support"))

from run_files import copy_suites

from k3conformance.reference.profiles import get_profile
from k3conformance.reference.server import RunningServer, start_in_thread
from k3conformance.sandbox import BACKENDS, backend_info


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each sandbox backend this machine runs (the sandbox's tests run on every one)."""
    name: str = request.param
    problem = backend_info(name).problem
    if problem is not None:
        pytest.skip(f"the {name} backend does not work on this machine: {problem}")
    return name


@pytest.fixture
def suite_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with the repo's smoke suite, its suites conftest and no ini file."""
    copy_suites(pytester.path, ["test_smoke.py"])
    return pytester


@pytest.fixture
def slow_reference() -> Iterator[RunningServer]:
    """A healthy reference deployment that takes 0.2 s per request."""
    with start_in_thread(get_profile("tp8"), latency_s=0.2) as server:
        yield server


# The llama.cpp tests share module-scoped suite runs against a llama.cpp server. xdist's
# `load` scheduling spreads a module's tests over both workers, so each worker ran the
# suites, two servers at a time on the two cores (seen 2026-12-01). `--dist loadgroup` does
# not help here: xdist 3.8 marks a group by rewriting `item._nodeid`, which pytest 9 no longer
# reads. So under `load` the scheduler puts these modules into one scope (one worker, in
# collection order) and every other test into its own, which `load` amounts to.
LLAMACPP_MODULES = (
    "tests/e2e/test_llamacpp.py::",
    "tests/e2e/test_llamacpp_k3.py::",
    "tests/e2e/test_llamacpp_gate.py::",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LlamaCppOnOneWorker(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no types
        def _split_scope(self, nodeid: str) -> str:
            return "llamacpp" if nodeid.startswith(LLAMACPP_MODULES) else nodeid

    return LlamaCppOnOneWorker(config, log)


# Tests that run only when their file is named on the command line (as `.ci/run` does): the
# install test builds, installs and runs the whole main job once more (about two minutes).
OPT_IN_TESTS = ("test_installed.py",)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name not in OPT_IN_TESTS:
        return None
    named = any(Path(arg.split("::")[0]).name == collection_path.name for arg in config.invocation_params.args)
    return None if named else True
