"""`k3conformance audit` against the reference deployment (a simulator), end to end: a tp8 run at
temperature 0 (math and long context at 128K, 4 items each) audited against reference:tp8 AGREES
bit for bit, against reference:ep32-megamoe (whose long contexts loop) DISAGREES; the suites it
cannot rescore are named as skipped; a damaged run and a run with nothing to audit are bad input.
About ten seconds; the llama.cpp audit is tests/e2e/test_llamacpp_audit.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from run_files import REPO

from k3conformance.cli import main as cli_main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("audit-results")
    subprocess.run(
        [sys.executable, "-m", "pytest", "suites/test_math.py", "suites/test_long_context.py", "suites/test_smoke.py",
         "--k3-endpoint", "reference:tp8", "--k3-shape", "tp8", "--k3-limit", "4", "--k3-temperature", "0",
         "--k3-context-lengths", "128000", f"--k3-results-dir={results}", "-q", "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, check=True, timeout=300,
    )  # fmt: skip
    (found,) = (results / "tp8").iterdir()
    return found


def _audit(run: Path, endpoint: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    status = cli_main(["audit", str(run), "--k3-endpoint", endpoint, "--items", "8", "--seed", "3", "--format", "json"])
    return status, json.loads(capsys.readouterr().out)


def test_the_same_profile_agrees_and_megamoe_disagrees(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, report = _audit(run_dir, "reference:tp8", capsys)
    assert (status, report["verdict"], report["mode"]) == (0, "AGREES", "bit for bit"), report["reasons"]
    assert report["figures"]["identical"] == report["figures"]["exchanges"] == 8
    assert report["audited_suites"] == {"long_context_128k": 4, "math": 4}
    assert "smoke" in report["skipped"] and all("no score to recompute" in why for why in report["skipped"]["smoke"])
    status, report = _audit(run_dir, "reference:ep32-megamoe", capsys)
    assert (status, report["verdict"]) == (1, "DISAGREES"), report["reasons"]
    # Math's short answers are unchanged on MegaMoE; its long contexts loop.
    changed = {entry["suite"] for entry in report["asked"] if not all(entry["identical"])}
    assert changed == {"long_context_128k"}


def test_a_damaged_run_or_a_bad_profile_is_bad_input(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = tmp_path / run_dir.name
    subprocess.run(["cp", "-r", str(run_dir), str(damaged)], check=True)
    summary = json.loads((damaged / "summary.json").read_text())
    summary["records_chain"] = {}
    (damaged / "summary.json").write_text(json.dumps(summary))
    assert cli_main(["audit", str(damaged), "--k3-endpoint", "reference:tp8", "--items", "2"]) == 2
    assert "its evidence does not hold" in capsys.readouterr().err
    assert cli_main(["audit", str(run_dir), "--k3-endpoint", "reference:nope", "--items", "2"]) == 2
    assert "unknown reference profile 'nope'" in capsys.readouterr().err
