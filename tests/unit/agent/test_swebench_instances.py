"""SWE-bench-shaped instances (issue 33): one whose repository the sandbox carries offline
loads through `file:` and runs (its gold patch passes its tests, its base fails them); one whose
environment cannot be built offline is refused with the reason, never scored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from k3conformance.agent.swebench import PatchError, Refused, apply_patch, load_instances
from k3conformance.agent.tasks import AgentTask
from k3conformance.agent.tools import Workspace
from k3conformance.datasets.bundled import fixtures_dir
from k3conformance.sandbox import SandboxPool

INSTANCES = fixtures_dir() / "swebench" / "instances.jsonl"


def test_an_offline_instance_runs_and_an_unbuildable_one_is_refused_with_its_reason() -> None:
    name, revision, loaded = load_instances(f"file:{INSTANCES}")
    assert name == f"file:{INSTANCES}" and len(revision) == 64
    task, refused = loaded
    assert isinstance(task, AgentTask) and isinstance(refused, Refused)
    assert "cannot be built offline" in refused.reason and "django/django" in refused.reason
    assert task.hidden_ids == (
        "hidden_tests.test_keys.CacheKeysTest.test_hashkey",
        "hidden_tests.test_keys.CacheKeysTest.test_sortedkey",
    )
    assert (
        "def test_sortedkey" in task.start["tests/test_keys.py"] and "sortedkey" not in task.start["cachetools/keys.py"]
    )
    pool = SandboxPool(1)
    base = asyncio.run(Workspace(dict(task.start), pool).hidden_tests(task.hidden, task.hidden_ids))
    gold = asyncio.run(Workspace(dict(task.solution), pool).hidden_tests(task.hidden, task.hidden_ids))
    assert not base.passed and gold.passed, (base.reason, gold.reason)


def test_an_instance_whose_patch_does_not_apply_is_refused(tmp_path: Path) -> None:
    instance = json.loads(INSTANCES.read_text().splitlines()[0])
    context = "\n     return key + tuple(map(type, args))\n"
    assert context in instance["patch"]
    instance["patch"] = instance["patch"].replace(context, "\n     return something_else\n")
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(instance) + "\n")
    (refused,) = load_instances(f"file:{path}")[2]
    assert isinstance(refused, Refused) and "cannot be built" in refused.reason


def test_a_patch_applies_where_its_context_is_and_nowhere_else() -> None:
    files = {"a.py": "one\ntwo\nthree\n"}
    patch = "--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x\n"
    assert apply_patch(files, patch) == {"a.py": "one\n2\nthree\n", "new.py": "x\n"}
    with pytest.raises(PatchError):
        apply_patch(files, patch.replace(" one\n", " uno\n"))
