"""How fast `detect` reads long outputs.

    python benchmarks/bench_repetition.py                 # 1, 10 and 100 MB
    python benchmarks/bench_repetition.py --sizes 1 10

Scenarios per size:
  * prose: varied prose, no loop. Loops are looked for anywhere (a loop the model escapes
    sits in the middle), so the whole text is tokenised and its 4-gram hashes sorted: the
    time should grow about linearly with the size;
  * prose + loop: healthy prose whose second half is one block repeated to the end (the
    reported failure: every output over 50K tokens looped after a healthy start). The loop
    is followed with vectorised comparisons, so it should cost no more than the prose.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from k3conformance.scoring.repetition import detect

MB = 1_000_000
_WORDS = ("the", "kernel", "routes", "each", "token", "to", "eight", "experts", "and", "the", "server", "streams",
          "answers", "back")  # fmt: skip
_BLOCK = "Wait, let me verify the routing of token 17 to expert 3 once more.\n"


def prose(chars: int, seed: int = 0) -> str:
    """Varied sentences built from a small pool, then repeated with fresh numbers so that
    100 MB does not take minutes to generate in Python."""
    rng = random.Random(seed)
    pool = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 18))).capitalize() for _ in range(5_000)]
    pieces: list[str] = []
    size = 0
    number = 0
    while size < chars:
        piece = f"{rng.choice(pool)} {number}. "
        pieces.append(piece)
        size += len(piece)
        number += 1
    return "".join(pieces)[:chars]


def best_seconds(text: str, repeats: int) -> tuple[float, bool]:
    """Best wall time of `detect` over `repeats` runs, and its verdict."""
    best = float("inf")
    looping = False
    for _ in range(repeats):
        started = time.perf_counter()
        looping = detect(text).looping
        best = min(best, time.perf_counter() - started)
    return best, looping


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 100], help="sizes in MB")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{'scenario':<14} {'MB':>5} {'seconds':>9} {'ms per MB':>10} {'MB/s':>10} looping")
    for size in args.sizes:
        chars = size * MB
        healthy = prose(chars)
        half = chars // 2
        looped = healthy[:half] + (_BLOCK * (half // len(_BLOCK) + 1))[: chars - half]
        for name, text in (("prose", healthy), ("prose + loop", looped)):
            seconds, looping = best_seconds(text, args.repeats)
            print(
                f"{name:<14} {size:>5} {seconds:>9.4f} {1000 * seconds / size:>10.3f} {size / seconds:>10.0f} {looping}"
            )


if __name__ == "__main__":
    main()
