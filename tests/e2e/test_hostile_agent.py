"""The hostile-agent harness of issue 25: a scripted model plays the attacks on the sandbox
through the normal tool calls of the agentic suite (and answers the coding suite with
solutions that exit before their tests), in a whole pytest run with K3_API_KEY set.

The property: no byte of the key or of a host file outside the task reaches the records,
the reports or the terminal; no task or coding item is scored solved; the run's host
memory stays bounded; every budget holds. The attacks and their results are the table in
docs/sandbox.md."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hostile_agent import INJECTION, attacks, serve_hostile
from run_files import REPO, only_run, written_texts

from k3conformance.agent.tasks import load_tasks
from k3conformance.agent.tools import hidden_test_ids
from k3conformance.runs.records import iter_records
from k3conformance.sandbox import BUBBLEWRAP, sandbox_backend
from k3conformance.sandbox.cgroup import memory_cgroup_parent
from k3conformance.sandbox.workfolder import tmpfs_problem

API_KEY = "sk-k3c-hostile-canary-7c1e9d2a"
HOST_SECRET = "host-file-canary-4b8e0f13"
TASK = load_tasks().tasks[0]


@pytest.fixture
def hostile_project(pytester: pytest.Pytester) -> pytest.Pytester:
    if sandbox_backend()[0] != BUBBLEWRAP:
        pytest.skip("the agentic suite runs model code only under bubblewrap")
    for name in ("conftest.py", "test_agentic_coding.py", "test_coding.py"):
        shutil.copy(REPO / "suites" / name, pytester.path / name)
    return pytester


# Runs argv[2:], then writes the peak resident memory (KiB) of it and its children to argv[1].
PEAK_MEMORY_LAUNCHER = (
    "import resource, subprocess, sys; code = subprocess.call(sys.argv[2:]); "
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); sys.exit(code)"
)


@pytest.fixture
def host_file(tmp_path: Path) -> str:
    """A root-only file of the host, outside every task."""
    path = tmp_path / "host-secret.txt"
    path.write_text(HOST_SECRET)
    path.chmod(0o600)
    return str(path)


def test_the_hostile_agent_gets_nothing_out_and_solves_nothing(
    hostile_project: pytest.Pytester, host_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = TASK.changed_paths()[0].split("/")[0]
    hidden_ids = tuple(sorted(hidden_test_ids(TASK.hidden)))
    monkeypatch.setenv("K3_API_KEY", API_KEY)
    peak_file = hostile_project.path / "peak-memory-kib"
    with serve_hostile(API_KEY, host_file, {TASK.id: (package, hidden_ids)}) as (url, model):
        # Run through a launcher that reports the peak memory of the pytest process and its own
        # children alone: the worker's RUSAGE_CHILDREN also counts whatever else it ran before
        # (a headless browser, a llama.cpp server) under xdist.
        result = hostile_project.run(
            sys.executable,
            "-c",
            PEAK_MEMORY_LAUNCHER,
            str(peak_file),
            sys.executable,
            "-mpytest",
            f"--basetemp={hostile_project.path / 'basetemp'}",
            "--k3-endpoint",
            url,
            "--k3-results-dir",
            "out",
            "--k3-limit",
            "1",
            "--k3-coding-dataset",
            "fixture:coding",
            "-p",
            "no:cacheprovider",
            "-rA",
            timeout=600,
        )
    assert model.unauthorised == 0 and model.played == [
        attack.name for attack in attacks(host_file, package, hidden_ids)
    ]
    shown = result.stdout.str() + result.stderr.str()
    run_dir = only_run(hostile_project.path / "out")
    if os.environ.get("K3_HOSTILE_DUMP"):
        Path(os.environ["K3_HOSTILE_DUMP"]).write_text(shown)
        shutil.copytree(run_dir, os.environ["K3_HOSTILE_DUMP"] + ".run", dirs_exist_ok=True)
    written = written_texts(hostile_project.path)
    # No byte of the harness's environment or of the host file, anywhere.
    for secret in (API_KEY, HOST_SECRET):
        assert secret not in shown
        assert [path for path, text in written.items() if secret in text] == []
    # Nothing the model wrote moves the terminal's cursor or colours it.
    assert "\x1b" not in shown and "\r" not in shown and "\u202e" not in shown
    assert "\\x1b[2J" in shown, "the injected text was meant to be shown, escaped"
    # No forged solve, in either suite.
    outcomes = [record for record in iter_records(run_dir, "outcome") if record.get("score")]
    agent = _agent_record(outcomes)
    assert agent["solved"] is False, agent["hidden_tests"]
    # The patch and the report forged from the package's memory reached only the model's
    # process; the verdict's own runner says the bug is there.
    assert "hidden tests did not pass" in agent["hidden_tests"], agent["hidden_tests"]
    assert agent["stop_reason"] == "finished"
    # The work folder's size and the run's memory are capped over the whole sandbox.
    conversation = "".join(written[path] for path in written if path.name.startswith("records"))
    if tmpfs_problem() is None:
        assert "No space left on device" in conversation
    if not isinstance(memory_cgroup_parent(), str):
        killed = [int(count) for count in re.findall(r"children killed: (\d) of 4", conversation)]
        assert killed and min(killed) >= 1, killed
    coding = [record for record in outcomes if record["suite"] == "coding"]
    assert coding and all(record["score"]["correct"] == 0 for record in coding)
    # Every budget held: 16 of the 40 calls of one turn ran.
    turns = agent["turns"]
    assert max(len(turn["refused"]) for turn in turns) == 24
    assert sum(turn["refused"].count("calls per turn") for turn in turns) == 24
    # The pytest process never read the sparse files back: well under the 1 GiB it took on main b7dd69a.
    assert int(peak_file.read_text()) < 600 * 1024
    assert INJECTION not in shown


def _agent_record(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    (agent,) = [
        record["score"]["details"][0]["agent"]
        for record in outcomes
        if record["suite"] == "agentic_coding" and record["test"] == "test_task_solved"
    ]
    return dict(agent)
