"""Runs probes concurrently on a background event loop while pytest runs tests in order.

Before the first test, the process plans the probes of the items it will run and keeps
a window of them in flight ahead of the test that is running, so the endpoint stays
busy and memory stays flat however long the run. A test then only waits for its own
probe. Every request is written to the records file the moment it finishes.

A probe the admission check (`admit`) turns away is held back, not skipped: the window
moves on to the probes after it, and it is sent once admitted or once its own test asks
for it. The sequential gate uses this so that a suite's requests run ahead only as far
as its next decision can use (a look's items), not as far as the window reaches. The load
lane's probe (`Probe.exclusive`) is never sent ahead: it goes when its test asks for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from k3conformance.endpoint.client import EndpointClient, RetryPolicy
from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import ErrorClass, RequestError
from k3conformance.options import Settings
from k3conformance.probes.counters import RequestCounters
from k3conformance.probes.probe import Outcome, Probe, ProbeResult, SampleResult
from k3conformance.probes.request_body import build_body, fingerprint
from k3conformance.runs.chain import new_nonce
from k3conformance.runs.records import RecordWriter, ResumeIndex, utc_now
from k3conformance.runs.schema import ResponseRecord
from k3conformance.runs.spend import Spend

T = TypeVar("T")
# Request fields that shape the generation, not the prompt: a tokenizer endpoint needs none.
GENERATION_ONLY = frozenset(
    {"stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed"}
)
ProbeKey = tuple[str, str]


class BackgroundLoop:
    """An asyncio loop on a daemon thread; the test thread hands it coroutines."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="k3conformance-requests", daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self.submit(coroutine).result(timeout)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


class RunnerExchange:
    """The runner's `Exchange`: `send` builds, sends and records through the runner."""

    def __init__(self, runner: Runner, probe: Probe, sample: int) -> None:
        self._runner = runner
        self.probe = probe
        self.sample = sample
        self.outcomes: dict[str, Outcome] = {}
        self.notes: dict[str, Any] = {}

    def note(self, name: str, value: Any) -> None:
        """Keep something the conversation computed for the test to read (`SampleResult.notes`)."""
        self.notes[name] = value

    @property
    def settings(self) -> Settings:
        return self._runner.settings

    @property
    def run_id(self) -> str:
        """Stable within a run (and its resumptions): a nonce for prompts that must not
        meet a server-side cache filled by an earlier run."""
        return self._runner.run_id

    async def send(self, step: str, partial: Mapping[str, Any]) -> Outcome:
        if step in self.outcomes:
            raise ValueError(f"probe {self.probe.key}: step {step!r} sent twice")
        outcome = await self._runner.send(self.probe, self.sample, step, partial)
        self.outcomes[step] = outcome
        return outcome

    async def count_prompt_tokens(self, partial: Mapping[str, Any]) -> int | RequestError:
        """The server's tokenizer endpoint's count for the prompt of the body `send` would
        send for `partial` (without the generation parameters, which render nothing)."""
        return await self._runner.tokenize(self.probe, self.sample, partial)


@dataclass
class _Plan:
    probes: list[Probe] = field(default_factory=list)
    position: dict[ProbeKey, int] = field(default_factory=dict)
    users: dict[ProbeKey, int] = field(default_factory=dict)
    submitted_up_to: int = 0
    # Probes the sequential gate no longer needs: never submitted, and cancelled if in flight.
    cancelled: set[ProbeKey] = field(default_factory=set)
    # Probes inside the window that `admit` turned away, in plan order, to be asked again.
    held: list[Probe] = field(default_factory=list)


