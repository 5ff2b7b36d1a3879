"""Each item's sample is sent with a seed of its own (k3conformance/probes/request_body.py).

A server that honours a request's seed starts the request's sampler from it: one seed for every
item of a run gives all items one random stream, whose luck then moves the whole run (measured on
llama.cpp at temperature 1, docs/real-engine.md), against the gate's assumption that items are
independent."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from k3conformance.options import Settings
from k3conformance.probes.request_body import build_body, request_seed

ITEMS = [f"item-{index:03d}" for index in range(200)]


def test_items_of_one_run_and_sample_get_distinct_seeds() -> None:
    seeds = {request_seed(1234, "math", item, 0) for item in ITEMS}
    assert len(seeds) == len(ITEMS)


def test_the_same_run_seed_gives_the_same_seeds() -> None:
    assert [request_seed(1234, "math", item, 2) for item in ITEMS] == [
        request_seed(1234, "math", item, 2) for item in ITEMS
    ]


def test_another_run_seed_shares_no_stream_with_any_sample_of_the_baseline() -> None:
    # Before, the candidate at seed 1235 sent sample 0 with the seed of the baseline's sample 1.
    baseline = {request_seed(1234, "math", item, sample) for item in ITEMS for sample in range(8)}
    candidate = {request_seed(1235, "math", item, sample) for item in ITEMS for sample in range(8)}
    assert not baseline & candidate


def test_suites_do_not_share_streams_for_the_same_item_name() -> None:
    assert request_seed(1, "math", "item-001", 0) != request_seed(1, "coding", "item-001", 0)


def test_seeds_fit_a_signed_32_bit_integer() -> None:
    assert all(0 <= request_seed(seed, "s", item, 0) < 2**31 for seed in range(20) for item in ITEMS)


def test_the_body_carries_the_item_seed_unless_the_probe_gives_one() -> None:
    settings = cast(
        Settings,
        SimpleNamespace(
            seed=1234, max_tokens=None, temperature=1.0, top_p=0.95, reasoning_effort="max", think_mode="opensource"
        ),
    )
    body = build_body({}, settings=settings, model="m", suite="math", item="item-001", sample=3, suite_max_tokens=None)
    assert body["seed"] == request_seed(settings.seed, "math", "item-001", 3)
    given = build_body(
        {"seed": 7}, settings=settings, model="m", suite="math", item="item-001", sample=3, suite_max_tokens=None
    )
    assert given["seed"] == 7
