"""Bad input gives one clear message before any item runs: no traceback, no failure per item."""

from __future__ import annotations

import re

import pytest


def assert_one_clear_error(result: pytest.RunResult, message: str) -> None:
    __tracebackhide__ = True
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert result.stderr.str().count("ERROR:") == 1
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert not re.search(r"\d+ (passed|failed|error)", output), "no item may run"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["single", "xdist"])
def test_unreachable_endpoint(suite_project: pytest.Pytester, workers: list[str]) -> None:
    result = suite_project.runpytest_subprocess("--k3-endpoint", "http://127.0.0.1:9/v1", "--k3-retries", "0", *workers)
    assert_one_clear_error(
        result, "Cannot reach the K3 endpoint: GET http://127.0.0.1:9/v1/models failed (*). Is the server running*"
    )


def test_unknown_model(suite_project: pytest.Pytester) -> None:
    result = suite_project.runpytest("--k3-model", "moonshotai/Kimi-K3")
    assert_one_clear_error(
        result, "Model 'moonshotai/Kimi-K3' is not served by http://127.0.0.1:*/v1; it serves: kimi-k3-simulator.*"
    )


def test_url_that_is_not_an_openai_api(suite_project: pytest.Pytester) -> None:
    # The reference deployment's root answers 404 for /models without the /v1 prefix.
    from k3conformance.reference.profiles import get_profile
    from k3conformance.reference.server import start_in_thread

    with start_in_thread(get_profile("tp8")) as server:
        result = suite_project.runpytest("--k3-endpoint", server.url.removesuffix("/v1"))
    assert_one_clear_error(
        result, "GET http://127.0.0.1:*/models answered HTTP 404: this is not the base of an OpenAI-compatible API*"
    )


def test_unwritable_results_directory(suite_project: pytest.Pytester) -> None:
    # A file where the directory should be: unwritable even for root, unlike chmod.
    (suite_project.path / "taken").write_text("not a directory")
    result = suite_project.runpytest("--k3-results-dir", "taken/results")
    assert_one_clear_error(
        result,
        "Cannot write run records to taken/results/reference-tp8/*: *. Choose a writable directory with --k3-results-dir*",
    )


def test_credentials_in_the_url_are_never_shown(suite_project: pytest.Pytester) -> None:
    result = suite_project.runpytest_subprocess(
        "--k3-endpoint", "http://admin:hunter2@127.0.0.1:9/v1?key=sk-q", "--k3-retries", "0"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "hunter2" not in output and "sk-q" not in output
    result.stderr.fnmatch_lines(["ERROR: Cannot reach the K3 endpoint: GET http://127.0.0.1:9/v1/models failed*"])


def test_suites_outside_a_marked_directory_still_fail_cleanly(pytester: pytest.Pytester) -> None:
    # No K3CONFORMANCE_SUITES conftest: the endpoint is resolved when the first item needs it.
    pytester.makepyfile(
        """
        import pytest
        from k3conformance import Probe

        @pytest.mark.parametrize("probe", [Probe("mine", "a", requests={"ask": {"messages": [{"role": "user", "content": "hi"}]}})], ids=str)
        def test_it(probe, k3_result):
            pass
        """
    )
    result = pytester.runpytest_subprocess(
        "--k3-endpoint=http://127.0.0.1:9/v1", "--k3-retries=0", "-p", "no:cacheprovider"
    )
    assert_one_clear_error(result, "Cannot reach the K3 endpoint*")


def test_separate_path_value_outside_the_directory_is_refused(
    suite_project: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """pytest would read the value as a test path when choosing its rootdir and ini file."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    result = suite_project.runpytest("--k3-results-dir", str(elsewhere))
    assert_one_clear_error(result, f"write --k3-results-dir={elsewhere} (with '='): *")
    joined = suite_project.runpytest(f"--k3-results-dir={elsewhere}", "-p", "no:cacheprovider")
    assert joined.ret == 0
    assert any(elsewhere.glob("reference-tp8/*/summary.json"))
