"""How much the plugin costs next to the endpoint: the same requests through pytest and
k3conformance, and through a plain `AsyncOpenAI` + `asyncio.gather` loop, in one run
against one reference deployment with a simulated latency per request.

    python benchmarks/bench_throughput.py                  # 2,000 requests, concurrency 64, 0.2 s
    python benchmarks/bench_throughput.py --requests 500 --concurrency 16 --latency 0.1

Both sides run as child processes (each pays its own interpreter start-up and imports)
against a reference server in a third process, so none of them shares a GIL with
another. Prints both wall times, their ratio, the ideal N*L/C and each side's peak
resident memory. The goal: the plugin within 1.10x of the plain loop.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PROMPT = "Benchmark request {index}: say something short."

PLAIN_LOOP = """
import asyncio, json, resource, sys, time
import openai
from k3conformance.options import Settings
from k3conformance.request_body import build_body

url, requests, concurrency, stream, effort = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]

async def main():
    client = openai.AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0, timeout=600)
    slots = asyncio.Semaphore(concurrency)
    settings = Settings(endpoint=url, model=None, api_key=None, shape=None, results_dir=".", think_mode="opensource",
                        reasoning_effort=effort, concurrency=concurrency, timeout=600, retries=0, backoff=0, samples=1,
                        limit=None, max_tokens=None, temperature=1.0, top_p=0.95, seed=1234,
                        strict_reasoning_field=False, cache_prompt_words=3000, math_dataset=(), coding_dataset=(),
                        context_lengths=(), resume=False)
    model = (await client.models.list()).data[0].id

    async def one(index):
        body = build_body({"messages": [{"role": "user", "content": %(prompt)r.format(index=index)}], "stream": stream},
                          settings=settings, model=model, sample=0, suite_max_tokens=None)
        extra = {key: body.pop(key) for key in ("chat_template_kwargs",)}
        async with slots:
            if stream:
                response = await client.chat.completions.create(**body, extra_body=extra)
                text = []
                async for chunk in response:
                    if chunk.choices and chunk.choices[0].delta.content:
                        text.append(chunk.choices[0].delta.content)
                return "".join(text)
            response = await client.chat.completions.create(**body, extra_body=extra)
            return response.choices[0].message.content

    started = time.perf_counter()
    answers = await asyncio.gather(*(one(index) for index in range(requests)))
    elapsed = time.perf_counter() - started
    assert all(answers)
    print(json.dumps({"requests_s": elapsed, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))

asyncio.run(main())
""" % {"prompt": PROMPT}

SUITE = """
import pytest
from k3conformance import Probe

PROBES = [
    Probe("bench", f"r{index:05d}", requests={"ask": {"messages": [{"role": "user", "content": %(prompt)r.format(index=index)}], "stream": STREAM}}, samples=1)
    for index in range(REQUESTS)
]

@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_answered(probe, k3_result):
    assert k3_result.completion("ask").content
"""

CONFTEST = """
import json, resource, time
import pytest

STARTED = time.perf_counter()

def pytest_unconfigure(config):
    with open("memory.json", "w") as handle:
        json.dump({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}, handle)
"""


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "k3conformance", "serve", "--latency", str(latency), "--exit-with-stdin"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def run_plugin(url: str, requests: int, concurrency: int, stream: bool, effort: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        suite = SUITE % {"prompt": PROMPT}
        (folder / "test_bench.py").write_text(f"STREAM = {stream}\nREQUESTS = {requests}\n" + textwrap.dedent(suite))
        (folder / "conftest.py").write_text(CONFTEST)
        command = [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--k3-endpoint", url, "--k3-shape", "bench",
            "--k3-results-dir", str(folder / "results"), "--k3-concurrency", str(concurrency),
            "--k3-reasoning-effort", effort, "--k3-retries", "0",
        ]
        started = time.perf_counter()
        finished = subprocess.run(command, cwd=folder, capture_output=True, text=True)
        elapsed = time.perf_counter() - started
        if finished.returncode != 0:
            raise SystemExit(f"the plugin run failed:\n{finished.stdout[-3000:]}\n{finished.stderr[-3000:]}")
        memory = json.loads((folder / "memory.json").read_text())["peak_rss_mb"]
    return elapsed, memory


def run_plain(url: str, requests: int, concurrency: int, stream: bool, effort: str) -> tuple[float, float, float]:
    started = time.perf_counter()
    finished = subprocess.run(
        [sys.executable, "-c", PLAIN_LOOP, url, str(requests), str(concurrency), "1" if stream else "0", effort],
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    if finished.returncode != 0:
        raise SystemExit(f"the plain loop failed:\n{finished.stderr[-3000:]}")
    report = json.loads(finished.stdout.strip().splitlines()[-1])
    return elapsed, report["requests_s"], report["peak_rss_mb"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--effort", default="low", choices=("low", "high", "max"))
    parser.add_argument("--no-stream", action="store_true", help="Send non-streaming requests")
    arguments = parser.parse_args()
    stream = not arguments.no_stream
    server, url = start_server(arguments.latency)
    try:
        plain_wall, plain_requests, plain_memory = run_plain(url, arguments.requests, arguments.concurrency, stream, arguments.effort)
        plugin_wall, plugin_memory = run_plugin(url, arguments.requests, arguments.concurrency, stream, arguments.effort)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(10)
    ideal = arguments.requests * arguments.latency / arguments.concurrency
    mode = "streaming" if stream else "non-streaming"
    print(f"{arguments.requests} {mode} requests, concurrency {arguments.concurrency}, latency {arguments.latency} s, effort {arguments.effort}")
    print(f"ideal N*L/C:             {ideal:7.2f} s")
    print(f"plain AsyncOpenAI loop:  {plain_wall:7.2f} s wall ({plain_requests:.2f} s in requests), peak RSS {plain_memory:6.1f} MB")
    print(f"pytest + k3conformance:  {plugin_wall:7.2f} s wall, peak RSS {plugin_memory:6.1f} MB")
    print(f"ratio plugin / plain:    {plugin_wall / plain_wall:7.3f}  (goal <= 1.10)")


if __name__ == "__main__":
    main()
