"""Whether a pytest session runs k3conformance, and where its run state is kept.

These names are read by the entry point (`plugin.py`) and by the run's hooks (`run/hooks.py`)
alike; they live here, below both, so that neither imports the other back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from k3conformance.options import OPTIONS

if TYPE_CHECKING:
    from k3conformance.run.state import RunState

# A conftest that sets this marks its directory as k3conformance suites: the endpoint
# is then resolved and checked before anything runs, and shown in the header.
SUITES_MARKER = "K3CONFORMANCE_SUITES"
# The run state of this process, set by `run.hooks.activate`; absent in sessions that do not run k3conformance.
STASH_KEY: pytest.StashKey[RunState] = pytest.StashKey()
_OVERRIDE_INI = ("-o", "--override-ini")


def runs_k3conformance(config: pytest.Config) -> bool:
    """Whether this session runs k3conformance: a --k3-* option or k3_* ini key, or a suites conftest."""
    if _names_k3_option(config.invocation_params.args) or any(
        config.getini(spec.dest) is not None for spec in OPTIONS if spec.ini
    ):
        return True
    return has_suites_conftest(config)


def has_suites_conftest(config: pytest.Config) -> bool:
    """Whether a loaded conftest marks its directory as k3conformance suites."""
    return any(getattr(plugin, SUITES_MARKER, False) for plugin in config.pluginmanager.get_plugins())


def _names_k3_option(args: Sequence[str]) -> bool:
    for previous, arg in zip(("", *args), args, strict=False):
        if arg.startswith("--k3-") or arg.startswith(("-ok3_", "--override-ini=k3_")):
            return True
        if previous in _OVERRIDE_INI and arg.startswith("k3_"):
            return True
    return False
