"""The client's retry and error classes against a scripted stub server."""

from __future__ import annotations

import pytest
from stub_server import MODEL, send, serve_stub

from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import ErrorClass, RequestError
from k3conformance.probes.probe import ParserRefusal, Probe, ProbeResult, SampleResult
from k3conformance.reference.profiles import get_profile
from k3conformance.reference.server import start_in_thread

MESSAGES = [{"role": "user", "content": "hi"}]
# A reference-deployment stream that asks for a usage frame.
STREAM_WITH_USAGE = {
    "model": "kimi-k3-simulator",
    "messages": MESSAGES,
    "stream": True,
    "stream_options": {"include_usage": True},
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("failure", ["503", "429"])
def test_transient_failures_are_retried(failure: str, stream: bool) -> None:
    with serve_stub([failure, failure]) as (url, stub):
        outcome, attempts = send(url, {"model": MODEL, "messages": MESSAGES, "stream": stream})
    assert isinstance(outcome, Completion)
    assert outcome.content == "fine" and outcome.reasoning == "thinking"
    assert attempts == 3 == stub.chat_requests


def test_a_dropped_stream_is_retried_as_infrastructure() -> None:
    with serve_stub(["drop"]) as (url, stub):
        outcome, attempts = send(url, {"model": MODEL, "messages": MESSAGES, "stream": True})
    assert isinstance(outcome, Completion) and outcome.content == "fine"
    assert attempts == 2 == stub.chat_requests


def test_retries_run_out_into_an_infrastructure_error() -> None:
    with serve_stub(["drop"] * 3) as (url, stub):
        outcome, attempts = send(url, {"model": MODEL, "messages": MESSAGES, "stream": True}, retries=2)
    assert isinstance(outcome, RequestError)
    assert outcome.error_class is ErrorClass.INFRA
    assert outcome.kind in ("IncompleteStream", "RemoteProtocolError")
    assert attempts == 3 == stub.chat_requests


@pytest.mark.parametrize("retries", [0, 1])
def test_a_stream_that_ends_without_done_is_incomplete_and_retried(retries: int) -> None:
    # The reference profile cuts the first attempt right after the finish frame: what
    # follows it (the usage frame) is lost, so the stream must not count as an answer.
    with start_in_thread(get_profile("stream-without-done")) as server:
        outcome, attempts = send(server.url, STREAM_WITH_USAGE, retries=retries)
    assert attempts == retries + 1
    if retries == 0:
        assert isinstance(outcome, RequestError) and outcome.error_class is ErrorClass.INFRA
        assert outcome.kind == "IncompleteStream" and "[DONE]" in outcome.message
    else:
        assert isinstance(outcome, Completion) and outcome.usage is not None
        assert outcome.stream is not None and outcome.stream.done_marker


def test_a_stream_with_finish_and_usage_but_no_done_is_the_apis_omission() -> None:
    """Everything but [DONE] arrived: nothing the checks read is lost, so the completion is
    kept (the smoke suite's streaming_matches_non_streaming fails it, at the API layer) and not retried
    as an infrastructure error."""
    with start_in_thread(get_profile("no-done-marker")) as server:
        outcome, attempts = send(server.url, STREAM_WITH_USAGE, retries=2)
    assert attempts == 1
    assert isinstance(outcome, Completion) and outcome.usage is not None and outcome.finish_reason == "stop"
    assert outcome.stream is not None and not outcome.stream.done_marker
    assert outcome.stream.finish_frames == 1 and outcome.stream.usage_frames == 1


def test_a_stream_cut_before_its_usage_frame_says_what_arrived() -> None:
    with start_in_thread(get_profile("stream-without-done")) as server:
        outcome, _ = send(server.url, STREAM_WITH_USAGE, retries=0)
    assert isinstance(outcome, RequestError) and outcome.error_class is ErrorClass.INFRA
    assert "1 finish frame(s), no usage frame and no final data: [DONE]" in outcome.message


def test_a_4xx_is_an_api_rejection_and_not_retried() -> None:
    with serve_stub(["400"]) as (url, stub):
        outcome, attempts = send(url, {"model": MODEL, "messages": MESSAGES})
    assert isinstance(outcome, RequestError)
    assert outcome.error_class is ErrorClass.API
    assert outcome.http_status == 400 and outcome.message == "bad tool_choice"
    assert attempts == 1 == stub.chat_requests


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_parser_refusal_is_retried_then_a_parser_fault(stream: bool) -> None:
    # llama.cpp's HTTP 500 (or error event) saying its parser refused the model's output is
    # retried like any 5xx; if it persists it is the server's parser failing, not an outage.
    with serve_stub(["refuse"] * 3) as (url, stub):
        outcome, attempts = send(url, {"model": MODEL, "messages": MESSAGES, "stream": stream}, retries=2)
    assert isinstance(outcome, RequestError)
    assert outcome.error_class is ErrorClass.PARSER and outcome.layer == "parser"
    assert "does not match the expected peg-native format" in outcome.message
    assert outcome.http_status == (None if stream else 500)
    assert attempts == 3 == stub.chat_requests


def test_a_parser_refusal_that_a_retry_clears_is_an_answer() -> None:
    with serve_stub(["refuse"]) as (url, stub):
        outcome, attempts = send(url, {"model": MODEL, "messages": MESSAGES}, retries=2)
    assert isinstance(outcome, Completion) and outcome.content == "fine"
    assert attempts == 2 == stub.chat_requests


def test_a_parser_refusal_fails_the_check_at_the_parser_layer_and_is_no_infrastructure_error() -> None:
    refusal = RequestError(
        ErrorClass.PARSER,
        "InternalServerError",
        "The model produced output that does not match the expected peg-native format",
        3,
        500,
    )
    result = ProbeResult(Probe("tool_calls", "one-call", requests={"plain": {}}), [SampleResult(0, {"plain": refusal})])
    assert result.infra_errors == []
    with pytest.raises(ParserRefusal, match=r"^\[layer: parser\] expected a completion .*; got: .*peg-native"):
        result.completion("plain")


def test_an_unreachable_server_is_infrastructure() -> None:
    outcome, attempts = send("http://127.0.0.1:9/v1", {"model": MODEL, "messages": MESSAGES}, retries=1)
    assert isinstance(outcome, RequestError) and outcome.error_class is ErrorClass.INFRA
    assert attempts == 2


INFRA_SUITE = """
import pytest
from k3conformance import Probe

PROBES = [Probe("flaky", f"q{i}", requests={"ask": {"messages": [{"role": "user", "content": f"question {i}"}]}}) for i in range(3)]

@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_answered(probe, k3_result):
    assert k3_result.completion("ask").content == "fine"
"""


def test_infrastructure_errors_are_reported_apart_and_resumable(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_flaky=INFRA_SUITE)
    common = ["--k3-shape", "stub", "--k3-results-dir", "out", "--k3-backoff", "0"]
    with serve_stub([], failing_text="question 0") as (url, stub):
        first = pytester.runpytest("--k3-endpoint", url, *common, "--k3-retries", "1")
        assert stub.chat_requests == 4
        first.assert_outcomes(passed=2, errors=1)
        assert (
            "[layer: infra] flaky/q0: not scored, the endpoint failed: HTTP 503 InternalServerError: overloaded "
            "(after 2 attempt(s))" in first.stdout.str()
        )
        first.stdout.fnmatch_lines(
            [
                "| flaky * 3 * 3 * 2 * 0 * 1 * 0 * 100.0% *",
                "*(incomplete): records in out/stub/*",
                "*rerun with --k3-resume*",
            ]
        )
        # The same endpoint recovers (a resume against another one is refused: its identity is sealed).
        stub.failing_text, stub.chat_requests = None, 0
        second = pytester.runpytest("--k3-endpoint", url, *common, "--k3-resume")
        assert stub.chat_requests == 1
    second.assert_outcomes(passed=3)
    second.stdout.fnmatch_lines(["requests: 1 sent (1 attempts), 2 reused from an earlier session*", "*(complete)*"])
