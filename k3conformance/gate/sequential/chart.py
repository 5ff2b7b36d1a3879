"""A small text chart of a sequentially gated suite's path: at each look, the statistic against
the FAIL and PASS bounds, so a reader sees how close each look came to deciding. It is drawn
from the path in gate.json (`sequential`), so `k3conformance compare` draws the same chart."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

WIDTH = 41
# Statistics beyond this are drawn at the edge (early O'Brien-Fleming bounds sit near ±5).
SCALE_LIMIT = 8.0


def _column(value: float, scale: float) -> int:
    clipped = max(-scale, min(scale, value))
    return round((clipped + scale) / (2 * scale) * (WIDTH - 1))


def _bound(value: float) -> str:
    """A bound in six characters: an early look that spends almost nothing on few degrees of
    freedom has a t bound in the tens of thousands, which would push the chart out of line."""
    return f"{value:>+6.2f}" if abs(value) < 1000 else f"{value:>+6.0e}"


def _axis(look: Mapping[str, Any], scale: float) -> str:
    cells = [" "] * WIDTH
    cells[_column(0.0, scale)] = "·"
    cells[_column(look["fail_bound"], scale)] = "F"
    cells[_column(look["pass_bound"], scale)] = "P"
    # The statistic is drawn last: on a bound it hides the letter, as it has crossed it.
    cells[_column(look["statistic"], scale)] = "*"
    return "|" + "".join(cells) + "|"


def look_samples(design: Mapping[str, Any], look: int) -> str:
    """For a design with rounds (samples per look stored), what look `look` (1-based) saw, as
    "round 2: 4 samples per item on 41 items"; "" for an item-only design."""
    samples = design.get("samples") or []
    if not samples:
        return ""
    count = samples[look - 1]
    per_item = "1 sample" if count == 1 else f"{count} samples"
    return f"round {sorted(set(samples)).index(count) + 1}: {per_item} per item on {design['sizes'][look - 1]} items"


def _planned(design: Mapping[str, Any]) -> str:
    samples = design.get("samples") or []
    if not samples:
        return f"{', '.join(map(str, design['sizes']))} items"
    pairs = ", ".join(f"({size}, {count})" for size, count in zip(design["sizes"], samples, strict=True))
    return f"{pairs} (items, samples per item)"


def look_chart(suite: str, path: Mapping[str, Any]) -> list[str]:
    """The lines for one suite: a title saying what stopped it, then one row per look taken."""
    design, looks, stop = path["design"], path["looks"], path.get("stop")
    planned = len(design["sizes"])
    if stop is None:
        ending = "no decision"
    elif stop["by"] == "look" and look_samples(design, stop["look"]):
        ending = f"{stop['verdict']} at look {stop['look']} ({look_samples(design, stop['look'])})"
    elif stop["by"] == "look":
        ending = f"{stop['verdict']} at look {stop['look']}"
    elif stop["by"] == "maximum reached":
        ending = f"{stop['verdict']} at the last look, the maximum of {stop['items']} items"
    else:
        ending = f"{stop['verdict']} by the {stop['by']} after {stop['items']} items, before look {stop['look']}"
    method = looks[0]["method"] if looks else "no look taken"
    lines = [f"{suite}: {ending} ({planned} looks planned at {_planned(design)}; {method})"]
    if not looks:
        return lines
    bounds = [abs(value) for look in looks for value in (look["fail_bound"], look["pass_bound"], look["statistic"])]
    scale = min(SCALE_LIMIT, max(bounds) * 1.1)
    low, high = f"{-scale:+.1f}", f"{scale:+.1f}"
    # The scale's ends over the chart's edges (the chart is WIDTH cells between two bars).
    samples = design.get("samples") or []
    # A design with rounds gets a column of samples per item at each look.
    head = "  samples" if samples else ""
    lines.append(
        f"  look  items{head}  FAIL ≤  statistic  PASS ≥  {low}{' ' * (WIDTH + 2 - len(low) - len(high))}{high}"
    )
    for look in looks:
        count = f"  {samples[look['look'] - 1]:>7}" if samples else ""
        lines.append(
            f"  {look['look']:>4}  {look['items']:>5}{count}  {_bound(look['fail_bound'])}  {look['statistic']:>+9.2f}  "
            f"{_bound(look['pass_bound'])}  {_axis(look, scale)}  {look['verdict']}"
        )
    return lines


def look_charts(sequential: Mapping[str, Any] | None) -> list[str]:
    """Every gated suite's chart, in suite order; nothing for a fixed-size run."""
    lines: list[str] = []
    for suite, path in sorted((sequential or {}).items()):
        lines += look_chart(suite, path)
    return lines
