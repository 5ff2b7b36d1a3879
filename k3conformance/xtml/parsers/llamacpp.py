"""llama.cpp's own Kimi K3 parser (`common_chat_params_init_kimi_k3`), run by its real server,
for the parser matrix's `llamacpp` column.

llama.cpp has no entry point that parses a given text, and its server refuses a custom
grammar together with tools ("Cannot use custom grammar constraints with tools."), so the
text cannot be forced through generation either. What it does accept is an assistant turn
to continue (`continue_final_message: "reasoning_content"`): its K3 handler puts
`<|open|>message role="assistant"<|sep|><|open|>think<|sep|>` and that turn's reasoning in
front of what the model generates, and parses the two together with the same parser as any
answer. So the raw output goes in as the reasoning of a final assistant turn (less the think
opener the generation prompt writes anyway), and the model is allowed one token, chosen by a
logit bias: its end of generation when the raw output ends its turn (the server sees a
finished answer, as after a real end of turn), or a control token that prints nothing when
the output is cut (the server sees `max_tokens` reached, as after a real truncation).

Only whole outputs can be read this way: the server streams what is generated, and nothing
of the raw output is generated, so this column has no streaming modes. llama.cpp's streaming
parse of real tokens is what tests/e2e/test_llamacpp.py runs the suites against.

The request declares the tools the raw output calls, with each argument's type taken from
its XTML `type` attribute: llama.cpp's parser accepts only declared tools and arguments and
reads an argument as a string or as JSON by the schema's type.
"""

from __future__ import annotations

import atexit
import html
import importlib.metadata
import json
import re
import secrets
import threading
import urllib.error
import urllib.request
from contextlib import ExitStack
from typing import Any

from k3conformance.deployment.llamacpp_server import (
    INSTALL_HINT,
    K3_SETTINGS,
    MODEL_ALIAS,
    LlamaCppServer,
    find_model,
    missing_requirement,
    running_llamacpp,
)
from k3conformance.xtml.parsers.base import Parsed, ParsedCall, ParseRefused, ParserUnavailable, StreamingParse

THINK_OPEN = "<|open|>think<|sep|>"
MESSAGE_CLOSE = "<|close|>message<|sep|>"
# SmolLM2's end of generation, and a control token of its vocabulary that is not one.
END_OF_GENERATION = "<|im_end|>"
SILENT_TOKEN = "<|im_start|>"
CALL_OPEN = '<|open|>call tool="'
ARGUMENT = re.compile(r'<\|open\|>argument key="([^"]*)"(?: type="([^"]*)")?')
XTML_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
REQUEST_TIMEOUT_S = 120.0


def xllamacpp_version() -> str:
    try:
        return importlib.metadata.version("xllamacpp")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def declared_tools(raw: str) -> list[dict[str, Any]]:
    """A tool declaration for every tool the raw output calls, with the arguments it passes."""
    properties: dict[str, dict[str, dict[str, str]]] = {}
    # Each call's name runs to its closing quote (a call cut inside its name declares nothing).
    for call in raw.split(CALL_OPEN)[1:]:
        name, quoted, body = call.partition('"')
        if not quoted:
            continue
        arguments = properties.setdefault(html.unescape(name), {})
        for key, kind in ARGUMENT.findall(body):
            arguments[html.unescape(key)] = {"type": kind} if kind in XTML_TYPES else {}
    return [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": arguments}}}
        for name, arguments in properties.items()
    ]


class LlamaCppParser:
    """llama.cpp's K3 parser behind its server, started on the first parse and stopped at exit."""

    name = "llamacpp"
    modes = ("whole",)

    def __init__(self) -> None:
        missing = missing_requirement()
        if missing is not None:
            raise ParserUnavailable(f"{missing}; install with: {INSTALL_HINT}")
        self.version = xllamacpp_version()
        self._api_key = secrets.token_urlsafe(24)
        self._running: LlamaCppServer | None = None
        self._token_ids: dict[str, int] = {}
        self._exit = ExitStack()
        # The reference deployment parses its requests in flight from threads: one server for all.
        self._starting = threading.Lock()

    def parse(self, raw: str, *, tools: bool) -> Parsed:
        message = self._complete(raw, tools)
        calls = tuple(
            ParsedCall(str(call["function"]["name"]), str(call["function"]["arguments"]))
            for call in message.get("tool_calls") or []
        )
        return Parsed(str(message.get("reasoning_content") or ""), str(message.get("content") or ""), calls)

    def stream(self, *, tools: bool) -> StreamingParse:
        raise ParserUnavailable("llama.cpp's parser reads forced text whole only: its server streams generated tokens")

    def _complete(self, raw: str, tools: bool) -> dict[str, Any]:
        ends_turn = raw.rstrip().endswith(MESSAGE_CLOSE)
        token = self._token_id(END_OF_GENERATION if ends_turn else SILENT_TOKEN)
        body: dict[str, Any] = {
            "model": MODEL_ALIAS,
            "messages": [
                {"role": "user", "content": "Go on."},
                # The content is not used when the reasoning is continued, but the server
                # refuses an assistant turn without content or tool calls.
                {"role": "assistant", "content": ".", "reasoning_content": raw.removeprefix(THINK_OPEN)},
            ],
            "continue_final_message": "reasoning_content",
            "add_generation_prompt": False,
            "max_tokens": 1,
            "temperature": 0,
            "logit_bias": [[token, 100]],
        }
        if tools:
            body["tools"] = declared_tools(raw)
        answer = self._post("/v1/chat/completions", body)
        message: dict[str, Any] = answer["choices"][0]["message"]
        return message

    def _token_id(self, special: str) -> int:
        if special not in self._token_ids:
            tokens = self._post("/tokenize", {"content": special, "parse_special": True})["tokens"]
            if len(tokens) != 1:
                raise ParserUnavailable(f"{special} is not one token of the model's vocabulary: {tokens}")
            self._token_ids[special] = int(tokens[0])
        return self._token_ids[special]

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self._server().root_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._api_key}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                answer: dict[str, Any] = json.loads(response.read())
                return answer
        except urllib.error.HTTPError as error:
            # llama.cpp answers HTTP 500 when its parser does not accept the whole output.
            detail = error.read().decode(errors="replace")
            raise ParseRefused(f"llama.cpp answered HTTP {error.code}: {_error_message(detail)}") from error

    def _server(self) -> LlamaCppServer:
        with self._starting:
            if self._running is None:
                model = find_model()
                assert model is not None  # checked when the parser was made
                self._running = self._exit.enter_context(running_llamacpp(model, self._api_key, K3_SETTINGS))
                atexit.register(self._exit.close)
            return self._running


def _error_message(body: str) -> str:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body[:300]
