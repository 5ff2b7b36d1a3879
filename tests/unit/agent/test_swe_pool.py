"""The real-repository pool (`fixtures/pools/swe_mutants/`, issue 33): its size and spread, its
hash checked on load, and, for a few tasks of every project and every real bug from a project's
history, the validation its builder ran: the start fails the tests its bug breaks, the project's
own code passes every deciding test. The whole validation is the builder's (`python
fixtures/pools/build_swe_mutants.py --history DIR --check`)."""

from __future__ import annotations

import asyncio
import gzip
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from k3conformance.agent.loop import task_prompt
from k3conformance.agent.mutants import BUG_KINDS, REVERTED_FIX, TWO_FILES, mutants, reverted_fix
from k3conformance.agent.pool_tasks import (
    PoolError,
    PoolTask,
    load_pool_tasks,
    pool_dir,
    pool_provenance,
    read_pool,
    summary_table,
)
from k3conformance.agent.tasks import AgentTask
from k3conformance.agent.tools import TOOL_SPECS, Workspace
from k3conformance.reference import agent_play
from k3conformance.reference.answer_key import AnswerKey
from k3conformance.reference.profiles import get_profile
from k3conformance.reference.simulator import Simulator
from k3conformance.reference.values import SimulatedTurn
from k3conformance.sandbox import SandboxPool

POOL = SandboxPool(2)
REPO = Path(__file__).resolve().parents[3]
TASKSET, TASKS = load_pool_tasks()


def test_the_pool_has_three_hundred_tasks_over_ten_projects_and_every_bug_kind() -> None:
    assert len(TASKS) >= 300
    projects = Counter(task.project for task in TASKS)
    assert len(projects) >= 10 and min(projects.values()) >= 5, projects
    assert set(Counter(task.bug_kind for task in TASKS)) == {*BUG_KINDS, REVERTED_FIX, TWO_FILES}
    assert len({task.task.id for task in TASKS}) == len(TASKS)
    # The pool's order spans the projects: the default run's sample holds ten of them.
    assert len({task.project for task in TASKS[:12]}) >= 10
    provenance = pool_provenance()
    assert provenance["sha256"] == TASKSET.sha256 and len(provenance["sources"]) == len(projects)
    assert all(source["where"].startswith("pypi:") and len(source["sha256"]) == 64 for source in provenance["sources"])


def test_a_changed_data_file_is_refused(tmp_path: Path) -> None:
    shutil.copytree(pool_dir(), tmp_path / "pool")
    data = tmp_path / "pool" / "items.jsonl.gz"
    lines = gzip.decompress(data.read_bytes()).decode().splitlines()
    data.write_bytes(gzip.compress("\n".join(lines[:-1]).encode(), mtime=0))
    with pytest.raises(PoolError, match="sha256"):
        load_pool_tasks(tmp_path / "pool")


def test_a_task_reports_a_symptom_never_the_place_of_the_fix() -> None:
    _, items = read_pool(pool_dir())
    edits = {item["id"]: len(item.get("edits") or [item]) for item in items if item["type"] == "task"}
    for entry in TASKS:
        task = entry.task
        paths = task.changed_paths()
        assert len(paths) == edits[task.id] == (2 if entry.bug_kind == TWO_FILES else len(paths)), task.id
        assert len(paths) == 1 or entry.bug_kind in (TWO_FILES, REVERTED_FIX), task.id
        assert entry.fail_to_pass and set(entry.fail_to_pass) <= set(task.hidden_ids)
        assert all(path not in task.statement for path in paths), task.id
        assert task.statement.count("fails with") == len(paths), task.id
        assert task.visible_tests in task.start, task.id


# What only our sandbox writes: the boundary the hidden tests call the package through, the
# runner's files and folders, and unittest's run summary (a user pastes the traceback, not that).
HARNESS_MARKS = ("k3_boundary", "/sandbox/", "program.py", "hidden_tests", "K3_")


