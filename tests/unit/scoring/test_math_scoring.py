"""Math answer scoring: boxed extraction, math-verify and its fallbacks, the thread rules
for math-verify's signal-based timeouts, GSM8K's lm-eval extractions, and the authored
math fixture (every reply scores correct, every wrong reply does not)."""

from __future__ import annotations

import importlib.util
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest

from k3conformance.datasets.bundled import load_fixture
from k3conformance.scoring import math_answers as math_scoring
from k3conformance.scoring.math_answers import (
    MathScore,
    extract_boxed,
    gsm8k_flexible,
    gsm8k_gold,
    gsm8k_strict,
    normalize_answer,
    score_gsm8k,
    score_math,
    signal_timeouts_usable,
)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


# math-verify (which brings SymPy) is what the scoring is built on; without it answers are
# compared as normalised strings, and these tests of the symbolic paths cannot run.
needs_math_verify = pytest.mark.skipif(not _installed("math_verify"), reason="math-verify is not installed")
needs_sympy = pytest.mark.skipif(not _installed("sympy"), reason="sympy is not installed")


@pytest.fixture(autouse=True)
def fresh_verdicts() -> Iterator[None]:
    # Verdicts are cached by (gold, answer); tests that swap the engine must not see old ones.
    math_scoring._compare.cache_clear()
    yield
    math_scoring._compare.cache_clear()


def _without_math_verify(monkeypatch: pytest.MonkeyPatch, module: Any = None) -> None:
    monkeypatch.setattr(math_scoring, "_math_verify", lambda: module)


# ---------------------------------------------------------------------------
# extract_boxed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so the answer is \boxed{42}.", "42"),
        (r"first \boxed{1}, then finally \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{\frac{\sqrt{3}}{2}}", r"\frac{\sqrt{3}}{2}"),
        (r"\fbox{ 7 }", "7"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
        (r"\boxed{\left\{ x \right\}}", r"\left\{ x \right\}"),
        (r"$\boxed 5$", "5"),
        (r"\boxed {12}", "12"),
        (r"\boxed{}", ""),
    ],
)
def test_extract_boxed_takes_the_last_box(text: str, expected: str) -> None:
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    "text", [None, "", "The answer is 42.", r"\boxed{12", r"\boxed{1} and \boxed{2", r"\boxedtext{3}"]
)
def test_extract_boxed_without_a_complete_box_is_none(text: str | None) -> None:
    assert extract_boxed(text) is None


# ---------------------------------------------------------------------------
# score_math


@needs_math_verify
@pytest.mark.parametrize(
    ("gold", "response"),
    [
        ("18", r"\boxed{18}"),
        ("18", r"\boxed{18.0}"),
        ("1,234", r"\boxed{1234}"),
        ("-3.5", r"\boxed{-3.50}"),
        (r"\frac{3}{4}", r"\boxed{0.75}"),
        (r"\frac{3}{4}", r"\boxed{\dfrac{3}{4}}"),
        (r"\frac{3}{4}", r"\boxed{3/4}"),
        (r"2\sqrt{3}", r"\boxed{\sqrt{12}}"),
        (r"100 - 25\pi", r"\boxed{-25\pi + 100}"),
        (r"x^2 + 1", r"\boxed{1 + x^2}"),
        (r"\left( 3, \frac{\pi}{2} \right)", r"\boxed{(3, \frac{\pi}{2})}"),
        (r"\{1, 2\}", r"\boxed{\{2, 1\}}"),
        ("x=3", r"\boxed{3}"),
        ("12", r"\boxed{12 \text{ cm}}"),
        (r"The answer is \boxed{7}.", r"\boxed{7}"),
    ],
)
def test_equivalent_answers_score_correct(gold: str, response: str) -> None:
    result = score_math(gold, f"Some working.\n\nThe final answer is ${response}$.")
    assert result.correct, result
    assert result.method in ("math-verify", "exact")


