"""How values are shown in failure messages and reports: one excerpt length, one percent
format, and the escaping of text that came from a model or a server before it reaches a
terminal or a Markdown page.

Model output is hostile input at this boundary (issue 25): an ESC sequence clears or
recolours the terminal, a carriage return overwrites a line with a forged one, Unicode
bidi controls make text read otherwise than it is, and in Markdown a heading, an image
that loads a URL, a `javascript:` link or a `|` that breaks a table row renders as if the
report had written it. So every such text is escaped where it leaves: `terminal_safe` for
the terminal, `markdown_text` for gate.md and the GitHub step summary, `page_text` for the
matrix's HTML page."""

from __future__ import annotations

import re

# Long enough to recognise a response, short enough that fifty failures stay readable.
EXCERPT_CHARS = 200

# C0 and C1 control characters and DEL (ESC, CR, BEL, backspace, CSI, ...), and the Unicode
# format characters that hide or reorder text: zero-width ones, line and paragraph
# separators, bidi embeddings, overrides and isolates, the byte order mark.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# Characters Markdown gives a meaning to inside a line: emphasis, code, links and images,
# raw HTML and entities, table cells, headings, strikethrough, and the colon of a bare URL
# (GitHub links https://... by itself). A backslash makes each one literal.
_MARKDOWN = re.compile(r"([\\`*_\[\]<>!|#~&:])")


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    if character in _NAMED:
        return _NAMED[character]
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """`text` with every control and text-reordering character written as an escape
    (`\\x1b`, `\\r`, `\\n`, `\\u202e`): one line that prints as itself."""
    return _UNSAFE.sub(_escape, text)


def page_text(text: str) -> str:
    """`text` for an HTML page (before `html.escape`): terminal-safe, but newlines and tabs kept,
    since a page lays them out (in `<pre>`) and a terminal printing the file only moves on a line."""
    return _UNSAFE.sub(lambda match: match.group() if match.group() in "\n\t" else _escape(match), text)


def markdown_text(value: object) -> str:
    """`value` as literal text inside a Markdown line or table cell: terminal-safe, with
    every character Markdown interprets escaped by a backslash, and "www." defused."""
    text = _MARKDOWN.sub(r"\\\1", terminal_safe(value if isinstance(value, str) else str(value)))
    return re.sub(r"(?i)\bwww\.", lambda match: match.group()[:-1] + "\\.", text)


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """`value` on one terminal-safe line, its middle cut out when it is longer than `limit`."""
    text = terminal_safe(value if isinstance(value, str) else repr(value))
    return text if len(text) <= limit else text[: limit // 2] + " … " + text[-limit // 2 :]


def percent(share: float | None) -> str:
    """A share as a percentage with one decimal; "-" when there is nothing to divide."""
    return "-" if share is None else f"{share:.1%}"