def test_a_report_holds_nothing_of_the_harness() -> None:
    for entry in TASKS:
        statement = entry.task.statement
        assert not [mark for mark in HARNESS_MARKS if mark in statement], (entry.task.id, statement)
        assert not re.search(r"^\s*(?:-{50,}|Ran \d+ tests?|FAILED \()", statement, re.M), (entry.task.id, statement)


def test_every_reproducer_is_the_test_s_source() -> None:
    """Also a test a mixin defines in another file (cachetools' tests/__init__.py): its name
    alone is no reproducer."""
    for entry in TASKS:
        reproducers = re.findall(r"shows it:\n\n    (.*)", entry.task.statement)
        assert reproducers and all(line.startswith(("def ", "async def ", "@")) for line in reproducers), entry.task.id


def _one_per_project() -> list[PoolTask]:
    seen: dict[str, PoolTask] = {}
    for task in TASKS:
        seen.setdefault(task.project, task)
    # And every real bug: there are few, and each is a fix the project made; and a few bugs in two files.
    return [*seen.values(), *REAL, *TWO[:3]]


REAL = [task for task in TASKS if task.bug_kind == REVERTED_FIX]
TWO = [task for task in TASKS if task.bug_kind == TWO_FILES]


def test_real_bugs_come_from_the_projects_public_history_after_every_mutant() -> None:
    _, items = read_pool(pool_dir())
    real = [item for item in items if item.get("bug_kind") == REVERTED_FIX]
    assert len(real) == len(REAL) >= 5 and len({item["project"] for item in real}) >= 3
    # After the mutants and before the bugs in two files: the default run's first tasks are the
    # same with or without either.
    tail = TASKS[-len(REAL) - len(TWO) :]
    assert [task.bug_kind for task in tail] == [REVERTED_FIX] * len(REAL) + [TWO_FILES] * len(TWO)
    histories = {source["name"]: source.get("history", "") for source in pool_provenance()["sources"]}
    for item in real:
        repo, _, head = histories[item["project"]].removeprefix("github:").partition("@")
        commit = item["detail"].split()[1].rstrip(":")
        assert item["source"] == f"github:{repo}@{commit}" and len(commit) == len(head) == 40, item["id"]


def test_a_real_fix_is_taken_back_out_only_where_it_stands_in_one_function() -> None:
    source = "def f(x):\n    if x > 0:\n        return x\n    return -x\n\n\ndef g(y):\n    return y + 1\n"
    fix = ("    if x >= 0:\n        return x\n", "    if x > 0:\n        return x\n")
    found = reverted_fix("m.py", source, [fix], "commit abc: fix f")
    assert found is not None and found.function == "f" and found.kind == REVERTED_FIX
    assert source.replace(found.original, found.mutated).count("x >= 0") == 1
    # Lines not in the release as the fix wrote them, or a fix spread over two functions: none.
    assert reverted_fix("m.py", source, [("    return x\n", "    return x + 0\n")], "d") is None
    both = [fix, ("    return y - 1\n", "    return y + 1\n")]
    assert reverted_fix("m.py", source, both, "d") is None


