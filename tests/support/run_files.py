"""Helpers of the plugin's own tests: copying the suites into a test project, and reading
what a run left on disk."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from k3conformance.runs.records import COMPRESSED_SUFFIX, SUMMARY_FILE, iter_records, read_records_text, record_files

REPO = Path(__file__).resolve().parents[2]
# The conformance suites; the accuracy suites measure rather than check, and
# tests/e2e/test_eval_suites.py shows their one check (an answer that can be scored) failing.
CONFORMANCE_SUITES = (
    "test_smoke.py",
    "test_reasoning.py",
    "test_tool_calls.py",
    "test_bfcl.py",
    "test_structured_output.py",
    "test_request_validation.py",
    "test_state_consistency.py",
    "test_tool_schemas.py",
    "test_prompt_tokens.py",
)
# The load lane (issue 23): in the fault-profile runs, not in the llama.cpp run (32 streams
# at once on a one-thread server would take minutes and say nothing about its parser).
LOAD_SUITE = "test_load.py"
# The API contract matrix (issue 34): in the healthy run and the runs of the profiles it is shown
# to catch, not in every fault-profile run (tests/e2e/test_conformance_faults.py).
CONTRACT_SUITE = "test_contract.py"


def copy_suites(destination: Path, suites: Iterable[str] = CONFORMANCE_SUITES) -> None:
    """Copy the suites conftest (which marks a suites directory) and the named suite files."""
    for name in ("conftest.py", *suites):
        shutil.copy(REPO / "suites" / name, destination / name)


def run_dirs(results: Path) -> list[Path]:
    return sorted(path for path in results.glob("*/*") if path.is_dir())


def only_run(results: Path) -> Path:
    runs = run_dirs(results)
    assert len(runs) == 1, runs
    return runs[0]


def summary_of(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / SUMMARY_FILE).read_text())
    return data


def responses_by_key(run_dir: Path) -> dict[tuple[str, str, int, str], list[dict[str, Any]]]:
    found: dict[tuple[str, str, int, str], list[dict[str, Any]]] = {}
    for record in iter_records(run_dir, "response"):
        key = (record["suite"], record["item"], record["sample"], record["step"])
        found.setdefault(key, []).append(record)
    return found


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """The parts of a response record that must not depend on timing or process."""
    response = record.get("response") or {}
    return {
        "request": record["request"],
        "status": record["status"],
        **{
            key: response.get(key)
            for key in ("content", "reasoning", "reasoning_field", "tool_calls", "finish_reason", "usage", "model")
        },
    }


def outcomes(results: Path) -> list[dict[str, Any]]:
    """Every outcome record a run under `results` left."""
    return [record for run_dir in run_dirs(results) for record in iter_records(run_dir, "outcome")]


def records_names(run_dir: Path) -> list[str]:
    """The run's records files, each named as its process wrote it (compressed or not)."""
    return [path.name.removesuffix(COMPRESSED_SUFFIX) for path in record_files(run_dir)]


def written_texts(root: Path) -> dict[Path, str]:
    """Every file under `root` as text, a compressed records file decompressed: what a search for a
    secret must read (the compressed bytes would hide it)."""
    return {
        path: read_records_text(path) if path.name.endswith(COMPRESSED_SUFFIX) else path.read_text(errors="replace")
        for path in root.rglob("*")
        if path.is_file()
    }


def check_name(outcome: dict[str, object]) -> str:
    """`suite/check[mode]`, as the fault matrix names a check."""
    name = f"{outcome['suite']}/{str(outcome['test']).removeprefix('test_')}"
    return name + (f"[{outcome['mode']}]" if outcome.get("mode") else "")
