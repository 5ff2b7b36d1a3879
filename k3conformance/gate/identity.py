"""A run's identity, sealed when the run starts: what it ran against and under what settings.

`identity.json` is written once, before the first request, from the run's first summary, and
never again. A resume is refused when this session's identity differs from the sealed one (a
MegaMoE run resumed against tp8 would otherwise be stored as one run of two deployments). The
gate reads a stored run's summary against the sealed identity: a summary relabelled after the
run (another shape, another server, another setting) says INCOMPLETE, naming the difference.

The identity names the run (its id and start time) and what changes what the model sees or how it is scored: the endpoint and the
model it serves, the deployment as the server describes it (volatile fields such as ports left
out, gate/policy.py), the shape's settings, the sampling and agent settings, the sample count,
the selection limit and the plugin version. Transport settings (concurrency, timeouts, retries)
are not: a resume may change them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from k3conformance.gate.policy import deployment_identity, is_per_launch
from k3conformance.options import COMPARED_SETTINGS
from k3conformance.runs.chain import IDENTITY_FILE, sealed_identity
from k3conformance.runs.records import write_json_atomic

# Beyond the settings baseline and candidate must share, what one run must keep across resumes.
_RUN_SETTINGS = ("samples", "suite_samples", "limit", "cache_prompt_words")
_SHOWN = 4


def identity_of(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The identity a summary records, as plain JSON values."""
    recorded = summary.get("settings")
    settings: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
    shape_settings = summary.get("shape_settings")
    identity = {
        # Which run this is and when it started: the newest run of a shape is chosen by these
        # (runs/records.newest_run), and the records' chain is anchored in them (runs/chain.py).
        "run_id": summary.get("run_id"),
        "started_at": summary.get("started_at"),
        "shape": summary.get("shape"),
        # The reference deployment listens on a new port each session: its profile names it.
        "endpoint": summary.get("endpoint") if summary.get("reference_profile") is None else None,
        "reference_profile": summary.get("reference_profile"),
        "model": summary.get("model"),
        "served_models": summary.get("served_models"),
        "deployment": deployment_identity(summary.get("server_info"), summary.get("launch")),
        "shape_settings": shape_settings.get("settings") if isinstance(shape_settings, Mapping) else None,
        "settings": {
            name: settings.get(name)
            for name in (*COMPARED_SETTINGS, *_RUN_SETTINGS)
            if name != "model" and name in settings
        },
        "plugin_version": summary.get("plugin_version"),
    }
    # A JSON round trip: tuples and lists, or int and float keys, compare as stored.
    normalized: dict[str, Any] = json.loads(json.dumps(identity, sort_keys=True, default=str))
    return normalized


def seal(run_dir: Path, summary: Mapping[str, Any]) -> None:
    """Write the run's identity, once: an existing seal is never replaced."""
    path = run_dir / IDENTITY_FILE
    if not path.exists():
        write_json_atomic(path, identity_of(summary))


def read_sealed(run_dir: Path) -> dict[str, Any] | None:
    """The sealed identity of the run in `run_dir`; None when there is none or it is unreadable."""
    return sealed_identity(run_dir)


def identity_differences(sealed: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Each part of the identity that differs, as `part: sealed → current` (flattened one level).
    A deployment field drawn anew at every launch (llama.cpp's media marker) is no difference: a
    resume against the same server relaunched is the same run."""
    differences = []
    for key in sorted(sealed.keys() | current.keys()):
        was, now = sealed.get(key), current.get(key)
        if isinstance(was, Mapping) and isinstance(now, Mapping):
            differences += [
                f"{key}.{name}: {_shown(was.get(name))} → {_shown(now.get(name))}"
                for name in sorted(was.keys() | now.keys())
                if was.get(name) != now.get(name) and not (key == "deployment" and is_per_launch(name))
            ]
        elif was != now:
            differences.append(f"{key}: {_shown(was)} → {_shown(now)}")
    return differences


def described(differences: list[str], shown: int = _SHOWN) -> str:
    """The first `shown` differences, and how many more there are."""
    rest = len(differences) - shown
    return "; ".join(differences[:shown]) + (f"; and {rest} more" if rest > 0 else "")


def _shown(value: Any) -> str:
    if value is None:
        return "(not recorded)"
    return (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True))[:120]
