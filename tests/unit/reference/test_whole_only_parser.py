"""The reference deployment behind a parser that reads whole outputs only (llama.cpp's, through
its server): streamed requests get a 400 that says why, whole ones are parsed, and an output the
parser refuses is the HTTP 500 a client of that server gets. A stand-in parser named as llama.cpp's
plays it here, so that no llama.cpp server is needed."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from k3conformance.reference import RunningServer, get_profile
from k3conformance.reference import app as reference_app
from k3conformance.reference.server import start_in_thread
from k3conformance.xtml.parsers import WHOLE_ONLY_PARSER_NAMES, Parsed, ParseRefused, StreamingParse, make_parser


class WholeOnly:
    """Ours under llama.cpp's name: refuses every output of a request with tools."""

    name = WHOLE_ONLY_PARSER_NAMES[0]
    version = "test"

    def __init__(self) -> None:
        self.builtin = make_parser("builtin")

    def parse(self, raw: str, *, tools: bool) -> Parsed:
        if tools:
            raise ParseRefused("llama.cpp answered HTTP 500: does not match the expected peg-native format")
        return self.builtin.parse(raw, tools=tools)

    def stream(self, *, tools: bool) -> StreamingParse:
        raise AssertionError("a whole-only parser is never asked to stream")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningServer]:
    monkeypatch.setattr(reference_app, "make_parser", lambda name, settings: WholeOnly())
    with start_in_thread(get_profile("tp8")) as running:
        yield running


def post(server: RunningServer, **fields: Any) -> tuple[int, dict[str, Any]]:
    body = {"model": "kimi-k3-simulator", "messages": [{"role": "user", "content": "Name a primary color."}], **fields}
    request = urllib.request.Request(
        server.url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_whole_output_is_read_by_the_whole_only_parser(server: RunningServer) -> None:
    status, body = post(server)
    assert status == 200
    message = body["choices"][0]["message"]
    assert message["content"] and message["reasoning_content"]


def test_a_streamed_request_gets_a_400_that_says_why(server: RunningServer) -> None:
    status, body = post(server, stream=True)
    assert status == 400
    assert body["error"]["param"] == "stream"
    assert "reads whole outputs only" in body["error"]["message"]


def test_an_output_the_parser_refuses_is_a_500_with_its_reason(server: RunningServer) -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    status, body = post(server, tools=tools)
    assert status == 500
    assert body["error"]["type"] == "server_error"
    assert "peg-native format" in body["error"]["message"]


def test_llamacpps_parser_reproduces_no_parser_fault() -> None:
    from k3conformance.xtml.parsers import ParserSettings, ParserUnavailable

    with pytest.raises(ParserUnavailable, match="reproduces no parser fault"):
        make_parser("llamacpp", ParserSettings(recognises_calls=False))


def test_a_reference_profile_can_be_read_by_llamacpps_parser() -> None:
    profile = get_profile("tp8+llamacpp")
    assert profile.parser == "llamacpp" and profile.base == "tp8"
