"""Excerpts and report text escape what came from outside (issue 25, finding 4)."""

from __future__ import annotations

import pytest

from k3conformance.checks.failures import ConformanceFailure
from k3conformance.formatting import excerpt, markdown_text, page_text, terminal_safe


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2Jclear", "\\x1b[2Jclear"),
        ("real\rforged", "real\\rforged"),
        ("a\nb\tc", "a\\nb\\tc"),
        ("bell\x07 del\x7f csi\x9b", "bell\\x07 del\\x7f csi\\x9b"),
        ("abc\u202edcba\u2066", "abc\\u202edcba\\u2066"),
        ("plain text, ünïcode 中文", "plain text, ünïcode 中文"),
    ],
)
def test_control_and_reordering_characters_are_escaped(raw: str, shown: str) -> None:
    assert terminal_safe(raw) == shown
    assert excerpt(raw) == shown


def test_a_failure_message_is_one_terminal_safe_line_and_a_hint() -> None:
    failure = ConformanceFailure("api", "a name like \x1b]0;title\x07", "\x1b[2J\rPASSED", hint="try \x1b[1m")
    message = str(failure)
    assert "\x1b" not in message and "\r" not in message and "\x07" not in message
    assert message.count("\n") == 1 and "\\x1b[2J\\rPASSED" in message


@pytest.mark.parametrize(
    ("raw", "rendered_literal"),
    [
        ("# heading", "\\# heading"),
        ("![img](https://x.example/a.png)", "\\!\\[img\\](https\\://x.example/a.png)"),
        ("[a](javascript:alert(1))", "\\[a\\](javascript\\:alert(1))"),
        ("<script>", "\\<script\\>"),
        ("a | b", "a \\| b"),
        ("`code` *em* _em_ ~~s~~ &amp;", "\\`code\\` \\*em\\* \\_em\\_ \\~\\~s\\~\\~ \\&amp;"),
        ("see www.example.com", "see www\\.example.com"),
        ("line\r## forged", "line\\\\r\\#\\# forged"),
    ],
)
def test_markdown_text_is_literal(raw: str, rendered_literal: str) -> None:
    assert markdown_text(raw) == rendered_literal


def test_page_text_escapes_controls_and_bidi_but_keeps_the_layout() -> None:
    hostile = "ok\x1b[2J\u202eLIAF\u202c\r\nnext\tcolumn\u200b"
    assert page_text(hostile) == "ok\\x1b[2J\\u202eLIAF\\u202c\\r\nnext\tcolumn\\u200b"
