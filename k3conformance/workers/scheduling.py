"""pytest-xdist support: each worker learns its whole share of items up front.

xdist's default `load` scheduling hands items out in small batches as workers finish
them, so a worker cannot send the requests of tests it has not been given yet. With
`ShareScheduling` (used in place of `load`), every worker gets its whole share at once; a
worker computes the same share itself from the same collection and keeps its requests
in flight ahead of its tests. Items moved to another worker after a crash are simply
sent when they run.

Several tests share one probe (`test_a[pong]`, `test_b[plain-pong]`): all tests of one
probe go to the same worker, so the probe is sent once. Only workers know which probe a
test uses; they write that map next to the run before reporting their collection, and the
scheduler reads it (falling back to grouping by module and parameter id).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScheduling

from k3conformance.outcomes import probe_of


def worker_rank(gateway_id: str) -> int:
    """gw3 -> 3; -1 for an id of another form."""
    digits = gateway_id.removeprefix("gw")
    return int(digits) if digits.isdigit() else -1


def probe_group(nodeid: str) -> str:
    """`suites/test_smoke.py::test_usage[pong]` -> `suites/test_smoke.py::[pong]`."""
    module, _, rest = nodeid.partition("::")
    _name, bracket, params = rest.partition("[")
    return f"{module}::[{params}" if bracket else nodeid


def probe_groups(items: list[pytest.Item]) -> dict[str, str]:
    """nodeid -> the probe it uses, for the items that use one."""
    groups: dict[str, str] = {}
    for item in items:
        probe = probe_of(item)
        if probe is not None:
            groups[item.nodeid] = f"{probe.suite}/{probe.item}"
    return groups


def write_probe_groups(path: Path, groups: Mapping[str, str]) -> None:
    # Every worker writes the same map; the rename makes each write whole.
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(groups))
    os.replace(temporary, path)


def read_probe_groups(path: Path) -> dict[str, str]:
    try:
        groups = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return groups if isinstance(groups, dict) else {}


def assign_ranks(nodeids: list[str], count: int, groups: Mapping[str, str]) -> list[int]:
    """The worker rank of each item: probe groups dealt round-robin in collection order."""
    group_rank: dict[str, int] = {}
    ranks = []
    for nodeid in nodeids:
        group = groups.get(nodeid) or probe_group(nodeid)
        if group not in group_rank:
            group_rank[group] = len(group_rank) % count
        ranks.append(group_rank[group])
    return ranks


def uses_share_scheduling(config: pytest.Config) -> bool:
    return bool(config.getvalue("dist") == "load")


class ShareScheduling(LoadScheduling):  # type: ignore[misc]
    collection: list[str] | None

    def __init__(self, config: pytest.Config, log: Any, groups_file: Path) -> None:
        super().__init__(config, log)
        self.groups_file = groups_file

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        collection: list[str] = next(iter(self.node2collection.values()))
        self.collection = collection
        if not collection:
            return
        ranks = assign_ranks(collection, len(self.nodes), read_probe_groups(self.groups_file))
        assigned: set[int] = set()
        for node in self.nodes:
            rank = worker_rank(node.gateway.id)
            share = [index for index, owner in enumerate(ranks) if owner == rank]
            if share:
                assigned.update(share)
                self.node2pending[node].extend(share)
                node.send_runtest_some(share)
        # Whatever no rank claimed is handed out the usual way, as it is asked for.
        self.pending[:] = [index for index in range(len(collection)) if index not in assigned]
        for node in self.nodes:
            self.check_schedule(node)


def share_of(items: list[pytest.Item], workerinput: dict[str, Any]) -> list[pytest.Item]:
    rank, count = worker_rank(str(workerinput["workerid"])), int(workerinput["workercount"])
    ranks = assign_ranks([item.nodeid for item in items], count, probe_groups(items))
    return [item for item, owner in zip(items, ranks, strict=True) if owner == rank]
