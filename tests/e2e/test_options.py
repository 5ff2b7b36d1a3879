"""Options: command line, ini fallback, environment, and bad values caught at parse time."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from k3conformance.options import OPTIONS, OptionSpec, Settings

SHOW_SETTINGS = """
def test_show(k3_settings):
    print("SETTINGS", k3_settings)
"""


def test_defaults_follow_the_model_card(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest("-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*endpoint='reference'*think_mode='opensource', reasoning_effort='max', concurrency=16*temperature=1.0, top_p=0.95*"
        ]
    )


def test_ini_values_apply_and_command_line_wins(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        """
        [pytest]
        k3_concurrency = 7
        k3_reasoning_effort = low
        k3_think_mode = kimi
        k3_shape = tp8
        """
    )
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest("-s", "--k3-reasoning-effort", "high")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*shape='tp8'*think_mode='kimi', reasoning_effort='high', concurrency=7*"])


def test_environment_beats_ini_and_key_never_shows(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini("[pytest]\nk3_model = from-ini\n")
    monkeypatch.setenv("K3_MODEL", "from-env")
    monkeypatch.setenv("K3_API_KEY", "sk-test-env-key")
    pytester.makepyfile(
        """
        def test_show(k3_settings):
            assert k3_settings.api_key == "sk-test-env-key"
            print("SETTINGS", k3_settings)
        """
    )
    result = pytester.runpytest("-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*model='from-env'*"])
    assert "sk-test-env-key" not in result.stdout.str()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--k3-concurrency", "0"], "*--k3-concurrency: expected a positive integer, got '0'*"),
        (["--k3-reasoning-effort", "medium"], "*expected one of low, high, max, got 'medium'*"),
        (["--k3-think-mode", "auto"], "*expected one of opensource, kimi*"),
        (["--k3-endpoint", "localhost:30000"], "*expected 'reference', 'reference:PROFILE' or an http(s) base URL*"),
        (["--k3-endpoint", "reference:tp9"], "*unknown reference profile 'tp9'; did you mean 'tp8'? *serve --help*"),
        (["--k3-limt", "3"], "*unknown option --k3-limt: did you mean --k3-limit?*"),
        (["--k3-resmue"], "*unknown option --k3-resmue: did you mean --k3-resume?*"),
        (["--k3-shape", "../etc"], "*expected a label of letters, digits*"),
        (["--k3-temperature", "3"], "*expected a temperature between 0 and 2*"),
        (["--k3-top-p", "0"], "*expected a positive number*"),
        (["--k3-suite-samples", "math=0"], "*--k3-suite-samples: expected a positive integer, got '0'*"),
        (["--k3-suite-samples", "math"], "*expected suite=count pairs such as math=8,coding=8, got 'math'*"),
    ],
)
def test_bad_command_line_values_are_usage_errors(
    pytester: pytest.Pytester, arguments: list[str], message: str
) -> None:
    pytester.makepyfile("def test_never(): pass")
    result = pytester.runpytest(*arguments)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_bad_ini_value_names_its_origin(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nk3_samples = many\n")
    pytester.makepyfile("def test_never(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*ini option k3_samples in *tox.ini (for --k3-samples): expected a positive integer, got 'many'*"]
    )


@pytest.mark.parametrize("spec", OPTIONS, ids=lambda spec: spec.flag)
def test_help_shows_every_option_of_the_table(pytester: pytest.Pytester, spec: OptionSpec[Any]) -> None:
    """Generated from the option table: a new option cannot be left out of --help or its ini key."""
    pytester.makepyfile("def test_never(): pass")
    text = " ".join(pytester.runpytest("--help").stdout.str().split())
    first_words = " ".join(spec.help.split()[:4])
    assert f"{spec.flag}=" in text or f"{spec.flag} " in text, spec.flag
    assert first_words in text, (spec.flag, first_words)
    assert (f"{spec.dest} (" in text) is spec.ini, spec.dest


def test_settings_are_the_option_table() -> None:
    """Settings has one field per option, named like it, then the derived ones: nothing is declared twice."""
    derived = ["api_key_source"]
    assert [field.name for field in dataclasses.fields(Settings)] == [spec.name for spec in OPTIONS] + derived


def test_an_unknown_profile_is_suggested_not_every_profile_listed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_never(): pass")
    result = pytester.runpytest("--k3-endpoint", "reference:ep32-megamo")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    error = result.stderr.str()
    assert "did you mean 'ep32-megamoe'" in error
    # 60-odd names were dumped before: only the suggestion, and where the list is.
    assert "xtml-tools-without-tools" not in error and "k3conformance serve --help" in error


def test_an_empty_baseline_variable_is_an_error_not_an_ungated_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reproduction (issue 21, 10): `K3_BASELINE=` disabled the gate silently."""
    monkeypatch.setenv("K3_BASELINE", "")
    pytester.makepyfile("def test_never(): pass")
    result = pytester.runpytest("--k3-endpoint", "reference")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*environment variable K3_BASELINE is set but empty (for --k3-baseline)*"])
