"""CPU cost of the reference deployment's wire layer: writing K3's raw output and parsing it
back, per answer, for a short answer and a long looping one, with each available parser.

    python benchmarks/bench_wire.py

Process CPU time, best of 5 rounds, so that a busy shared machine inflates it less than wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from k3conformance.reference.values import SimulatedTurn
from k3conformance.reference.wire import completion_object, stream_frames
from k3conformance.xtml.parsers import PARSER_NAMES, ParserUnavailable, make_parser

SHORT = SimulatedTurn(
    " ".join(["First, the question suggests a careful check."] * 100), "The answer is 42.", (), "stop", 10, 600, 580
)
LONG = SimulatedTurn(
    " ".join(["Wait, the loop bound must cover index 4 before returning."] * 3000), "", (), "length", 10, 32000, 32000
)


def best_ms(action: Callable[[], object], rounds: int = 5, repeat: int = 20) -> float:
    times = []
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(repeat):
            action()
        times.append((time.process_time() - started) / repeat * 1e3)
    return min(times)


def main() -> None:
    for name in PARSER_NAMES:
        try:
            parser = make_parser(name)
        except ParserUnavailable as error:
            print(f"{name}: not run ({error})")
            continue
        for label, completion in (("600-word answer", SHORT), ("32,000-word loop", LONG)):
            envelope = {
                "response_id": "x",
                "created": 0,
                "model": "m",
                "faults": frozenset(),
                "parser": parser,
                "parse_tools": False,
            }
            stream = best_ms(lambda: list(stream_frames(completion, include_usage=True, **envelope)))  # noqa: B023
            whole = best_ms(lambda: completion_object(completion, **envelope))  # noqa: B023
            print(f"{name} {parser.version}, {label}: stream {stream:.2f} ms, whole {whole:.3f} ms")


if __name__ == "__main__":
    main()