@pytest.mark.parametrize(
    ("gold", "response"),
    [
        ("18", r"\boxed{17}"),
        (r"\frac{3}{4}", r"\boxed{\frac{4}{3}}"),
        (r"2\sqrt{3}", r"\boxed{2\sqrt{2}}"),
        (r"12x", r"\boxed{12x + 18}"),
        (r"100 - 25\pi", r"\boxed{100 - 100\pi}"),
    ],
)
def test_different_answers_score_wrong(gold: str, response: str) -> None:
    assert not score_math(gold, response).correct


def test_no_boxed_answer_is_recorded_as_no_answer() -> None:
    assert score_math("42", "The answer is 42.") == MathScore(False, None, "none")
    assert score_math("42", None) == MathScore(False, None, "none")
    assert score_math("42", r"\boxed{ }") == MathScore(False, "", "none")


def test_plain_numbers_never_reach_math_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fast path that makes GSM8K-sized runs take seconds: no LaTeX parsing at all.
    def fail() -> None:
        raise AssertionError("math-verify was loaded for two plain numbers")

    monkeypatch.setattr(math_scoring, "_math_verify", fail)
    assert score_math("1,078", r"\boxed{1078}") == MathScore(True, "1078", "exact")
    assert score_math("1078", r"\boxed{1012}") == MathScore(False, "1012", "exact")


def test_math_verify_gets_gold_first_and_main_thread_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, Any, Any]] = []

    def parse(text: str, parsing_timeout: int | None = 5) -> list[str]:
        calls.append(("parse", text, parsing_timeout))
        return [text]

    def verify(gold: Any, target: Any, timeout_seconds: int | None = 5) -> bool:
        calls.append(("verify", (gold, target), timeout_seconds))
        return True

    _without_math_verify(monkeypatch, SimpleNamespace(parse=parse, verify=verify))
    assert score_math(r"\frac{1}{2}", r"\boxed{0.5}") == MathScore(True, "0.5", "math-verify")
    assert calls == [
        ("parse", r"\boxed{\frac{1}{2}}", math_scoring.MATH_VERIFY_TIMEOUT_SECONDS),
        ("parse", r"\boxed{0.5}", math_scoring.MATH_VERIFY_TIMEOUT_SECONDS),
        ("verify", ([r"\boxed{\frac{1}{2}}"], [r"\boxed{0.5}"]), math_scoring.MATH_VERIFY_TIMEOUT_SECONDS),
    ]


def test_worker_threads_pass_no_timeouts_to_math_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    timeouts: list[Any] = []

    def parse(text: str, parsing_timeout: int | None = 5) -> list[str]:
        timeouts.append(parsing_timeout)
        return [text]

    def verify(gold: Any, target: Any, timeout_seconds: int | None = 5) -> bool:
        timeouts.append(timeout_seconds)
        return False

    _without_math_verify(monkeypatch, SimpleNamespace(parse=parse, verify=verify))
    with ThreadPoolExecutor(max_workers=1) as pool:
        result = pool.submit(score_math, r"\frac{1}{2}", r"\boxed{0.4}").result()
    assert result == MathScore(False, "0.4", "math-verify")
    assert timeouts == [None, None, None]


@needs_math_verify
def test_real_math_verify_works_in_worker_threads() -> None:
    cases = [(r"2\sqrt{3}", r"\boxed{\sqrt{12}}", True), (r"\frac{5}{36}", r"\boxed{\frac{1}{12}}", False)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda case: score_math(case[0], case[1]), cases))
    assert [r.correct for r in results] == [True, False]
    assert {r.method for r in results} == {"math-verify"}


def test_signal_timeouts_only_in_the_main_thread_with_no_timer_armed() -> None:
    assert threading.current_thread() is threading.main_thread()
    if signal.getitimer(signal.ITIMER_REAL)[0]:
        pytest.skip("a real-time timer is armed around this test (pytest-timeout's signal method?)")
    assert signal_timeouts_usable()
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(signal_timeouts_usable).result() is False
    # alarm() would silently cancel a timer someone else armed (pytest-timeout, say).
    previous = signal.setitimer(signal.ITIMER_REAL, 300)
    try:
        assert not signal_timeouts_usable()
    finally:
        signal.setitimer(signal.ITIMER_REAL, *previous)


