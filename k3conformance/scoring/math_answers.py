"""Scoring math answers: the last `\\boxed{}` of a response against a gold answer.

Equivalence is decided by HuggingFace's math-verify (LaTeX -> SymPy, then symbolic and
numeric comparison), with cheaper or sturdier paths around it:

* two plain numbers (``42``, ``-3.50``, ``1,234``) are compared exactly as fractions,
  without SymPy: that is most GSM8K answers, and it is ~100x faster than parsing LaTeX;
* when math-verify is not installed or fails, a guarded SymPy comparison of simple
  LaTeX, then a normalised string comparison.

math-verify bounds its work with ``signal.alarm``, which only works in the main thread
and would cancel a timer someone else armed. Elsewhere its timeouts are switched off,
and answers that could make SymPy run for minutes (power towers, huge factorials, very
long expressions) never reach SymPy at all: they are compared as strings.

GSM8K's two lm-evaluation-harness extractions (strict ``#### N`` and flexible "last
number") are here too, so a suite can report them next to the boxed score.
"""

from __future__ import annotations

import importlib
import logging
import re
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache
from types import ModuleType

__all__ = [
    "MATH_VERIFY_TIMEOUT_SECONDS",
    "MathScore",
    "extract_boxed",
    "gsm8k_flexible",
    "gsm8k_gold",
    "gsm8k_strict",
    "normalize_answer",
    "score_gsm8k",
    "score_math",
    "signal_timeouts_usable",
]

# math-verify's own default; whole seconds because it uses signal.alarm.
MATH_VERIFY_TIMEOUT_SECONDS = 5

# Answers longer than this are not final answers but pasted derivations; SymPy on them
# is slow and the verdict meaningless.
_MAX_SYMBOLIC_CHARS = 400

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


@dataclass(frozen=True)
class MathScore:
    correct: bool
    extracted: str | None  # what was compared with the gold; None: the response gave no answer
    method: str  # "math-verify", "sympy", "exact" (numbers or normalised strings), "none"


# ---------------------------------------------------------------------------
# Extraction


