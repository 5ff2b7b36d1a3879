"""The wire-format layer: raw K3 output, our parser and SGLang's, whole and streamed."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from k3conformance.checks.failures import ConformanceFailure
from k3conformance.checks.parsers import check_parser_reads_case, corpus_path, load_corpus
from k3conformance.cli import main
from k3conformance.reference import faults as fault_hooks
from k3conformance.reference.parsers import Parsed, ParserSettings, ParserUnavailable, WireParser, make_parser
from k3conformance.reference.profiles import get_profile
from k3conformance.reference.raw_output import render, token_pieces
from k3conformance.reference.values import Completion, ToolCall

ANSWER = Completion("Let me think <|x about it <", "Paris is <b>big</b> & |x| < 3.", (), "stop", 5, 20, 8)
CALLS = Completion(
    "The user wants weather.",
    None,
    (
        ToolCall("functions.get_weather:0", "get_weather", json.dumps({"city": 'Pa"ris & co', "days": 3, "x": 1.5})),
        ToolCall(
            "functions.search:1", "search", json.dumps({"q": "a<|b|>\nc", "ok": True, "l": [1, "a"], "o": {"k": None}})
        ),
    ),
    "tool_calls",
    5,
    40,
    4,
)
CUT_IN_THINKING = Completion("Half a thought", "", (), "length", 5, 3, 3)
CUT_IN_ANSWER = Completion("A thought.", "Half an ans", (), "length", 5, 5, 2)
NO_THINKING = Completion("", "Just the answer.", (), "stop", 5, 3, 0)
CASES = {
    "answer": ANSWER,
    "calls": CALLS,
    "cut-in-thinking": CUT_IN_THINKING,
    "cut-in-answer": CUT_IN_ANSWER,
    "no-thinking": NO_THINKING,
}


def expected(completion: Completion) -> Parsed:
    calls = tuple((call.name, json.loads(call.arguments)) for call in completion.tool_calls)
    return Parsed(completion.reasoning, completion.content or "", calls)  # type: ignore[arg-type]


def normalised(parsed: Parsed) -> Parsed:
    calls = tuple((call.name, json.loads(call.arguments)) for call in parsed.calls)
    return Parsed(parsed.reasoning, parsed.content, calls)  # type: ignore[arg-type]


def streamed(parser: WireParser, pieces: list[str], tools: bool = True) -> Parsed:
    stream = parser.stream(tools=tools)
    steps = [stream.feed(piece) for piece in pieces] + [stream.finish()]
    return Parsed(
        "".join(step.reasoning for step in steps),
        "".join(step.content for step in steps),
        tuple(call for step in steps for call in step.calls),
    )


def available(name: str) -> WireParser:
    try:
        return make_parser(name)
    except ParserUnavailable as error:
        if os.environ.get("CI") and name == "sglang":
            raise  # CI installs the sglang-parsers extra: its absence there is a failure
        pytest.skip(str(error))


PARSERS = pytest.mark.parametrize("parser_name", ["builtin", "sglang"])


@PARSERS
@pytest.mark.parametrize("case", sorted(CASES))
def test_whole_output_parses_back_to_what_the_model_said(parser_name: str, case: str) -> None:
    parser = available(parser_name)
    completion = CASES[case]
    assert normalised(parser.parse(render(completion), tools=True)) == expected(completion)


@PARSERS
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_stream_cut_anywhere_parses_like_the_whole(parser_name: str, case: str) -> None:
    parser = available(parser_name)
    raw = render(CASES[case])
    whole = normalised(parser.parse(raw, tools=True))
    for cut in range(len(raw) + 1):
        assert normalised(streamed(parser, [raw[:cut], raw[cut:]])) == whole, (cut, raw[:cut])
    assert normalised(streamed(parser, list(raw))) == whole  # one character per step
    assert normalised(streamed(parser, token_pieces(raw))) == whole


def test_token_pieces_are_seeded_and_split_every_marker_everywhere() -> None:
    raw = render(CALLS)
    assert "".join(token_pieces(raw)) == raw and token_pieces(raw) == token_pieces(raw)
    marker = "<|close|>think<|sep|>"
    cuts_inside: set[int] = set()
    for sample in range(300):
        raw = render(Completion(f"Thought number {sample}.", "Yes.", (), "stop", 1, 1, 1))
        start = raw.index(marker)
        offset = 0
        for piece in token_pieces(raw):
            offset += len(piece)
            if start < offset < start + len(marker):
                cuts_inside.add(offset - start)
    assert cuts_inside == set(range(1, len(marker)))


def test_without_tools_the_tools_block_stays_text() -> None:
    parsed = make_parser("builtin").parse(render(CALLS), tools=False)
    assert parsed.calls == () and parsed.content.startswith("<|open|>tools<|sep|>")


# --- parser-configuration faults (builtin only) ------------------------------------------


def test_no_reasoning_parser_leaves_the_think_block_in_content() -> None:
    parsed = make_parser("builtin", ParserSettings(reasoning=False)).parse(render(ANSWER), tools=False)
    assert (
        parsed.reasoning == ""
        and parsed.content == f"<|open|>think<|sep|>{ANSWER.reasoning}<|close|>think<|sep|>{ANSWER.content}"
    )


def test_untyped_arguments_stay_strings() -> None:
    parsed = make_parser("builtin", ParserSettings(typed_arguments=False)).parse(render(CALLS), tools=True)
    assert json.loads(parsed.calls[0].arguments) == {"city": 'Pa"ris & co', "days": "3", "x": "1.5"}


def test_a_parser_that_misses_calls_passes_them_as_text() -> None:
    parsed = make_parser("builtin", ParserSettings(recognises_calls=False)).parse(render(CALLS), tools=True)
    assert parsed.calls == () and '<|open|>call tool="get_weather"' in parsed.content


def test_message_close_leaks_only_in_streams() -> None:
    parser = make_parser("builtin", ParserSettings(strips_message_close_in_streams=False))
    raw = render(ANSWER)
    assert "<|close|>message<|sep|>" not in parser.parse(raw, tools=False).content
    assert streamed(parser, token_pieces(raw), tools=False).content.endswith("<|close|>message<|sep|>")


def test_real_parsers_do_not_pretend_to_have_our_bugs() -> None:
    with pytest.raises(ParserUnavailable):
        make_parser("sglang", ParserSettings(typed_arguments=False))


# --- raw-text faults -------------------------------------------------------------------------


def test_raw_text_faults_change_what_the_model_writes() -> None:
    raw = render(ANSWER)
    assert fault_hooks.on_raw(frozenset(), raw) == raw
    k2 = make_parser("builtin").parse(fault_hooks.on_raw(frozenset({"k2-think-tags"}), raw), tools=False)
    assert k2.reasoning == f"<think>{ANSWER.reasoning}</think>"
    unclosed = make_parser("builtin").parse(fault_hooks.on_raw(frozenset({"empty-content"}), raw), tools=False)
    assert (unclosed.reasoning, unclosed.content) == (f"{ANSWER.reasoning}\n{ANSWER.content}", "")
    prefixed = make_parser("builtin").parse(
        fault_hooks.on_raw(frozenset({"hallucinated-tool-name"}), render(CALLS)), tools=True
    )
    assert [call.name for call in prefixed.calls] == ["functions.get_weather", "functions.search"]


# --- choosing a parser ------------------------------------------------------------------------


def test_a_profile_names_its_parser() -> None:
    assert get_profile("tp8").parser == "builtin"
    assert (get_profile("tp8+sglang").name, get_profile("tp8+sglang").parser) == ("tp8+sglang", "sglang")
    assert get_profile("tp8+sglang").faults == frozenset()
    with pytest.raises(KeyError, match="unknown parser 'vllm2'"):
        get_profile("tp8+vllm2")


# --- the parser matrix ------------------------------------------------------------------------


def test_the_matrix_command_reports_every_case_and_fails_on_a_disagreement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Not llama.cpp's column: it starts a server (tests/test_llamacpp.py runs it).
    assert main(["parsers", "--parser", "builtin", "--parser", "sglang"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("case") and "builtin k3conformance whole" in lines[0]
    assert {line.split()[0] for line in lines[1:]} >= {case.name for case in load_corpus()}
    document = json.loads(corpus_path().read_text())
    document["cases"][0]["expected"]["content"] = "something else"
    wrong = tmp_path / "corpus.json"
    wrong.write_text(json.dumps(document))
    assert main(["parsers", "--corpus", str(wrong), "--format", "json", "--parser", "builtin"]) == 1
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {row["verdict"] for row in rows if row["case"] == "answer" and row["parser"].startswith("builtin")} == {
        "DIFF"
    }


def test_a_parser_that_reads_a_case_wrongly_fails_with_the_parser_layer() -> None:
    case = load_corpus()[0]
    # The model never closes its think block: the answer becomes reasoning.
    broken = dataclasses.replace(case, raw=case.raw.replace("<|close|>think<|sep|><|open|>response<|sep|>", "", 1))
    with pytest.raises(ConformanceFailure, match=r"\[layer: parser\].*content: expected"):
        check_parser_reads_case(make_parser("builtin"), broken, "stream")
    check_parser_reads_case(make_parser("builtin"), case, "stream")


def test_a_bad_corpus_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "corpus.json"
    bad.write_text("{not json")
    assert main(["parsers", "--corpus", str(bad)]) == 2
    assert "cannot read the corpus" in capsys.readouterr().err
