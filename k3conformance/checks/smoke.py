"""Checks of the smoke suite: one obvious answer per prompt, whole, through the full path.

The answer must be the reply, not a substring of it: "42 7" is not 42 and "pong 7" is not
pong (a stray token after the answer is what a server that keeps draft tokens past the
end-of-message token sends). Markdown emphasis, quotes and closing punctuation around the
answer are not part of the reply's meaning and are dropped before comparing.
"""

from __future__ import annotations

from k3conformance.checks.failures import check_stopped, expect
from k3conformance.endpoint.completion import Completion
from k3conformance.formatting import excerpt
from k3conformance.xtml.markup import find_markup

# Wrapping a one-word answer may get: "**42**", "`pong`", "Paris.", "\"Paris\"".
_WRAPPING = " \t\r\n*_`'\"“”‘’.!。！"


def reply_of(content: str | None) -> str:
    """The reply with its wrapping dropped, in lower case, for comparing with an answer."""
    return (content or "").strip().strip(_WRAPPING).casefold()


def check_answer(completion: Completion, answer: str, mode: str) -> None:
    """finish_reason stop, a non-empty content, and that content is the answer."""
    __tracebackhide__ = True
    check_stopped(completion, mode)
    content = completion.content or ""
    expect(bool(content.strip()), layer="parser", expected=f"a non-empty answer in content ({mode})", got=completion)
    reply, wanted = reply_of(content), answer.casefold()
    # Serving markup around the answer is the parser's leak; the answer and then more tokens
    # means the server did not stop where the model did; anything else is the model's answer.
    leaked = find_markup(content)
    trailing = reply.startswith(wanted) and reply != wanted
    expect(
        reply == wanted,
        layer="parser" if leaked else "api" if trailing else "model",
        expected=f"the reply to be the answer {answer!r}, not merely contain it ({mode})",
        got=f"{', '.join(leaked)} in {excerpt(content)}" if leaked else excerpt(content),
        hint="markup in content: the reasoning parser left it there"
        if leaked
        else "text after the answer: a stop condition missed (draft tokens kept past end of message?)"
        if trailing
        else "",
    )


def check_chat_round_trip(completion: Completion, answer: str, model: str) -> None:
    __tracebackhide__ = True
    check_answer(completion, answer, "non-streaming")
    expect(
        completion.model == model,
        layer="api",
        expected=f"the response to name the requested model {model!r}",
        got=completion.model,
    )


def check_streaming_matches_non_streaming(plain: Completion, streamed: Completion, answer: str) -> None:
    __tracebackhide__ = True
    check_answer(streamed, answer, "streaming")
    assert streamed.stream is not None
    expect(
        streamed.stream.finish_frames == 1,
        layer="api",
        expected="exactly one stream frame with a finish_reason",
        got=f"{streamed.stream.finish_frames} finish frames in {streamed.stream.frames}",
    )
    expect(
        plain.finish_reason == streamed.finish_reason,
        layer="api",
        expected="the same finish_reason streamed and not",
        got=f"non-streaming {plain.finish_reason!r}, streaming {streamed.finish_reason!r}",
    )
    expect(
        plain.reasoning_field == streamed.reasoning_field,
        layer="parser",
        expected="reasoning in the same field streamed and not",
        got=f"non-streaming {plain.reasoning_field!r}, streaming {streamed.reasoning_field!r}",
    )
    check_stream_ends_with_done(streamed)


def check_stream_ends_with_done(streamed: Completion) -> None:
    """The stream's body ends with `data: [DONE]`. The client accepts a stream without it
    when its finish frame and usage frame both came (nothing else was lost), so that the
    omission shows here, as the API's, rather than as an infrastructure error. Part of
    streaming_matches_non_streaming: a stream must be whole to match."""
    __tracebackhide__ = True
    stats = streamed.stream
    assert stats is not None
    expect(
        stats.done_marker,
        layer="api",
        expected="the stream to end with data: [DONE] after its finish and usage frames",
        got=f"{stats.frames} frame(s), {stats.finish_frames} finish frame(s), {stats.usage_frames} usage frame(s), "
        "then the body ended without data: [DONE]",
        hint="OpenAI clients read [DONE] as the end of the stream; some wait for it or report a cut connection",
    )


def check_usage_reported(usage: dict[str, object] | None, mode: str) -> None:
    __tracebackhide__ = True
    expect(usage is not None, layer="api", expected=f"a usage object ({mode})", got=usage)
    assert usage is not None
    prompt, completion, total = (usage.get(key) for key in ("prompt_tokens", "completion_tokens", "total_tokens"))
    expect(
        isinstance(prompt, int) and isinstance(completion, int) and prompt > 0 and completion > 0,
        layer="api",
        expected=f"positive prompt_tokens and completion_tokens ({mode})",
        got=usage,
    )
    expect(
        total == prompt + completion,  # type: ignore[operator]
        layer="api",
        expected=f"total_tokens = prompt + completion ({mode})",
        got=usage,
    )
