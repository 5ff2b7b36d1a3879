"""Transport faults of the reference deployment: the network or the server process failing requests.

Conformance faults change what the simulated model answers; these change whether an answer
arrives at all. They act in the HTTP layer only, so an attempt that gets through is
answered byte for byte as the healthy `tp8` answers it.

They are deterministic and recoverable, so that retries and resume can be shown to absorb
them: a fault hits every other distinct request it applies to (counted in order of first
arrival, keyed by a hash of the request body) on its first attempt(s), and the app
remembers the attempts it has seen. A client that retries completes the run; one that
does not loses exactly those requests, and a resumed run against the same server has them
answered. The restart happens once per server, to whatever is in flight.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

LATENCY_SPIKES = "latency-spikes"
DROPPED_CONNECTION = "dropped-connection"
STREAM_WITHOUT_DONE = "stream-without-done"
MALFORMED_FRAME = "malformed-frame"
RATE_LIMITED = "rate-limited"
SERVER_ERRORS = "server-errors"
SERVER_RESTART = "server-restart"
HANDLED_FAULTS = frozenset(
    {
        LATENCY_SPIKES,
        DROPPED_CONNECTION,
        STREAM_WITHOUT_DONE,
        MALFORMED_FRAME,
        RATE_LIMITED,
        SERVER_ERRORS,
        SERVER_RESTART,
    }
)

# Long enough to outlast a short --k3-timeout, short enough that a test absorbing it waits little.
SPIKE_S = 3.0
RETRY_AFTER_S = 1
# A retry is early when it comes before Retry-After has passed; the margin absorbs clock
# granularity, never network delay (which only makes a retry later).
_RETRY_AFTER_MARGIN_S = 0.05
# Attempts of a hit request that fail: a 503 then a 500 for a burst, one for the rest.
_FAILED_ATTEMPTS = {SERVER_ERRORS: 2}
_STREAM_ONLY = frozenset({STREAM_WITHOUT_DONE})
# The restart comes with this many distinct requests answered or in flight, and refuses
# this many attempts after it: a client with the default three retries always gets through.
RESTART_AFTER_REQUESTS = 3
RESTART_REFUSALS = 2
_PRUNE_CONNECTIONS_AT = 64


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
    return web.json_response(body, status=status, headers=headers)


def _finish_reason(frame: str) -> str | None:
    try:
        chunk = json.loads(frame.removeprefix("data: "))
    except ValueError:
        return None
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    return choices[0].get("finish_reason") if choices else None


def hang_up(request: web.Request, response: web.StreamResponse | None = None) -> web.StreamResponse:
    """Close the connection where the answer stands; what is returned is never sent."""
    if request.transport is not None:
        request.transport.close()
    return response if response is not None else web.Response(status=503)


@dataclass
class _Seen:
    hit: bool
    attempts: int = 0
    retry_not_before: float = 0.0


class Hit:
    """One attempt that a fault hits; the app hands it the healthy answer to spoil."""

    def __init__(self, fault: str, attempt: int, request: web.Request) -> None:
        self.fault = fault
        self.attempt = attempt
        self._request = request

    @property
    def preempts(self) -> bool:
        """Whether the fault answers instead of the simulator (429, 5xx, a restart)."""
        return self.fault in (RATE_LIMITED, SERVER_ERRORS, SERVER_RESTART)

    def preempt(self) -> web.StreamResponse:
        if self.fault == RATE_LIMITED:
            return _error(
                429,
                "simulated rate limit: too many requests, retry after the Retry-After delay",
                {"Retry-After": str(RETRY_AFTER_S)},
            )
        if self.fault == SERVER_ERRORS:
            if self.attempt == 1:
                return _error(503, "simulated overload: the server is busy, try again")
            return _error(500, "simulated internal error in a burst of server errors")
        return hang_up(self._request)

    async def answer(self, payload: dict[str, Any]) -> web.StreamResponse:
        """A non-streaming answer, spoilt."""
        body = json.dumps(payload).encode()
        if self.fault == LATENCY_SPIKES:
            await asyncio.sleep(SPIKE_S)
            return web.json_response(payload)
        if self.fault == MALFORMED_FRAME:
            # A whole, well-framed HTTP response whose JSON is cut short.
            return web.Response(body=body[: len(body) // 2], content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = len(body)
        await response.prepare(self._request)
        await response.write(body[: len(body) // 2])
        return hang_up(self._request, response)

    async def stream(self, frames: Iterator[str]) -> web.StreamResponse:
        """A streamed answer, spoilt: written frame by frame, since where it breaks matters."""
        pending = list(frames)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        middle = len(pending) // 2
        try:
            await response.prepare(self._request)
            for position, frame in enumerate(pending):
                if self.fault == DROPPED_CONNECTION and position == middle:
                    return hang_up(self._request, response)
                if self.fault == MALFORMED_FRAME and position == middle:
                    frame = frame[: len(frame) // 2] + "\n\n"
                await response.write(frame.encode())
                if self.fault == LATENCY_SPIKES and position == 0:
                    await asyncio.sleep(SPIKE_S)
                if self.fault == STREAM_WITHOUT_DONE and _finish_reason(frame) is not None:
                    # A clean end of the body right after the finish frame: no usage frame, no [DONE].
                    break
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client gave up (a short timeout against a spike); nobody is left to tell
        return response


class TransportFaults:
    """What a transport-faulty app remembers across requests: the attempts of each request
    body, and whether it has restarted."""

    def __init__(self, faults: frozenset[str]) -> None:
        active = faults & HANDLED_FAULTS
        if len(active) != 1:
            raise ValueError(f"a reference profile takes one transport fault, got {sorted(active)}")
        (self.fault,) = active
        self._seen: dict[str, _Seen] = {}
        self._eligible = 0
        self._connections: set[asyncio.BaseTransport] = set()
        self._restarted = False
        self._refusals_left = 0

    def admit(self, request: web.Request, raw_body: bytes) -> Hit | None:
        """Count this attempt; the fault that hits it, or None when it goes through healthy."""
        if self.fault == SERVER_RESTART:
            return self._admit_around_restart(request, raw_body)
        if self.fault in _STREAM_ONLY and not _asks_to_stream(raw_body):
            return None
        seen = self._count(raw_body)
        now = time.monotonic()
        if self.fault == RATE_LIMITED and seen.hit and (seen.attempts == 1 or now < seen.retry_not_before):
            # A real limiter answers a retry that ignores Retry-After with another 429.
            seen.retry_not_before = now + RETRY_AFTER_S - _RETRY_AFTER_MARGIN_S
            return Hit(self.fault, seen.attempts, request)
        if self.fault != RATE_LIMITED and seen.hit and seen.attempts <= _FAILED_ATTEMPTS.get(self.fault, 1):
            return Hit(self.fault, seen.attempts, request)
        return None

    def _count(self, raw_body: bytes) -> _Seen:
        key = hashlib.sha256(raw_body).hexdigest()
        seen = self._seen.get(key)
        if seen is None:
            seen = self._seen[key] = _Seen(hit=self._eligible % 2 == 0)
            self._eligible += 1
        seen.attempts += 1
        return seen

    def _admit_around_restart(self, request: web.Request, raw_body: bytes) -> Hit | None:
        seen = self._count(raw_body)
        if self._refusals_left > 0:
            self._refusals_left -= 1
            return Hit(self.fault, seen.attempts, request)
        if request.transport is not None:
            if len(self._connections) >= _PRUNE_CONNECTIONS_AT:
                self._connections = {known for known in self._connections if not known.is_closing()}
            self._connections.add(request.transport)
        if self._restarted or self._eligible <= RESTART_AFTER_REQUESTS:
            return None
        # The process goes down: every connection it holds, this one included, is cut.
        self._restarted = True
        self._refusals_left = RESTART_REFUSALS
        for connection in self._connections:
            if connection is not request.transport:
                connection.close()
        self._connections.clear()
        return Hit(self.fault, seen.attempts, request)


def _asks_to_stream(raw_body: bytes) -> bool:
    try:
        body = json.loads(raw_body)
    except ValueError:
        return False
    return isinstance(body, dict) and bool(body.get("stream"))


def transport_faults_for(faults: frozenset[str]) -> TransportFaults | None:
    """The state an app keeps for its profile: only a transport-faulty deployment keeps any."""
    return TransportFaults(faults) if faults & HANDLED_FAULTS else None
