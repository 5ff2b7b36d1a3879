"""Per-item scores of the accuracy suites and what a suite's scores add up to.

Accuracy suites measure: a wrong answer is a data point, not a failed test (whether a
score is acceptable is for the comparison with a baseline to decide, not for a floor).
Items are the unit of sampling (Miller, "Adding Error Bars to Evals", 2024): with several
samples per item, an item's score is the mean over its samples and the standard error is
taken over items, which clusters the samples of an item.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from k3conformance.scoring.repetition import detect_output

if TYPE_CHECKING:
    from k3conformance.endpoint.completion import Completion

Z_95 = 1.959963984540054


@dataclass
class ItemScore:
    samples: int = 0
    correct: float = 0.0
    no_answer: int = 0
    truncated: int = 0
    # Samples whose reasoning, content or both together hold a mechanical loop.
    looping: int = 0
    # Looping samples by kind of loop ("short-token", "block", "counter"), and under
    # "escaped" those whose loop stopped before the end (the model got out and answered).
    loop_kinds: dict[str, int] = field(default_factory=dict)
    output_tokens: int = 0
    # What was extracted and why it was scored so, one entry per sample (for the records).
    details: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self,
        correct: float,
        *,
        answered: bool,
        truncated: bool,
        output_tokens: int | None,
        looping: bool = False,
        loop_kinds: tuple[str, ...] = (),
        **detail: Any,
    ) -> None:
        """One sample; `loop_kinds` is the looping sample's kind of loop (and "escaped"), counted in
        `self.loop_kinds` (add_completion finds them itself)."""
        self.samples += 1
        for kind in loop_kinds if looping else ():
            self.loop_kinds[kind] = self.loop_kinds.get(kind, 0) + 1
        self.correct += correct
        self.no_answer += not answered
        self.truncated += truncated
        self.looping += looping
        self.output_tokens += output_tokens or 0
        self.details.append({"correct": correct, "answered": answered, "truncated": truncated, **detail})

    def add_completion(self, completion: Completion, correct: float, *, answered: bool, **detail: Any) -> None:
        """Score one sample's completion; truncation, looping and output length come from it."""
        reports = detect_output(completion.reasoning, completion.content)
        looping = any(report.looping for report in reports.values())
        # The joined text sees every loop either part holds, and one spanning the join.
        loop = (
            next(report for report in (reports["combined"], reports["reasoning"], reports["content"]) if report.looping)
            if looping
            else None
        )
        if loop is not None and loop.kind is not None:
            for kind in (loop.kind, "escaped") if loop.escaped else (loop.kind,):
                self.loop_kinds[kind] = self.loop_kinds.get(kind, 0) + 1
        self.add(
            correct,
            answered=answered,
            truncated=completion.finish_reason == "length",
            output_tokens=(completion.usage or {}).get("completion_tokens"),
            looping=looping,
            loop_kind=loop.kind if loop is not None else None,
            loop_escaped=loop.escaped if loop is not None else False,
            repetition={part: report.to_record() for part, report in reports.items()},
            **detail,
        )

    @property
    def mean(self) -> float:
        return self.correct / self.samples if self.samples else 0.0

    def to_record(self) -> dict[str, Any]:
        return asdict(self)

    def merge(self, other: Mapping[str, Any]) -> None:
        for name in ("samples", "correct", "no_answer", "truncated", "looping", "output_tokens"):
            setattr(self, name, getattr(self, name) + other.get(name, 0))
        for kind, count in (other.get("loop_kinds") or {}).items():
            self.loop_kinds[kind] = self.loop_kinds.get(kind, 0) + count

    def totals(self) -> dict[str, float]:
        """What a run summary keeps per item, and what the gate compares."""
        return {name: getattr(self, name) for name in ("samples", "correct", "no_answer", "truncated", "looping")}


@dataclass(frozen=True)
class SuiteAccuracy:
    items: int
    samples: int
    accuracy: float
    low: float
    high: float
    no_answer_rate: float
    truncation_rate: float
    looping_rate: float
    mean_output_tokens: float


def wilson_interval(share: float, count: float, z: float = Z_95) -> tuple[float, float]:
    """Wilson's score interval (1927) for a proportion `share` of `count` trials. Unlike the Wald
    interval (share ± z·SE) it does not collapse to a point at 0% or 100%, and it keeps close to
    its nominal coverage at the small sizes a quick run has (6 items all right: [61.0%, 100%],
    where Wald said [100%, 100%])."""
    if count <= 0:
        return 0.0, 1.0
    z2 = z * z
    denominator = 1 + z2 / count
    centre = (share + z2 / (2 * count)) / denominator
    half = z * math.sqrt(share * (1 - share) / count + z2 / (4 * count * count)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def effective_count(means: list[float], samples: int) -> float:
    """The number of independent trials the item means are worth (Kish's design effect): the items,
    when each has one sample (binary means, Wilson's own case); more, up to the samples, when several
    samples per item agree less than items differ; the items when the means do not vary at all."""
    count = len(means)
    share = sum(means) / count
    spread = sum((value - share) ** 2 for value in means) / count
    if spread <= 0 or not 0 < share < 1:
        return float(count)
    return min(float(samples), count * share * (1 - share) / spread)


def summarize(scores: Mapping[str, ItemScore]) -> SuiteAccuracy | None:
    """Mean item score with a 95% Wilson interval over the items (their effective number, so that
    several samples per item count as clustered, not as independent trials)."""
    means = [score.mean for score in scores.values() if score.samples]
    if not means:
        return None
    count = len(means)
    accuracy = sum(means) / count
    samples = sum(score.samples for score in scores.values())
    low, high = wilson_interval(accuracy, effective_count(means, samples))
    return SuiteAccuracy(
        items=count,
        samples=samples,
        accuracy=accuracy,
        low=low,
        high=high,
        no_answer_rate=sum(score.no_answer for score in scores.values()) / samples,
        truncation_rate=sum(score.truncated for score in scores.values()) / samples,
        looping_rate=sum(score.looping for score in scores.values()) / samples,
        mean_output_tokens=sum(score.output_tokens for score in scores.values()) / samples,
    )
