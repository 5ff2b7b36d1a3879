"""The wire-format layer: raw K3 output, our parser, SGLang's and vLLM's, whole and streamed.

vLLM's tests run where vLLM and torch are installed (the `vllm-parsers` extra, see docs/parsers.md)
and skip elsewhere with the install hint; CI does not install them.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from k3conformance.checks.failures import ConformanceFailure
from k3conformance.checks.parsers import check_parser_reads_case, corpus_path, load_corpus
from k3conformance.cli import main
from k3conformance.reference import faults as fault_hooks
from k3conformance.reference.profiles import get_profile
from k3conformance.reference.values import SimulatedTurn, ToolCall
from k3conformance.reference.wire import completion_object, stream_frames
from k3conformance.xtml.parsers import Parsed, ParserSettings, ParserUnavailable, WireParser, make_parser
from k3conformance.xtml.writer import render, token_pieces

ANSWER = SimulatedTurn("Let me think <|x about it <", "Paris is <b>big</b> & |x| < 3.", (), "stop", 5, 20, 8)
CALLS = SimulatedTurn(
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
CUT_IN_THINKING = SimulatedTurn("Half a thought", "", (), "length", 5, 3, 3)
CUT_IN_ANSWER = SimulatedTurn("A thought.", "Half an ans", (), "length", 5, 5, 2)
NO_THINKING = SimulatedTurn("", "Just the answer.", (), "stop", 5, 3, 0)
CASES = {
    "answer": ANSWER,
    "calls": CALLS,
    "cut-in-thinking": CUT_IN_THINKING,
    "cut-in-answer": CUT_IN_ANSWER,
    "no-thinking": NO_THINKING,
}


def expected(completion: SimulatedTurn) -> Parsed:
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


PARSERS = pytest.mark.parametrize("parser_name", ["builtin", "sglang", "vllm"])
# vLLM 0.33.0 streams an output without a think block as reasoning (the whole-output parse reads
# it right): the corpus's no-think-block case records it too.
_VLLM_STREAMS_NO_THINKING = pytest.mark.xfail(
    reason="vLLM 0.33.0 streams an output without a think block as reasoning", strict=True
)


def _stream_params() -> list[object]:
    return [
        pytest.param(
            name,
            case,
            id=f"{name}-{case}",
            marks=[_VLLM_STREAMS_NO_THINKING] if (name, case) == ("vllm", "no-thinking") else [],
        )
        for name in ("builtin", "sglang", "vllm")
        for case in sorted(CASES)
    ]


@PARSERS
@pytest.mark.parametrize("case", sorted(CASES))
def test_whole_output_parses_back_to_what_the_model_said(parser_name: str, case: str) -> None:
    parser = available(parser_name)
    completion = CASES[case]
    assert normalised(parser.parse(render(completion), tools=True)) == expected(completion)


@pytest.mark.parametrize(("parser_name", "case"), _stream_params())
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
        raw = render(SimulatedTurn(f"Thought number {sample}.", "Yes.", (), "stop", 1, 1, 1))
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


@pytest.mark.parametrize("parser_name", ["sglang", "vllm"])
def test_real_parsers_do_not_pretend_to_have_our_bugs(parser_name: str) -> None:
    with pytest.raises(ParserUnavailable, match="only the builtin parser reproduces parser bugs"):
        make_parser(parser_name, ParserSettings(typed_arguments=False))


# --- vLLM's parsers -----------------------------------------------------------------------


def test_without_vllm_the_vllm_parser_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from k3conformance.xtml.parsers import vllm as vllm_adapter

    vllm_adapter._vllm.cache_clear()
    # None in sys.modules is what an import finds when the package is not installed.
    for module in [name for name in sys.modules if name == "vllm" or name.startswith("vllm.")] or ["vllm"]:
        monkeypatch.setitem(sys.modules, module, None)
    try:
        with pytest.raises(ParserUnavailable, match=r"did not load .*pip install 'k3conformance\[vllm-parsers\]'"):
            make_parser("vllm")
    finally:
        vllm_adapter._vllm.cache_clear()


def test_a_piece_ending_inside_a_special_token_is_held_until_the_token_is_whole() -> None:
    from k3conformance.xtml.parsers.vllm import _partial_special_token_length

    assert [_partial_special_token_length(text) for text in ("a<", "a<|", "a<|clo", "a<|sep|", "a<|sep|>")] == [
        1,
        2,
        5,
        6,
        0,
    ]
    assert _partial_special_token_length("x < 3") == 0 and _partial_special_token_length("a<|b") == 0


def test_vllm_runs_its_own_kimi_k3_classes_on_k3_token_ids() -> None:
    parser = available("vllm")
    composed = importlib.import_module("vllm.parser.kimi_k3").KimiK3Parser
    assert issubclass(parser.parser_class, composed)  # type: ignore[attr-defined]
    assert parser.parser_class.reasoning_parser_cls.__name__ == "KimiK3ReasoningParser"  # type: ignore[attr-defined]
    assert parser.parser_class.tool_parser_cls.__name__ == "KimiK3ToolParser"  # type: ignore[attr-defined]
    tokenizer = parser.tokenizer  # type: ignore[attr-defined]
    open_id, sep_id = (tokenizer.convert_tokens_to_ids(token) for token in ("<|open|>", "<|sep|>"))
    ids = tokenizer.encode("<|open|>think<|sep|>", add_special_tokens=False)
    assert ids[0] == open_id and ids[-1] == sep_id and len(ids) == 7  # markers are special tokens, "think" bytes
    assert tokenizer.decode(tokenizer.encode("a<|b|> é", add_special_tokens=False)) == "a<|b|> é"


@pytest.mark.parametrize("tools", [False, True])
def test_without_its_reasoning_parser_vllm_drops_the_think_block_whole_and_leaks_it_in_streams(tools: bool) -> None:
    # Ours and SGLang's leave the think block in the content either way. vLLM 0.33.0's K3 tool
    # parser unwraps the response block of a whole output, so nothing keeps the think block; a
    # stream passes the think block on as content, markers and all.
    available("vllm")
    parser = make_parser("vllm", ParserSettings(reasoning=False))
    assert parser.parse(render(ANSWER), tools=tools) == Parsed("", ANSWER.content or "")
    think_block = f"<|open|>think<|sep|>{ANSWER.reasoning}<|close|>think<|sep|>"
    assert streamed(parser, token_pieces(render(ANSWER)), tools=tools) == Parsed(
        "", think_block + (ANSWER.content or "")
    )


def reference_stream(completion: SimulatedTurn, parser: WireParser, *, parse_tools: bool) -> list[str]:
    """The SSE frames of the reference server's stream of `completion`, read by `parser`."""
    return list(
        stream_frames(
            completion,
            response_id="r",
            created=0,
            model="m",
            include_usage=False,
            faults=frozenset(),
            parser=parser,
            parse_tools=parse_tools,
        )
    )


