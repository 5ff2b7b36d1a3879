"""Sends chat requests through the official `openai` SDK, with retries and error classes.

Every request either yields a `Completion` or a `RequestError` whose class says who is
to blame: `infra` (transport, timeout, 429, 5xx, dropped stream: retried, never scored
as a wrong answer), `api` (the server rejected the request with a 4xx) or `parser` (a 5xx
or error event in which the server says its own parser refused the model's output:
retried like a 5xx, then failed by the checks at the parser layer; see `errors.py`).
Whether the completion itself is right is for the suites to judge.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import random
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

import openai

from k3conformance.endpoint.completion import Completion, StreamAssembler, from_message
from k3conformance.endpoint.errors import ErrorClass, RequestError, is_parser_refusal
from k3conformance.endpoint.url import server_root, split_credentials

T = TypeVar("T")
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 300.0
MAX_BACKOFF_S = 60.0
ERROR_BODY_CHARS = 500


class TransportFault(Exception):
    """The response broke off or came back unreadable: a dropped connection, a stream
    that closed without a finish_reason, a frame that is not JSON, an error event."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


async def _guarded(pending: Awaitable[T]) -> T:
    try:
        return await pending
    except (openai.APIError, StopAsyncIteration):
        raise
    except Exception as error:
        # The SDK leaves errors of its HTTP library unwrapped while a body is read (and,
        # seen with httpx2, sometimes while connecting).
        raise TransportFault(type(error).__name__, str(error) or type(error).__name__) from error


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each server-sent event (multi-line data joined), in order."""
    data: list[str] = []
    while True:
        try:
            line = await _guarded(lines.__anext__())
        except StopAsyncIteration:
            break
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield "\n".join(data)


@dataclass(frozen=True)
class RetryPolicy:
    retries: int
    base_delay_s: float

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(retry_after_s, MAX_RETRY_AFTER_S)
        # Full jitter: concurrent requests that failed together do not retry together.
        return random.uniform(0, min(MAX_BACKOFF_S, self.base_delay_s * 2**attempt))


def retry_after_seconds(response: Any) -> float | None:
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _excerpt(text: str | None) -> str | None:
    if text is None:
        return None
    return text if len(text) <= ERROR_BODY_CHARS else text[:ERROR_BODY_CHARS] + "…"


def _status_error_message(error: openai.APIStatusError) -> tuple[str, str | None]:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
        return (str(message) if message else error.message), _excerpt(json.dumps(body, default=str))
    return error.message, _excerpt(str(body) if body is not None else None)


def _status_error_class(status: int, message: str) -> ErrorClass:
    if status not in RETRYABLE_STATUS:
        return ErrorClass.API
    return ErrorClass.PARSER if is_parser_refusal(message) else ErrorClass.INFRA


class EndpointClient:
    """One `AsyncOpenAI` client per process, bounded to `concurrency` requests in flight."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
        concurrency: int,
        retry: RetryPolicy,
    ) -> None:
        # user:password in the URL travel as a header, so that no log line shows them.
        base_url, url_auth = split_credentials(base_url)
        self._sdk = openai.AsyncOpenAI(
            base_url=base_url,
            # The SDK insists on a key; servers without auth ignore the header.
            api_key=api_key or "EMPTY",
            default_headers=url_auth or None,
            timeout=timeout_s,
            # We retry ourselves: the SDK's retries cannot see a stream dropped half-way.
            max_retries=0,
        )
        self._slots = asyncio.Semaphore(concurrency)
        self._concurrency = concurrency
        self._retry = retry

    async def close(self) -> None:
        await self._sdk.close()

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Every request slot held: nothing else this client sends is in flight meanwhile
        (requests sent with `throttled=False` still go)."""
        held = 0
        try:
            for _ in range(self._concurrency):
                await self._slots.acquire()
                held += 1
            yield
        finally:
            for _ in range(held):
                self._slots.release()

    async def chat(self, body: dict[str, Any], *, throttled: bool = True) -> tuple[Completion | RequestError, int]:
        """Send one chat request (streamed when `body["stream"]`), retrying infrastructure
        failures. Returns the outcome and the number of attempts made. `throttled`: the request
        waits for one of the `concurrency` slots (the load lane's do not: it holds them all, see `exclusive`)."""
        attempts = 0
        while True:
            attempts += 1
            retry_after: float | None = None
            try:
                async with self._slots if throttled else contextlib.nullcontext():
                    return await self._send_once(body), attempts
            except openai.APIStatusError as error:
                message, excerpt = _status_error_message(error)
                failure = RequestError(
                    _status_error_class(error.status_code, message),
                    type(error).__name__,
                    message,
                    attempts,
                    error.status_code,
                    excerpt,
                )
                if failure.error_class is ErrorClass.API:
                    return failure, attempts
                retry_after = retry_after_seconds(error.response)
            except openai.APITimeoutError as error:
                failure = RequestError(ErrorClass.INFRA, "Timeout", str(error), attempts)
            except openai.APIConnectionError as error:
                cause = error.__cause__
                detail = f"{error} ({type(cause).__name__}: {cause})" if cause else str(error)
                failure = RequestError(ErrorClass.INFRA, "ConnectionError", detail, attempts)
            except TransportFault as error:
                # The server broke off mid-answer, which says nothing about the model,
                # unless it says that its parser refused the model's output.
                refused = error.kind == "ErrorEvent" and is_parser_refusal(str(error))
                failure = RequestError(
                    ErrorClass.PARSER if refused else ErrorClass.INFRA, error.kind, str(error), attempts
                )
            if attempts > self._retry.retries:
                return failure, attempts
            await asyncio.sleep(self._retry.delay(attempts - 1, retry_after))

    async def tokenize(self, body: dict[str, Any]) -> int | RequestError:
        """The server's own token count of the prompt `body` renders to, from its
        tokenization endpoint: `POST /tokenize` at the server root, with `messages`, as
        SGLang serves it (serving_tokenize.py, answering `count`), and vLLM has the route. An
        error where the server has none (404) or it fails; not retried."""
        url = server_root(str(self._sdk.base_url)) + "/tokenize"
        try:
            async with self._slots:
                answer = await self._sdk.post(url, cast_to=object, body=body)
        except openai.APIStatusError as error:
            message, excerpt = _status_error_message(error)
            return RequestError(ErrorClass.API, type(error).__name__, message, 1, error.status_code, excerpt)
        except (openai.APITimeoutError, openai.APIConnectionError) as error:
            return RequestError(ErrorClass.INFRA, type(error).__name__, str(error), 1)
        count = answer.get("count") if isinstance(answer, dict) else None
        if isinstance(count, bool) or not isinstance(count, int):
            return RequestError(ErrorClass.API, "MalformedTokenize", f"no integer count in {_excerpt(str(answer))}", 1)
        return count

    async def _send_once(self, body: dict[str, Any]) -> Completion:
        """One attempt. The SDK builds and sends the request and turns HTTP errors into its
        exceptions; the body is read raw, so that what the server really sent (null
        fields, frame order, repeated tool names) reaches the checks unchanged and no
        per-frame objects are built."""
        started = time.monotonic()
        stream = bool(body.get("stream"))
        # The body goes out exactly as recorded, through `extra_body`, which the SDK merges
        # into the JSON as it is; its typed parameters it would walk and transform, which
        # costs a third of the client's CPU on short requests.
        request = self._sdk.chat.completions.with_streaming_response.create(
            model=body["model"], messages=[], stream=stream, extra_body=body
        )
        response = await _guarded(request.__aenter__())
        try:
            if not stream:
                raw = await _guarded(response.read())
                return from_message(_json_object(raw, "response"), started)
            assembler = StreamAssembler(started)
            async for data in sse_data(response.iter_lines()):
                # Read on past [DONE] to the end of the body: a connection left unread
                # cannot be reused, and a new connection per request costs both sides.
                if assembler.stats.done_marker:
                    continue
                if data.strip() == "[DONE]":
                    assembler.stats.done_marker = True
                    continue
                frame = _json_object(data, "stream frame")
                if "error" in frame and not frame.get("choices"):
                    raise TransportFault(
                        "ErrorEvent", f"the server sent an error mid-stream: {_excerpt(json.dumps(frame))}"
                    )
                assembler.feed(frame)
        finally:
            await request.__aexit__(None, None, None)
        if not assembler.finished:
            raise TransportFault(
                "IncompleteStream", f"the stream closed after {assembler.stats.frames} frame(s) without a finish_reason"
            )
        stats = assembler.stats
        usage_requested = bool((body.get("stream_options") or {}).get("include_usage"))
        if not stats.done_marker and usage_requested and not stats.usage_frames:
            # A stream cut after its finish frame has lost its usage frame, which the checks
            # would blame on the server's API: a cut connection until a retry says otherwise.
            raise TransportFault(
                "IncompleteStream",
                f"the stream closed after {stats.frames} frame(s) with {stats.finish_frames} finish frame(s), "
                "no usage frame and no final data: [DONE]",
            )
        # Everything but [DONE] arrived: the server left it out (the API's omission, which
        # the smoke suite's streaming_matches_non_streaming reports), and nothing the checks read is lost.
        return assembler.result()


def _json_object(raw: str | bytes, what: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except ValueError:
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        raise TransportFault("MalformedJSON", f"the {what} is not JSON: {_excerpt(text)}") from None
    if not isinstance(parsed, dict):
        raise TransportFault("MalformedJSON", f"the {what} is not a JSON object: {_excerpt(str(parsed))}")
    return parsed
