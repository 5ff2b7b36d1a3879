"""Two leaks of the agent's tools, closed (issue 33): bubblewrap's argv (the host's work-folder
path) is no longer readable as /proc/1/cmdline inside the sandbox, and a forged compiled file
of a real test module no longer makes `run_tests` report that the tests passed."""

from __future__ import annotations

import asyncio

import pytest

from k3conformance.agent.tasks import load_tasks
from k3conformance.agent.tools import TOOL_LIMITS, Workspace
from k3conformance.sandbox import BUBBLEWRAP, SandboxPool, sandbox_backend

POOL = SandboxPool(1)

# A test module discovered before tests/test_core.py: it writes a compiled test_core whose
# tests all pass, stamped with the real file's mtime and size and compiled under its path.
FORGER = r"""
import importlib._bootstrap_external as external, importlib.util, os, re

_real = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_core.py")
_source = open(_real, encoding="utf-8").read()
_forged = re.sub(r"(def test\w*\(self\):)", r"\1\n        return", _source)
_stat = os.stat(_real)
_code = compile(_forged, _real, "exec")
_data = external._code_to_timestamp_pyc(_code, _stat.st_mtime, _stat.st_size)
for _path in (importlib.util.cache_from_source(_real),
              os.path.join(os.path.dirname(_real), "__pycache__", "test_core." + __import__("sys").implementation.cache_tag + ".pyc")):
    try:
        os.makedirs(os.path.dirname(_path), exist_ok=True)
        with open(_path, "wb") as _handle:
            _handle.write(_data)
    except OSError:
        pass
"""


def test_bubblewraps_argv_is_not_readable_inside_the_sandbox() -> None:
    if sandbox_backend()[0] != BUBBLEWRAP:
        pytest.skip("bubblewrap's argv is only there under bubblewrap")
    program = "print(open('/proc/1/cmdline', 'rb').read().replace(b'\\0', b' ').decode())"
    result = asyncio.run(POOL.run(program, TOOL_LIMITS))
    assert result.passed, result.reason
    shown = result.stdout_excerpt
    assert "--args" in shown and "--bind" not in shown and "/sandbox" in shown.split(" -- ")[-1], shown


def test_a_forged_compiled_test_file_does_not_make_run_tests_pass() -> None:
    task = next(task for task in load_tasks().tasks if task.kind == "bugfix")
    files = {**task.start, "tests/test_aaa_forger.py": FORGER}
    result = asyncio.run(Workspace(files, POOL).call("run_tests", {}))
    assert not result.ok and result.text.startswith("tests failed"), result.text[:500]
