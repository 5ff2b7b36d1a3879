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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from xdist.workermanage import parse_tx_spec_config

from k3conformance.probes.probe import probe_of


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


class ShareScheduling:
    """xdist's `Scheduling` protocol (`xdist.scheduler.protocol`), written against the protocol
    rather than by subclassing `LoadScheduling`, whose internals change between releases.

    Each worker gets its whole share (`assign_ranks`) at once; what no rank claims, and what
    a crashed worker left, is handed out two at a time as workers ask for it.
    """

    def __init__(self, config: pytest.Config, log: Any, groups_file: Path) -> None:
        self.numnodes = len(parse_tx_spec_config(config))
        self.log = log
        self.groups_file = groups_file
        self.node2collection: dict[Any, list[str]] = {}
        self.node2pending: dict[Any, list[int]] = {}
        self.pending: list[int] = []
        self.collection: list[str] | None = None

    @property
    def nodes(self) -> list[Any]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        # A worker runs a test once it knows the next one (or is told to stop), so one
        # pending item per worker is as good as done.
        return (
            self.collection_is_completed
            and not self.pending
            and all(len(pending) < 2 for pending in self.node2pending.values())
        )

    @property
    def has_pending(self) -> bool:
        return bool(self.pending) or any(self.node2pending.values())

    def add_node(self, node: Any) -> None:
        self.node2pending[node] = []

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        self.node2collection[node] = list(collection)

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        self.node2pending[node].remove(item_index)
        self._top_up(node)

    def mark_test_pending(self, item: str) -> None:
        assert self.collection is not None
        self.pending.insert(0, self.collection.index(item))
        for node in self.nodes:
            self._top_up(node)

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        removed = set(indices)
        self.node2pending[node] = [index for index in self.node2pending[node] if index not in removed]
        self.pending.extend(sorted(removed))
        for other in self.nodes:
            self._top_up(other)

    def remove_node(self, node: Any) -> str | None:
        """A worker went away: the test it was running crashed it; the rest of its share goes to the others."""
        pending = self.node2pending.pop(node)
        if not pending:
            return None
        assert self.collection is not None
        crashed = self.collection[pending.pop(0)]
        self.pending.extend(pending)
        for other in self.nodes:
            self._top_up(other)
        return crashed

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self._top_up(node)
            return
        collections = list(self.node2collection.values())
        if any(collection != collections[0] for collection in collections[1:]):
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = collections[0]
        if not self.collection:
            return
        ranks = assign_ranks(self.collection, len(self.nodes), read_probe_groups(self.groups_file))
        assigned: set[int] = set()
        for node in self.nodes:
            rank = worker_rank(node.gateway.id)
            share = [index for index, owner in enumerate(ranks) if owner == rank]
            if share:
                assigned.update(share)
                self.node2pending[node].extend(share)
                node.send_runtest_some(share)
        self.pending = [index for index in range(len(self.collection)) if index not in assigned]
        for node in self.nodes:
            self._top_up(node)

    def _top_up(self, node: Any) -> None:
        if node.shutting_down:
            return
        if not self.pending:
            # Nothing left to hand out: the worker finishes its queue and stops.
            node.shutdown()
            return
        wanted = 2 - len(self.node2pending[node])
        if wanted > 0:
            batch, self.pending = self.pending[:wanted], self.pending[wanted:]
            self.node2pending[node].extend(batch)
            node.send_runtest_some(batch)


def share_of(items: list[pytest.Item], workerinput: dict[str, Any]) -> list[pytest.Item]:
    rank, count = worker_rank(str(workerinput["workerid"])), int(workerinput["workercount"])
    ranks = assign_ranks([item.nodeid for item in items], count, probe_groups(items))
    return [item for item, owner in zip(items, ranks, strict=True) if owner == rank]
