"""One audit: a stored run's items drawn at random, asked again, decided, and reported."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from k3conformance.audit.exchanges import Eligible, eligible_items
from k3conformance.audit.replay import Transport, ask_again
from k3conformance.audit.verdict import AGREES, AuditDecision, ItemAudit, decide
from k3conformance.endpoint.url import is_reference, strip_credentials
from k3conformance.runs.stored import StoredRun


@dataclass
class AuditResult:
    run: str
    endpoint: str
    seed: int
    eligible: Eligible
    audits: list[ItemAudit]
    decision: AuditDecision

    @property
    def verdict(self) -> str:
        return self.decision.verdict

    def exit_status(self) -> int:
        """0 when the answers agree; 1 when they disagree or the audit cannot tell (it fails closed)."""
        return 0 if self.verdict == AGREES else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "endpoint": self.endpoint,
            "seed": self.seed,
            "verdict": self.verdict,
            "mode": self.decision.mode,
            "reasons": self.decision.reasons,
            "figures": self.decision.figures,
            "audited_suites": self.eligible.suites(),
            "asked": [{"suite": a.item.suite, "item": a.item.item, "identical": a.identical()} for a in self.audits],
            "skipped": {suite: dict(reasons) for suite, reasons in sorted(self.eligible.skipped.items())},
        }


def audit(
    run: StoredRun, transport: Transport, count: int, seed: int, alpha: float, margin: float
) -> AuditResult | str:
    """The audit of `count` items of `run`; a message instead when it has no item to audit."""
    eligible = eligible_items(run)
    if not eligible.items:
        skipped = "; ".join(f"{suite}: {', '.join(reasons)}" for suite, reasons in sorted(eligible.skipped.items()))
        return f"{run.label} has no item the audit can ask again and score ({skipped or 'no response records'})"
    chosen = eligible.sample(count, seed)
    requests = [exchange.request for item in chosen for exchange in item.exchanges]
    answers = iter(ask_again(transport, requests))
    audits = [ItemAudit(item, tuple(next(answers) for _ in item.exchanges)) for item in chosen]
    endpoint = transport.endpoint if is_reference(transport.endpoint) else strip_credentials(transport.endpoint)
    return AuditResult(run.label, endpoint, seed, eligible, audits, decide(audits, alpha, margin))


def text_lines(result: AuditResult) -> list[str]:
    simulator = " (a simulator)" if is_reference(result.endpoint) else ""
    figures = result.decision.figures
    asked = ", ".join(f"{suite} {count}" for suite, count in _asked(result).items())
    lines = [
        f"audit of {result.run} against {result.endpoint}{simulator}: {result.verdict}",
        f"  seed {result.seed}: {len(result.audits)} of {len(result.eligible.items)} auditable items asked ({asked}), "
        f"{figures.get('exchanges', 0)} answers, {figures.get('identical', 0)} identical to the stored ones; "
        f"compared {result.decision.mode}",
    ]
    lines += [f"  {reason}" for reason in result.decision.reasons]
    lines.append(f"  audited suites: {', '.join(f'{s} ({n} items)' for s, n in result.eligible.suites().items())}")
    for suite, reasons in sorted(result.eligible.skipped.items()):
        why = "; ".join(f"{count} items: {reason}" for reason, count in reasons.items())
        lines.append(f"  skipped {suite}: {why}")
    lines.append("  exit status: 0 when AGREES, 1 otherwise (DISAGREES, UNDECIDED), 2 on bad input")
    return lines


def _asked(result: AuditResult) -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in result.audits:
        counts[entry.item.suite] = counts.get(entry.item.suite, 0) + 1
    return counts


def json_text(result: AuditResult) -> str:
    return json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str)
