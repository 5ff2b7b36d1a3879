"""Endpoint URLs: the `reference` pseudo-endpoint, and URLs made safe to show and store."""

from __future__ import annotations

import base64
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

REFERENCE = "reference"
DEFAULT_REFERENCE_PROFILE = "tp8"


def is_reference(endpoint: str) -> bool:
    return endpoint == REFERENCE or endpoint.startswith(REFERENCE + ":")


def parse_reference_profile(endpoint: str) -> str:
    """`reference` -> `tp8`; `reference:NAME` -> `NAME`. The name is only split off here: the run
    checks it against the simulator's profiles (`run/hooks.activate`), since URL parsing sits
    below the simulator and knows nothing of it."""
    return endpoint.partition(":")[2] or DEFAULT_REFERENCE_PROFILE


def strip_credentials(url: str) -> str:
    """Drop user:password from a URL and any query string (keys hide there too)."""
    parts = urlsplit(url)
    if parts.hostname is None:
        return url
    return urlunsplit((parts.scheme, _host_and_port(parts), parts.path, "", ""))


def _host_and_port(parts: SplitResult) -> str:
    """The network location without user:password."""
    assert parts.hostname is not None
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return f"{host}:{parts.port}" if parts.port else host


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """The URL without user:password, and the Basic authorization header they stand for.

    HTTP clients send credentials in a URL as Basic auth, and log the URL of every request
    (httpx at INFO): taken out of the URL, they are sent the same and logged nowhere."""
    parts = urlsplit(url)
    if parts.hostname is None or (parts.username is None and parts.password is None):
        return url, {}
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    header = {"Authorization": f"Basic {base64.b64encode(pair.encode()).decode()}"}
    return urlunsplit((parts.scheme, _host_and_port(parts), parts.path, parts.query, parts.fragment)), header


def server_root(base_url: str) -> str:
    """The server's root for its native routes (`/get_server_info`, `/version`): the base URL
    without a trailing `/v1`."""
    trimmed = base_url.rstrip("/")
    return trimmed.removesuffix("/v1")