@pytest.mark.parametrize("answer", [r"9^{9^{9}}", "9^9^9", "9**9**9", "2^{10000000}", "123456!"])
def test_runaway_answers_skip_sympy_even_in_threads(answer: str) -> None:
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=1) as pool:
        result = pool.submit(score_math, "5", rf"\boxed{{{answer}}}").result(timeout=30)
    assert result == MathScore(False, answer, "exact")
    assert time.perf_counter() - started < 5


_ENGINE_PACKAGES = ("math_verify", "latex2sympy2_extended", "sympy", "mpmath", "antlr4")


def _engine_modules() -> dict[str, Any]:
    return {name: module for name, module in sys.modules.items() if name.split(".")[0] in _ENGINE_PACKAGES}


@needs_math_verify
def test_a_reset_of_sys_modules_does_not_mix_two_sympy_copies() -> None:
    # pytester's in-process runs snapshot sys.modules and restore it afterwards. Anything
    # imported during such a run (a second copy of math-verify and SymPy) must not be
    # used once the first copy is back: the two copies' objects never compare equal.
    score_math(r"\frac{1}{2}", r"\boxed{0.5}")  # the session's copy, imported if it was not yet
    original = _engine_modules()
    for name in original:
        del sys.modules[name]
    try:
        assert score_math(r"\frac{2}{4}", r"\boxed{0.5}").correct  # imports a second copy
    finally:
        for name in _engine_modules():
            del sys.modules[name]
        sys.modules.update(original)
    math_scoring._compare.cache_clear()
    for gold, response in [
        (r"2\sqrt{3}", r"\boxed{\sqrt{12}}"),
        (r"\{1, 2\}", r"\boxed{\{2, 1\}}"),
        ("x^2 + 1", r"\boxed{1 + x^2}"),
    ]:
        assert score_math(gold, response) == MathScore(True, extract_boxed(response), "math-verify")


@needs_sympy
def test_without_math_verify_sympy_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_math_verify(monkeypatch)
    assert score_math(r"2\sqrt{3}", r"\boxed{\sqrt{12}}") == MathScore(True, r"\sqrt{12}", "sympy")
    assert score_math(r"\frac{3}{4}", r"\boxed{\dfrac{6}{8}}") == MathScore(True, r"\dfrac{6}{8}", "sympy")
    assert score_math(r"\frac{\sqrt{2}}{2}", r"\boxed{\frac{1}{\sqrt{2}}}").correct
    assert score_math(r"(x+1)^2", r"\boxed{x^2 + 2x + 1}") == MathScore(True, "x^2 + 2x + 1", "sympy")
    assert score_math(r"2\sqrt{3}", r"\boxed{2\sqrt{2}}") == MathScore(False, r"2\sqrt{2}", "sympy")


@needs_sympy
def test_when_math_verify_raises_the_fallbacks_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(text: str, parsing_timeout: int | None = 5) -> list[str]:
        raise ValueError("signal only works in main thread of the main interpreter")

    _without_math_verify(monkeypatch, SimpleNamespace(parse=parse, verify=None))
    assert score_math(r"\frac{1}{2}", r"\boxed{0.5}") == MathScore(True, "0.5", "sympy")


def test_without_any_engine_normalised_strings_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_math_verify(monkeypatch)
    assert score_math(r"\text{Evelyn}", r"\boxed{\text{ Evelyn }}") == MathScore(True, r"\text{ Evelyn }", "exact")
    assert score_math(r"\left( 1, 2 \right)", r"\boxed{(1,2)}") == MathScore(True, "(1,2)", "exact")
    assert not score_math(r"\text{Evelyn}", r"\boxed{Eve}").correct


