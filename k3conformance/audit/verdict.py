"""Whether the live endpoint's answers agree with a stored run's, within their sampling spread.

At temperature 0 the answers are compared bit for bit (content, reasoning and tool calls): a
deterministic deployment asked the same request gives the same answer, so one answer that differs
DISAGREES, unless the stored run itself shows that the deployment is not deterministic (samples of
one item whose answers differ), in which case the scores decide, as at temperature > 0.

At temperature > 0 (or a nondeterministic run) the items' scores decide, each item's recorded score
against the one asked again (each rescored with the suite's own scorer). DISAGREES when the exact
sign test on the items whose score changed rejects "no change" at alpha (two-sided); AGREES when
the change is shown to lie within ±margin (two one-sided tests: Tango's score bounds at alpha each,
the gate's paired interval, stats/paired.py); else UNDECIDED, with the figures. With several
samples per item the discordance is counted in fractions of an item (an approximation Tango's
bounds take as they are). A request that fails (an error, where the run had an answer) keeps the
verdict from AGREES: the audit fails closed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from k3conformance.audit.exchanges import AuditItem, Exchange
from k3conformance.audit.replay import Answer
from k3conformance.audit.rescore import rescorer_for
from k3conformance.endpoint.completion import Completion

Verdict = Literal["AGREES", "DISAGREES", "UNDECIDED"]
AGREES: Verdict = "AGREES"
DISAGREES: Verdict = "DISAGREES"
UNDECIDED: Verdict = "UNDECIDED"
DEFAULT_ALPHA = 0.05
# Points of accuracy within which an audit at temperature > 0 calls the scores the same: wider than
# the gate's 3, since a spot check of tens of items cannot bound a change more tightly.
DEFAULT_MARGIN = 10.0


def answer_text(response: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """What bit for bit compares of an answer: its content, reasoning and tool calls (not its timing or ids)."""
    return response.get("content"), response.get("reasoning"), response.get("tool_calls")


@dataclass(frozen=True)
class ItemAudit:
    """One item asked again: per recorded sample, the answer now and its score (None: an error)."""

    item: AuditItem
    answers: tuple[Answer, ...]

    def scores(self) -> list[float | None]:
        rescore = rescorer_for(self.item.suite)
        assert rescore is not None
        return [
            rescore(self.item.item, exchange.gold, answer.content) if isinstance(answer, Completion) else None
            for exchange, answer in zip(self.item.exchanges, self.answers, strict=True)
        ]

    def identical(self) -> list[bool]:
        return [
            isinstance(answer, Completion) and answer_text(answer.to_record()) == answer_text(exchange.response)
            for exchange, answer in zip(self.item.exchanges, self.answers, strict=True)
        ]

    @property
    def failed(self) -> bool:
        return any(not isinstance(answer, Completion) for answer in self.answers)


@dataclass
class AuditDecision:
    verdict: Verdict
    mode: str
    reasons: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def recorded_nondeterminism(items: Sequence[AuditItem]) -> int:
    """How many items the run answered differently in different samples at temperature 0."""
    return sum(
        1
        for item in items
        if len(item.exchanges) > 1
        and all(exchange.temperature == 0 for exchange in item.exchanges)
        and len({repr(answer_text(exchange.response)) for exchange in item.exchanges}) > 1
    )


def decide(audits: Sequence[ItemAudit], alpha: float = DEFAULT_ALPHA, margin: float = DEFAULT_MARGIN) -> AuditDecision:
    answered = [audit for audit in audits if not audit.failed]
    failed = len(audits) - len(answered)
    exchanges: list[Exchange] = [exchange for audit in audits for exchange in audit.item.exchanges]
    temperatures = sorted({exchange.temperature for exchange in exchanges}, key=lambda value: (value is None, value))
    identical = sum(sum(audit.identical()) for audit in answered)
    compared = sum(len(audit.answers) for audit in answered)
    figures: dict[str, Any] = {
        "items": len(audits),
        "items_failed": failed,
        "exchanges": compared,
        "identical": identical,
        "temperatures": temperatures,
    }
    reasons = []
    if failed:
        reasons.append(f"{failed} of {len(audits)} items got an error where the run had an answer")
    if not answered:
        return AuditDecision(UNDECIDED, "none", [*reasons, "no item was answered: nothing compared"], figures)
    nondeterministic = recorded_nondeterminism([audit.item for audit in audits])
    figures["recorded_nondeterministic_items"] = nondeterministic
    if temperatures == [0.0] and not nondeterministic:
        mismatches = compared - identical
        recorded, again = _item_scores(answered)
        figures.update(mismatches=mismatches, recorded_mean=_mean(recorded), again_mean=_mean(again))
        # The scores are shown, not tested: at temperature 0 one changed answer already says enough.
        reasons.append(f"scores, for information: {_mean(recorded):.1%} stored, {_mean(again):.1%} asked again")
        if mismatches:
            reasons.insert(0, f"at temperature 0, {mismatches} of {compared} answers differ from the stored ones")
            return AuditDecision(DISAGREES, "bit for bit", reasons, figures)
        reasons.insert(0, f"at temperature 0, all {compared} answers are identical to the stored ones")
        return AuditDecision(UNDECIDED if failed else AGREES, "bit for bit", reasons, figures)
    if temperatures == [0.0]:
        reasons.append(f"the stored run answered {nondeterministic} items differently across samples at temperature 0")
    return _by_scores(answered, alpha, margin, reasons, figures, failed)


def _item_scores(answered: Sequence[ItemAudit]) -> tuple[list[float], list[float]]:
    """Per item, its mean score as stored and as asked again."""
    recorded = [_mean([exchange.score for exchange in audit.item.exchanges]) for audit in answered]
    again = [_mean([score or 0.0 for score in audit.scores()]) for audit in answered]
    return recorded, again


def _by_scores(
    answered: Sequence[ItemAudit],
    alpha: float,
    margin: float,
    reasons: list[str],
    figures: dict[str, Any],
    failed: int,
) -> AuditDecision:
    from scipy import stats

    from k3conformance.stats.paired import tango_interval

    recorded, again = _item_scores(answered)
    differences = [new - old for old, new in zip(recorded, again, strict=True)]
    down, up = sum(d < 0 for d in differences), sum(d > 0 for d in differences)
    changed = down + up
    p_value = min(1.0, 2 * float(stats.binom.cdf(min(down, up), changed, 0.5))) if changed else 1.0
    lost, gained = sum(max(-d, 0.0) for d in differences), sum(max(d, 0.0) for d in differences)
    lower, upper = tango_interval(lost, gained, len(answered), alpha)  # type: ignore[arg-type]
    figures.update(
        recorded_mean=_mean(recorded),
        again_mean=_mean(again),
        items_lower=down,
        items_higher=up,
        sign_test_p=p_value,
        change=(gained - lost) / len(answered),
        interval=[lower, upper],
        alpha=alpha,
        margin_points=margin,
    )
    text = (
        f"scores: {_mean(recorded):.1%} stored, {_mean(again):.1%} asked again over {len(answered)} items; "
        f"{down} lower, {up} higher (exact sign test p = {p_value:.3g}); change {100 * (gained - lost) / len(answered):+.1f} "
        f"pts [{100 * lower:+.1f}, {100 * upper:+.1f}] ({1 - 2 * alpha:.0%} interval, Tango)"
    )
    if p_value <= alpha:
        return AuditDecision(DISAGREES, "scores", [f"{text}: the scores changed (p ≤ {alpha:g})", *reasons], figures)
    if lower > -margin / 100 and upper < margin / 100 and not failed:
        return AuditDecision(AGREES, "scores", [f"{text}: within ±{margin:g} pts", *reasons], figures)
    return AuditDecision(
        UNDECIDED,
        "scores",
        [
            f"{text}: neither a change (p > {alpha:g}) nor agreement within ±{margin:g} pts is shown; ask more items",
            *reasons,
        ],
        figures,
    )