def extract_boxed(text: str | None) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`) in `text`, else None.

    Nested and escaped braces are handled. A last box that never closes (a truncated
    response) yields None rather than an earlier box, which may be an intermediate result.
    """
    if not text:
        return None
    last: re.Match[str] | None = None
    for match in _BOX_COMMAND.finditer(text):
        last = match
    if last is None:
        return None
    rest = text[last.end() :]
    stripped = rest.lstrip()
    if stripped.startswith("{"):
        content = _braced_content(stripped)
        return None if content is None else content.strip()
    # MATH solutions sometimes write `\boxed 5`: the argument is one token.
    token = re.match(r"\s+([^\s$]+)", rest)
    return token.group(1) if token else None


def _braced_content(text: str) -> str | None:
    """The content of the group opened by `text[0] == "{"`, or None if it never closes."""
    depth = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2  # `\{` and `\}` are literal braces, not grouping
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[1:index]
        index += 1
    return None


# ---------------------------------------------------------------------------
# Scoring boxed answers


def score_math(gold: str, response: str | None) -> MathScore:
    """Whether the last boxed answer in `response` equals `gold` (LaTeX, or a full
    solution whose last box is the answer). No boxed answer scores as wrong, extracted=None."""
    extracted = extract_boxed(response)
    if extracted is None or not extracted.strip():
        return MathScore(False, extracted, "none")
    gold_answer = extract_boxed(gold) if _BOX_COMMAND.search(gold) else gold
    return _compare(gold_answer if gold_answer is not None else gold, extracted)


# Suites score many samples of the same problem, which often agree; the verdict is a pure
# function of the two strings.
@lru_cache(maxsize=65536)
def _compare(gold: str, extracted: str) -> MathScore:
    numbers = _compare_plain_numbers(gold, extracted)
    if numbers is not None:
        return MathScore(numbers, extracted, "exact")
    if _symbolic_is_safe(gold) and _symbolic_is_safe(extracted):
        verdict = _verify_with_math_verify(gold, extracted)
        if verdict is not None:
            return MathScore(verdict, extracted, "math-verify")
        verdict = _verify_with_sympy(gold, extracted)
        if verdict is not None:
            return MathScore(verdict, extracted, "sympy")
    return MathScore(normalize_answer(gold) == normalize_answer(extracted), extracted, "exact")


_PLAIN_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+")


def _plain_number(text: str) -> Fraction | None:
    candidate = text.strip().replace("{,}", ",")
    if not _PLAIN_NUMBER.fullmatch(candidate):
        return None
    return Fraction(Decimal(candidate.replace(",", "")))


def _compare_plain_numbers(gold: str, extracted: str) -> bool | None:
    """Exact comparison when both sides are plain decimal numbers, else None."""
    gold_number = _plain_number(gold)
    extracted_number = _plain_number(extracted) if gold_number is not None else None
    if gold_number is None or extracted_number is None:
        return None
    return gold_number == extracted_number


# A power whose exponent holds another power (9^{9^9}, 9^9^9), an exponent of 6+ digits,
# or the factorial of a 5+ digit number: SymPy would compute the integer.
_COSTLY = re.compile(r"\^\s*\{[^{}]*\^|\^\s*\d+\s*\^|\^\s*\{?\s*-?\d{6,}|\d{5,}\s*!")


def _symbolic_is_safe(text: str) -> bool:
    if len(text) > _MAX_SYMBOLIC_CHARS:
        return False
    return not _COSTLY.search(text.replace("**", "^"))


# ---------------------------------------------------------------------------
# math-verify


_MISSING_MODULES: set[str] = set()


def _math_verify() -> ModuleType | None:
    # Imported on first use: it brings SymPy and an ANTLR parser (~0.3 s), which a run
    # without math suites should not pay. Through importlib because it ships no type hints.
    # Looked up in sys.modules on every call, never kept here: a module kept across a reset
    # of sys.modules (pytester's in-process runs do one) would mix two copies of SymPy,
    # whose objects fail each other's isinstance checks and compare unequal.
    if "math_verify" in _MISSING_MODULES:
        return None
    try:
        module = importlib.import_module("math_verify")
    except ImportError:
        _MISSING_MODULES.add("math_verify")
        return None
    for name in ("math_verify.parser", "math_verify.grader"):  # addFilter ignores repeats
        logging.getLogger(name).addFilter(_drop_timeout_disabled_warning)
    return module


def _drop_timeout_disabled_warning(record: logging.LogRecord) -> bool:
    # Off the main thread we pass timeout=None on purpose and guard against runaway
    # SymPy ourselves (_symbolic_is_safe); its advice to do so is noise in the run log.
    return not record.getMessage().startswith("Timeout is disabled")


def signal_timeouts_usable() -> bool:
    """Whether math-verify may time itself out with signal.alarm here and now."""
    if threading.current_thread() is not threading.main_thread():
        return False  # signal.signal raises ValueError outside the main thread
    if not hasattr(signal, "setitimer"):
        return False  # Windows: math-verify would start a process per comparison
    # alarm() would cancel a timer already armed (pytest-timeout's signal method, say).
    return signal.getitimer(signal.ITIMER_REAL)[0] == 0


def _verify_with_math_verify(gold: str, extracted: str) -> bool | None:
    """math-verify's verdict, or None when it is missing or could not read an answer."""
    module = _math_verify()
    if module is None:
        return None
    timeout = MATH_VERIFY_TIMEOUT_SECONDS if signal_timeouts_usable() else None
    try:
        gold_parsed = module.parse(f"\\boxed{{{gold}}}", parsing_timeout=timeout)
        extracted_parsed = module.parse(f"\\boxed{{{extracted}}}", parsing_timeout=timeout)
        if not gold_parsed or not extracted_parsed:
            return None
        # Gold first: verify is asymmetric (e.g. "x=3" as gold accepts "3").
        return bool(module.verify(gold_parsed, extracted_parsed, timeout_seconds=timeout))
    except Exception:
        # Its own errors are swallowed (raise_on_error=False); what escapes is a bug in it
        # or the "signal only works in main thread" error: the fallbacks decide instead.
        return None


# ---------------------------------------------------------------------------
# SymPy fallback: simple LaTeX only, translated by hand


# Names SymPy's parser may see. parse_expr evaluates Python, so nothing else gets through.
_SYMPY_FUNCTIONS = frozenset({"sqrt", "pi"})
_SYMPY_TEXT = re.compile(r"[0-9A-Za-z+\-*/^().\s]*")
_IDENTIFIER = re.compile(r"[A-Za-z]+")
_LATEX_REPLACEMENTS = (
    (re.compile(r"\\left|\\right|\\!|\\,|\\;|\\:|\\ |\\displaystyle"), ""),
    (re.compile(r"\\[dt]frac"), r"\\frac"),
    (re.compile(r"\\cdot|\\times"), "*"),
    (re.compile(r"\\pi(?![A-Za-z])"), " pi "),
)


def _latex_to_sympy_text(latex: str) -> str | None:
    text = latex.strip().strip("$")
    for pattern, replacement in _LATEX_REPLACEMENTS:
        text = pattern.sub(replacement, text)
    with_fractions = _replace_command(text, "frac", 2, lambda a, b: f"(({a})/({b}))")
    translated = _replace_command(with_fractions, "sqrt", 1, lambda a: f"sqrt({a})")
    if translated is None or "\\" in translated:
        return None
    text = translated.replace("{", "(").replace("}", ")").replace("^", "**")
    if not _SYMPY_TEXT.fullmatch(text):
        return None
    for name in _IDENTIFIER.findall(text):
        if len(name) > 1 and name not in _SYMPY_FUNCTIONS:
            return None
    return text


def _replace_command(text: str | None, name: str, arity: int, build: Callable[..., str]) -> str | None:
    """`\\name{a}{b}` -> build(a, b), innermost arguments translated first."""
    if text is None:
        return None
    command = f"\\{name}"
    while (start := text.rfind(command)) != -1:
        rest = text[start + len(command) :]
        arguments = []
        for _ in range(arity):
            rest = rest.lstrip()
            argument = _braced_content(rest) if rest.startswith("{") else None
            if argument is None:
                return None
            arguments.append(argument)
            rest = rest[len(argument) + 2 :]
        text = text[:start] + build(*arguments) + rest
    return text


def _verify_with_sympy(gold: str, extracted: str) -> bool | None:
    gold_text = _latex_to_sympy_text(gold)
    extracted_text = _latex_to_sympy_text(extracted)
    if gold_text is None or extracted_text is None:
        return None
    try:
        sympy = importlib.import_module("sympy")
        parser = importlib.import_module("sympy.parsing.sympy_parser")
        transformations = (*parser.standard_transformations, parser.implicit_multiplication_application)
        gold_expr = parser.parse_expr(gold_text, transformations=transformations)
        extracted_expr = parser.parse_expr(extracted_text, transformations=transformations)
        return bool(sympy.simplify(gold_expr - extracted_expr) == 0)
    except Exception:
        return None


# ---------------------------------------------------------------------------
# String fallback


_NORMALISE_DROP = re.compile(r"\\left|\\right|\\[!,;: ]|\\displaystyle|\\\$|\$|\s+|\^\{?\\circ\}?")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")


def normalize_answer(text: str) -> str:
    """A canonical spelling for string comparison: no spacing, `\\left`/`\\right`, dollar
    signs, degree marks, `\\text{}` wrappers or final period; `\\dfrac` is `\\frac`."""
    normal = _TEXT_WRAPPER.sub(r"\1", text)
    normal = _NORMALISE_DROP.sub("", normal)
    normal = re.sub(r"\\[dt]frac", r"\\frac", normal)
    return normal.rstrip(".").lower()


# ---------------------------------------------------------------------------
# GSM8K, as lm-evaluation-harness extracts it (tasks/gsm8k/gsm8k.yaml)


_GSM8K_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
_GSM8K_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")


def _gsm8k_clean(text: str) -> str | None:
    # The harness's regexes_to_ignore: ",", "\$", then "\.$".
    cleaned = re.sub(r"\.$", "", text.strip().replace(",", "").replace("$", ""))
    return cleaned or None


def gsm8k_strict(text: str | None) -> str | None:
    """strict-match: the number after the first `#### `, cleaned; None if there is none."""
    match = _GSM8K_STRICT.search(text or "")
    return _gsm8k_clean(match.group(1)) if match else None


