"""Which tests a session runs: `--k3-limit` and `--k3-vendor`.

A limited run keeps, in every suite, at least one item for every kind of item each check
needs, then fills up to the limit; items are drawn in a seeded order, so a quick run is
repeatable and is not always the first items of the files. A kind is a check (the test
function) together with the probe's own kind (a tool-call category, the dataset an
accuracy item comes from). Taking the first N items instead dropped the parallel-call
and round-trip items of the tool-call suite, so a server that reused tool-call ids passed
a `--k3-limit 3` run, and dropped the authored coding tasks behind HumanEval's first items.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

import pytest

from k3conformance.probes.probe import Probe

# Checks of what Moonshot's API fixes for vendors; open-source servers legitimately differ.
VENDOR_MARK = "k3_vendor"

Stratum = tuple[str, str]


def probe_kind(probe: Probe) -> str:
    return probe.kind or str(probe.data.get("dataset", ""))


def limited(
    items: Sequence[pytest.Item], probes: Sequence[Probe | None], limit: int, seed: int
) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(kept, dropped) items; `probes[i]` is item i's probe (None: not a k3 item, kept)."""
    strata_of: dict[tuple[str, str], set[Stratum]] = defaultdict(set)
    by_suite: dict[str, list[Probe]] = defaultdict(list)
    for item, probe in zip(items, probes, strict=True):
        if probe is None:
            continue
        if probe.key not in strata_of:
            by_suite[probe.suite].append(probe)
        function = getattr(item, "originalname", item.name)
        strata_of[probe.key].add((function, probe_kind(probe)))
    chosen: set[tuple[str, str]] = set()
    for suite, suite_probes in by_suite.items():
        chosen |= _choose(suite_probes, strata_of, limit, random.Random(f"{seed}:{suite}"))
    kept = [item for item, probe in zip(items, probes, strict=True) if probe is None or probe.key in chosen]
    dropped = [item for item, probe in zip(items, probes, strict=True) if probe is not None and probe.key not in chosen]
    return kept, dropped


def _choose(
    probes: list[Probe], strata_of: dict[tuple[str, str], set[Stratum]], limit: int, rng: random.Random
) -> set[tuple[str, str]]:
    order = list(probes)
    rng.shuffle(order)
    chosen: list[tuple[str, str]] = []
    covered: set[Stratum] = set()
    # First one item for every stratum not yet covered (in the seeded order), then the rest.
    for probe in order:
        if strata_of[probe.key] - covered:
            chosen.append(probe.key)
            covered |= strata_of[probe.key]
    for probe in order:
        if len(chosen) >= limit:
            break
        if probe.key not in chosen:
            chosen.append(probe.key)
    return set(chosen)


def vendor_only(item: pytest.Item) -> bool:
    return item.get_closest_marker(VENDOR_MARK) is not None
