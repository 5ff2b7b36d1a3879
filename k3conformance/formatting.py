"""How values are shown in failure messages and reports: one excerpt length, one percent format."""

from __future__ import annotations

# Long enough to recognise a response, short enough that fifty failures stay readable.
EXCERPT_CHARS = 200


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """`value` on one line, its middle cut out when it is longer than `limit`."""
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit // 2] + " … " + text[-limit // 2 :]


def percent(share: float | None) -> str:
    """A share as a percentage with one decimal; "-" when there is nothing to divide."""
    return "-" if share is None else f"{share:.1%}"
