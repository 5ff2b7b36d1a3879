"""The parser corpus states where every case comes from, and its generated half is what
fixtures/parsers/build_variants.py generates (only the recorded disagreements are added)."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import ModuleType

from run_files import REPO

from k3conformance.checks.parsers import load_corpus, variants_path


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_variants", REPO / "fixtures" / "parsers" / "build_variants.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_case_names_its_source_and_its_name_is_unique() -> None:
    cases = load_corpus()
    assert [case.name for case in cases if not case.source] == []
    names = [case.name for case in cases]
    assert len(names) == len(set(names))


def test_the_stored_variants_are_the_generated_ones() -> None:
    builder = _builder()
    generated = (
        builder.form_variants() + builder.argument_variants() + builder.escape_variants() + builder.cut_variants()
    )
    stored = json.loads(variants_path().read_text(encoding="utf-8"))["cases"]
    assert [{k: v for k, v in case.items() if k != "known_disagreements"} for case in stored] == generated


def test_generated_calls_are_numbered_from_one_as_the_encoder_writes_them() -> None:
    raws = [case.raw for case in load_corpus(variants_path())]
    assert any('index="1"' in raw for raw in raws)
    assert not any('index="0"' in raw for raw in raws)
