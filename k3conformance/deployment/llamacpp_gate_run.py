"""One run of suite files, in a child pytest with the real plugin, against llama.cpp's server
launched with chosen settings (a "shape" of the real-engine benchmark): store it as a
baseline (`--k3-save-baseline`) or gate it against one (`--k3-baseline`), and read back
what the run and the gate wrote. Used by tests/e2e/test_llamacpp_gate.py (the CI pair) and
benchmarks/bench_real_engine.py (the matrix).

The launch settings are written to a `--k3-server-args` file, so each run records its
deployment identity next to what llama.cpp's /props reports.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k3conformance.deployment.llamacpp_params import parse_param
from k3conformance.deployment.llamacpp_server import CLIENT_OPTIONS, LlamaCppSettings, running_llamacpp

__all__ = ["GatedRun", "run_suites_on_llamacpp"]

REPO = Path(__file__).resolve().parents[2]
BASE_OPTIONS = (
    *CLIENT_OPTIONS,
    "--tb=no",
    "-q",
    "-p",
    "no:cacheprovider",
)
CHILD_TIMEOUT_S = 1800


@dataclass
class GatedRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    run_dir: Path | None
    server_log: str
    gate: dict[str, Any] | None = field(default=None)

    def summary(self) -> dict[str, Any]:
        assert self.run_dir is not None, self.diagnostics()
        loaded: dict[str, Any] = json.loads((self.run_dir / "summary.json").read_text())
        return loaded

    def diagnostics(self) -> str:
        return (
            f"exit status {self.returncode} after {self.seconds:.0f} s\n--- stdout (end) ---\n{self.stdout[-3000:]}"
            f"\n--- stderr (end) ---\n{self.stderr[-1500:]}\n--- llama.cpp log (end) ---\n{self.server_log[-1500:]}"
        )


def _child_environment(api_key: str) -> dict[str, str]:
    # A developer's K3_* settings or pytest options must not redirect the child run.
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("K3_") and name not in ("OPENAI_API_KEY", "PYTEST_ADDOPTS")
    }
    return {**inherited, "K3_API_KEY": api_key}


def _newest_run(results: Path, shape: str, before: set[Path]) -> Path | None:
    runs = sorted(path for path in (results / shape).glob("*") if path.is_dir() and path not in before)
    return runs[-1] if runs else None


def run_suites_on_llamacpp(
    project: Path,
    suites: Sequence[str],
    *,
    model: Path,
    shape: str,
    params: Sequence[str] = (),
    options: Sequence[str] = (),
    timeout_s: float = CHILD_TIMEOUT_S,
) -> GatedRun:
    """`suites` (copied from the repository's suites/ into `project`) run in a child pytest
    against a new llama.cpp server serving `model` with `params`; results in project/results."""
    project.mkdir(parents=True, exist_ok=True)
    for name in ("conftest.py", *suites):
        shutil.copy(REPO / "suites" / name, project / name)
    server_args = project / f"server-args-{shape}.json"
    # A mapping, as the launch record stores it: {"rope_freq_scale": "0.5"}; {} for the defaults.
    server_args.write_text(json.dumps({"args": dict(parse_param(param) for param in params), "env": {}}))
    results = project / "results"
    before = set((results / shape).glob("*")) if (results / shape).is_dir() else set()
    api_key = secrets.token_urlsafe(24)
    with running_llamacpp(model, api_key, LlamaCppSettings(params=tuple(params))) as server:
        command = [
            sys.executable,
            "-m",
            "pytest",
            "--k3-endpoint",
            server.base_url,
            "--k3-results-dir",
            str(results),
            "--k3-shape",
            shape,
            "--k3-server-args",
            str(server_args),
            *BASE_OPTIONS,
            *options,
            *suites,
        ]
        started = time.monotonic()
        child = subprocess.run(
            command,
            check=False,
            cwd=project,
            env=_child_environment(api_key),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        seconds = time.monotonic() - started
        log = server.log_tail()
    run_dir = _newest_run(results, shape, before)
    gate_file = run_dir / "gate.json" if run_dir else None
    gate = json.loads(gate_file.read_text()) if gate_file and gate_file.is_file() else None
    return GatedRun(child.returncode, child.stdout, child.stderr, seconds, run_dir, log, gate)
