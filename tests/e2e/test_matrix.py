"""The shape matrix over a results folder: a tp8 baseline and candidate shapes on the reference
deployment (a simulator), through `k3conformance matrix` (and `compare` with several candidates):
terminal, Markdown, JSON, and the static HTML page, whose model-written text is escaped and never
run, checked by parsing it and, where Chromium is installed, in a headless browser."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from run_files import copy_suites
from stored_runs import rewrite_records

from k3conformance.cli import main as cli_main
from k3conformance.runs.records import expand_records

COMMON = ("--k3-limit", "8", "--k3-max-tokens", "8192", "--k3-results-dir", "out", "-p", "no:cacheprovider")
SUITES = ("test_agentic_coding.py", "test_math.py")
PAYLOAD = (
    "</pre></details><script>document.body.innerHTML='PWNED'</script>"
    "<img src=x onerror=\"document.body.innerHTML='PWNED'\">"
    "<a href=\"javascript:document.body.innerHTML='PWNED'\">click</a>"
    "<div onmouseover=\"document.body.innerHTML='PWNED'\">hover</div>"
    # A terminal acts on ESC sequences (clear, recolour); U+202E reverses what a reader sees.
    "\x1b[2J\x1b[31mdeployment healthy\u202eLIAF\u202c\r"
)


class Tags(HTMLParser):
    """Every start tag of a page with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def poison(run_dir: Path) -> int:
    """Put the payload into what the model wrote (reasoning, content, call arguments) and a failure message."""
    poisoned = 0
    expand_records(run_dir)
    for path in run_dir.glob("records-*.jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            if record.get("kind") == "response" and isinstance(record.get("response"), dict):
                response = record["response"]
                response["reasoning"] = PAYLOAD + str(response.get("reasoning") or "")
                response["content"] = PAYLOAD
                for call in response.get("tool_calls") or []:
                    call["function"]["arguments"] = PAYLOAD
                poisoned += 1
            if record.get("kind") == "outcome":
                record["message"] = PAYLOAD
        # Chained and sealed again as the run's writer would have: the page must render the
        # payloads of evidence the gate accepts (a broken chain is INCOMPLETE, with less to show).
        rewrite_records(run_dir, records, path.name)
    return poisoned


@pytest.fixture
def results(pytester: pytest.Pytester) -> Path:
    copy_suites(pytester.path, SUITES)
    baseline = pytester.runpytest(
        *SUITES,
        "--k3-endpoint",
        "reference:tp8",
        "--k3-shape",
        "tp8",
        "--k3-save-baseline",
        "--k3-subset-baseline",
        *COMMON,
    )
    assert baseline.ret == 0
    for profile, shape in (("ep32-megamoe", "ep32-megamoe"), ("tp8", "tp8-again")):
        pytester.runpytest(
            *SUITES, "--k3-endpoint", f"reference:{profile}", "--k3-shape", shape, "--k3-baseline", "tp8", *COMMON
        )
    return pytester.path / "out"


def matrix(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str]:
    status = cli_main(list(arguments))
    return status, capsys.readouterr().out


def test_the_matrix_gates_every_stored_shape_in_one_view(
    results: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, text = matrix(capsys, "matrix", "tp8", "--results-dir", str(results))
    # The worst row decides: the MegaMoE shape fails the gate.
    assert status == 1
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith(("ep32-megamoe ", "tp8-again "))}
    assert set(rows) == {"ep32-megamoe", "tp8-again"}
    assert "FAIL" in rows["ep32-megamoe"] and "looping monitor" in rows["ep32-megamoe"]
    assert "FAIL" not in rows["tp8-again"]
    assert "minimum detectable drop" in text and "simulator" in text

    # `compare BASELINE CAND...` is the same matrix.
    compared, same = matrix(capsys, "compare", "tp8", "ep32-megamoe", "tp8-again", "--results-dir", str(results))
    assert compared == status and same == text

    _, document_text = matrix(capsys, "matrix", "tp8", "--results-dir", str(results), "--format", "json")
    document: dict[str, Any] = json.loads(document_text)
    assert document["worst"] == "FAIL" and document["exit_status"] == 1
    (megamoe,) = [row for row in document["rows"] if row["shape"] == "ep32-megamoe"]
    agentic = megamoe["suites"]["agentic_coding"]
    assert agentic["verdict"] == "FAIL" and len(agentic["interval"]) == 2
    assert any("looping" in rule["rule"] for rule in agentic["decided_by"] if rule["verdict"] == "FAIL")

    _, markdown = matrix(capsys, "matrix", "tp8", "--results-dir", str(results), "--format", "markdown")
    assert markdown.startswith("## k3conformance matrix: worst verdict **FAIL**")
    assert "| shape" in markdown and "| ep32-megamoe" in markdown


def test_the_html_page_escapes_what_the_model_wrote(
    results: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (run_dir,) = (path for path in (results / "ep32-megamoe").iterdir() if path.is_dir())
    assert poison(run_dir) > 0
    page = tmp_path / "matrix.html"
    status, _ = matrix(capsys, "matrix", "tp8", "--results-dir", str(results), "--html", str(page))
    assert status == 1
    text = page.read_text()
    # The payload is there, as text.
    assert "&lt;script&gt;document.body.innerHTML=&#x27;PWNED&#x27;&lt;/script&gt;" in text
    parser = Tags()
    parser.feed(text)
    tags = parser.tags
    assert tags and not any(tag in ("script", "img", "iframe", "object", "embed", "link", "form") for tag, _ in tags)
    for tag, attrs in tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        # Links are in-page anchors; nothing is loaded from anywhere.
        assert tag != "a" or str(attrs.get("href", "")).startswith("#"), attrs
        assert "src" not in attrs, (tag, attrs)
    assert any(
        tag == "meta"
        and "script-src 'none'" in str(attrs.get("content"))
        and "default-src 'none'" in str(attrs.get("content"))
        for tag, attrs in tags
    )
    # Control and bidi characters are written as escapes, as in the terminal and gate.md; newlines stay.
    assert not set(text) & {"\x1b", "\u202e", "\u202c", "\r"}
    assert "\\x1b[2J\\x1b[31mdeployment healthy\\u202eLIAF\\u202c\\r" in text and "\n" in text
    # The drill-down reaches the agent's turns and says where a task looped.
    assert "turn 1:" in text and "LOOP in" in text


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install chromium)")
def test_the_html_page_in_a_headless_browser_runs_none_of_it(
    results: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (run_dir,) = (path for path in (results / "ep32-megamoe").iterdir() if path.is_dir())
    poison(run_dir)
    page = tmp_path / "matrix.html"
    matrix(capsys, "matrix", "tp8", "--results-dir", str(results), "--html", str(page))
    # Open every drill-down, so the payloads are rendered too.
    opened = tmp_path / "opened.html"
    opened.write_text(page.read_text().replace("<details", "<details open"))
    browser = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--window-size=1500,1200",
    ]
    screenshot = tmp_path / "matrix.png"
    shot = subprocess.run(
        [*browser, f"--screenshot={screenshot}", opened.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000
    dumped = subprocess.run([*browser, "--dump-dom", opened.as_uri()], capture_output=True, text=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    # A script or handler that ran would have replaced the whole body with PWNED.
    assert "k3conformance matrix: worst verdict FAIL" in dom and dom.count("<details") >= 3
    parser = Tags()
    parser.feed(dom)
    assert not any(tag in ("script", "img") for tag, _ in parser.tags)
    assert all(not str(attrs.get("href", "#")).startswith("javascript:") for _, attrs in parser.tags)
    # For a person to look at: keep the screenshot next to the test's files.
    shutil.copy(screenshot, results.parent / "matrix.png")
