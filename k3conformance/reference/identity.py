"""How the reference deployment names itself: always as a simulator, never as the real model."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DEFAULT_MODEL_ID = "kimi-k3-simulator"
SIMULATOR_OWNER = "k3conformance-reference-simulator"
SIMULATOR_WARNING = "k3conformance reference deployment: a simulator, not Kimi K3"


def package_version() -> str:
    try:
        return version("k3conformance")
    except PackageNotFoundError:  # running from a source checkout
        return "0.1.0"


def startup_notice(url: str, profile_name: str) -> str:
    return (
        f"k3conformance reference deployment listening at {url} (profile {profile_name}): "
        "a deterministic simulator of the Kimi K3 API, not the model."
    )