def gsm8k_flexible(text: str | None) -> str | None:
    """flexible-extract: the last number-like run in the text, cleaned; None if there is none."""
    matches = _GSM8K_FLEXIBLE.findall(text or "")
    if not matches:
        return None
    dollars_or_digits, digits = matches[-1]
    return _gsm8k_clean(dollars_or_digits or digits)


def gsm8k_gold(answer: str) -> str:
    """The final number of a GSM8K `answer` field (the text after `####`), cleaned."""
    _, _, final = answer.rpartition("####")
    return _gsm8k_clean(final) or final.strip()


def score_gsm8k(gold: str, response: str | None) -> dict[str, MathScore]:
    """The response scored three ways: "boxed" (score_math), "strict" and "flexible"
    (lm-eval's extractions, compared as numbers). `gold` may be the whole answer field."""
    gold_number = gsm8k_gold(gold)
    return {
        "boxed": score_math(gold_number, response),
        "strict": _score_number(gold_number, gsm8k_strict(response)),
        "flexible": _score_number(gold_number, gsm8k_flexible(response)),
    }


def _score_number(gold: str, extracted: str | None) -> MathScore:
    if extracted is None:
        return MathScore(False, None, "none")
    gold_value = _decimal(gold)
    extracted_value = _decimal(extracted)
    if gold_value is None or extracted_value is None:
        return MathScore(gold.strip() == extracted.strip(), extracted, "exact")
    return MathScore(gold_value == extracted_value, extracted, "exact")


def _decimal(text: str) -> Decimal | None:
    try:
        value = Decimal(text.replace(",", "").strip())
    except InvalidOperation:
        return None
    return value if value.is_finite() else None
