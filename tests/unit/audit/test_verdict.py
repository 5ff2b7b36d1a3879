"""The audit's decision (audit/verdict.py) on answers made up for it: bit for bit at temperature 0
(one changed answer DISAGREES; a run that answered one item two ways is judged on scores), and at
temperature > 0 the scores: a clear loss DISAGREES, equal scores on enough items AGREE, a few items
are UNDECIDED, and an error where the run had an answer keeps any verdict from AGREES."""

from __future__ import annotations

from k3conformance.audit.exchanges import AuditItem, Exchange
from k3conformance.audit.rescore import rescorer_for
from k3conformance.audit.verdict import AGREES, DISAGREES, UNDECIDED, ItemAudit, decide
from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import ErrorClass, RequestError

RIGHT, WRONG = "so \\boxed{12}", "so \\boxed{13}"


def _completion(content: str) -> Completion:
    return Completion(content, None, None, None, "stop", None, "m", 0.1)


def _item(index: int, stored: list[str], again: list[str | None], temperature: float) -> ItemAudit:
    exchanges = tuple(
        Exchange(
            sample,
            {"temperature": temperature, "messages": []},
            {"content": content, "reasoning": None, "tool_calls": None},
            1.0 if content == RIGHT else 0.0,
            {"gold": "12"},
        )
        for sample, content in enumerate(stored)
    )
    answers = tuple(
        _completion(text) if text is not None else RequestError(ErrorClass.INFRA, "Timeout", "timed out", 3)
        for text in again
    )
    return ItemAudit(AuditItem("math", f"item-{index}", exchanges), answers)


def test_the_math_rescorer_is_the_suites_scorer() -> None:
    rescore = rescorer_for("math")
    assert rescore is not None
    assert rescore("x", {"gold": "12"}, RIGHT) == 1.0 and rescore("x", {"gold": "12"}, WRONG) == 0.0
    assert rescore("x", {}, RIGHT) is None
    assert rescorer_for("coding") is None and rescorer_for("long_context_8k") is not None


def test_at_temperature_0_one_changed_answer_disagrees() -> None:
    same = [_item(i, [RIGHT], [RIGHT], 0.0) for i in range(10)]
    assert decide(same).verdict == AGREES
    changed = [*same[:9], _item(9, [RIGHT], [RIGHT + " "], 0.0)]
    decision = decide(changed)
    assert decision.verdict == DISAGREES and decision.figures["mismatches"] == 1
    assert decision.reasons[0] == "at temperature 0, 1 of 10 answers differ from the stored ones"


def test_a_run_that_answered_one_item_two_ways_at_temperature_0_is_judged_on_scores() -> None:
    items = [_item(i, [RIGHT, RIGHT], [RIGHT, RIGHT], 0.0) for i in range(9)]
    items.append(_item(9, [RIGHT, RIGHT + "."], [RIGHT, RIGHT], 0.0))
    decision = decide(items)
    assert decision.mode == "scores" and decision.figures["recorded_nondeterministic_items"] == 1
    assert decision.verdict == UNDECIDED  # 10 items cannot bound a change within 10 points


def test_at_temperature_above_0_the_scores_decide() -> None:
    equal = [_item(i, [RIGHT if i % 3 else WRONG], [RIGHT if i % 3 else WRONG], 1.0) for i in range(60)]
    decision = decide(equal)
    assert (decision.verdict, decision.mode) == (AGREES, "scores")
    lower, upper = decision.figures["interval"]
    assert -0.10 < lower < 0 < upper < 0.10
    lost = [_item(i, [RIGHT], [WRONG if i < 20 else RIGHT], 1.0) for i in range(60)]
    decision = decide(lost)
    assert decision.verdict == DISAGREES and decision.figures["items_lower"] == 20
    assert decision.figures["sign_test_p"] < 1e-5
    few = equal[:8]
    assert decide(few).verdict == UNDECIDED


def test_an_error_where_the_run_had_an_answer_is_never_agreement() -> None:
    items = [_item(i, [RIGHT], [RIGHT], 0.0) for i in range(9)] + [_item(9, [RIGHT], [None], 0.0)]
    decision = decide(items)
    assert decision.verdict == UNDECIDED
    assert "1 of 10 items got an error where the run had an answer" in decision.reasons
    assert decide([_item(0, [RIGHT], [None], 0.0)]).verdict == UNDECIDED
