"""Tasks in the shape of SWE-bench instances, brought by the user (`file:` or `hub:` specs).

An instance has `instance_id`, `repo`, `base_commit` and/or `version`, `problem_statement`,
`patch` (the gold fix), `test_patch` (the tests that show it), `FAIL_TO_PASS` and
`PASS_TO_PASS` (pytest node ids, as SWE-bench writes them, in JSON lists or as JSON text).

Nothing is fetched at run time, so an instance runs only where its environment can be built
offline in the sandbox: its repository at its version must be one of the projects the
real-repository pool carries (pool_tasks.py: a PyPI sdist pinned by hash, nothing to
install), its patches must apply, and its tests must be ones the verdict can name. Any other
instance is refused with the reason (`Refused`), never scored. The task built is a pool-style
task: the repository at its base (with the test patch's tests visible, as SWE-bench's harness
has them at evaluation), the gold patch as the reference solution, and the FAIL_TO_PASS and
PASS_TO_PASS tests as the deciding hidden tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from k3conformance.agent.pool_tasks import load_pool_tasks, pool_dir, read_pool
from k3conformance.agent.tasks import HIDDEN_DIR, AgentTask
from k3conformance.datasets.sources import DatasetSpec, FieldMap, load_dataset_items

FIELDS = FieldMap(
    id="instance_id",
    prompt="problem_statement",
    answer="patch",
    extra=("repo", "base_commit", "version", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS"),
)
OPTION = "--k3-agent-instances"


class PatchError(ValueError):
    """A patch that does not apply to the files it names."""


@dataclass(frozen=True)
class Refused:
    instance_id: str
    reason: str


def load_instances(spec: DatasetSpec | str, limit: int | None = None) -> tuple[str, str, list[AgentTask | Refused]]:
    """The instances `spec` names, each a task or refused with its reason; and the data's name
    and revision for the run's identity."""
    loaded = load_dataset_items(spec, limit=limit, fields=FIELDS, option=OPTION)
    projects = _offline_projects()
    return loaded.name, loaded.revision, [instance_task(item, projects) for item in loaded.items]


def _offline_projects() -> dict[tuple[str, str], Mapping[str, Any]]:
    if not pool_dir().is_dir():
        return {}
    _, items = read_pool(pool_dir())
    load_pool_tasks()  # the hash check, once
    return {(item["name"], item["version"]): item for item in items if item.get("type") == "project"}


def instance_task(
    item: Mapping[str, Any], projects: Mapping[tuple[str, str], Mapping[str, Any]]
) -> AgentTask | Refused:
    instance = str(item["id"])
    repo = str(item.get("repo") or "")
    name = repo.removeprefix("pypi:").rpartition("/")[2]
    version = str(item.get("version") or "")
    project = projects.get((name, version))
    if project is None:
        offline = ", ".join(f"{n}=={v}" for n, v in sorted(projects)) or "none"
        return Refused(
            instance,
            f"its environment cannot be built offline: {repo or '(no repo)'} at version {version or '(none)'} is not "
            f"a project the sandbox carries (offline projects: {offline}); nothing is fetched at run time",
        )
    try:
        start = apply_patch(project["files"], str(item.get("test_patch") or ""))
        solution = apply_patch(start, str(item["answer"]))
        ids = [_unittest_id(node) for node in [*_tests(item.get("FAIL_TO_PASS")), *_tests(item.get("PASS_TO_PASS"))]]
    except (PatchError, ValueError) as error:
        return Refused(instance, f"its environment cannot be built: {error}")
    if not ids:
        return Refused(instance, "it names no FAIL_TO_PASS test")
    tests_root = _tests_root(project)
    hidden = {
        f"{HIDDEN_DIR}/{path.removeprefix(tests_root)}": text
        for path, text in start.items()
        if path.startswith(tests_root) and path.endswith(".py")
    }
    hidden.setdefault(f"{HIDDEN_DIR}/__init__.py", "")
    missing = [test for test in ids if f"{HIDDEN_DIR}/{test.split('.')[1]}.py" not in hidden]
    if missing:
        return Refused(instance, f"its tests are not in the repository's test folder: {', '.join(missing[:3])}")
    return AgentTask(
        id=instance,
        family=name,
        kind="bugfix",
        difficulty=2,
        statement=str(item["prompt"]),
        start=start,
        solution=solution,
        hidden=hidden,
        hidden_ids=tuple(sorted(set(ids))),
        visible_tests=tests_root + ids[0].split(".")[1] + ".py",
    )


