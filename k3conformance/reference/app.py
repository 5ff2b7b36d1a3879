"""The aiohttp application: Kimi K3's OpenAI-compatible routes in front of the simulator."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import itertools
import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from k3conformance.reference import faults as fault_hooks
from k3conformance.reference.answer_key import AnswerKey, default_fixtures_dir
from k3conformance.reference.identity import DEFAULT_MODEL_ID, SIMULATOR_OWNER, SIMULATOR_WARNING, package_version
from k3conformance.reference.simulator import Simulator
from k3conformance.reference.transport import Hit, hang_up, transport_faults_for
from k3conformance.reference.values import InvalidRequest, Profile, SimulatedTurn
from k3conformance.reference.wire import completion_object, stream_frames
from k3conformance.reference.words import words_for_bytes
from k3conformance.xtml.parsers import WHOLE_ONLY_PARSER_NAMES, ParseRefused, make_parser

_log = logging.getLogger(__name__)
# Writing every SSE frame separately dominates the cost of long streams, so frames
# after the first go out in groups.
_FRAMES_PER_WRITE = 32


def _shape_server_args(shape_name: str) -> dict[str, Any]:
    from k3conformance.deployment.cookbook import get_shape
    from k3conformance.deployment.shapes import server_args

    shape = get_shape(shape_name)
    if shape is None:
        raise ValueError(f"reference profile names unknown shape {shape_name!r}")
    return server_args(shape)


def error_response(status: int, message: str, param: str | None = None, code: str | None = None) -> web.Response:
    error_type = "server_error" if status >= 500 else "invalid_request_error"
    body = {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    return web.json_response(body, status=status)


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        return error_response(error.status, f"{error.reason}: {request.method} {request.path}")
    except Exception:
        _log.exception("reference server failed on %s %s", request.method, request.path)
        return error_response(500, "internal error in the k3conformance reference simulator")


def _dead_after_crash(routes: _Routes) -> Middleware:
    """Once the simulated process has crashed, every request of any route is answered 503, as
    the router or load balancer in front of a dead server answers."""

    @web.middleware
    async def dead_after_crash(request: web.Request, handler: Handler) -> web.StreamResponse:
        if routes.crashed:
            return error_response(503, "simulated crash: the server process died under concurrent guided load")
        return await handler(request)

    return dead_after_crash


def _require_api_key(api_key: str) -> Middleware:
    expected = f"Bearer {api_key}".encode()

    @web.middleware
    async def check_api_key(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == "/v1" or request.path.startswith("/v1/"):
            presented = request.headers.get("Authorization", "").encode("utf-8", "replace")
            if not hmac.compare_digest(presented, expected):
                return error_response(401, "missing or incorrect API key", code="invalid_api_key")
        return await handler(request)

    return check_api_key


# K3's context window.
MAX_MODEL_LEN = 1_048_576
_VOCABULARY = 163_840


def _token_id(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % _VOCABULARY


async def _json_object(request: web.Request) -> dict[str, Any] | web.Response:
    """The request's JSON object body, or the 400 that answers a body that is not one."""
    try:
        body = await request.json()
    except ValueError:
        return error_response(400, "request body is not valid JSON")
    if not isinstance(body, dict):
        return error_response(400, "request body must be a JSON object")
    return body


def _batches(frames: Iterator[str]) -> Iterator[bytes]:
    while batch := list(itertools.islice(frames, _FRAMES_PER_WRITE)):
        yield "".join(batch).encode()


