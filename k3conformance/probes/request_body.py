"""Turns a probe's partial request into the exact body sent, and fingerprints it.

The fingerprint is what `--k3-resume` compares: a finished response is reused only for
the very same body (same model, budget, sampling, thinking parameters).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from k3conformance.options import Settings

DEFAULT_MAX_TOKENS = 4096
# Servers take a seed as a signed 32-bit integer at most (llama.cpp: uint32; SGLang and vLLM: int).
_SEED_RANGE = 2**31 - 1


def request_seed(run_seed: int, suite: str, item: str, sample: int) -> int:
    """The seed one sample of one item is sent with: drawn from the run's seed, the item and the sample.

    A server that honours a request's seed (llama.cpp, vLLM and SGLang all do) starts each
    request's sampler from it, so one seed for every item of a run gives every item the same
    random stream: the run's outcomes are then correlated through the stream's luck, which the
    gate's paired tests assume away (items independent). Measured on llama.cpp SmolLM2 at
    temperature 1.0 with `seed = run seed + sample` on all 342 small-model items: the streams of
    seeds 1234-1237 scored 14.0-16.7% and those of 1238-1241 23.8-24.1%, a spread between runs
    far beyond an item sample's (docs/real-engine.md). A seed per item keeps a run reproducible
    from `--k3-seed` and makes its items' streams independent; another run seed gives every item
    a new stream, never one the baseline used for another sample."""
    digest = hashlib.sha256(json.dumps(["request-seed", run_seed, suite, item, sample]).encode()).digest()
    return int.from_bytes(digest[:8], "big") % _SEED_RANGE


def thinking_parameters(think_mode: str, effort: str) -> dict[str, Any]:
    """K3's thinking switch as each kind of server takes it, earlier reasoning kept, and the same
    effort in `reasoning_effort` too (what every probe sends unless its thinking is as given)."""
    return {**thinking_fields(think_mode, effort=effort, keep=True), "reasoning_effort": effort}


def thinking_fields(
    think_mode: str, *, effort: str | None = None, enabled: bool = True, keep: bool | None = None
) -> dict[str, Any]:
    """Exactly the thinking parameters given, in the form `think_mode` names: Kimi's
    `thinking` object or open-source `chat_template_kwargs` (for probes whose thinking is as given)."""
    if think_mode == "kimi":
        thinking: dict[str, Any] = {"type": "enabled" if enabled else "disabled"}
        if effort is not None:
            thinking["effort"] = effort
        if keep is not None:
            thinking["keep"] = "all" if keep else "none"
        return {"thinking": thinking}
    kwargs: dict[str, Any] = {"thinking": enabled}
    if effort is not None:
        kwargs["thinking_effort"] = effort
    if keep is not None:
        kwargs["preserve_thinking"] = keep
    return {"chat_template_kwargs": kwargs}


def build_body(
    partial: Mapping[str, Any],
    *,
    settings: Settings,
    model: str,
    suite: str,
    item: str,
    sample: int,
    suite_max_tokens: int | None,
    thinking_as_given: bool = False,
    sampling_as_given: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "seed": request_seed(settings.seed, suite, item, sample),
        "max_tokens": settings.max_tokens or suite_max_tokens or DEFAULT_MAX_TOKENS,
    }
    if not sampling_as_given:
        body.update(temperature=settings.temperature, top_p=settings.top_p)
    given = copy.deepcopy(dict(partial))
    if not thinking_as_given:
        effort = given.pop("reasoning_effort", settings.reasoning_effort)
        body.update(thinking_parameters(settings.think_mode, effort))
    body.update(given)
    if body.get("stream"):
        body.setdefault("stream_options", {"include_usage": True})
    return body


def fingerprint(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
