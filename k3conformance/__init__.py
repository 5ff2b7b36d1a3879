"""k3conformance: a pytest plugin that tells whether a Kimi K3 deployment is safe to ship."""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

# Public names, imported on first use so that loading the plugin (or the reference
# server) does not pay for the HTTP client stack.
_EXPORTS = {
    "ApiRejection": "k3conformance.probes.probe",
    "InfrastructureError": "k3conformance.probes.probe",
    "Probe": "k3conformance.probes.probe",
    "ProbeResult": "k3conformance.probes.probe",
    "Completion": "k3conformance.endpoint.completion",
    "ErrorClass": "k3conformance.endpoint.errors",
    "RequestError": "k3conformance.endpoint.errors",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'k3conformance' has no attribute {name!r}")
