"""Controller-side xdist hooks: hand workers the run, merge what they report back."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from xdist.scheduler.protocol import Scheduling

from k3conformance.run.scheduling import ShareScheduling, uses_share_scheduling
from k3conformance.run.state import WORKERINPUT_KEY, WORKEROUTPUT_KEY, RunState


class XdistHooks:
    def __init__(self, state: RunState, config: pytest.Config) -> None:
        self.state = state
        self.config = config
        self._scratch = Path(tempfile.mkdtemp(prefix="k3conformance-"))
        self.groups_file = self._scratch / "probe-groups.json"

    def pytest_configure_node(self, node: Any) -> None:
        shared = self.state.to_workerinput(uses_share_scheduling(self.config))
        shared["groups_file"] = str(self.groups_file)
        node.workerinput[WORKERINPUT_KEY] = shared

    def pytest_unconfigure(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        # A crashed worker reports nothing; its records are on disk all the same.
        report = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        if not report:
            return
        self.state.stats.merge(report["stats"])
        self.state.chain_heads.update(report.get("records_chain") or {})
        for suite, entry in report["datasets"].items():
            merged = self.state.datasets.setdefault(suite, {"items": []})
            for key in ("dataset", "dataset_sha256"):
                if key in entry:
                    merged[key] = entry[key]
            merged["items"] = sorted(set(merged["items"]) | set(entry["items"]))
            for key in ("sources", "item_sha256", "pools"):
                if key in entry:
                    merged.setdefault(key, {}).update(entry[key])  # type: ignore[misc]

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Scheduling | None:
        return ShareScheduling(config, log, self.groups_file) if uses_share_scheduling(config) else None
