"""How fast `score_math` scores answers, in the main thread (math-verify's signal timeouts on).

    python benchmarks/bench_math_scoring.py              # ~5,000 answers per scenario
    python benchmarks/bench_math_scoring.py --answers 20000

Scenarios:
  * import: `import math_verify` and `import k3conformance.scoring.math_answers` in fresh
    interpreters (the latter defers math-verify to the first answer that needs it);
  * fixture, cached: the math fixture's replies and wrong replies repeated to N, as a run
    with many samples per problem scores them (the verdict cache answers repeats);
  * fixture, uncached: the same answers with the verdict cache cleared before each one,
    so every answer is extracted, parsed (math-verify keeps its own parse cache) and compared;
  * unique integers: N distinct plain-number answers (the GSM8K case, no SymPy);
  * unique LaTeX: N distinct fractions and radicals, half right and half wrong, so no
    cache of any kind helps (a wrong radical is the slowest case: SymPy's simplify).
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from k3conformance.datasets.bundled import load_fixture
from k3conformance.scoring import math_answers as math_scoring
from k3conformance.scoring.math_answers import score_math

Pair = tuple[str, str]


def import_seconds(module: str, repeats: int = 3) -> float:
    """Best wall time of importing `module` in a fresh interpreter."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(repeats)
    ]
    return min(runs)


def fixture_pairs(count: int) -> list[Pair]:
    items = load_fixture("math").items
    answers = [(item["answer"], item["simulator"][key]) for item in items for key in ("reply", "wrong_reply")]
    return list(itertools.islice(itertools.cycle(answers), count))


def unique_integer_pairs(count: int) -> list[Pair]:
    return [
        (str(1000 + n), f"The total is {1000 + n + n % 2}.\n\nThe final answer is $\\boxed{{{1000 + n + n % 2}}}$.")
        for n in range(count)
    ]


def unique_latex_pairs(count: int) -> list[Pair]:
    """Distinct fractions and radicals, half of them equal to the gold in another form."""
    pairs = []
    for n in range(1, count + 1):
        wrong = n % 2  # 0 for equal, 1 for off by a little
        if n % 4 < 2:
            gold, answer = f"\\frac{{{n}}}{{{n + 7}}}", f"\\frac{{{2 * n}}}{{{2 * n + 14 + wrong}}}"
        else:
            gold, answer = f"{n}\\sqrt{{3}}", f"\\sqrt{{{3 * n * n + wrong}}}"
        pairs.append((gold, f"Simplifying gives the result.\n\nThe final answer is $\\boxed{{{answer}}}$."))
    return pairs


def timed(pairs: Sequence[Pair], before_each: Callable[[], None] | None = None) -> tuple[float, int]:
    correct = 0
    started = time.perf_counter()
    for gold, response in pairs:
        if before_each is not None:
            before_each()
        correct += score_math(gold, response).correct
    return time.perf_counter() - started, correct


def report(label: str, pairs: Sequence[Pair], seconds: float, correct: int) -> None:
    print(f"| {label} | {len(pairs):,} | {seconds:.2f} s | {len(pairs) / seconds:,.0f} | {correct:,} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=5000, help="answers per scenario (default 5,000)")
    args = parser.parse_args()

    print(f"import math_verify (fresh interpreter, best of 3): {import_seconds('math_verify'):.2f} s")
    print(
        f"import k3conformance.scoring.math_answers (fresh interpreter, best of 3): {import_seconds('k3conformance.scoring.math_answers'):.3f} s"
    )
    module = math_scoring._math_verify()
    version = getattr(module, "__version__", None) or _distribution_version("math-verify")
    print(f"math-verify {version}, main thread, signal timeouts: {math_scoring.signal_timeouts_usable()}")
    print()
    print("| scenario | answers | time | answers/s | correct |")
    print("|---|---|---|---|---|")

    fixture = fixture_pairs(args.answers)
    math_scoring._compare.cache_clear()
    first_pass = fixture[: 2 * len(load_fixture("math").items)]
    report("fixture, first pass (cold caches)", first_pass, *timed(first_pass))
    math_scoring._compare.cache_clear()
    report("fixture, cached", fixture, *timed(fixture))
    report("fixture, uncached", fixture, *timed(fixture, before_each=math_scoring._compare.cache_clear))
    integers = unique_integer_pairs(args.answers)
    report("unique integers", integers, *timed(integers))
    latex = unique_latex_pairs(args.answers)
    report("unique LaTeX (fractions, radicals)", latex, *timed(latex))


def _distribution_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    main()
