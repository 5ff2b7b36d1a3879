"""Item pools (datasets/pools.py): bundled real items that load offline, with their provenance, and
are refused whole when their data is not what their manifest says."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from run_files import REPO

from k3conformance.datasets import pools
from k3conformance.datasets.bundled import FIXTURES_ENV_VAR
from k3conformance.datasets.pools import PoolUnavailable, load_pool, pool_digest, pool_names
from k3conformance.datasets.sources import DatasetUnavailable, load_dataset_items, parse_dataset_spec


@pytest.fixture
def copied_pools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the bundled fixtures to break, read instead of the real ones."""
    target = tmp_path / "fixtures" / "pools"
    shutil.copytree(REPO / "fixtures" / "pools", target)
    monkeypatch.setenv(FIXTURES_ENV_VAR, str(tmp_path / "fixtures"))
    pools.load_pool.cache_clear()
    yield target
    pools.load_pool.cache_clear()


def test_the_math_pool_loads_with_its_provenance() -> None:
    pool = load_pool("math_hard")
    assert "math_hard" in pool_names()
    assert pool.suite == "math" and len(pool.items) == 262 and pool.license == "MIT"
    assert {item["level"] for item in pool.items} == {4, 5}
    assert len({item["id"] for item in pool.items}) == 262
    provenance = pool.provenance()
    assert provenance["sha256"] == pool.sha256
    assert all(source["where"].startswith("github:") and source["license"] == "MIT" for source in provenance["sources"])
    manifest = json.loads((REPO / "fixtures/pools/math_hard/manifest.json").read_text())
    assert (REPO / manifest["builder"]).is_file()


def test_a_pool_spec_loads_through_the_dataset_loader() -> None:
    loaded = load_dataset_items(parse_dataset_spec("pool:math_hard"))
    assert loaded.name == "pool:math_hard" and loaded.revision == load_pool("math_hard").sha256
    assert len(loaded.items) == 262 and set(loaded.items[0]) == {"id", "prompt", "answer"}


def test_a_pool_whose_data_was_changed_is_refused(copied_pools: Path) -> None:
    data = copied_pools / "math_hard" / "items.jsonl.gz"
    raw = data.read_bytes()
    data.write_bytes(raw[:100] + bytes([raw[100] ^ 1]) + raw[101:])
    with pytest.raises(PoolUnavailable, match=r"has sha256 .* its manifest says .* rebuild it with"):
        load_pool("math_hard")
    with pytest.raises(DatasetUnavailable, match=r"dataset pool:math_hard is unavailable.*--k3-math-dataset"):
        load_dataset_items(parse_dataset_spec("pool:math_hard"))


def test_a_pools_digest_is_its_loaded_hash_and_refuses_changed_data(copied_pools: Path) -> None:
    # What a run's identity records before the first request, without parsing the items.
    folder = copied_pools / "swe_mutants"
    assert pool_digest(folder) == ("swe_mutants", pools.read_pool(folder).sha256)
    data = folder / "items.jsonl.gz"
    raw = data.read_bytes()
    data.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    with pytest.raises(PoolUnavailable, match=r"has sha256 .* its manifest says"):
        pool_digest(folder)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.pop("license"), "lacks license"),
        (lambda m: m.update(sources=[]), "names no source"),
        (lambda m: m.update(sources=[{"name": "x"}]), "a source lacks where, version, license"),
        (lambda m: m.update(format=2), "format 2"),
        (lambda m: m.update(items=1), "262 items read, its manifest says 1"),
    ],
)
def test_a_pool_with_a_broken_manifest_is_refused(copied_pools: Path, edit: object, message: str) -> None:
    path = copied_pools / "math_hard" / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)  # type: ignore[operator]
    path.write_text(json.dumps(manifest))
    with pytest.raises(PoolUnavailable, match=message):
        load_pool("math_hard")


def test_an_unknown_pool_names_the_bundled_ones() -> None:
    with pytest.raises(PoolUnavailable, match=r"bundled pools: .*math_hard"):
        load_pool("nonesuch")
