"""`k3conformance audit` on a real engine: llama.cpp's server serving SmolLM2-135M-Instruct runs
the small-model suite once at temperature 0 (20 seeded items, stored), and the stored run is
audited bit for bit against a new launch of the same server (must AGREE: llama.cpp at temperature
0 answers a request as it answered it before) and against a launch with RoPE frequency scale 0.5
(must DISAGREE: every answer's positions rotate by half, and answers change). Nothing is simulated.

The audit reads the key from $K3_API_KEY, as a receiver would give it; it is never on a command line.
Like tests/e2e/test_llamacpp_gate.py, it fails rather than skips in CI when llama.cpp's server or
its model is missing (llamacpp_server.require_model). About a minute on two cores.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from llamacpp_server import require_model

from k3conformance.deployment.llamacpp_gate_run import GatedRun, run_suites_on_llamacpp
from k3conformance.deployment.llamacpp_server import LlamaCppSettings, running_llamacpp

ITEMS = 20
SHAPE = "llamacpp-default"
REGRESSION = ("rope_freq_scale=0.5",)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GatedRun]:
    model = require_model()
    project = tmp_path_factory.mktemp("llamacpp-audit")
    run = run_suites_on_llamacpp(
        project,
        ("test_small_model.py",),
        model=model,
        shape=SHAPE,
        options=["--k3-temperature", "0", "--k3-limit", str(ITEMS)],
    )
    assert run.run_dir is not None and run.summary()["status"] == "complete", run.diagnostics()
    return model, run


def _audit(model: Path, run: GatedRun, params: tuple[str, ...]) -> tuple[int, dict[str, Any]]:
    key = secrets.token_urlsafe(24)
    with running_llamacpp(model, key, LlamaCppSettings(params=params)) as server:
        done = subprocess.run(
            [sys.executable, "-m", "k3conformance", "audit", str(run.run_dir), "--k3-endpoint", server.base_url,
             "--items", str(ITEMS), "--seed", "5", "--format", "json"],
            capture_output=True, text=True, check=False, timeout=600,
            env={"PATH": "/usr/bin:/bin", "K3_API_KEY": key, "PYTHONPATH": str(Path(__file__).parents[2])},
        )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    assert key not in done.stdout + done.stderr
    return done.returncode, json.loads(done.stdout)


def test_the_same_launch_agrees_bit_for_bit(stored: tuple[Path, GatedRun]) -> None:
    model, run = stored
    status, report = _audit(model, run, ())
    assert report["mode"] == "bit for bit" and report["figures"]["temperatures"] == [0.0], report
    assert (status, report["verdict"]) == (0, "AGREES"), report["reasons"]
    assert report["figures"]["identical"] == report["figures"]["exchanges"] == ITEMS


def test_a_changed_launch_disagrees(stored: tuple[Path, GatedRun]) -> None:
    model, run = stored
    status, report = _audit(model, run, REGRESSION)
    assert (status, report["verdict"]) == (1, "DISAGREES"), report["reasons"]
    assert report["figures"]["mismatches"] > 0
