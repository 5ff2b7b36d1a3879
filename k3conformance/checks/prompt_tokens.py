"""Prompt-token accuracy: `usage.prompt_tokens` against the server's own tokenizer.

SGLang serves `POST /tokenize` (vLLM has the route too), which renders `messages` (with
tools, thinking parameters and response format) as a chat completion does and answers
with `count`.
Billing and context limits rest on `usage.prompt_tokens`; a server whose usage leaves
out part of what it rendered (tool declarations, preserved reasoning, the response
schema) undercounts. Moonshot's Kimi-Vendor-Verifier (tests/prompt_tokens) compares
with counts made offline and accepts up to 3 tokens more; so do we, against the
server's own count, and against such fixed counts where the user provides them
(`--k3-prompt-token-cases`, KVV's file format).
"""

from __future__ import annotations

from k3conformance.checks.failures import expect
from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import RequestError

# KVV's tolerance: usage may count up to this many tokens more than the reference count.
OVERCOUNT_TOLERANCE = 3


def check_prompt_tokens_match_tokenizer(completion: Completion, tokenized: int | RequestError, case: str) -> None:
    __tracebackhide__ = True
    if isinstance(tokenized, RequestError):
        expect(
            False,
            layer="api",
            expected=f"the tokenizer endpoint to count a request the chat endpoint answered ({case})",
            got=tokenized.describe(),
        )
        return
    _check_prompt_tokens(completion, tokenized, "the server's own /tokenize count", case)


def check_prompt_tokens_match_constants(completion: Completion, expected: int, source: str, case: str) -> None:
    """Against a fixed count for K3's template (KVV's source), for servers without /tokenize."""
    __tracebackhide__ = True
    _check_prompt_tokens(completion, expected, f"the fixed count of {source}", case)


def _check_prompt_tokens(completion: Completion, reference: int, source: str, case: str) -> None:
    __tracebackhide__ = True
    counted = (completion.usage or {}).get("prompt_tokens")
    expect(
        isinstance(counted, int) and reference <= counted <= reference + OVERCOUNT_TOLERANCE,
        layer="api",
        expected=(
            f"usage.prompt_tokens within [{reference}, {reference + OVERCOUNT_TOLERANCE}], {source} "
            f"for the same request ({case})"
        ),
        got=f"prompt_tokens {counted}",
        hint="usage must count everything the chat template rendered: tool declarations, kept reasoning, schemas",
    )
