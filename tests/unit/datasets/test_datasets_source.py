"""Dataset specs and loading: parsing (and its errors as argparse sees them), bundled
fixtures, local JSON / JSON lines / Parquet files, offline Hub datasets failing fast with
one clear message, and the authored coding fixture's solutions run against its tests.
No test touches the network."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from k3conformance.datasets.bundled import fixtures_dir, load_fixture
from k3conformance.datasets.sources import (
    GENERIC_FIELDS,
    GSM8K_FIELDS,
    MATH500_FIELDS,
    DatasetSpec,
    DatasetUnavailable,
    FieldMap,
    _hub_revision,
    default_fields,
    load_dataset_items,
    parse_dataset_spec,
)

REPO = Path(__file__).resolve().parents[3]

# ---------------------------------------------------------------------------
# Parsing


@pytest.mark.parametrize(
    ("text", "expected", "canonical"),
    [
        ("fixture:math", DatasetSpec("fixture", "math"), "fixture:math"),
        (
            "hub:openai/gsm8k:main@test",
            DatasetSpec("hub", "openai/gsm8k", "main", "test"),
            "hub:openai/gsm8k:main@test",
        ),
        (
            "hub:HuggingFaceH4/MATH-500@test",
            DatasetSpec("hub", "HuggingFaceH4/MATH-500", None, "test"),
            "hub:HuggingFaceH4/MATH-500@test",
        ),
        ("hub:gsm8k:main", DatasetSpec("hub", "gsm8k", "main", "test"), "hub:gsm8k:main@test"),
        (
            "hub:openai/gsm8k:main@test[:100]",
            DatasetSpec("hub", "openai/gsm8k", "main", "test[:100]"),
            "hub:openai/gsm8k:main@test[:100]",
        ),
        ("  file:/data/gsm8k.jsonl ", DatasetSpec("file", "/data/gsm8k.jsonl"), "file:/data/gsm8k.jsonl"),
        ("file:/data/math.json", DatasetSpec("file", "/data/math.json"), "file:/data/math.json"),
        ("file:/data/part-0.PARQUET", DatasetSpec("file", "/data/part-0.PARQUET"), "file:/data/part-0.PARQUET"),
    ],
)
def test_parse_dataset_spec(text: str, expected: DatasetSpec, canonical: str) -> None:
    spec = parse_dataset_spec(text)
    assert spec == expected
    assert str(spec) == canonical
    assert parse_dataset_spec(str(spec)) == spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a dataset spec"),
        ("math", "expected a dataset spec"),
        ("fixture:", "expected a dataset spec"),
        ("fixture:../secrets", "expected fixture:NAME"),
        ("hub:", "expected a dataset spec"),
        ("hub:a/b/c", "is not OWNER/NAME or NAME"),
        ("hub:openai/gsm8k:@test", "config ''"),
        ("hub:openai/gsm8k:main@", "split ''"),
        ("hub:openai/gsm8k:main@te st", "split 'te st'"),
        ("file:/data/gsm8k.csv", "ending in .json, .jsonl or .parquet"),
        ("ftp:example.org/data.json", "unknown dataset kind 'ftp'"),
    ],
)
def test_bad_specs_are_argument_type_errors(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
        parse_dataset_spec(text)


def test_parse_dataset_spec_works_as_an_argparse_type(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="k3")
    parser.add_argument("--k3-math-dataset", type=parse_dataset_spec)
    assert parser.parse_args(["--k3-math-dataset", "fixture:math"]).k3_math_dataset == DatasetSpec("fixture", "math")
    with pytest.raises(SystemExit):
        parser.parse_args(["--k3-math-dataset", "hub:"])
    assert "argument --k3-math-dataset: expected a dataset spec" in capsys.readouterr().err


def test_default_fields_by_dataset_name() -> None:
    assert default_fields(parse_dataset_spec("hub:openai/gsm8k:main@test")) is GSM8K_FIELDS
    assert default_fields(parse_dataset_spec("file:/tmp/GSM8K-test.jsonl")) is GSM8K_FIELDS
    assert default_fields(parse_dataset_spec("hub:HuggingFaceH4/MATH-500@test")) is MATH500_FIELDS
    assert default_fields(parse_dataset_spec("fixture:math")) is GENERIC_FIELDS


# ---------------------------------------------------------------------------
# Fixtures


def test_fixture_spec_loads_the_bundled_file() -> None:
    dataset = load_dataset_items("fixture:math")
    fixture = load_fixture("math")
    assert dataset.name == "fixture:math"
    assert dataset.revision == fixture.sha256
    assert [item["id"] for item in dataset.items] == [item["id"] for item in fixture.items]
    assert dataset.items[0] == {key: fixture.items[0][key] for key in ("id", "prompt", "answer")}


def test_fixture_limit_and_extra_fields() -> None:
    fields = FieldMap(id="id", prompt="prompt", answer="canonical", extra=("entry_point", "tests"))
    dataset = load_dataset_items("fixture:coding", limit=2, fields=fields, option="--k3-coding-dataset")
    assert len(dataset.items) == 2
    assert set(dataset.items[0]) == {"id", "prompt", "answer", "entry_point", "tests"}


def test_missing_fixture_is_unavailable() -> None:
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset_items("fixture:no-such-suite")
    message = str(caught.value)
    assert message.startswith("dataset fixture:no-such-suite is unavailable: ")
    assert (
        "set --k3-math-dataset to fixture:math or to a local file: --k3-math-dataset file:/path/to/gsm8k.jsonl"
        in message
    )


def test_the_remedy_names_the_option_that_chose_the_data() -> None:
    with pytest.raises(DatasetUnavailable, match="set --k3-coding-dataset to fixture:coding"):
        load_dataset_items("fixture:no-such-suite", option="--k3-coding-dataset")


# ---------------------------------------------------------------------------
# Local files


ROWS = [
    {"id": "p1", "prompt": "What is 2 + 2?", "answer": "4"},
    {"id": "p2", "prompt": "What is 3 * 3?", "answer": "9"},
    {"id": "p3", "prompt": "What is 10 / 4?", "answer": "\\frac{5}{2}"},
]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def cache_dir(tmp_path: Path) -> str:
    # `datasets` converts local files to Arrow in a cache; keep it out of the home directory.
    return str(tmp_path / "hf-cache")


def test_jsonl_file(tmp_path: Path, cache_dir: str) -> None:
    path = _write(tmp_path / "problems.jsonl", "".join(json.dumps(row) + "\n" for row in ROWS))
    dataset = load_dataset_items(f"file:{path}", cache_dir=cache_dir)
    assert dataset.name == f"file:{path}"
    assert dataset.revision == _sha256(path)
    assert dataset.items == ROWS


def test_json_array_file_with_limit(tmp_path: Path, cache_dir: str) -> None:
    path = _write(tmp_path / "problems.json", json.dumps(ROWS))
    dataset = load_dataset_items(f"file:{path}", limit=2, cache_dir=cache_dir)
    assert dataset.items == ROWS[:2]


def test_json_file_in_the_fixture_format(tmp_path: Path, cache_dir: str) -> None:
    path = _write(tmp_path / "mine.json", json.dumps({"suite": "math", "items": ROWS}))
    assert load_dataset_items(f"file:{path}", cache_dir=cache_dir).items == ROWS


def test_parquet_file(tmp_path: Path, cache_dir: str) -> None:
    pandas = pytest.importorskip("pandas")
    path = tmp_path / "problems.parquet"
    pandas.DataFrame(ROWS).to_parquet(path)
    dataset = load_dataset_items(f"file:{path}", cache_dir=cache_dir)
    assert dataset.items == ROWS
    assert dataset.revision == _sha256(path)


def test_gsm8k_shaped_file_gets_gsm8k_fields(tmp_path: Path, cache_dir: str) -> None:
    rows = [
        {
            "question": "Natalia sold 48 clips in April and half as many in May. How many in all?",
            "answer": "48/2 = 24\n48 + 24 = 72\n#### 72",
        },
        {
            "question": "Weng earns $12 an hour. How much for 50 minutes?",
            "answer": "12/60 = 0.2\n0.2 x 50 = 10\n#### 10",
        },
    ]
    path = _write(tmp_path / "gsm8k-test.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    dataset = load_dataset_items(f"file:{path}", cache_dir=cache_dir)
    assert dataset.items == [
        {"id": "0", "prompt": rows[0]["question"], "answer": "72"},
        {"id": "1", "prompt": rows[1]["question"], "answer": "10"},
    ]


def test_math500_shaped_file_gets_math500_fields(tmp_path: Path, cache_dir: str) -> None:
    row = {
        "problem": "Compute $\\dbinom{8}{4}$.",
        "solution": "...",
        "answer": "70",
        "subject": "Counting",
        "level": 2,
        "unique_id": "test/counting/1.json",
    }
    path = _write(tmp_path / "math500.jsonl", json.dumps(row) + "\n")
    assert load_dataset_items(f"file:{path}", cache_dir=cache_dir).items == [
        {"id": "test/counting/1.json", "prompt": row["problem"], "answer": "70"}
    ]


def test_custom_field_map(tmp_path: Path, cache_dir: str) -> None:
    path = _write(tmp_path / "custom.jsonl", json.dumps({"q": "1 + 1?", "gold": 2, "key": 7}) + "\n")
    fields = FieldMap(id="key", prompt="q", answer="gold")
    assert load_dataset_items(f"file:{path}", fields=fields, cache_dir=cache_dir).items == [
        {"id": "7", "prompt": "1 + 1?", "answer": "2"}
    ]


def test_missing_file_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "absent" / "gsm8k.jsonl"
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset_items(f"file:{path}")
    message = str(caught.value)
    assert message.startswith(f"dataset file:{path} is unavailable: cannot read {path} (No such file or directory)")
    assert message.endswith(
        "set --k3-math-dataset to fixture:math or to a local file: --k3-math-dataset file:/path/to/gsm8k.jsonl"
    )
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_records_without_the_fields_are_unavailable(tmp_path: Path, cache_dir: str) -> None:
    path = _write(tmp_path / "other.jsonl", json.dumps({"text": "hello", "label": 1}) + "\n")
    with pytest.raises(
        DatasetUnavailable, match=r"record 0 has no field 'id', 'prompt', 'answer' \(it has 'label', 'text'\)"
    ):
        load_dataset_items(f"file:{path}", cache_dir=cache_dir)


def test_unreadable_file_is_unavailable(tmp_path: Path, cache_dir: str) -> None:
    path = _write(tmp_path / "broken.jsonl", '{"id": "a", "prompt": \n')
    with pytest.raises(DatasetUnavailable, match=re.escape(f"{path} is not readable as json")):
        load_dataset_items(f"file:{path}", cache_dir=cache_dir)


# ---------------------------------------------------------------------------
# The Hub, offline, and the cost of importing `datasets`


def _run_python(code: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
        check=False,
    )


def test_offline_hub_dataset_fails_fast_with_one_message(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf-home"),  # an empty cache: nothing to fall back on
        "HF_DATASETS_CACHE": str(tmp_path / "hf-home" / "datasets"),
    }
    code = """
        import time
        from k3conformance.datasets.sources import DatasetUnavailable, load_dataset_items
        started = time.perf_counter()
        try:
            load_dataset_items("hub:openai/gsm8k:main@test")
        except DatasetUnavailable as error:
            print(f"{time.perf_counter() - started:.2f}")
            print(error)
    """
    result = _run_python(code, env)
    assert result.returncode == 0, result.stderr
    elapsed, message = result.stdout.strip().split("\n", 1)
    assert float(elapsed) < 30
    assert message.startswith("dataset hub:openai/gsm8k:main@test is unavailable: ConnectionError: ")
    assert "not in the local cache" in message
    assert (
        "set --k3-math-dataset to fixture:math or to a local file: --k3-math-dataset file:/path/to/gsm8k.jsonl"
        in message
    )
    assert "\n" not in message


def test_hub_spec_loads_through_datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache_dir: str) -> None:
    # `datasets.load_dataset` reads a local folder named like a Hub repository the way it
    # reads a downloaded one: the hub: path end to end, without the network.
    folder = tmp_path / "acme" / "gsm8k-mini"
    folder.mkdir(parents=True)
    rows = [
        {"question": "Two plus three?", "answer": "2 + 3 = 5\n#### 5"},
        {"question": "Ten hundreds?", "answer": "#### 1,000"},
    ]
    _write(folder / "test.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    monkeypatch.chdir(tmp_path)
    dataset = load_dataset_items("hub:acme/gsm8k-mini@test", limit=5, cache_dir=cache_dir)
    assert dataset.name == "hub:acme/gsm8k-mini@test"
    assert re.fullmatch(r"[0-9a-f]{16}", dataset.revision)  # the Arrow fingerprint: no commit here
    assert dataset.items == [
        {"id": "0", "prompt": "Two plus three?", "answer": "5"},
        {"id": "1", "prompt": "Ten hundreds?", "answer": "1,000"},
    ]


def test_hub_revision_is_the_commit_in_the_cache_path() -> None:
    commit = "e53f048856ff4f594e959d75785d2c2d37b678ee"
    downloaded = SimpleNamespace(
        cache_files=[{"filename": f"/cache/openai___gsm8k/main/0.0.0/{commit}/gsm8k-test.arrow"}], _fingerprint="abc"
    )
    assert _hub_revision(downloaded) == commit
    assert _hub_revision(SimpleNamespace(cache_files=[], _fingerprint="0123456789abcdef")) == "0123456789abcdef"


def test_fixture_specs_do_not_import_datasets() -> None:
    code = """
        import sys
        from k3conformance.datasets.sources import load_dataset_items, parse_dataset_spec
        parse_dataset_spec("hub:openai/gsm8k:main@test")
        load_dataset_items("fixture:math")
        print("datasets" in sys.modules)
    """
    result = _run_python(code, dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


# ---------------------------------------------------------------------------
# The authored coding fixture: canonical solutions pass, wrong replies fail

CODING_ITEMS = load_fixture("coding").items
_FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _fenced_code(reply: str) -> str:
    match = _FENCE.fullmatch(reply.strip())
    assert match is not None, "a reply must be exactly one ```python block"
    return match.group(1)


def _run_tests(code: str, tests: list[str]) -> subprocess.CompletedProcess[str]:
    # Plain exec in a child process with a timeout: the real sandbox is k3conformance.sandbox.
    program = code + "\n\n" + "\n\n".join(tests) + "\n"
    return subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            "import sys; exec(compile(sys.stdin.read(), '<solution>', 'exec'), {'__name__': '__main__'})",
        ],
        input=program,
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_coding_fixture_shape() -> None:
    fixture = load_fixture("coding")
    assert fixture.extra["suite"] == "coding"
    assert fixture.extra["license"] == "Authored for k3conformance (Apache-2.0)"
    ids = [item["id"] for item in CODING_ITEMS]
    assert len(ids) == len(set(ids)) >= 12
    assert sum(item["long_output"] for item in CODING_ITEMS) >= 3
    for item in CODING_ITEMS:
        assert f"`{item['entry_point']}" in item["prompt"]
        assert "Return only the code in a ```python block." in item["prompt"]
        assert _fenced_code(item["simulator"]["reply"]) == item["canonical"]
        assert item["simulator"]["graded"] is True
        assert all(item["entry_point"] in test for test in item["tests"])


@pytest.mark.parametrize("item", CODING_ITEMS, ids=[item["id"] for item in CODING_ITEMS])
def test_canonical_passes_and_wrong_reply_fails(item: dict[str, Any]) -> None:
    right = _run_tests(item["canonical"], item["tests"])
    assert right.returncode == 0, right.stderr
    wrong = _run_tests(_fenced_code(item["simulator"]["wrong_reply"]), item["tests"])
    assert wrong.returncode != 0, "the wrong reply passed every test"
    assert "AssertionError" in wrong.stderr or "Error" in wrong.stderr


def test_long_output_tasks_really_are_long() -> None:
    long_replies = [item["simulator"]["reply"] for item in CODING_ITEMS if item["long_output"]]
    assert all(len(reply) >= 700 for reply in long_replies)


def test_prompts_are_distinct_across_all_fixtures() -> None:
    # The reference simulator finds an item by its prompt as a substring of the request.
    prompts = [
        (path.name, item["id"], item["prompt"])
        for path in sorted(fixtures_dir().glob("*.json"))
        for item in json.loads(path.read_text(encoding="utf-8")).get("items", [])
        if isinstance(item, dict) and item.get("prompt")
    ]
    ours = [entry for entry in prompts if entry[0] in ("math.json", "coding.json")]
    assert len(ours) == len(load_fixture("math").items) + len(CODING_ITEMS)
    clashes = [(a[:2], b[:2]) for a in ours for b in prompts if a[:2] != b[:2] and (a[2] in b[2] or b[2] in a[2])]
    assert clashes == []


def test_the_reference_simulator_finds_each_item() -> None:
    from k3conformance.reference.answer_key import AnswerKey

    key = AnswerKey.load(fixtures_dir())
    for item in [*load_fixture("math").items, *CODING_ITEMS]:
        found = key.lookup(f"{item['prompt']}\n\nPlease answer carefully.")
        assert found is not None and found.id == item["id"]
