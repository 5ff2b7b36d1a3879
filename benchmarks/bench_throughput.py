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
from contextlib import closing

from child_runs import ReferenceServer, run_plain, run_plugin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--effort", default="low", choices=("low", "high", "max"))
    parser.add_argument("--no-stream", action="store_true", help="Send non-streaming requests")
    arguments = parser.parse_args()
    stream = not arguments.no_stream
    requests, concurrency, effort = arguments.requests, arguments.concurrency, arguments.effort
    with closing(ReferenceServer(arguments.latency)) as server:
        plain = run_plain(server.url, requests=requests, concurrency=concurrency, stream=stream, effort=effort)
        plugin, _ = run_plugin(server.url, requests=requests, concurrency=concurrency, stream=stream, effort=effort)
    plain_wall, plain_requests, plain_memory = plain.child.wall_s, plain.requests_s, plain.child.peak_rss_mb
    plugin_wall, plugin_memory = plugin.wall_s, plugin.peak_rss_mb
    ideal = arguments.requests * arguments.latency / arguments.concurrency
    mode = "streaming" if stream else "non-streaming"
    print(
        f"{arguments.requests} {mode} requests, concurrency {arguments.concurrency}, latency {arguments.latency} s, effort {arguments.effort}"
    )
    print(f"ideal N*L/C:             {ideal:7.2f} s")
    print(
        f"plain AsyncOpenAI loop:  {plain_wall:7.2f} s wall ({plain_requests:.2f} s in requests), peak RSS {plain_memory:6.1f} MB"
    )
    print(f"pytest + k3conformance:  {plugin_wall:7.2f} s wall, peak RSS {plugin_memory:6.1f} MB")
    print(f"ratio plugin / plain:    {plugin_wall / plain_wall:7.3f}  (goal <= 1.10)")


if __name__ == "__main__":
    main()
