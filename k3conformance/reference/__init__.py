"""The embedded reference deployment: a deterministic simulator of Kimi K3's OpenAI-compatible API.

It lets the plugin be tried, and tested, without a GPU cluster. It is not the model
and says so wherever it identifies itself.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k3conformance.reference.answer_key import AnswerKey, default_fixtures_dir
    from k3conformance.reference.app import build_app
    from k3conformance.reference.identity import DEFAULT_MODEL_ID
    from k3conformance.reference.profiles import PROFILES, get_profile
    from k3conformance.reference.server import RunningServer, serve, start_in_thread
    from k3conformance.reference.simulator import Simulator
    from k3conformance.reference.values import InvalidRequest, Profile, SimulatedTurn, ToolCall

# Imported on first use: reading profile names must not pull in aiohttp and jsonschema.
_EXPORTS = {
    "AnswerKey": "answer_key",
    "default_fixtures_dir": "answer_key",
    "build_app": "app",
    "DEFAULT_MODEL_ID": "identity",
    "PROFILES": "profiles",
    "Profile": "values",
    "get_profile": "profiles",
    "RunningServer": "server",
    "serve": "server",
    "start_in_thread": "server",
    "SimulatedTurn": "values",
    "InvalidRequest": "values",
    "Simulator": "simulator",
    "ToolCall": "values",
}

__all__ = [
    "DEFAULT_MODEL_ID",
    "PROFILES",
    "AnswerKey",
    "InvalidRequest",
    "Profile",
    "RunningServer",
    "SimulatedTurn",
    "Simulator",
    "ToolCall",
    "build_app",
    "default_fixtures_dir",
    "get_profile",
    "serve",
    "start_in_thread",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"k3conformance.reference.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'k3conformance.reference' has no attribute {name!r}")
