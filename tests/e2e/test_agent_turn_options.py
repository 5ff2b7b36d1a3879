"""--k3-agent-tool-choice and --k3-agent-thinking reach every agent turn on the wire and are
recorded as settings (compared with the baseline's as COMPARED_SETTINGS says); by default a turn
is sent as before the options existed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from run_files import copy_suites

from k3conformance.runs.records import iter_records

COMMON = ("--k3-endpoint", "reference:tp8", "--k3-limit", "1", "--k3-results-dir", "out", "-p", "no:cacheprovider")


def _agent_requests(project: pytest.Pytester) -> list[dict[str, Any]]:
    (run,) = (project.path / "out" / "reference-tp8").glob("*/")
    return [
        record["request"]
        for record in iter_records(Path(run))
        if record.get("suite") == "agentic_coding" and isinstance(record.get("request"), dict)
    ]


def _settings(project: pytest.Pytester) -> dict[str, Any]:
    (summary,) = (project.path / "out" / "reference-tp8").glob("*/summary.json")
    settings: dict[str, Any] = json.loads(summary.read_text())["settings"]
    return settings


def test_required_tool_choice_and_thinking_off_are_sent_on_every_turn(pytester: pytest.Pytester) -> None:
    copy_suites(pytester.path, ("test_agentic_coding.py",))
    result = pytester.runpytest(
        "test_agentic_coding.py", "--k3-agent-tool-choice", "required", "--k3-agent-thinking=off", *COMMON
    )
    assert result.ret == 0
    bodies = [request.get("body", request) for request in _agent_requests(pytester)]
    assert len(bodies) >= 2, "an agent task takes several turns"
    assert all(body["tool_choice"] == "required" for body in bodies)
    assert all(body["chat_template_kwargs"]["thinking"] is False for body in bodies)
    settings = _settings(pytester)
    assert settings["agent_tool_choice"] == "required" and settings["agent_thinking"] is False


def test_by_default_nothing_is_added_to_a_turn(pytester: pytest.Pytester) -> None:
    copy_suites(pytester.path, ("test_agentic_coding.py",))
    assert pytester.runpytest("test_agentic_coding.py", *COMMON).ret == 0
    bodies = [request.get("body", request) for request in _agent_requests(pytester)]
    assert bodies and not any("tool_choice" in body for body in bodies)
    assert all(body.get("chat_template_kwargs", {}).get("thinking", True) is not False for body in bodies)
    settings = _settings(pytester)
    assert settings["agent_tool_choice"] == "auto" and settings["agent_thinking"] is True