def _tests_root(project: Mapping[str, Any]) -> str:
    hidden_files = [path.removeprefix(f"{HIDDEN_DIR}/") for path in project["hidden"]]
    for path in project["files"]:
        for name in hidden_files:
            if name != "__init__.py" and path.endswith("/" + name):
                return str(path)[: -len(name)]
    return ""


def _tests(value: Any) -> list[str]:
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else []
    if not isinstance(value, list) or not all(isinstance(test, str) for test in value):
        raise ValueError(f"FAIL_TO_PASS and PASS_TO_PASS must be lists of test ids, got {value!r}")
    return list(value)


def _unittest_id(node: str) -> str:
    """A pytest node id (tests/test_x.py::Class::test_y, or ::test_y) as the verdict names it."""
    path, _, rest = node.partition("::")
    if not path.endswith(".py") or not rest or "[" in rest:
        raise ValueError(f"test {node!r} is not a file::[Class::]test id the verdict can run")
    module = path.removesuffix(".py").rpartition("/")[2]
    parts = rest.split("::")
    return ".".join([HIDDEN_DIR, module, *(parts if len(parts) == 2 else ["functions", *parts])])


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_patch(files: Mapping[str, str], patch: str) -> dict[str, str]:
    """`files` with a unified diff (git's format) applied; PatchError where it does not apply."""
    result = dict(files)
    for new_path, old_name, hunks in _file_diffs(patch):
        # Upstream's src/ layout: the sandbox has the package at the repository's top.
        path, old_path = (_in_layout(name, result) for name in (new_path, old_name))
        if old_path is None:
            lines: list[str] = []
        elif old_path not in result:
            raise PatchError(f"the patch changes {old_path}, which the repository does not have")
        else:
            lines = result[old_path].splitlines(keepends=True)
        offset = 0
        for start, body in hunks:
            old = [line[1:] for line in body if line[:1] in (" ", "-")]
            new = [line[1:] for line in body if line[:1] in (" ", "+")]
            at = max(0, start - 1 + offset)
            if lines[at : at + len(old)] != old:
                found = [i for i in range(len(lines) - len(old) + 1) if lines[i : i + len(old)] == old]
                if len(found) != 1:
                    raise PatchError(f"a hunk of the patch does not apply to {path}")
                at = found[0]
            lines[at : at + len(old)] = new
            # Later hunks' line numbers are the old file's: shift by what this one moved and grew.
            offset = at - (start - 1) + len(new) - len(old)
        if path is None:
            result.pop(old_path or "", None)
        else:
            result[path] = "".join(lines)
    return result


def _in_layout(name: str | None, files: Mapping[str, str]) -> str | None:
    if name is not None and name not in files and name.startswith("src/") and name[4:] in files:
        return name[4:]
    return name


def _file_diffs(patch: str) -> list[tuple[str | None, str | None, list[tuple[int, list[str]]]]]:
    diffs: list[tuple[str | None, str | None, list[tuple[int, list[str]]]]] = []
    lines = patch.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        if not lines[index].startswith("--- ") or index + 1 >= len(lines) or not lines[index + 1].startswith("+++ "):
            index += 1
            continue
        old, new = _diff_path(lines[index]), _diff_path(lines[index + 1])
        index += 2
        hunks: list[tuple[int, list[str]]] = []
        while index < len(lines) and (match := _HUNK.match(lines[index])):
            old_count = int(match.group(2) or 1)
            new_count = int(match.group(4) or 1)
            body: list[str] = []
            index += 1
            while index < len(lines) and (old_count > 0 or new_count > 0):
                line = lines[index]
                if line.startswith("\\"):
                    index += 1
                    continue
                line = line if line[:1] in (" ", "-", "+") else " " + line  # an empty context line
                body.append(line if line.endswith("\n") else line + "\n")
                old_count -= line[:1] in (" ", "-")
                new_count -= line[:1] in (" ", "+")
                index += 1
            hunks.append((int(match.group(1)), body))
        diffs.append((new, old, hunks))
    if not diffs and patch.strip():
        raise PatchError("the patch holds no unified diff")
    return diffs


def _diff_path(line: str) -> str | None:
    name = line[4:].strip().split("\t")[0]
    if name == "/dev/null":
        return None
    return name[2:] if name.startswith(("a/", "b/")) else name


def refusals(tasks: Sequence[AgentTask | Refused]) -> list[Refused]:
    return [task for task in tasks if isinstance(task, Refused)]
