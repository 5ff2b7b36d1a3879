"""The gate's shape policy: which suites a candidate must have run, given how its deployment
differs from the baseline's.

Two kinds of difference count. The shape settings (deployment/shapes.py: widths, MoE path,
KV and state dtypes, speculative decoding, the disaggregation role), one reason per kind.
And everything else the runs recorded about the server: SGLang's `/get_server_info` (every
launch argument: attention backend, quantization, radix-cache strategy...), vLLM's and
SGLang's `/version`, llama.cpp's `/props`, and the launch arguments and environment the user
passed with `--k3-server-args` (hardware, kernel switches such as SGLANG_K3_KDA_FUSED_BACKEND,
AITER flags or the MegaMoE tokens-per-rank cap, which no endpoint reports). Two TP8 servers
on B300 and MI355X, or on two serving-stack versions, have the same width and are not the
same deployment. Any difference, and anything that cannot be determined, requires the
long-output coding and the math suites on both runs: the layout and kernel regressions on
record show in long outputs while math stays fine.

llama.cpp has none of SGLang's shape settings, so a run against it has no shape to read. When
both runs are llama.cpp deployments with their launch settings recorded
(deployment/llamacpp_identity.py), `/props` and the launch settings are the whole identity and
nothing is unknown: identical records need nothing more, and a difference requires every
accuracy suite the baseline scored. Kimi K3's two suites are still required when the model may
be a Kimi model, or the baseline scored no accuracy suite at all. Measured on the real engine
(docs/real-engine.md): before this, even a bit-identical llama.cpp rerun was INCOMPLETE, since
a 135M model runs neither K3 suite.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from k3conformance.deployment.llamacpp_identity import LlamaCppDeployment
from k3conformance.deployment.shapes import ATTN_DP_SIZE, SERVER_ARG_NAMES, WIDTH_FIELDS, ShapeSettings, width_of
from k3conformance.options import COMPARED_SETTINGS

# Both suites must have run on both sides of a changed deployment: the layout and kernel
# regressions on record show in long outputs (DeepSWE, 34K-token prompts) while math stays fine.
REQUIRED_SUITES: tuple[str, ...] = ("agentic_coding", "math")
# Recorded server fields that say where or how a process listens, or what it has done so
# far, not what it computes: they differ between two launches of one deployment.
_NOT_IDENTITY = frozenset(
    {
        "host",
        "port",
        "nccl_port",
        "dist_init_addr",
        "node_rank",
        "internal_states",
        "random_seed",
        "served_model_name",
        "warning",
        "api_key",
        "admin_api_key",
        "file_storage_path",
        "log_level",
        "log_requests",
        "enable_metrics",
    }
)
# llama.cpp's /props fields that differ between two launches of one deployment: a marker drawn
# at random at every launch, and whether the server was idle at that moment. Left out when two
# runs are compared and when a run is held to its seal (gate/identity.py), not from the sealed
# identity itself, so that runs sealed before they were left out still read back as sealed.
_PER_LAUNCH = frozenset({"media_marker", "is_sleeping"})


def is_per_launch(key: str) -> bool:
    """Whether a flattened deployment-identity key is a field one deployment changes at every launch."""
    return key.rsplit(".", 1)[-1] in _PER_LAUNCH


# A difference list longer than this is cut, with a count of the rest.
_SHOWN_DIFFERENCES = 8


@dataclass(frozen=True)
class ShapePolicy:
    """What the gate needs to know about a candidate's deployment against the baseline's."""

    differs: list[str]  # differences; empty when the deployments are the same
    required_suites: tuple[str, ...]  # REQUIRED_SUITES when they differ, else ()


# Each group is one reason: its label, its fields, and how to show its value.
_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("width", WIDTH_FIELDS),
    ("MoE backend", ("moe_a2a_backend",)),
    ("MoE runner", ("moe_runner_backend",)),
    ("KV cache dtype", ("kv_cache_dtype",)),
    ("state dtype", ("state_dtype",)),
    ("speculative decoding", ("speculative_algorithm",)),
    # Not in the list, but a prefill or decode role moves the KV and the KDA state
    # between servers: one more place for silent corruption, so it counts too.
    ("disaggregation role", ("disaggregation_mode",)),
)


def _group_value(settings: ShapeSettings, group: str, names: tuple[str, ...]) -> str:
    if group == "width":
        return width_of(settings)
    return str(getattr(settings, names[0]))


def material_differences(baseline: ShapeSettings | None, candidate: ShapeSettings | None) -> list[str]:
    """Why the candidate's shape differs from the baseline's, one reason per kind of
    difference. A setting unknown on either side counts as a difference (conservative)."""
    missing = [side for side, settings in (("baseline", baseline), ("candidate", candidate)) if settings is None]
    if missing:
        sides = " and the ".join(missing)
        return [
            f"shape: could not be determined for the {sides} (no server arguments, no registry --k3-shape): treated as different"
        ]
    assert baseline is not None and candidate is not None
    reasons: list[str] = []
    for group, names in _GROUPS:
        unknown = [
            f"{side} reports no {SERVER_ARG_NAMES[name]}"
            for side, settings in (("baseline", baseline), ("candidate", candidate))
            for name in names
            if getattr(settings, name) is None
        ]
        if unknown:
            reasons.append(f"{group}: could not be determined ({', '.join(unknown)}): treated as different")
            continue
        before, after = _group_value(baseline, group, names), _group_value(candidate, group, names)
        if before != after:
            reasons.append(f"{group}: {before} → {after}")
    return reasons


# Compared as shape settings (material_differences), one reason per kind: not twice.
_SHAPE_FIELDS = frozenset({*SERVER_ARG_NAMES.values(), ATTN_DP_SIZE})


def _flatten(value: Any, prefix: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if str(key) not in _NOT_IDENTITY and str(key) not in _SHAPE_FIELDS:
                yield from _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
    else:
        # ensure_ascii off: a hardware name such as "H100 4×8" reads as written in the report.
        yield prefix, json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def deployment_identity(
    server_info: Mapping[str, Any] | None, launch: Mapping[str, Any] | None
) -> dict[str, str] | None:
    """Everything recorded about a deployment beyond its shape settings, flattened:
    `get_server_info.attention_backend`, `version.version`, `launch.env.SGLANG_K3_KDA_FUSED_BACKEND`,
    `launch.hardware`...; None when nothing at all was recorded."""
    if not server_info and not launch:
        return None
    identity = dict(_flatten(server_info or {}, ""))
    identity.update(_flatten(launch or {}, "launch"))
    return identity


def deployment_differences(baseline: Mapping[str, str] | None, candidate: Mapping[str, str] | None) -> list[str]:
    """Differences between two deployment identities; nothing recorded on a side is one."""
    empty = [side for side, identity in (("baseline", baseline), ("candidate", candidate)) if identity is None]
    if empty:
        return [
            f"deployment: nothing recorded about the {' and the '.join(empty)} server (no server information, "
            "no --k3-server-args): treated as different"
        ]
    assert baseline is not None and candidate is not None
    changed = [
        f"{key}: {baseline.get(key, '(not recorded)')} → {candidate.get(key, '(not recorded)')}"
        for key in sorted(baseline.keys() | candidate.keys())
        if baseline.get(key) != candidate.get(key) and not is_per_launch(key)
    ]
    if not changed:
        return []
    shown = "; ".join(changed[:_SHOWN_DIFFERENCES])
    rest = len(changed) - _SHOWN_DIFFERENCES
    return [f"deployment: {shown}" + (f"; and {rest} more" if rest > 0 else "")]


def shape_policy(
    baseline: ShapeSettings | None, candidate: ShapeSettings | None, other_differences: Sequence[str] = ()
) -> ShapePolicy:
    differs = material_differences(baseline, candidate) + list(other_differences)
    return ShapePolicy(differs=differs, required_suites=REQUIRED_SUITES if differs else ())


def llamacpp_policy(
    baseline: LlamaCppDeployment,
    candidate: LlamaCppDeployment,
    identity_differences: Sequence[str],
    *,
    models: Sequence[str | None],
    baseline_suites: Collection[str],
) -> ShapePolicy:
    """The policy for two llama.cpp deployments, each known whole (`/props` and its launch
    settings): `identity_differences` (deployment_differences of the two) are all there is to
    differ. A difference requires the accuracy suites the baseline scored, all of them; Kimi
    K3's suites when the model may be a Kimi model (any of `models`, the runs' model ids), or
    when the baseline scored none (nothing to hold the candidate to is not a pass)."""
    differs = list(identity_differences)
    if not differs:
        return ShapePolicy(differs=[], required_suites=())
    kimi = any(side.may_serve_kimi(model) for side in (baseline, candidate) for model in models)
    if kimi or not baseline_suites:
        return ShapePolicy(differs=differs, required_suites=REQUIRED_SUITES)
    return ShapePolicy(differs=differs, required_suites=tuple(sorted(baseline_suites)))


VERSION_SETTING = "plugin_version"


def _recorded(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    settings = summary.get("settings")
    if not isinstance(settings, Mapping):
        return None
    return {**settings, "model": summary.get("model"), "plugin_version": summary.get("plugin_version")}


def settings_differences(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """Each compared setting whose value differs, as `name: before → after`; a side that
    recorded no settings at all is one difference (only when the other did: summaries written
    before settings were recorded compare as before)."""
    before, after = _recorded(baseline), _recorded(candidate)
    if before is None and after is None:
        return []
    if before is None or after is None:
        side = "baseline" if before is None else "candidate"
        return [f"settings: the {side} run recorded none"]
    changed = []
    # The plugin's version too: another version may ask, parse or score otherwise (issue 35).
    for name in (*COMPARED_SETTINGS, VERSION_SETTING):
        if name not in before and name not in after:
            continue
        was, now = before.get(name, "(not recorded)"), after.get(name, "(not recorded)")
        if json.dumps(was, sort_keys=True, default=str) != json.dumps(now, sort_keys=True, default=str):
            changed.append(f"{name}: {was} → {now}")
    return changed
