"""What the llama.cpp tests need beyond the launcher (k3conformance/endpoint/llamacpp.py):
`require_model()`, which a test calls first. Without the package or the model it skips
outside CI, saying how to install them, and fails in CI, where these tests must run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from k3conformance.endpoint import llamacpp
from k3conformance.endpoint.llamacpp import INSTALL_HINT


def require_model() -> Path:
    """The model file; skips the test outside CI and fails it in CI when something is missing."""
    __tracebackhide__ = True
    missing = llamacpp.missing_requirement()
    if missing is not None:
        message = f"{missing}; install with: {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the llama.cpp tests must run, not skip: {message}", pytrace=False)
        pytest.skip(message)
    model = llamacpp.find_model()
    assert model is not None
    return model
