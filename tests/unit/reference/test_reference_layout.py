"""The reference deployment's module seams: value types and the fault catalogue in leaf modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from k3conformance.reference import catalogue
from k3conformance.reference.profiles import PROFILES
from k3conformance.xtml.markup import xtml_tool_call

REFERENCE = Path(__file__).resolve().parents[3] / "k3conformance" / "reference"
# These four used to import one another (some under TYPE_CHECKING); now they share values.py.
PEERS = ("faults", "request", "simulator", "profiles")
ALLOWED = {"simulator": {"faults", "profiles", "request"}, "request": {"faults"}}


def reference_imports(module: str) -> set[str]:
    tree = ast.parse((REFERENCE / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "k3conformance.reference":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("k3conformance.reference."):
                found.add(node.module.rsplit(".", 1)[1])
    return found


@pytest.mark.parametrize("module", PEERS)
def test_peers_import_only_downwards(module: str) -> None:
    peers = reference_imports(module) & set(PEERS)
    assert peers <= ALLOWED.get(module, set()), peers
    for peer in peers:
        assert module not in reference_imports(peer)


def test_value_types_and_catalogue_are_leaves() -> None:
    assert reference_imports("catalogue") == set()
    assert reference_imports("values") == {"catalogue"}


def test_every_conformance_and_transport_fault_has_its_profile_and_its_bug() -> None:
    for fault in catalogue.FAULTS:
        assert fault.bug.strip()
        if fault.kind != "accuracy":
            assert PROFILES[fault.name].faults == {fault.name}
            assert fault.bug in PROFILES[fault.name].description
    assert set().union(*(profile.faults for profile in PROFILES.values())) == catalogue.KNOWN_FAULTS


def test_the_one_xtml_writer_uses_k3_type_names_and_escapes_attributes() -> None:
    markup = xtml_tool_call('say"&', 2, {"n": 3, "x": 1.5, "ok": True, "none": None, "l": [1], "o": {}, "s": "a<b"})
    types = [part.split('type="')[1].split('"')[0] for part in markup.split("<|open|>argument")[1:]]
    assert types == ["number", "number", "boolean", "null", "array", "object", "string"]
    assert markup.startswith('<|open|>call tool="say&quot;&amp;" index="2"<|sep|>')
    assert "<|sep|>a<b<|close|>argument<|sep|>" in markup
