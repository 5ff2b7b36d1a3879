"""Asking a stored run's requests again: each recorded request body sent as it was recorded (the
model id replaced only when asked), to a live endpoint or to a reference deployment (a simulator)
started for the audit, as `pytest --k3-endpoint reference:PROFILE` starts one."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from k3conformance.endpoint.client import EndpointClient, RetryPolicy
from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import RequestError
from k3conformance.endpoint.reference_process import ReferenceProcess
from k3conformance.endpoint.url import is_reference, parse_reference_profile


@dataclass(frozen=True)
class Transport:
    """How the audit reaches the endpoint; the key is held here only, never written or printed."""

    endpoint: str
    api_key: str | None
    model: str | None = None
    concurrency: int = 4
    timeout_s: float = 600.0
    retries: int = 3


Answer = Completion | RequestError


def ask_again(transport: Transport, requests: Sequence[dict[str, Any]]) -> list[Answer]:
    """Each request sent again, in order of `requests`; a reference endpoint is started and stopped here."""
    reference = (
        ReferenceProcess(parse_reference_profile(transport.endpoint)) if is_reference(transport.endpoint) else None
    )
    base_url = reference.url if reference is not None else transport.endpoint
    try:
        return asyncio.run(_ask(transport, base_url, requests))
    finally:
        if reference is not None:
            reference.stop()


async def _ask(transport: Transport, base_url: str, requests: Sequence[dict[str, Any]]) -> list[Answer]:
    client = EndpointClient(
        base_url=base_url,
        api_key=transport.api_key,
        timeout_s=transport.timeout_s,
        concurrency=transport.concurrency,
        retry=RetryPolicy(transport.retries, 1.0),
    )
    try:

        async def one(body: dict[str, Any]) -> Answer:
            sent = {**body, "model": transport.model} if transport.model else dict(body)
            answer, _ = await client.chat(sent)
            return answer

        return list(await asyncio.gather(*(one(body) for body in requests)))
    finally:
        await client.close()