class _Routes:
    def __init__(self, simulator: Simulator, latency_s: float) -> None:
        self.simulator = simulator
        self.profile = simulator.profile
        self.model_id = simulator.model_id
        self.latency_s = latency_s
        # State across requests lives here, not in the simulator, and only a faulty profile has any.
        self.prefix_cache = fault_hooks.prefix_cache_for(self.profile.faults)
        self.transport = transport_faults_for(self.profile.faults)
        self.parser = make_parser(self.profile.parser, fault_hooks.parser_settings(self.profile.faults))
        # Streams being served now: only a load-sensitive profile counts them (and waits for them).
        self.streams_in_flight = 0
        # Strict-schema requests being served now, and whether they took the process down: only a
        # deployment that crashes under guided load counts them (TensorRT-LLM PR 17845).
        # Keyed by identity: aiohttp's requests are mappings, unhashable, and equal when their states are.
        self.guided_in_flight: dict[int, web.Request] = {}
        self.crashed = False

    async def models(self, request: web.Request) -> web.Response:
        model = {
            "id": self.model_id,
            "object": "model",
            "created": 0,
            "owned_by": SIMULATOR_OWNER,
            "k3conformance_simulator": {"profile": self.profile.name, "description": self.profile.description},
        }
        return web.json_response({"object": "list", "data": [model]})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "simulator": True,
                "warning": SIMULATOR_WARNING,
                "profile": self.profile.name,
                "model_path": self.model_id,
                "served_model_name": self.model_id,
                # The launch arguments of the layout the profile stands for, as SGLang reports them.
                **_shape_server_args(self.profile.shape),
                "reasoning_parser": "kimi_k3" if fault_hooks.parser_settings(self.profile.faults).reasoning else None,
                "tool_call_parser": "kimi_k3",
                # Which implementation reads the simulated raw output (xtml/parsers).
                "k3conformance_parser": {"name": self.parser.name, "version": self.parser.version},
                # How the simulated items' solve chances spread (reference/difficulty.py).
                "k3conformance_item_spread": self.profile.item_spread,
                "version": package_version(),
            }
        )

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": f"{SIMULATOR_OWNER} {package_version()}"})

    async def tokenize(self, request: web.Request) -> web.Response:
        """SGLang's `/tokenize` (serving_tokenize.py): `messages` (with tools, tool_choice,
        thinking parameters, response_format) are rendered as for a chat completion; a
        `prompt` is encoded as it is. Token ids are the simulator's own (one per word)."""
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        try:
            words = self.simulator.prompt_words(body)
        except InvalidRequest as invalid:
            return error_response(invalid.status, invalid.message, invalid.param, invalid.code)
        tokens = [_token_id(word) for word in words]
        return web.json_response(
            {"tokens": tokens, "count": len(tokens), "max_model_len": MAX_MODEL_LEN, "simulator": True}
        )

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        hit = None if self.transport is None else self.transport.admit(request, await request.read())
        if hit is not None and hit.preempts:
            return hit.preempt()
        body = await _json_object(request)
        if isinstance(body, web.Response):
            return body
        if fault_hooks.crashes_under_guided_load(self.profile.faults) and fault_hooks.carries_strict_schema(body):
            return await self._guided(request, body, hit)
        return await self._answer(request, body, hit)

    async def _guided(self, request: web.Request, body: dict[str, Any], hit: Hit | None) -> web.StreamResponse:
        """A strict-schema request on a deployment that dies when more than GUIDED_CRASH_IN_FLIGHT
        of them are in flight at once: that one, every one in flight, and (through `_dead_after_crash`)
        every later request of any kind get no answer."""
        self.guided_in_flight[id(request)] = request
        try:
            if len(self.guided_in_flight) > fault_hooks.GUIDED_CRASH_IN_FLIGHT and not self.crashed:
                self.crashed = True
                _log.warning("simulated crash: %d strict-schema requests in flight", len(self.guided_in_flight))
                for doomed in self.guided_in_flight.values():
                    hang_up(doomed)
            await asyncio.sleep(fault_hooks.GRAMMAR_COMPILE_S)
            if self.crashed:
                return hang_up(request)
            return await self._answer(request, body, hit)
        finally:
            del self.guided_in_flight[id(request)]

    async def _answer(self, request: web.Request, body: dict[str, Any], hit: Hit | None) -> web.StreamResponse:
        try:
            completion = self.simulator.complete(body, self.prefix_cache)
        except InvalidRequest as invalid:
            return error_response(invalid.status, invalid.message, invalid.param, invalid.code)
        envelope: dict[str, Any] = {
            "response_id": f"chatcmpl-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": self.model_id,
            "faults": self.profile.faults,
            "parser": self.parser,
            # Servers run the tool-call parser on requests that declare tools, K3's dynamic
            # tools (`messages[].tools`) included.
            "parse_tools": _declares_tools(body),
        }
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        if not body.get("stream"):
            try:
                payload = await self._whole(completion, envelope)
            except ParseRefused as refusal:
                # What a client of a server whose parser refuses the output gets (llama.cpp: HTTP 500).
                return error_response(500, str(refusal))
            return web.json_response(payload) if hit is None else await hit.answer(payload)
        if self.parser.name in WHOLE_ONLY_PARSER_NAMES:
            return error_response(
                400,
                f"the {self.parser.name} parser reads whole outputs only here: its server streams what it "
                "generates, and the simulator's raw output is not generated by it (send stream: false)",
                "stream",
            )
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        frames = stream_frames(completion, include_usage=include_usage, **envelope)
        if not fault_hooks.load_sensitive(self.profile.faults):
            return await self._stream(request, frames, hit)
        self.streams_in_flight += 1
        try:
            # The scheduler's batch window: streams sent together are then all in flight.
            await asyncio.sleep(fault_hooks.LOAD_BATCH_WINDOW_S)
            frames = fault_hooks.under_load(self.profile.faults, self.streams_in_flight, frames)
            return await self._stream(request, frames, hit)
        finally:
            self.streams_in_flight -= 1

    async def _whole(self, completion: SimulatedTurn, envelope: dict[str, Any]) -> dict[str, Any]:
        # llama.cpp's parser is a request to its own server: parsed off the event loop, so that
        # the requests in flight are parsed side by side and the server's other routes answer.
        if self.parser.name in WHOLE_ONLY_PARSER_NAMES:
            return await asyncio.to_thread(completion_object, completion, **envelope)
        return completion_object(completion, **envelope)

    async def _stream(self, request: web.Request, frames: Iterator[str], hit: Hit | None) -> web.StreamResponse:
        if hit is not None:
            return await hit.stream(frames)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        try:
            await response.prepare(request)
            await response.write(next(frames).encode())  # the first byte goes out alone, as a real server's would
            for batch in _batches(frames):
                await response.write(batch)
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client hung up; there is no one left to tell
        return response


