"""Load and memory: long streamed outputs at high concurrency, through pytest + k3conformance
and through a plain `AsyncOpenAI` loop, at several run sizes to show memory flat in N.

    python benchmarks/bench_load.py                                   # N 1,000 3,000 10,000; C 256; 100 KB; 0.5 s
    python benchmarks/bench_load.py --requests 200 --output-bytes 20000
    python benchmarks/bench_load.py --requests 3000 --plain-up-to 0 --tracemalloc 15   # where the memory is

The reference deployment (a simulator, not K3) runs in its own process with
`--output-bytes`, so that every answer reasons about that many bytes, and waits
`--latency` seconds before answering. Each client is a child process whose wall time,
CPU time and peak resident memory are measured from outside. Records go to a temporary
folder on disk (N x output bytes of it) and are deleted after each run.

The ideal N*L/C counts only the simulated latency. Streaming N x 100 KB also costs CPU
on both ends (the simulator writes about 4,000 frames per answer), so on a small machine
the wall time is bounded by CPU, not by L; the CPU columns show where it went. Other
processes on the machine count too: the load average is printed with every row.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from child_runs import ReferenceServer, run_plain, run_plugin

from k3conformance.reference.words import words_for_bytes

COLUMNS = (
    f"{'N':>6} {'C':>4} {'output':>7} {'ideal':>7} {'plain':>8} {'plugin':>8} {'ratio':>6} "
    f"{'RSS plain':>10} {'RSS plugin':>11} {'CPU plain':>10} {'CPU plugin':>11} {'CPU server':>15} {'load':>10}"
)


def load_average() -> float:
    return os.getloadavg()[0]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, nargs="+", default=[1000, 3000, 10000], help="run sizes N")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the server waits before each answer")
    parser.add_argument("--output-bytes", type=int, default=100_000, help="reasoning bytes per answer")
    parser.add_argument("--effort", default="low", choices=("low", "high", "max"))
    parser.add_argument(
        "--plain-up-to", type=int, default=1000, metavar="N",
        help="run the plain loop only for sizes up to N (0: never); it costs ~0.3 CPU s per 100 KB answer",
    )  # fmt: skip
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="TOP", help="list the plugin's TOP allocations")
    arguments = parser.parse_args(argv)
    concurrency, latency, output_bytes = arguments.concurrency, arguments.latency, arguments.output_bytes
    # Room for the simulator's +20% spread around the mean length; a truncated answer would fail the suite.
    max_tokens = max(65_536, 2 * words_for_bytes(output_bytes))
    print(
        f"streamed requests, {output_bytes / 1000:.0f} KB of reasoning each, latency {latency} s, {os.cpu_count()} CPUs"
    )
    print("times in seconds, RSS in MB; CPU server: the server's CPU seconds during the plain and the plugin run")
    print(COLUMNS, flush=True)
    with closing(ReferenceServer(latency, output_bytes)) as server:
        for requests in arguments.requests:
            load_before = load_average()
            cpu_start = server.cpu_s()
            plain = None
            if requests <= arguments.plain_up_to:
                plain = run_plain(server.url, requests=requests, concurrency=concurrency, stream=True,
                                  effort=arguments.effort, max_tokens=max_tokens)  # fmt: skip
                if plain.completion_tokens < 0.75 * requests * words_for_bytes(output_bytes):
                    raise SystemExit(f"the plain loop got {plain.completion_tokens} tokens: outputs were not padded")
            cpu_between = server.cpu_s()
            plugin, allocations = run_plugin(
                server.url,
                requests=requests,
                concurrency=concurrency,
                stream=True,
                effort=arguments.effort,
                max_tokens=max_tokens,
                min_reasoning_chars=int(0.75 * output_bytes),
                tracemalloc_top=arguments.tracemalloc,
            )
            cpu_end = server.cpu_s()
            ideal = requests * latency / concurrency
            plain_cells = (
                f"{plain.child.wall_s:>8.1f} {plugin.wall_s:>8.1f} {plugin.wall_s / plain.child.wall_s:>6.2f} "
                f"{plain.child.peak_rss_mb:>10.0f} {plugin.peak_rss_mb:>11.0f} {plain.child.cpu_s:>10.1f}"
                if plain
                else f"{'-':>8} {plugin.wall_s:>8.1f} {'-':>6} {'-':>10} {plugin.peak_rss_mb:>11.0f} {'-':>10}"
            )
            server_cpu = f"{cpu_between - cpu_start:.0f} / {cpu_end - cpu_between:.0f}"
            print(
                f"{requests:>6} {concurrency:>4} {output_bytes / 1000:>5.0f}KB {ideal:>7.1f} {plain_cells} "
                f"{plugin.cpu_s:>11.1f} {server_cpu:>15} {load_before:>4.1f}-{load_average():<4.1f}",
                flush=True,
            )
            if allocations:
                print(allocations, flush=True)


if __name__ == "__main__":
    main()
