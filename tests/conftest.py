"""Fixtures for the plugin's own tests: a pytester project holding the smoke suite, and a
reference deployment in a thread."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

# pytester's in-process runs unload whatever was first imported during a run; `datasets`
# (with numpy and pyarrow) refuses to be loaded twice in a process, so it is loaded first.
import datasets  # noqa: F401
import pytest

# The same holds for SciPy (the gate's statistics) and matplotlib (its chart).
import scipy.stats  # noqa: F401

with contextlib.suppress(ImportError):
    import matplotlib.pyplot  # noqa: F401
from run_files import copy_suites

from k3conformance.reference.profiles import get_profile
from k3conformance.reference.server import RunningServer, start_in_thread


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
