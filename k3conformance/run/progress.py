"""A run you can watch: what the suite being waited on has done, while its test waits.

Between results only pytest's dots moved: two agentic tasks against a server answering in 3 s
per turn printed nothing for 19 s. A test waits for its probe's requests in `k3_result`; that
wait now checks the future every second and says how the suite stands: tests done of its
total, requests in flight, retries so far, failures so far, output tokens per second and an
estimate of the time left (tqdm's `format_interval`, the formatting its bars use).

On a terminal (and not under -q) the line is drawn at the end of pytest's current line and
erased before the test reports, so pytest's own output is never interleaved or moved. Elsewhere
(a CI log, where carriage returns and erasing do not work) a plain line is written every
--k3-progress-interval seconds of waiting, unless -qq. Only the waiting (main) thread writes, so
nothing races pytest's terminal writer. Under xdist the controller runs no requests and a
worker has no terminal: no line is drawn there.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tqdm import tqdm

if TYPE_CHECKING:
    from k3conformance.probes.runner import Runner
    from k3conformance.scoring.suite_tally import SuiteTally

T = TypeVar("T")
REDRAW_S = 1.0
PLAIN_EVERY_S = 30.0
# Leave pytest's [NN%] column alone: the line is cut to what is left of the terminal's width.
MARGIN = 8


@dataclass
class Progress:
    """Per suite: tests collected; the first time one of its tests waited (for the estimate)."""

    totals: Counter[str] = field(default_factory=Counter)
    started: dict[str, float] = field(default_factory=dict)
    run_started: float = field(default_factory=time.monotonic)

    def line(self, suite: str, tally: SuiteTally | None, runner: Runner | None) -> str:
        now = time.monotonic()
        done = tally.tests if tally is not None else 0
        total = self.totals.get(suite, 0)
        parts = [f"{suite} {done}/{total} done"]
        if runner is not None:
            parts.append(f"{runner.in_flight.get(suite, 0)} in flight")
            parts.append(f"{runner.stats.attempts - runner.stats.sent} retries")
            tokens = sum(spend.output_tokens for spend in runner.spent.values())
            elapsed = max(now - self.run_started, 1e-6)
            parts.append(f"{tokens / elapsed:.0f} output tok/s")
        if tally is not None:
            parts.append(f"{tally.failed + tally.infra_errors + tally.errors} failures")
        began = self.started.setdefault(suite, now)
        if done and total > done:
            left = (now - began) / done * (total - done)
            parts.append(f"~{tqdm.format_interval(left)} left")
        return "k3conformance: " + ", ".join(parts)


class Waiter:
    """Waits for a future from the main thread, showing the progress line as it waits."""

    def __init__(
        self, progress: Progress, terminal: Any, capture: Any, verbosity: int, plain_every: float = PLAIN_EVERY_S
    ) -> None:
        self.progress = progress
        self.plain_every = plain_every
        self.terminal = terminal
        # pytest's capture manager: the line goes to the real terminal, as pytest's live logging does.
        self.capture = capture
        tty = bool(terminal.isatty)
        self.live = tty and verbosity >= 0
        self.plain = not tty and verbosity >= -1
        self._last_plain = time.monotonic()

    def wait(
        self,
        future: concurrent.futures.Future[T],
        suite: str,
        tally: SuiteTally | None,
        runner: Runner | None,
    ) -> T:
        drawn = 0
        self.progress.started.setdefault(suite, time.monotonic())
        try:
            while True:
                try:
                    return future.result(timeout=REDRAW_S)
                except concurrent.futures.TimeoutError:
                    pass
                line = self.progress.line(suite, tally, runner)
                if self.live:
                    drawn = self._draw(line, drawn)
                elif self.plain and time.monotonic() - self._last_plain >= self.plain_every:
                    self._last_plain = time.monotonic()
                    with self._uncaptured():
                        self.terminal.ensure_newline()
                        self.terminal.write_line(line)
        finally:
            if drawn:
                self._erase(drawn)

    def _uncaptured(self) -> contextlib.AbstractContextManager[Any]:
        return self.capture.global_and_fixture_disabled() if self.capture is not None else contextlib.nullcontext()

    def _draw(self, line: str, drawn: int) -> int:
        if drawn:
            self._erase(drawn)
        # Written around pytest's terminal writer (which would count it into its line and misplace
        # its [NN%] column); pytest's own count of its current line says where the line ends.
        used = getattr(self.terminal, "_width_of_current_line", None)
        if not isinstance(used, int):
            return 0
        room = shutil.get_terminal_size().columns - used - MARGIN
        if room < 20:
            return 0
        text = "  " + line[: room - 2]
        with self._uncaptured():
            sys.stdout.write(text)
            sys.stdout.flush()
        return len(text)

    def _erase(self, drawn: int) -> None:
        # Back over what was drawn and clear to the end of the line: pytest's line is as it was.
        with self._uncaptured():
            sys.stdout.write(f"\x1b[{drawn}D\x1b[K")
            sys.stdout.flush()