class Runner:
    def __init__(
        self,
        *,
        settings: Settings,
        base_url: str,
        model: str,
        writer: RecordWriter,
        resume: ResumeIndex | None,
        loop: BackgroundLoop,
        run_id: str,
    ) -> None:
        self.settings = settings
        self.run_id = run_id
        self.model = model
        self.stats = RequestCounters()
        # What each probe's requests cost in this run (resumed ones cost nothing): the sequential
        # gate's estimate of what stopping a suite saved starts from it.
        self.spent: dict[ProbeKey, Spend] = {}
        # Requests waiting for their answer, per suite, for the progress line (run/progress.py).
        self.in_flight: Counter[str] = Counter()
        self._writer = writer
        self._resume = resume
        self._loop = loop
        self._client = loop.run(self._make_client(base_url))
        self._futures: dict[ProbeKey, concurrent.futures.Future[ProbeResult]] = {}
        self._plan = _Plan()
        # Enough probes in flight to keep every request slot busy while the tests
        # consume results in order, without holding a whole run's outputs in memory.
        self._window = max(8, settings.concurrency * 4)
        # Whether a planned probe may be sent ahead of its test now (see the module's docstring).
        self.admit: Callable[[Probe], bool] = lambda probe: True

    async def _make_client(self, base_url: str) -> EndpointClient:
        # The client's semaphore and connection pool belong to the background loop.
        return EndpointClient(
            base_url=base_url,
            api_key=self.settings.api_key,
            timeout_s=self.settings.timeout,
            concurrency=self.settings.concurrency,
            retry=RetryPolicy(self.settings.retries, self.settings.backoff),
        )

    # Planning and prefetching, called from the test thread.

    def plan(self, probes: Iterable[Probe]) -> None:
        """The probes this process will need, in the order its tests will ask for them."""
        plan = self._plan
        for probe in probes:
            plan.users[probe.key] = plan.users.get(probe.key, 0) + 1
            if probe.key not in plan.position:
                plan.position[probe.key] = len(plan.probes)
                plan.probes.append(probe)
        self._advance(0)

    def _advance(self, position: int) -> None:
        plan = self._plan
        held, plan.held = plan.held, []
        # A held probe whose test has come (its position is reached) is sent by `result`.
        for probe in held:
            if plan.position[probe.key] > position and probe.key not in plan.cancelled:
                self._submit_or_hold(probe)
        horizon = min(len(plan.probes), position + self._window)
        while plan.submitted_up_to < horizon:
            probe = plan.probes[plan.submitted_up_to]
            # A probe that sets the load itself waits for its own test, by which time every probe of
            # the tests before it has finished: a multi-step conversation still under way would
            # otherwise send its next step into the lane's load (or into a deployment it took down).
            if probe.key not in plan.cancelled and not probe.exclusive:
                self._submit_or_hold(probe)
            plan.submitted_up_to += 1

    def _submit_or_hold(self, probe: Probe) -> None:
        if self.admit(probe):
            self._submit(probe)
        else:
            self._plan.held.append(probe)

    def _submit(self, probe: Probe) -> concurrent.futures.Future[ProbeResult]:
        future = self._futures.get(probe.key)
        if future is None:
            future = self._loop.submit(self._run_probe(probe))
            self._futures[probe.key] = future
        return future

    def result(
        self, probe: Probe, wait: Callable[[concurrent.futures.Future[ProbeResult]], ProbeResult] | None = None
    ) -> ProbeResult:
        """Wait for a probe's result (sending it now if it was not planned); `wait` waits in its own way
        (the progress line redraws while it waits)."""
        position = self._plan.position.get(probe.key)
        if position is not None:
            self._advance(position)
        future = self._submit(probe)
        return wait(future) if wait is not None else future.result()

    def planned_suites(self) -> list[str]:
        """The suites of the planned probes, in plan order."""
        return list(dict.fromkeys(probe.suite for probe in self._plan.probes))

    def cancel(self, suite: str, keep: Callable[[Probe], bool]) -> list[Probe]:
        """Stop a suite early: its planned probes that `keep` turns down and that have not finished
        are never sent, or cancelled in flight (their partial responses are not recorded). Returns them."""
        cancelled = []
        for probe in self._plan.probes:
            if probe.suite != suite or keep(probe) or probe.key in self._plan.cancelled:
                continue
            if self._plan.users.get(probe.key, 0) <= 0:
                # Answered and used by every test that needed it (its result is already dropped).
                continue
            future = self._futures.get(probe.key)
            if future is not None and future.done() and not future.cancelled():
                continue
            self._plan.cancelled.add(probe.key)
            if future is not None:
                future.cancel()
                self._futures.pop(probe.key, None)
            cancelled.append(probe)
        return cancelled

    def release(self, probe: Probe) -> None:
        """A test that used the probe is done; drop the result after its last user."""
        remaining = self._plan.users.get(probe.key, 1) - 1
        self._plan.users[probe.key] = remaining
        if remaining <= 0:
            self._futures.pop(probe.key, None)

    # The request path, on the background loop.

    async def _run_probe(self, probe: Probe) -> ProbeResult:
        samples = probe.samples or self.settings.samples_of(probe.suite)
        indices = range(probe.first_sample, probe.first_sample + samples)
        results = await asyncio.gather(*(self._run_sample(probe, sample) for sample in indices))
        return ProbeResult(probe, list(results))

    async def _run_sample(self, probe: Probe, sample: int) -> SampleResult:
        exchange = RunnerExchange(self, probe, sample)
        if probe.conversation is not None and probe.exclusive:
            async with self._client.exclusive():
                await probe.conversation(exchange)
        elif probe.conversation is not None:
            await probe.conversation(exchange)
        else:
            await asyncio.gather(*(exchange.send(step, partial) for step, partial in probe.requests.items()))
        return SampleResult(sample, exchange.outcomes, exchange.notes)

    def _body(self, probe: Probe, sample: int, partial: Mapping[str, Any]) -> dict[str, Any]:
        return build_body(
            partial,
            settings=self.settings,
            model=self.model,
            suite=probe.suite,
            item=probe.item,
            sample=sample,
            suite_max_tokens=probe.max_tokens,
            thinking_as_given=probe.thinking_as_given,
            sampling_as_given=probe.sampling_as_given,
        )

    async def tokenize(self, probe: Probe, sample: int, partial: Mapping[str, Any]) -> int | RequestError:
        body = self._body(probe, sample, partial)
        prompt_only = {key: value for key, value in body.items() if key not in GENERATION_ONLY}
        return await self._client.tokenize(prompt_only)

    async def send(self, probe: Probe, sample: int, step: str, partial: Mapping[str, Any]) -> Outcome:
        body = self._body(probe, sample, partial)
        body_print = fingerprint(body)
        if self._resume is not None:
            earlier = self._resume.get((probe.suite, probe.item, sample, step), body_print)
            if earlier is not None:
                self.stats.resumed += 1
                return _outcome_from_record(earlier)
        self.in_flight[probe.suite] += 1
        try:
            outcome, attempts = await self._client.chat(body, throttled=not probe.exclusive)
        finally:
            self.in_flight[probe.suite] -= 1
        self.stats.sent += 1
        self.stats.attempts += attempts
        record: ResponseRecord = {
            "kind": "response",
            "suite": probe.suite,
            "item": probe.item,
            "sample": sample,
            "step": step,
            "fingerprint": body_print,
            "k3_nonce": new_nonce(),
            "request": body,
            "attempts": attempts,
            "finished_at": utc_now(),
        }
        spend = self.spent.setdefault(probe.key, Spend())
        spend.requests += 1
        if isinstance(outcome, Completion):
            record["status"], record["response"] = "ok", outcome.to_record()
            spend.output_tokens += int((outcome.usage or {}).get("completion_tokens") or 0)
        else:
            self.stats.count_failure(outcome.error_class.value)
            record["status"] = "infra_error" if outcome.error_class is ErrorClass.INFRA else "api_error"
            record["error"] = outcome.to_record()
        self._writer.write(record)
        return outcome

    def close(self) -> None:
        for future in self._futures.values():
            future.cancel()
        # Closing idle connections at exit: nothing is lost if it fails.
        with contextlib.suppress(OSError, RuntimeError, concurrent.futures.TimeoutError):
            self._loop.run(self._client.close(), timeout=5)


def _outcome_from_record(record: dict[str, Any]) -> Outcome:
    if record["status"] == "ok":
        return Completion.from_record(record["response"])
    return RequestError.from_record(record["error"])