def _builder(monkeypatch: pytest.MonkeyPatch) -> Any:
    spec = importlib.util.spec_from_file_location("build_swe_mutants", REPO / "fixtures/pools/build_swe_mutants.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Its dataclasses look their module up by name.
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", message], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_a_real_fix_of_two_files_is_taken_back_out_of_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder's history step (fixtures/pools/build_swe_mutants.py): a fix of one function in
    each of two package files is one candidate of two halves, both put back as they were; a fix
    of three files, or one whose change to a file is not within one function, is none."""
    builder = _builder(monkeypatch)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    buggy = {
        "pkg/a.py": "def f(x):\n    y = x\n    z = y > 0\n    w = z\n    return w\n\n\ndef h(x):\n    return x\n",
        "pkg/b.py": "def g(x):\n    y = x\n    z = y < 0\n    w = z\n    return w\n",
        **{f"pkg/{name}.py": f"def {name}(x):\n    return 1\n" for name in "cde"},
        "tests/test_pkg.py": "def test_f():\n    pass\n",
    }
    _commit(repo, buggy, "start")
    fixed = {
        **buggy,
        "pkg/a.py": buggy["pkg/a.py"].replace("y > 0", "y >= 0"),
        "pkg/b.py": buggy["pkg/b.py"].replace("y < 0", "y <= 0"),
    }
    fix = _commit(repo, {**fixed, "tests/test_pkg.py": "def test_f():\n    assert True\n"}, "fix the boundary")
    # Three files at once; and two files, one of them changed where its context spans two functions: none.
    release = {**fixed, **{f"pkg/{name}.py": f"def {name}(x):\n    return 2\n" for name in "cde"}}
    _commit(repo, {**release, "tests/test_pkg.py": "def test_f():\n    assert 1\n"}, "three files")
    release = {**release, "pkg/a.py": release["pkg/a.py"].replace("return x\n", "return -x\n")}
    release["pkg/c.py"] = "def c(x):\n    return 3\n"
    head = _commit(repo, {**release, "tests/test_pkg.py": "def test_f():\n    assert 2\n"}, "two functions")
    monkeypatch.setattr(builder, "HISTORY", {"demo": ("owner/demo", head)})
    project = builder.Project("demo", "1", "0" * 64, "MIT", "", ("pkg",), "tests", ("test_pkg.py",), ("pkg/a.py",))
    files = {name: text for name, text in release.items() if name.startswith("pkg/")}
    (found,) = builder.history_candidates(project, files, repo)
    assert [(half.path, half.function, half.kind) for half in found] == [
        ("pkg/a.py", "f", REVERTED_FIX),
        ("pkg/b.py", "g", REVERTED_FIX),
    ]
    assert all(half.detail == f"commit {fix}: fix the boundary" for half in found)
    started = {half.path: files[half.path].replace(half.original, half.mutated) for half in found}
    assert started == {"pkg/a.py": release["pkg/a.py"].replace("y >= 0", "y > 0"), "pkg/b.py": buggy["pkg/b.py"]}


@pytest.mark.parametrize("entry", _one_per_project(), ids=lambda entry: entry.task.id)
def test_the_start_fails_the_broken_tests_and_the_reference_passes_them_all(entry: PoolTask) -> None:
    task = entry.task
    start = asyncio.run(Workspace(dict(task.start), POOL).hidden_tests(task.hidden, task.hidden_ids))
    assert not start.passed and start.report is not None
    assert sorted(set(task.hidden_ids) - start.report.passed) == list(entry.fail_to_pass)
    solved = asyncio.run(Workspace(dict(task.solution), POOL).hidden_tests(task.hidden, task.hidden_ids))
    assert solved.passed, solved.reason


def test_bugs_in_two_files_come_from_both_and_fixing_one_file_alone_does_not_solve_the_task() -> None:
    _, items = read_pool(pool_dir())
    two = [item for item in items if item.get("bug_kind") == TWO_FILES]
    assert len(two) == len(TWO) >= 20 and len({item["project"] for item in two}) >= 5
    for item in two:
        assert [edit["bug_kind"] for edit in item["edits"]] != [] and all(
            edit["bug_kind"] in BUG_KINDS for edit in item["edits"]
        ), item["id"]
    # The property that makes it one task of two files: either file fixed alone leaves tests failing.
    for entry in TWO[:2]:
        task = entry.task
        for fixed in task.changed_paths():
            half = {**task.start, fixed: task.solution[fixed]}
            outcome = asyncio.run(Workspace(half, POOL).hidden_tests(task.hidden, task.hidden_ids))
            assert not outcome.passed and outcome.report is not None, (task.id, fixed)


def test_the_reference_deployment_plays_a_task_of_two_files_with_an_edit_in_each() -> None:
    task = TWO[0].task
    script = agent_play._script(task, correct=True)
    edits = [arguments for name, arguments in script if name == "str_replace_editor"]
    files = dict(task.start)
    for edit in edits:
        files[edit["path"]] = files[edit["path"]].replace(edit["old_str"], edit["new_str"])
    assert [edit["path"] for edit in edits] == task.changed_paths() and files == task.solution


def test_the_reference_deployment_plays_a_pool_task_from_its_answer_key() -> None:
    task = TASKS[0].task
    script = agent_play._script(task, correct=True)
    names = [name for name, _ in script]
    assert names[0] == "list_files" and names[-2:] == ["run_tests", "finish"]
    reads = [arguments["path"] for name, arguments in script if name == "read_file"]
    assert reads == [*task.changed_paths(), task.visible_tests]
    # The whole function the bug is in, rewritten with the editor of the open coding agents.
    (edit,) = [arguments for name, arguments in script if name == "str_replace_editor"]
    (path,) = task.changed_paths()
    assert edit["old_str"].lstrip().startswith(("def ", "async def ", "@"))
    assert task.start[path].replace(edit["old_str"], edit["new_str"]) == task.solution[path]


def test_mutants_change_one_place_of_one_function_by_every_kind() -> None:
    source = (
        "def f(items, limit):\n"
        "    '''Doc.'''\n"
        "    if not items:\n"
        "        return []\n"
        "    total = 0\n"
        "    for item in items:\n"
        "        if item < limit and item != 3:\n"
        "            total = total + item\n"
        "        else:\n"
        "            total -= 1\n"
        "    return sorted(items, key=abs)[:2] + [max(total, limit)]\n"
    )
    found = mutants("m.py", source)
    assert {mutant.kind for mutant in found} == set(BUG_KINDS)
    for mutant in found:
        changed = source.replace(mutant.original, mutant.mutated)
        assert changed != source and json.dumps(mutant.detail)
        compile(changed, "m.py", "exec")
        # Nothing outside the function moves, and the docstring stays.
        assert "'''Doc.'''" in changed


def test_the_docs_show_the_pools_projects_as_its_manifest_has_them() -> None:
    table = summary_table(pool_provenance()["sources"])
    assert table in (REPO / "docs" / "suites.md").read_text(encoding="utf-8")


def _played(profile: str, task: AgentTask) -> list[SimulatedTurn]:
    """The scripted agent's turns on `task` against the reference deployment, each read_file
    answered with the file as the sandbox would return it (the context a real repository makes)."""
    simulator = Simulator(get_profile(profile), AnswerKey.load(REPO / "fixtures"), "kimi-k3")
    history: list[dict[str, object]] = [{"role": "user", "content": task_prompt(task)}]
    turns = []
    for _ in range(8):
        turn = simulator.complete({"messages": history, "tools": list(TOOL_SPECS), "seed": 1234, "max_tokens": 8192})
        turns.append(turn)
        if turn.finish_reason != "tool_calls" or turn.tool_calls[0].name == "finish":
            break
        call = turn.tool_calls[0]
        arguments = json.loads(call.arguments)
        result = task.start.get(arguments.get("path", ""), "ok") if call.name == "read_file" else "ok"
        history += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            ]},
            {"role": "tool", "tool_call_id": call.id, "content": result},
        ]  # fmt: skip
    return turns


def test_megamoe_loops_on_the_long_turns_of_real_repositories_and_tp8_never() -> None:
    """The same length mechanism as on the authored tasks: the whole function rewritten (its
    drafts) and the real files read make long outputs and contexts, where the fused kernel loops."""
    sample = [entry.task for entry in TASKS[:16]]
    looping = {
        profile: sum(any(turn.finish_reason == "length" for turn in _played(profile, task)) for task in sample)
        for profile in ("tp8", "ep32-megamoe")
    }
    assert looping["tp8"] == 0 and looping["ep32-megamoe"] >= 2, looping
