"""Fixed prompt-token counts as the second source (`--k3-prompt-token-cases`, KVV's file
format): the constants check passes on a healthy deployment and fails on the prompt-token
faults on a server without a tokenizer endpoint, where the constants are the only source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.typedefs import Handler
from run_files import check_name, copy_suites, outcomes
from stub_server import serve_app

from k3conformance.datasets.prompt_token_cases import load_prompt_token_cases
from k3conformance.datasets.sources import DatasetUnavailable
from k3conformance.reference.app import build_app
from k3conformance.reference.profiles import get_profile
from k3conformance.reference.prompt import prompt_tokens
from k3conformance.reference.request import parse_request

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
HISTORY = [
    {"role": "user", "content": "Remember the code 7382. Reply only with 'noted'."},
    {"role": "assistant", "content": "noted", "reasoning_content": "The code to remember is 7382; I say noted."},
    {"role": "user", "content": "Which code did I give you?"},
]
THINKING = {"thinking": {"type": "enabled", "keep": "all"}, "temperature": 1.0, "top_p": 0.95, "max_tokens": 256}
REQUESTS: dict[str, dict[str, Any]] = {
    "plain": {"messages": [{"role": "user", "content": "What is the capital of France?"}], **THINKING},
    "tools": {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER], **THINKING},
    "history-reasoning": {"messages": HISTORY, **THINKING},
}


def write_cases(path: Path) -> Path:
    """Counts of the reference deployment's own template, standing for K3's real ones."""
    lines = [
        json.dumps(
            {"id": case, "request": request, "expected_prompt_tokens": prompt_tokens(parse_request(request, ""))}
        )
        for case, request in REQUESTS.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@web.middleware
async def _no_tokenizer(request: web.Request, handler: Handler) -> web.StreamResponse:
    # Like a vendor API: no tokenizer endpoint, so the fixed counts are the only source.
    if request.path.endswith("/tokenize"):
        raise web.HTTPNotFound()
    return await handler(request)


def failed_constants(project: pytest.Pytester, profile: str) -> tuple[set[str], set[str]]:
    cases = write_cases(project.path / "counts.jsonl")
    app = build_app(get_profile(profile))
    app.middlewares.append(_no_tokenizer)
    with serve_app(app) as url:
        result = project.runpytest_subprocess(
            f"--k3-endpoint={url}",
            f"--k3-prompt-token-cases={cases}",
            "--k3-results-dir=out",
            "-rs",
            "-p",
            "no:cacheprovider",
        )
    records = outcomes(project.path / "out")
    by_check = {check_name(o) for o in records}
    assert by_check >= {
        "prompt_tokens/prompt_tokens_match_constants[plain]",
        "prompt_tokens/prompt_tokens_match_constants[stream]",
    }
    # The /tokenize checks say why they did not run; only the constants were checked.
    assert not any(o["outcome"] != "skipped" for o in records if "match_tokenizer" in check_name(o))
    result.stdout.fnmatch_lines(["*the server has no tokenizer endpoint (POST /tokenize)*--k3-prompt-token-cases*"])
    failed = {f"{o['item']}[{o['mode']}]" for o in records if o["outcome"] == "failed"}
    messages = {str(o["message"]) for o in records if o["outcome"] == "failed"}
    return failed, messages


@pytest.fixture
def prompt_token_project(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_suites(pytester.path, ["test_prompt_tokens.py"])
    return pytester


@pytest.mark.parametrize(
    ("profile", "failing_cases"),
    [("tp8", set()), ("prompt-tokens-exclude-tools", {"tools"}), ("drops-reasoning-history", {"history-reasoning"})],
)
def test_constants_catch_prompt_token_faults(
    prompt_token_project: pytest.Pytester, profile: str, failing_cases: set[str]
) -> None:
    failed, messages = failed_constants(prompt_token_project, profile)
    assert failed == {f"constant-{case}[{mode}]" for case in failing_cases for mode in ("plain", "stream")}
    # The failure says which source it was checked against: the file and the case's line.
    assert all("the fixed count of " in message and "counts.jsonl:" in message for message in messages)


def test_bad_case_files_say_where(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "request": {"messages": []}, "expected_prompt_tokens": 12}\n{"id": "b"}\n')
    with pytest.raises(DatasetUnavailable, match=r"line 2: `request` must be"):
        load_prompt_token_cases(bad)
    with pytest.raises(DatasetUnavailable, match="cannot read it"):
        load_prompt_token_cases(tmp_path / "missing.jsonl")


def test_a_bad_case_file_stops_the_run_up_front(prompt_token_project: pytest.Pytester) -> None:
    bad = prompt_token_project.path / "bad.jsonl"
    bad.write_text('{"id": "a", "request": {"messages": []}, "expected_prompt_tokens": "many"}\n')
    result = prompt_token_project.runpytest_subprocess(
        "--k3-endpoint=reference", f"--k3-prompt-token-cases={bad}", "--k3-results-dir=out", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "line 1: `expected_prompt_tokens` must be a positive integer" in result.stderr.str()
