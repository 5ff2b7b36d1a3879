"""The state of one k3conformance run inside a pytest session, kept in `config.stash`.

Roles: a single process does everything; under xdist the controller resolves the
endpoint, writes the run summary and merges what the workers report, and each worker
sends the requests of its share and writes its own records file.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from k3conformance import __version__
from k3conformance.endpoint.resolved import ResolvedEndpoint
from k3conformance.endpoint.url import is_reference
from k3conformance.options import Settings
from k3conformance.probes.counters import RequestCounters
from k3conformance.runs.chain import ChainHeads, file_anchor, last_chain
from k3conformance.runs.records import (
    STATUS_COMPLETE,
    STATUS_INCOMPLETE,
    STATUS_INTERRUPTED,
    STATUS_RUNNING,
    SUMMARY_FILE,
    MisfiledRun,
    RecordWriter,
    ResumeIndex,
    expand_records,
    iter_whole_lines,
    latest_incomplete_run,
    new_run_id,
    read_summary,
    record_files,
    records_file,
    utc_now,
    write_json_atomic,
)
from k3conformance.runs.schema import DatasetEntry, RunStatus, RunSummary, Selection
from k3conformance.scoring.suite_tally import SuiteTally

if TYPE_CHECKING:
    from k3conformance.endpoint.reference_process import ReferenceProcess
    from k3conformance.gate.sequential.state import SequentialRun
    from k3conformance.gate.verdict import GateResult
    from k3conformance.probes.runner import BackgroundLoop, Runner
    from k3conformance.run.progress import Waiter
    from k3conformance.runs.stored import StoredRun

Role = Literal["single", "controller", "worker"]
WORKERINPUT_KEY = "k3conformance"
WORKEROUTPUT_KEY = "k3conformance"
# Settings fields that describe the run; the API key is not among them.
_PROVENANCE_SETTINGS = (
    "think_mode",
    "reasoning_effort",
    "temperature",
    "top_p",
    "seed",
    "samples",
    "suite_samples",
    "limit",
    "max_tokens",
    "concurrency",
    "timeout",
    "retries",
    "agent_turns",
    "agent_tokens",
    "agent_wall_time",
    "agent_tools",
    "agent_tool_choice",
    "agent_thinking",
    "context_lengths",
    "cache_prompt_words",
    # The sequential plan's options: compare's replay recomputes the run's design from the baseline with them.
    "looks",
    "max_items",
    "sample_rounds",
)


def shape_label(settings: Settings) -> str:
    if settings.shape:
        return settings.shape
    if is_reference(settings.endpoint):
        from k3conformance.reference.profiles import endpoint_profile

        return f"reference-{endpoint_profile(settings.endpoint)}"
    return "unlabelled"


class BaselineViews:
    """What the run derives from its baseline beyond the summary, computed once per session: its A/A
    partner (a scan and validation of every neighbouring run). The item totals are kept by the
    baseline itself (`StoredRun.item_totals`)."""

    def __init__(self, baseline: StoredRun) -> None:
        self.baseline = baseline

    @cached_property
    def partner(self) -> StoredRun | None:
        from k3conformance.gate.sequential.plan import a_a_partner

        return a_a_partner(self.baseline)


@dataclass
class RunState:
    settings: Settings
    role: Role
    process: str
    shape: str
    run_dir: Path
    resumed: bool
    started_at: str = field(default_factory=utc_now)
    status: RunStatus = STATUS_RUNNING
    endpoint: ResolvedEndpoint | None = None
    reference: ReferenceProcess | None = None
    loop: BackgroundLoop | None = None
    runner: Runner | None = None
    writer: RecordWriter | None = None
    # Whether this worker's share of items is known up front (our xdist scheduler).
    share_known: bool = False
    # Where a worker tells the xdist scheduler which probe each test uses.
    groups_file: Path | None = None
    stats: RequestCounters = field(default_factory=RequestCounters)
    tallies: dict[str, SuiteTally] = field(default_factory=dict)
    # Per records file, the head its summary seals (runs/chain.py): files of earlier sessions and of
    # xdist workers; this process's own writer adds its file's when the summary is written.
    chain_heads: ChainHeads = field(default_factory=dict)
    datasets: dict[str, DatasetEntry] = field(default_factory=dict)
    # How the tests were chosen (-k, -m, --k3-limit) and how many were left out.
    selection: Selection = field(
        default_factory=lambda: Selection(keyword=None, markers=None, limit=None, deselected=0, subset=False)
    )
    # Vendor-only tests left out without --k3-vendor (counted in selection.deselected, not a subset).
    vendor_deselected: int = 0
    # Why --k3-save-baseline did not store this run as a baseline (run/admission.py); empty when it did.
    baseline_refused: list[str] = field(default_factory=list)
    # The --k3-server-args file, read at configure time.
    launch: dict[str, Any] | None = None
    # The run gated against, loaded at configure time (controller or single process only).
    baseline: StoredRun | None = None
    # The baseline's views derived from its neighbours, looked up once per session.
    baseline_views: BaselineViews | None = None
    gate_result: GateResult | None = None
    # The sequential gate of this run's accuracy suites (single process with a baseline only).
    sequential: SequentialRun | None = None
    # What the progress line shows while a test waits (run/progress.py); None: no line (xdist worker).
    waiter: Waiter | None = None

    @classmethod
    def for_process(cls, config: pytest.Config, settings: Settings) -> RunState:
        workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        if workerinput is not None:
            shared = workerinput[WORKERINPUT_KEY]
            state = cls(
                settings=settings,
                role="worker",
                process=str(workerinput["workerid"]),
                shape=shared["shape"],
                run_dir=Path(shared["run_dir"]),
                resumed=shared["resumed"],
                share_known=shared["share_known"],
                groups_file=Path(shared["groups_file"]) if shared.get("groups_file") else None,
            )
            if shared["endpoint"] is not None:
                state.endpoint = ResolvedEndpoint.from_wire(shared["endpoint"])
            return state
        shape = shape_label(settings)
        shape_dir = settings.results_dir / shape
        resumed = False
        run_dir = shape_dir / new_run_id()
        if settings.resume:
            try:
                earlier = latest_incomplete_run(shape_dir)
            except MisfiledRun as error:
                raise pytest.UsageError(f"--k3-resume: {error}") from None
            if earlier is None:
                raise pytest.UsageError(
                    f"--k3-resume: no incomplete run of shape {shape!r} under {shape_dir}; "
                    "start a new run without --k3-resume"
                )
            run_dir, resumed = earlier, True
            # A session that finished compressed its records: the resumed run appends to them and
            # reads its earlier responses by offset (before any xdist worker starts).
            expand_records(run_dir)
        state = cls(settings=settings, role="single", process="main", shape=shape, run_dir=run_dir, resumed=resumed)
        if resumed:
            # Files no process of this session appends to keep the heads they had.
            for path in record_files(run_dir):
                head, count = last_chain(iter_whole_lines(path))
                if head is not None:
                    state.chain_heads[path.name] = {"head": head, "records": count}
        return state

    def to_workerinput(self, share_known: bool) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "run_dir": str(self.run_dir),
            "resumed": self.resumed,
            "share_known": share_known,
            "endpoint": self.endpoint.to_wire() if self.endpoint else None,
        }

    # Endpoint and results directory, checked before anything runs.

    def ensure_endpoint(self) -> ResolvedEndpoint:
        # The HTTP stack is imported only by sessions that talk to an endpoint.
        from k3conformance.endpoint.errors import EndpointError
        from k3conformance.endpoint.preflight import start_endpoint
        from k3conformance.reference.profiles import endpoint_profile

        if self.endpoint is None:
            try:
                profile = endpoint_profile(self.settings.endpoint) if is_reference(self.settings.endpoint) else None
                self.endpoint, self.reference = start_endpoint(self.settings, self._loop().run, profile)
            except EndpointError as error:
                raise pytest.UsageError(str(error)) from None
        return self.endpoint

    def ensure_results_dir(self) -> None:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            probe = self.run_dir / f".write-test-{self.process}"
            probe.write_text("ok")
            probe.unlink()
        except OSError as error:
            raise pytest.UsageError(
                f"Cannot write run records to {self.run_dir}: {error.strerror or error}. "
                "Choose a writable directory with --k3-results-dir (or k3_results_dir in the ini file)."
            ) from None

    def _loop(self) -> BackgroundLoop:
        from k3conformance.probes.runner import BackgroundLoop

        if self.loop is None:
            self.loop = BackgroundLoop()
        return self.loop

    def ensure_writer(self) -> RecordWriter:
        """This process's records file: every outcome goes there, a test that sent no request too
        (the gate reads the outcomes back as its evidence: gate/evidence.py)."""
        if self.writer is None:
            self.ensure_results_dir()
            path = records_file(self.run_dir, self.process)
            self.writer = RecordWriter(path, self.run_dir.name, file_anchor(self.run_dir, path.name))
        return self.writer

    def ensure_runner(self) -> Runner:
        from k3conformance.probes.runner import Runner

        if self.runner is None:
            endpoint = self.ensure_endpoint()
            writer = self.ensure_writer()
            resume = ResumeIndex(self.run_dir) if self.resumed else None
            self.runner = Runner(
                settings=self.settings,
                base_url=endpoint.base_url,
                model=endpoint.model,
                writer=writer,
                resume=resume,
                loop=self._loop(),
                run_id=self.run_dir.name,
            )
            self.stats = self.runner.stats
        return self.runner

    # The run summary, written by the single process or the controller.

    def note_selection(self, config: pytest.Config, deselected: int) -> None:
        from k3conformance.run.admission import subset_reasons

        keyword = config.option.keyword or None
        markers = config.option.markexpr or None
        total = self.selection["deselected"] + deselected
        # Vendor-only checks left out without --k3-vendor are not a subset of the items: every
        # default run left them out, so `subset` was true for all (issue 21, reproduction 5).
        self.selection = Selection(
            keyword=keyword,
            markers=markers,
            limit=self.settings.limit,
            deselected=total,
            subset=bool(subset_reasons(config, self.settings) or total > self.vendor_deselected),
        )

    def summary(self, status: RunStatus, exit_status: int | None) -> RunSummary:
        earlier = read_summary(self.run_dir) if self.resumed else None
        sessions = list(earlier.get("sessions", [])) if earlier else []
        if status != STATUS_RUNNING:
            sessions.append(
                {"started_at": self.started_at, "finished_at": utc_now(), "status": status, "exit_status": exit_status}
            )
        endpoint = self.endpoint
        return {
            "run_id": self.run_dir.name,
            "shape": self.shape,
            "status": status,
            "baseline": self.settings.save_baseline and not self.baseline_refused,
            "baseline_refused": self.baseline_refused or None,
            "subset_declared": self.settings.subset_baseline,
            "selection": self.selection,
            "launch": self.launch,
            "simulator": bool(endpoint and endpoint.simulator),
            "endpoint": endpoint.display_url if endpoint else None,
            "reference_profile": endpoint.reference_profile if endpoint else None,
            "model": endpoint.model if endpoint else self.settings.model,
            "served_models": endpoint.served_models if endpoint else None,
            "server_info": endpoint.server_info if endpoint else None,
            "shape_settings": self.shape_settings(),
            "settings": {name: getattr(self.settings, name) for name in _PROVENANCE_SETTINGS},
            # The gate's policy in force, stored with a baseline: a later gate under a weaker one says so.
            "policy": self._policy(),
            "started_at": (earlier or {}).get("started_at", self.started_at),
            "finished_at": None if status == STATUS_RUNNING else utc_now(),
            "sessions": sessions,
            "requests": vars(self.stats),
            "suites": {name: tally.to_summary() for name, tally in sorted(self.tallies.items())},
            "datasets": self.datasets,
            "records_chain": self.sealed_heads(),
            "sequential": self.sequential.to_summary() if self.sequential is not None else None,
            "plugin_version": __version__,
            "python": platform.python_version(),
            "pytest": pytest.__version__,
            "platform": sys.platform,
        }

    def sealed_heads(self) -> ChainHeads:
        """Every records file's head, as the summary seals it."""
        heads = dict(self.chain_heads)
        if self.writer is not None:
            heads[self.writer.path.name] = self.writer.sealed_head()
        return heads

    def _policy(self) -> dict[str, Any]:
        from k3conformance.gate.settings import GateSettings

        return GateSettings.from_options(self.settings).policy()

    def recount_requests(self) -> None:
        """Request counts of this session read back from the records: an interrupted xdist
        worker never reports its counts to the controller, but its records are on disk.
        A lower bound: workers may finish requests after the controller has stopped, and
        requests reused from an earlier session write no record."""
        from k3conformance.runs.records import iter_records

        stats = RequestCounters()
        for record in iter_records(self.run_dir, "response"):
            if record.get("finished_at", "") < self.started_at:
                continue
            stats.sent += 1
            stats.attempts += int(record.get("attempts", 1))
            if record.get("status") != "ok":
                stats.count_failure(record["error"]["error_class"])
        self.stats = stats

    def final_status(self, exit_status: int, stopped_early: bool) -> RunStatus:
        if exit_status == pytest.ExitCode.INTERRUPTED:
            return STATUS_INTERRUPTED
        infra = self.stats.infra_errors + sum(t.infra_errors for t in self.tallies.values())
        if infra or stopped_early:
            return STATUS_INCOMPLETE
        return STATUS_COMPLETE

    def shape_settings(self) -> dict[str, Any]:
        """The deployment's defining settings, from the server's own arguments when it
        reports them, else from a registry --k3-shape; and any contradiction between the two."""
        from k3conformance.deployment.cookbook import read_run_shape

        shape = read_run_shape(self.settings.shape, self.endpoint.server_info if self.endpoint else None, self.launch)
        return {
            "settings": asdict(shape.settings) if shape.settings else None,
            "described": shape.described,
            "source": shape.source,
            "contradictions": shape.contradictions,
        }

    def write_summary(self, status: RunStatus, exit_status: int | None = None) -> RunSummary:
        summary = self.summary(status, exit_status)
        if self.run_dir.is_dir():
            write_json_atomic(self.run_dir / SUMMARY_FILE, summary)
        return summary

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()
        if self.writer is not None:
            self.writer.close()
        if self.loop is not None:
            self.loop.close()
        if self.reference is not None:
            self.reference.stop()
            self.reference = None
