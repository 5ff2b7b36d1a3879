"""Item pools: real evaluation items with their provenance, bundled under `fixtures/pools/NAME/`.

A pool is a folder with a `manifest.json` and a gzip-compressed JSON-lines data file:

    {"format": 1, "name": ..., "suite": ..., "data": "items.jsonl.gz", "sha256": <of the data file>,
     "items": N, "license": <SPDX of the pool as shipped>, "ships": true,
     "sources": [{"name", "where", "version", "license", "sha256"}], "builder": <script>, "notes": ...}

The builder script named in the manifest rebuilds the folder from its public sources (a fetched
repository at a commit, a registry package at a version) byte for byte (gzip with mtime 0), so
the hash in the manifest is the hash of what anyone rebuilding it gets. A pool whose data does
not hash to its manifest's figure, or whose manifest lacks a field, is refused with one message:
a run must never score items whose provenance it cannot state. The provenance (name, hash,
license, sources) goes into the run's summary with the suite's datasets.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from k3conformance.datasets.bundled import fixtures_dir

__all__ = [
    "MANIFEST",
    "POOL_FORMAT",
    "Pool",
    "PoolUnavailable",
    "load_pool",
    "pool_digest",
    "pool_names",
    "pools_dir",
    "read_pool",
]

POOL_FORMAT = 1
MANIFEST = "manifest.json"
_REQUIRED = ("format", "name", "suite", "data", "sha256", "items", "license", "ships", "sources", "builder")
_SOURCE_FIELDS = ("name", "where", "version", "license")


class PoolUnavailable(Exception):
    """The pool cannot be used: missing, malformed, or its data does not hash to its manifest."""


@dataclass(frozen=True)
class Pool:
    name: str
    suite: str
    path: Path
    sha256: str
    license: str
    sources: tuple[dict[str, Any], ...]
    items: tuple[dict[str, Any], ...]
    # The manifest as written (pools of some suites keep more than the common fields in it).
    manifest: dict[str, Any]

    def provenance(self) -> dict[str, Any]:
        """What a run records of the pool: enough to say where every item came from."""
        return {
            "pool": self.name,
            "sha256": self.sha256,
            "license": self.license,
            "sources": [dict(source) for source in self.sources],
        }


def pools_dir() -> Path:
    return fixtures_dir() / "pools"


def pool_names() -> list[str]:
    directory = pools_dir()
    return sorted(p.name for p in directory.iterdir() if (p / MANIFEST).is_file()) if directory.is_dir() else []


@cache
def load_pool(name: str) -> Pool:
    """The bundled pool `name` (fixtures/pools/NAME/), checked; loaded once per process."""
    return read_pool(pools_dir() / name, name)


def read_pool(folder: Path, name: str | None = None) -> Pool:
    """The pool in `folder`, its data checked against its manifest; `name`: what it must be called."""
    name = name or folder.name
    manifest, data_path, raw = _checked_data(folder, name)
    digest = str(manifest["sha256"])
    try:
        items = tuple(json.loads(line) for line in gzip.decompress(raw).decode("utf-8").splitlines() if line.strip())
    except (OSError, ValueError) as error:
        raise PoolUnavailable(f"pool {name!r}: {data_path.name} is not gzip-compressed JSON lines ({error})") from None
    if len(items) != manifest["items"] or any("id" not in item for item in items):
        raise PoolUnavailable(
            f"pool {name!r}: {len(items)} items read, its manifest says {manifest['items']}, and every item needs an id"
        )
    return Pool(
        name=name,
        suite=str(manifest["suite"]),
        path=data_path,
        sha256=digest,
        license=str(manifest["license"]),
        sources=tuple(manifest["sources"]),
        items=items,
        manifest=manifest,
    )


def pool_digest(folder: Path, name: str | None = None) -> tuple[str, str]:
    """The pool's name and content hash, its data checked against its manifest without parsing
    the items: what a run's identity records before the first request (the items are read,
    and checked again, where a suite loads them)."""
    name = name or folder.name
    manifest, _, _ = _checked_data(folder, name)
    return str(manifest["name"]), str(manifest["sha256"])


def _checked_data(folder: Path, name: str) -> tuple[dict[str, Any], Path, bytes]:
    """The manifest, the data file's path and its bytes, whose sha256 is the manifest's."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except OSError as error:
        known = ", ".join(pool_names()) or "none"
        raise PoolUnavailable(
            f"pool {name!r} not found at {folder} ({error.strerror}); bundled pools: {known}"
        ) from None
    except ValueError as error:
        raise PoolUnavailable(f"pool {name!r}: {folder / MANIFEST} is not JSON ({error})") from None
    _check_manifest(name, manifest)
    data_path = folder / str(manifest["data"])
    try:
        raw = data_path.read_bytes()
    except OSError as error:
        raise PoolUnavailable(f"pool {name!r}: cannot read {data_path} ({error.strerror})") from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != manifest["sha256"]:
        raise PoolUnavailable(
            f"pool {name!r}: {data_path.name} has sha256 {digest[:12]}…, its manifest says "
            f"{str(manifest['sha256'])[:12]}…: the data is not what was built; rebuild it with {manifest['builder']}"
        )
    return manifest, data_path, raw


def _check_manifest(name: str, manifest: Any) -> None:
    if not isinstance(manifest, dict):
        raise PoolUnavailable(f"pool {name!r}: its manifest is not a JSON object")
    missing = [key for key in _REQUIRED if key not in manifest]
    if missing:
        raise PoolUnavailable(f"pool {name!r}: its manifest lacks {', '.join(missing)}")
    if manifest["format"] != POOL_FORMAT:
        raise PoolUnavailable(f"pool {name!r}: manifest format {manifest['format']!r}, this plugin reads {POOL_FORMAT}")
    if manifest["name"] != name:
        raise PoolUnavailable(f"pool {name!r}: its manifest names it {manifest['name']!r}")
    sources = manifest["sources"]
    if not isinstance(sources, list) or not sources:
        raise PoolUnavailable(f"pool {name!r}: its manifest names no source")
    for source in sources:
        lacking = [key for key in _SOURCE_FIELDS if not isinstance(source, dict) or key not in source]
        if lacking:
            raise PoolUnavailable(f"pool {name!r}: a source lacks {', '.join(lacking)}")
