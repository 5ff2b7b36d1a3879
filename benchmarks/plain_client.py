"""The baseline of the client benchmarks: chat requests through `AsyncOpenAI` and
`asyncio.gather` with a semaphore, no pytest and no records. The bodies are built by
k3conformance's own `build_body`, so both sides send the same requests.

    python benchmarks/plain_client.py URL --requests 2000 --concurrency 64 [--no-stream] [--max-tokens T]

Prints one JSON line: the seconds spent in requests and the completion tokens the server
reported (streams: from their usage frames).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from k3conformance.options import OPTIONS, Effort, Settings
from k3conformance.probes.request_body import build_body

PROMPT = "Benchmark request {index}: say something short."


def settings_for(url: str, concurrency: int, effort: Effort, max_tokens: int | None) -> Settings:
    """The plugin's defaults, as a run without options resolves them, with the benchmark's load."""
    defaults = {spec.name: spec.default for spec in OPTIONS}
    overrides = {"endpoint": url, "concurrency": concurrency, "reasoning_effort": effort, "max_tokens": max_tokens}
    return Settings(**{**defaults, **overrides, "retries": 0})


async def run(url: str, requests: int, concurrency: int, stream: bool, settings: Settings) -> tuple[float, int]:
    client = openai.AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0, timeout=600)
    slots = asyncio.Semaphore(concurrency)
    model = (await client.models.list()).data[0].id
    completion_tokens = 0

    async def one(index: int) -> str | None:
        nonlocal completion_tokens
        partial = {"messages": [{"role": "user", "content": PROMPT.format(index=index)}], "stream": stream}
        body: dict[str, Any] = build_body(partial, settings=settings, model=model, sample=0, suite_max_tokens=None)
        extra = {"chat_template_kwargs": body.pop("chat_template_kwargs")}
        async with slots:
            if stream:
                chunks = await client.chat.completions.create(**body, extra_body=extra)
                text: list[str] = []
                async for chunk in chunks:
                    if chunk.usage:
                        completion_tokens += chunk.usage.completion_tokens
                    if chunk.choices and chunk.choices[0].delta.content:
                        text.append(chunk.choices[0].delta.content)
                return "".join(text)
            response = await client.chat.completions.create(**body, extra_body=extra)
            completion_tokens += response.usage.completion_tokens if response.usage else 0
            content: str | None = response.choices[0].message.content
            return content

    started = time.perf_counter()
    answers = await asyncio.gather(*(one(index) for index in range(requests)))
    elapsed = time.perf_counter() - started
    if not all(answers):
        raise SystemExit(f"{sum(not answer for answer in answers)} of {requests} requests came back without content")
    return elapsed, completion_tokens


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--effort", default="low", choices=("low", "high", "max"))
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--no-stream", action="store_true")
    arguments = parser.parse_args(argv)
    settings = settings_for(arguments.url, arguments.concurrency, arguments.effort, arguments.max_tokens)
    elapsed, tokens = asyncio.run(
        run(arguments.url, arguments.requests, arguments.concurrency, not arguments.no_stream, settings)
    )
    print(json.dumps({"requests_s": elapsed, "completion_tokens": tokens}))


if __name__ == "__main__":
    main()
