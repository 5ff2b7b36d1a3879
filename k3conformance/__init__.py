"""k3conformance: a pytest plugin that tells whether a Kimi K3 deployment is safe to ship."""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

# What a suite author needs, imported on first use so that loading the plugin (or the
# reference server) does not pay for the HTTP client stack.
_EXPORTS = {
    # what a test asks and gets
    "Probe": "k3conformance.probes.probe",
    "ProbeResult": "k3conformance.probes.probe",
    "Exchange": "k3conformance.probes.probe",
    "Completion": "k3conformance.endpoint.completion",
    # what went wrong, and whose fault it is
    "ApiRejection": "k3conformance.probes.probe",
    "InfrastructureError": "k3conformance.probes.probe",
    "ErrorClass": "k3conformance.endpoint.errors",
    "RequestError": "k3conformance.endpoint.errors",
    "expect": "k3conformance.checks.failures",
    "K3ConformanceWarning": "k3conformance.checks.failures",
    # scores, settings and data
    "ItemScore": "k3conformance.scoring.item_score",
    "Settings": "k3conformance.options",
    "ResolvedEndpoint": "k3conformance.endpoint.resolved",
    "load_fixture": "k3conformance.datasets.bundled",
    "parametrize_probes": "k3conformance.plugin",
    "settings_of": "k3conformance.plugin",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'k3conformance' has no attribute {name!r}")