@pytest.mark.parametrize("answer", ["exit()", "__import__('os').system('true')", "open(1)", r"\text{quit}()"])
def test_the_sympy_fallback_evaluates_no_python_names(monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    # parse_expr runs eval(); only single letters, sqrt and pi may reach it.
    _without_math_verify(monkeypatch)
    assert score_math("1", rf"\boxed{{{answer}}}") == MathScore(False, answer, "exact")


def test_normalize_answer() -> None:
    assert normalize_answer(r"\left( 3, \dfrac{\pi}{2} \right).") == r"(3,\frac{\pi}{2})"
    assert normalize_answer(r"\$ 18") == "18"
    assert normalize_answer(r"90^\circ") == "90"


# ---------------------------------------------------------------------------
# GSM8K, as lm-evaluation-harness extracts it


def test_gsm8k_strict_takes_the_first_marked_number() -> None:
    assert gsm8k_strict("48 + 24 = 72\n#### 72") == "72"
    assert gsm8k_strict("#### 1,234.") == "1234"
    assert gsm8k_strict("#### -3.5\nlater #### 9") == "-3.5"
    assert gsm8k_strict("The answer is 72.") is None
    assert gsm8k_strict("####72") is None  # the harness's regex needs the space
    assert gsm8k_strict(None) is None


def test_gsm8k_flexible_takes_the_last_number_like_run() -> None:
    assert gsm8k_flexible("She has 5 apples, then 12 more: 17 apples.") == "17"
    assert gsm8k_flexible("The total is $1,234.50.") == "1234.50"
    assert gsm8k_flexible("It costs 7") == "7"
    assert gsm8k_flexible("x = -4") == "-4"
    assert gsm8k_flexible("no digits here") is None
    assert gsm8k_flexible(None) is None


def test_gsm8k_gold_is_the_number_after_the_marker() -> None:
    assert gsm8k_gold("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72") == "72"
    assert gsm8k_gold("1,000") == "1000"


def test_score_gsm8k_scores_three_ways_comparing_numbers() -> None:
    gold = "She sold 48 + 24 = 72 clips.\n#### 72"
    scores = score_gsm8k(gold, "48 + 24 = 72.00 clips\n#### 72.0\n\nSo \\boxed{72}")
    assert scores == {
        "boxed": MathScore(True, "72", "exact"),
        "strict": MathScore(True, "72.0", "exact"),
        "flexible": MathScore(True, "72", "exact"),
    }
    unmarked = score_gsm8k("72", "The answer is 70 + 2 = 72.")
    assert unmarked["boxed"] == MathScore(False, None, "none")
    assert unmarked["strict"] == MathScore(False, None, "none")
    assert unmarked["flexible"] == MathScore(True, "72", "exact")
    assert not score_gsm8k("72", "#### 27")["strict"].correct
    assert score_gsm8k("72", None)["flexible"] == MathScore(False, None, "none")


# ---------------------------------------------------------------------------
# The authored fixture


MATH_ITEMS = load_fixture("math").items


def test_math_fixture_shape() -> None:
    fixture = load_fixture("math")
    assert fixture.extra["suite"] == "math"
    assert fixture.extra["license"] == "Authored for k3conformance (Apache-2.0)"
    ids = [item["id"] for item in MATH_ITEMS]
    assert len(ids) == len(set(ids))
    categories = [item["category"] for item in MATH_ITEMS]
    assert set(categories) == {"word", "competition"}
    assert categories.count("word") >= 25 and categories.count("competition") >= 15
    for item in MATH_ITEMS:
        assert item["simulator"]["graded"] is True
        assert item["prompt"].strip() and "boxed" not in item["prompt"]


@pytest.mark.parametrize("item", MATH_ITEMS, ids=[item["id"] for item in MATH_ITEMS])
def test_math_fixture_reply_is_right_and_wrong_reply_is_wrong(item: dict[str, Any]) -> None:
    right = score_math(item["answer"], item["simulator"]["reply"])
    wrong = score_math(item["answer"], item["simulator"]["wrong_reply"])
    assert right.correct, right
    assert wrong.extracted is not None and not wrong.correct, wrong


@pytest.mark.parametrize("item", [i for i in MATH_ITEMS if i["category"] == "word"], ids=lambda item: item["id"])
def test_word_problems_have_integer_answers(item: dict[str, Any]) -> None:
    assert item["answer"].isdigit()