def vllm_stream_deltas(completion: SimulatedTurn, parser: WireParser, *, parse_tools: bool) -> list[dict[str, Any]]:
    """The deltas of the reference server's stream of `completion`, read by `parser`."""
    frames = reference_stream(completion, parser, parse_tools=parse_tools)
    chunks = [json.loads(frame.removeprefix("data: ")) for frame in frames if frame != "data: [DONE]\n\n"]
    return [chunk["choices"][0]["delta"] for chunk in chunks]


def test_with_thinking_off_vllm_builds_the_requests_parser_to_read_everything_as_content() -> None:
    # vLLM's server passes chat_template_kwargs to the parser it builds for each request; the
    # reference passes the simulator's thinking switch, so a streamed answer without a think block
    # (the known disagreement with thinking on) is content.
    parser = available("vllm")
    off = dataclasses.replace(NO_THINKING, thinking=False)
    deltas = vllm_stream_deltas(off, parser, parse_tools=True)
    assert "".join(delta.get("content") or "" for delta in deltas) == NO_THINKING.content
    assert not any(delta.get("reasoning") for delta in deltas)
    quiet = parser.for_request(thinking=False)  # type: ignore[attr-defined]
    assert streamed(quiet, token_pieces(render(NO_THINKING))) == Parsed("", NO_THINKING.content or "")
    assert parser.for_request(thinking=True) is parser  # type: ignore[attr-defined]


def test_the_reference_server_gives_calls_the_ids_vllm_gives_them() -> None:
    # vLLM 0.33.0's K3 tool parser ids its calls chatcmpl-tool-<hex>, whole and streamed (its
    # functions.NAME:IDX ids for Kimi models are used only for tool_choice required or named).
    parser = available("vllm")
    envelope: dict[str, object] = {"response_id": "r", "created": 0, "model": "m", "faults": frozenset()}
    whole = completion_object(CALLS, parser=parser, parse_tools=True, **envelope)  # type: ignore[arg-type]
    deltas = vllm_stream_deltas(CALLS, parser, parse_tools=True)
    streamed_calls = [call for delta in deltas for call in delta.get("tool_calls") or ()]
    for calls in (whole["choices"][0]["message"]["tool_calls"], streamed_calls):
        ids = [call["id"] for call in calls]
        assert len(ids) == len(set(ids)) == len(CALLS.tool_calls)
        assert all(re.fullmatch(r"chatcmpl-tool-[0-9a-f]+", call_id) for call_id in ids), ids


def test_the_reference_server_puts_vllms_reasoning_where_vllm_does() -> None:
    parser = available("vllm")
    message = completion_object(
        ANSWER, response_id="r", created=0, model="m", faults=frozenset(), parser=parser, parse_tools=False
    )["choices"][0]["message"]
    assert message["reasoning"] == ANSWER.reasoning and "reasoning_content" not in message
    frames = "".join(reference_stream(ANSWER, parser, parse_tools=False))
    assert '"reasoning":' in frames and "reasoning_content" not in frames


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
    assert (get_profile("tp8+vllm").name, get_profile("tp8+vllm").parser) == ("tp8+vllm", "vllm")
    with pytest.raises(KeyError, match="unknown parser or item spread 'vllm2'"):
        get_profile("tp8+vllm2")


# --- the parser matrix ------------------------------------------------------------------------


def test_the_matrix_command_reports_every_case_and_fails_on_a_disagreement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Not llama.cpp's column: it starts a server (tests/e2e/test_llamacpp.py runs it).
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
