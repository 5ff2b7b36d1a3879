"""A scripted OpenAI-compatible stub for the failures the reference deployment does not
stage yet: each chat request takes the next behaviour from a script."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

from k3conformance.endpoint.client import EndpointClient, RetryPolicy
from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import RequestError

MODEL = "stub-model"
# llama.cpp's answer when its parser refuses the model's output (xllamacpp 2026.10.11549): the
# body of its HTTP 500, and in a stream the error event it sends instead of the next frame.
PARSER_REFUSAL = {
    "error": {
        "code": 500,
        "message": "The model produced output that does not match the expected peg-native format",
        "type": "server_error",
    }
}


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    frame = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(frame)}\n\n".encode()


def completion() -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "fine", "reasoning_content": "thinking"},
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


class Stub:
    """`script` is consumed one entry per chat request; when it runs out, requests succeed.
    Requests whose messages contain `failing_text` always get a 503."""

    def __init__(self, script: list[str], failing_text: str | None = None) -> None:
        self.script = list(script)
        self.failing_text = failing_text
        self.chat_requests = 0

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "stub"}]})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.chat_requests += 1
        body = await request.json()
        action = self.script.pop(0) if self.script else "ok"
        if self.failing_text and self.failing_text in json.dumps(body["messages"]):
            action = "503"
        if action == "503":
            return web.json_response({"error": {"message": "overloaded"}}, status=503)
        if action == "429":
            return web.json_response({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "0"})
        if action == "400":
            return web.json_response(
                {"error": {"message": "bad tool_choice", "type": "invalid_request_error"}}, status=400
            )
        if action == "refuse" and not body.get("stream"):
            return web.json_response(PARSER_REFUSAL, status=500)
        if not body.get("stream"):
            return web.json_response(completion())
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(chunk({"role": "assistant"}))
        await response.write(chunk({"reasoning_content": "thinking"}))
        if action == "refuse":
            await response.write(f"data: {json.dumps(PARSER_REFUSAL)}\n\n".encode())
            return response
        if action == "drop":
            # Close the connection mid-answer, without a finish frame or [DONE].
            request.transport.close()  # type: ignore[union-attr]
            return response
        await response.write(chunk({"content": "fine"}))
        await response.write(chunk({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        return response


@contextmanager
def serve_app(app: web.Application) -> Iterator[str]:
    """Any aiohttp app on loopback in a daemon thread; yields its /v1 base URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> tuple[web.AppRunner, int]:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    runner, port = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


@contextmanager
def serve_stub(script: list[str], failing_text: str | None = None) -> Iterator[tuple[str, Stub]]:
    stub = Stub(script, failing_text)
    app = web.Application()
    app.router.add_get("/v1/models", stub.models)
    app.router.add_post("/v1/chat/completions", stub.chat)
    with serve_app(app) as url:
        yield url, stub


def send(url: str, body: dict[str, Any], retries: int = 3) -> tuple[Completion | RequestError, int]:
    """One request through the plugin's own client, with its retries (a short backoff)."""

    async def go() -> tuple[Completion | RequestError, int]:
        client = EndpointClient(
            base_url=url, api_key=None, timeout_s=10, concurrency=2, retry=RetryPolicy(retries, 0.01)
        )
        try:
            return await client.chat(body)
        finally:
            await client.close()

    return asyncio.run(go())
