"""Finding out what we talk to before any item runs.

Starts the embedded reference deployment when asked to, checks that the endpoint
answers, accepts the key and serves the model, and collects what the server says about
itself. Each failure becomes one `EndpointError` that says what was tried, why it
failed and what to do.
"""

from __future__ import annotations

import re
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

import aiohttp
import openai

from k3conformance.endpoint.errors import EndpointError
from k3conformance.endpoint.reference_process import ReferenceProcess
from k3conformance.endpoint.resolved import ResolvedEndpoint
from k3conformance.endpoint.url import (
    server_root,
    split_credentials,
    strip_credentials,
)

PREFLIGHT_TIMEOUT_S = 30.0
SERVER_INFO_TIMEOUT_S = 10.0
# SGLang's server_info echoes its own arguments, `api_key` among them.
_SECRET_KEY = re.compile(r"key|token|secret|password|passwd|credential|auth", re.IGNORECASE)
REDACTED = "<redacted>"


class EndpointOptions(Protocol):
    """The options the preflight reads (`options.Settings` has them): the endpoint sits below the options."""

    @property
    def endpoint(self) -> str: ...
    @property
    def model(self) -> str | None: ...
    @property
    def api_key(self) -> str | None: ...
    @property
    def api_key_source(self) -> str: ...
    @property
    def retries(self) -> int: ...


def redact_secrets(value: Any, known: tuple[str, ...] = ()) -> Any:
    """`value` with key-like fields blanked, and the `known` secrets cut out of every string
    (a launch command line repeats the key under a name that says nothing)."""
    if isinstance(value, dict):
        return {
            key: (
                REDACTED
                if _SECRET_KEY.search(str(key)) and item not in (None, "", False)
                else redact_secrets(item, known)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact_secrets(item, known) for item in value]
    if isinstance(value, str):
        for secret in known:
            value = value.replace(secret, REDACTED)
    return value


async def preflight(settings: EndpointOptions, base_url: str) -> ResolvedEndpoint:
    display = strip_credentials(base_url)
    # user:password in the URL travel as a header, so that no log line shows them.
    plain_url, url_auth = split_credentials(base_url)
    client = openai.AsyncOpenAI(
        base_url=plain_url,
        api_key=settings.api_key or "EMPTY",
        timeout=PREFLIGHT_TIMEOUT_S,
        max_retries=min(settings.retries, 2),
        default_headers=url_auth or None,
    )
    try:
        served = await _served_models(client, display, settings)
    finally:
        await client.close()
    model = _choose_model(served, settings.model, display)
    info = await fetch_server_info(base_url, settings.api_key)
    return ResolvedEndpoint(
        base_url=base_url,
        display_url=display,
        model=model,
        served_models=[entry["id"] for entry in served],
        server_info=info,
        simulator=_says_simulator(info, served),
    )


def _says_simulator(info: dict[str, Any], served: list[dict[str, Any]]) -> bool:
    reported = any(isinstance(payload, dict) and payload.get("simulator") for payload in info.values())
    return reported or any("simulator" in str(entry.get("owned_by", "")) for entry in served)


async def _served_models(client: openai.AsyncOpenAI, display: str, settings: EndpointOptions) -> list[dict[str, Any]]:
    tried = f"GET {display}/models"
    try:
        page = await client.models.list()
    except openai.AuthenticationError as error:
        # The source the key really came from (never the key), so the person fixes the right variable.
        source = (
            f"the key from {settings.api_key_source}"
            if settings.api_key
            else "no key (set K3_API_KEY, --k3-api-key, or --k3-api-key-env NAME)"
        )
        raise EndpointError(
            f"The endpoint rejected the credentials: {tried} answered HTTP {error.status_code}. "
            f"Sent: {source}. Check the key the server was started with (--api-key)."
        ) from None
    except openai.NotFoundError:
        raise EndpointError(
            f"{tried} answered HTTP 404: this is not the base of an OpenAI-compatible API. "
            "The URL usually ends in /v1, e.g. http://host:30000/v1."
        ) from None
    except openai.APIStatusError as error:
        raise EndpointError(f"{tried} answered HTTP {error.status_code}: {error.message}") from None
    except (openai.APIConnectionError, openai.APITimeoutError) as error:
        cause = error.__cause__
        reason = f"{type(cause).__name__}: {cause}" if cause else str(error)
        raise EndpointError(
            f"Cannot reach the K3 endpoint: {tried} failed ({reason}). Is the server running and the URL "
            "right? Without a cluster, use --k3-endpoint reference (a simulator)."
        ) from None
    served = [model.model_dump() for model in page.data]
    if not served:
        raise EndpointError(f"{tried} lists no models: the server is up but serves nothing yet.")
    return served


def _choose_model(served: list[dict[str, Any]], wanted: str | None, display: str) -> str:
    ids = [entry["id"] for entry in served]
    if wanted is None:
        return str(ids[0])
    if wanted not in ids:
        raise EndpointError(
            f"Model {wanted!r} is not served by {display}; it serves: {', '.join(ids)}. "
            "Pass one of those to --k3-model, or leave it out to use the first."
        )
    return wanted


async def fetch_server_info(base_url: str, api_key: str | None) -> dict[str, Any]:
    """What the server says about itself: SGLang's `/get_server_info` (its launch
    arguments), llama.cpp's `/props` (its build, model file and chat template) or vLLM's
    `/version`. Best effort; secrets are redacted."""
    plain_url, url_auth = split_credentials(base_url)
    root = server_root(plain_url)
    parts = urlsplit(base_url)
    known = tuple(secret for secret in (api_key, parts.password and unquote(parts.password)) if secret)
    # As the SDK does: credentials in the URL win over the key.
    headers = url_auth or ({"Authorization": f"Bearer {api_key}"} if api_key else {})
    found: dict[str, Any] = {}
    timeout = aiohttp.ClientTimeout(total=SERVER_INFO_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout, headers=headers) as session:
        for route in ("/get_server_info", "/server_info", "/props", "/version"):
            try:
                async with session.get(root + route) as response:
                    if response.status != 200:
                        continue
                    payload = await response.json(content_type=None)
            except (aiohttp.ClientError, TimeoutError, ValueError):
                continue
            if isinstance(payload, dict):
                found[route.lstrip("/")] = redact_secrets(payload, known)
                if route != "/version":
                    break
    return found


def start_endpoint(
    settings: EndpointOptions, loop_run: Any, profile: str | None
) -> tuple[ResolvedEndpoint, ReferenceProcess | None]:
    """Start the reference deployment serving `profile` (a checked profile name, None for a real
    endpoint), then preflight. `loop_run` runs a coroutine to completion on the plugin's background loop."""
    reference: ReferenceProcess | None = None
    base_url = settings.endpoint
    if profile is not None:
        reference = ReferenceProcess(profile)
        base_url = reference.url
    try:
        resolved: ResolvedEndpoint = loop_run(preflight(settings, base_url))
    except BaseException:
        if reference is not None:
            reference.stop()
        raise
    if reference is not None:
        resolved.simulator = True
        resolved.reference_profile = profile
    return resolved, reference
