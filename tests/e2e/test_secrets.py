"""No API key and no password from an endpoint URL in anything a run writes or prints:
records, summaries, JUnit XML, the terminal (with `-rA -v`, local variables and DEBUG
logs shown), also when requests fail and their errors are printed, and under `-n 2`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.typedefs import Handler
from run_files import only_run, records_names, responses_by_key, summary_of, written_texts
from stub_server import serve_app

from k3conformance.reference.app import build_app
from k3conformance.reference.profiles import get_profile
from k3conformance.reference.server import RunningServer, start_in_thread

API_KEY = "sk-k3c-secret-key-5f0d1c2b"
PASSWORD = "pw-k3c-secret-9a8b7c"
USER = "k3c-user-4e5f"
# Everything that could carry a secret to the person at the terminal or to disk.
LOUD = ["-rA", "-v", "--showlocals", "--tb=long", "--log-level=DEBUG", "--junitxml=junit.xml"]


def assert_nowhere(result: pytest.RunResult, root: Path, *secrets: str) -> None:
    shown = result.stdout.str() + result.stderr.str()
    written = written_texts(root)
    assert any(path.name.endswith(".jsonl.zst") for path in written) or not any(root.rglob("summary.json"))
    for secret in secrets:
        assert secret not in shown, f"{secret!r} shown on the terminal"
        for path, text in written.items():
            assert secret not in text, f"{secret!r} written to {path}"


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{PASSWORD}@", 1)


@pytest.fixture
def keyed_server() -> Iterator[RunningServer]:
    with start_in_thread(get_profile("tp8"), api_key=API_KEY) as server:
        yield server


def test_a_correct_key_completes_and_is_nowhere_under_xdist(
    suite_project: pytest.Pytester, keyed_server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K3_API_KEY", API_KEY)
    result = suite_project.runpytest_subprocess(
        "--k3-endpoint", keyed_server.url, "--k3-results-dir", "out", "-n", "2", *LOUD
    )
    result.assert_outcomes(passed=9)
    run_dir = only_run(suite_project.path / "out")
    assert summary_of(run_dir)["status"] == "complete"
    assert records_names(run_dir) == ["records-gw0.jsonl", "records-gw1.jsonl"]
    assert (suite_project.path / "junit.xml").is_file()
    assert "DEBUG" in result.stdout.str(), "the logs were meant to be shown"
    assert_nowhere(result, suite_project.path, API_KEY)


def test_a_wrong_key_is_one_clear_error_without_the_key(
    suite_project: pytest.Pytester, keyed_server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "sk-k3c-wrong-key-0b1c2d3e"
    monkeypatch.setenv("K3_API_KEY", wrong)
    result = suite_project.runpytest("--k3-endpoint", keyed_server.url, "--k3-results-dir", "out", *LOUD)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert len(errors) == 1 and "The endpoint rejected the credentials" in errors[0] and "HTTP 401" in errors[0]
    # The source the key really came from, not the flag that was not given.
    assert "Sent: the key from $K3_API_KEY." in errors[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert_nowhere(result, suite_project.path, wrong, API_KEY)


def test_openai_api_key_is_never_read_unless_named(
    suite_project: pytest.Pytester, keyed_server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A developer's OPENAI_API_KEY must not go to an internal endpoint unasked: without K3_API_KEY the
    run sends no key (the server refuses it) and the error says so; named, it is sent, and the header
    says where it came from."""
    monkeypatch.delenv("K3_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    unasked = suite_project.runpytest("--k3-endpoint", keyed_server.url, "--k3-results-dir", "out", *LOUD)
    assert unasked.ret == pytest.ExitCode.USAGE_ERROR
    unasked.stderr.fnmatch_lines(["*HTTP 401. Sent: no key (set K3_API_KEY, --k3-api-key, or --k3-api-key-env NAME)*"])
    named = suite_project.runpytest(
        "--k3-endpoint", keyed_server.url, "--k3-results-dir", "out", "--k3-api-key-env", "OPENAI_API_KEY", *LOUD
    )
    named.assert_outcomes(passed=9)
    named.stdout.fnmatch_lines(["k3conformance: API key from $OPENAI_API_KEY (named by --k3-api-key-env)"])
    assert_nowhere(named, suite_project.path, API_KEY)


def test_the_header_names_the_key_source_and_an_unread_openai_key(
    suite_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("K3_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    result = suite_project.runpytest("--k3-results-dir", "out", "--co")
    result.stdout.fnmatch_lines(
        ["k3conformance: no API key sent (*); $OPENAI_API_KEY is set but not read: --k3-api-key-env OPENAI_API_KEY*"]
    )
    monkeypatch.setenv("K3_API_KEY", "sk-k3c-header-key")
    given = suite_project.runpytest("--k3-results-dir", "out", "--co", "--k3-api-key", "sk-k3c-flag-key")
    given.stdout.fnmatch_lines(["k3conformance: API key from --k3-api-key"])
    assert_nowhere(given, suite_project.path, "sk-k3c-flag-key", "sk-k3c-header-key", API_KEY)


def test_a_named_key_variable_that_is_unset_is_a_usage_error(
    suite_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MY_K3_KEY", raising=False)
    result = suite_project.runpytest("--k3-api-key-env", "MY_K3_KEY", "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--k3-api-key-env names $MY_K3_KEY, which is not set*"])


@pytest.mark.parametrize("fault", ["server-errors", "dropped-connection", "malformed-frame"])
def test_failing_requests_are_reported_without_the_key(
    suite_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    monkeypatch.setenv("K3_API_KEY", API_KEY)
    with start_in_thread(get_profile(fault), api_key=API_KEY) as server:
        result = suite_project.runpytest(
            "--k3-endpoint", server.url, "--k3-results-dir", "out", "--k3-retries", "0", "--k3-backoff", "0", *LOUD
        )
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) >= 3 and "failed" not in outcomes
    result.stdout.fnmatch_lines(["*[[]layer: infra[]] smoke/*: not scored, the endpoint failed: *"])
    failures = [
        r
        for records in responses_by_key(only_run(suite_project.path / "out")).values()
        for r in records
        if r.get("error")
    ]
    assert failures and all(r["status"] == "infra_error" for r in failures)
    assert_nowhere(result, suite_project.path, API_KEY)


def test_credentials_in_the_endpoint_url_are_stripped_everywhere_under_xdist(
    suite_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K3_API_KEY", API_KEY)
    with start_in_thread(get_profile("tp8")) as server:
        endpoint = with_credentials(server.url)
        result = suite_project.runpytest_subprocess(
            "--k3-endpoint", endpoint, "--k3-results-dir", "out", "-n", "2", *LOUD
        )
    result.assert_outcomes(passed=9)
    result.stdout.fnmatch_lines([f"k3conformance: endpoint {server.url}, model kimi-k3-simulator, shape unlabelled"])
    run_dir = only_run(suite_project.path / "out")
    assert summary_of(run_dir)["endpoint"] == server.url
    assert "DEBUG" in result.stdout.str(), "the logs were meant to be shown"
    assert_nowhere(result, suite_project.path, PASSWORD, f"{USER}:", API_KEY)


def test_url_credentials_are_sent_as_basic_auth_not_in_the_url() -> None:
    from k3conformance.endpoint.url import split_credentials

    plain, headers = split_credentials("http://al%40ice:p%3Ass@gpu-node:30000/v1")
    assert plain == "http://gpu-node:30000/v1"
    assert headers == {"Authorization": "Basic YWxAaWNlOnA6c3M="}  # al@ice:p:ss
    assert split_credentials("http://gpu-node:30000/v1") == ("http://gpu-node:30000/v1", {})


def test_an_unreachable_endpoint_is_reported_without_its_credentials(suite_project: pytest.Pytester) -> None:
    result = suite_project.runpytest(
        "--k3-endpoint", with_credentials("http://127.0.0.1:9/v1"), "--k3-retries", "0", *LOUD
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: Cannot reach the K3 endpoint: GET http://127.0.0.1:9/v1/models failed*"])
    assert_nowhere(result, suite_project.path, PASSWORD, f"{USER}:")


def test_a_rejected_endpoint_url_is_echoed_without_its_credentials(suite_project: pytest.Pytester) -> None:
    result = suite_project.runpytest("--k3-endpoint", f"ftp://{USER}:{PASSWORD}@127.0.0.1:9/v1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert_nowhere(result, suite_project.path, PASSWORD)


def _leaky_server_info(request: web.Request) -> web.Response:
    # SGLang's /get_server_info echoes its launch arguments, the key among them.
    return web.json_response(
        {
            "simulator": True,
            "model_path": "kimi-k3-simulator",
            "api_key": API_KEY,
            "admin_api_key": API_KEY,
            "served_model_name": "kimi-k3-simulator",
            "launch_command": f"python -m sglang.launch_server --api-key {API_KEY} --tp 8",
        }
    )


@contextmanager
def leaky_reference() -> Iterator[str]:
    """The reference deployment, requiring the key, whose server information repeats it."""
    app = build_app(get_profile("tp8"), api_key=API_KEY)

    @web.middleware
    async def leak(request: web.Request, handler: Handler) -> web.StreamResponse:
        return _leaky_server_info(request) if request.path == "/get_server_info" else await handler(request)

    app.middlewares.append(leak)
    with serve_app(app) as url:
        yield url


def test_server_information_that_repeats_the_key_is_redacted(
    suite_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K3_API_KEY", API_KEY)
    with leaky_reference() as url:
        result = suite_project.runpytest("--k3-endpoint", url, "--k3-results-dir", "out", *LOUD)
    result.assert_outcomes(passed=9)
    info: dict[str, Any] = summary_of(only_run(suite_project.path / "out"))["server_info"]["get_server_info"]
    assert info["model_path"] == "kimi-k3-simulator", "the server information should be kept, only the key removed"
    assert info["api_key"] == info["admin_api_key"] == "<redacted>"
    assert info["launch_command"] == "python -m sglang.launch_server --api-key <redacted> --tp 8"
    assert_nowhere(result, suite_project.path, API_KEY)
