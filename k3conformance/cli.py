"""The `k3conformance` command: tools that need no pytest session."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from k3conformance import __version__
from k3conformance.options import non_negative_float

REFERENCE_API_KEY_ENV = "K3_REFERENCE_API_KEY"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port between 0 and 65535, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from k3conformance.reference.profiles import PROFILES

    parser = argparse.ArgumentParser(prog="k3conformance", description="Kimi K3 deployment conformance tools")
    parser.add_argument("--version", action="version", version=f"k3conformance {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="Run the reference deployment: a simulator of the K3 API, not the model",
        description=(
            "Serve the k3conformance reference deployment on loopback: an OpenAI-compatible server whose "
            "'model' is a deterministic simulator of Kimi K3's API surface. It prints its base URL on the "
            f"first line of stdout. Set ${REFERENCE_API_KEY_ENV} to make it require that API key."
        ),
    )
    profiles = ", ".join(f"{name} ({profile.description})" for name, profile in sorted(PROFILES.items()))
    serve.add_argument("--profile", default="tp8", choices=sorted(PROFILES), help=f"Deployment profile: {profiles}")
    serve.add_argument("--host", default="127.0.0.1", help="Address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=0, help="Port to bind; 0 picks a free one (default: 0)")
    serve.add_argument(
        "--latency", type=non_negative_float, default=None, help="Seconds to wait before answering each request"
    )
    serve.add_argument("--model-id", default=None, help="Model id to serve (default: kimi-k3-simulator)")
    serve.add_argument("--fixtures-dir", type=Path, default=None, help="Answer keys to load (default: fixtures/)")
    serve.add_argument("--exit-with-stdin", action="store_true", help="Exit when stdin closes (for parent processes)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    if arguments.command == "serve":
        return _serve(arguments)
    return 2


def _serve(arguments: argparse.Namespace) -> int:
    from k3conformance.reference.identity import DEFAULT_MODEL_ID
    from k3conformance.reference.profiles import get_profile
    from k3conformance.reference.server import serve

    try:
        serve(
            host=arguments.host,
            port=arguments.port,
            profile=get_profile(arguments.profile),
            latency_s=arguments.latency,
            # From the environment, never argv: command lines show up in process listings.
            api_key=os.environ.get(REFERENCE_API_KEY_ENV) or None,
            model_id=arguments.model_id or DEFAULT_MODEL_ID,
            exit_with_stdin=arguments.exit_with_stdin,
            fixtures_dir=arguments.fixtures_dir,
        )
    except OSError as error:
        print(f"k3conformance serve: cannot listen on {arguments.host}:{arguments.port}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
