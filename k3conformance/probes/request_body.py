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
    sample: int,
    suite_max_tokens: int | None,
    thinking_as_given: bool = False,
    sampling_as_given: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "seed": settings.seed + sample,
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
