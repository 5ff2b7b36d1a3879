"""Which server errors say that the server could not handle what the model wrote (a `parser`
fault, deterministic for that output) and which are outages (`infra`): the wordings are
llama.cpp's own, found in the library that the llama.cpp tests run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from llamacpp_server import require_model

from k3conformance.endpoint.errors import is_parser_refusal

# What llama.cpp's server (xllamacpp 2026.10.11549) answers, as its HTTP 500 bodies carry them.
REFUSALS = (
    "The model produced output that does not match the expected peg-native format",
    "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1,"
    " column 74: syntax error while parsing value - invalid string: missing closing quote;"
    " last read: '\"<|open|>call<|sep|><|close|>call<|sep|><|open|>message<|sep|>'",
)
# Server errors that are not about the model's output: retried and, if they persist, infrastructure.
OUTAGES = (
    "overloaded",
    "Internal Server Error",
    "Failed to parse messages: Expected 'content' or 'tool_calls'",
    "CUDA error: an illegal memory access was encountered",
    "the tool call arguments were dropped by the proxy",
)
# The fixed part of each refusal, as the library holds it.
LIBRARY_WORDINGS = (
    b"The model produced output that does not match the expected ",
    b"Failed to parse tool call arguments as JSON: ",
)


@pytest.mark.parametrize("message", REFUSALS)
def test_llamacpp_refusals_of_the_models_output_are_parser_faults(message: str) -> None:
    assert is_parser_refusal(message)


@pytest.mark.parametrize("message", OUTAGES)
def test_other_server_errors_are_not(message: str) -> None:
    assert not is_parser_refusal(message)


def test_the_wordings_are_llamacpps_own() -> None:
    # A llama.cpp release that rewords either message would turn its refusals into outages
    # (the run incomplete instead of a parser fault): this fails first.
    require_model()
    spec = importlib.util.find_spec("xllamacpp")
    assert spec is not None and spec.origin is not None
    libraries = list(Path(spec.origin).parent.glob("*.so"))
    assert libraries, f"no shared library next to {spec.origin}"
    text = b"".join(library.read_bytes() for library in libraries)
    for wording in LIBRARY_WORDINGS:
        assert wording in text, wording
        assert is_parser_refusal(wording.decode() + "peg-native format")