def build_app(
    profile: Profile,
    *,
    latency_s: float | None = None,
    api_key: str | None = None,
    model_id: str = DEFAULT_MODEL_ID,
    fixtures_dir: Path | None = None,
    output_bytes: int | None = None,
) -> web.Application:
    """`output_bytes`: reason about that many bytes at every effort (for load benchmarks)."""
    if output_bytes is not None:
        profile = _with_reasoning_bytes(profile, output_bytes)
    answer_key = AnswerKey.load(fixtures_dir or default_fixtures_dir())
    routes = _Routes(Simulator(profile, answer_key, model_id), profile.latency_s if latency_s is None else latency_s)
    middlewares: list[Middleware] = [_json_errors] + ([_require_api_key(api_key)] if api_key else [])
    if fault_hooks.crashes_under_guided_load(profile.faults):
        middlewares.append(_dead_after_crash(routes))
    app = web.Application(middlewares=middlewares)
    app.router.add_get("/v1/models", routes.models)
    app.router.add_post("/v1/chat/completions", routes.chat_completions)
    app.router.add_post("/tokenize", routes.tokenize)
    app.router.add_post("/v1/tokenize", routes.tokenize)
    app.router.add_get("/health", routes.health)
    app.router.add_get("/get_server_info", routes.server_info)
    app.router.add_get("/version", routes.version)
    return app


def _with_reasoning_bytes(profile: Profile, output_bytes: int) -> Profile:
    # Only the reasoning length changes, through the simulator's own path, so budgets,
    # faults and token counts apply to long outputs as they do to short ones.
    words = words_for_bytes(output_bytes)
    return dataclasses.replace(
        profile,
        description=f"{profile.description}; reasoning padded to about {output_bytes} bytes",
        reasoning_words=MappingProxyType(dict.fromkeys(profile.reasoning_words, words)),
    )


def _declares_tools(body: Mapping[str, Any]) -> bool:
    messages = body.get("messages")
    dynamic = isinstance(messages, list) and any(isinstance(m, dict) and m.get("tools") for m in messages)
    return bool(body.get("tools")) or dynamic
