"""Running the reference deployment: as a blocking process (`serve`) or in a background thread."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path
from types import TracebackType

from aiohttp import web

from k3conformance.reference.app import build_app
from k3conformance.reference.identity import DEFAULT_MODEL_ID, startup_notice
from k3conformance.reference.values import Profile

# Long streams in flight at shutdown are abandoned after this long rather than awaited.
_SHUTDOWN_TIMEOUT_S = 2.0


async def _start_site(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    # A large backlog keeps bursts of hundreds of concurrent clients from being refused.
    await web.TCPSite(runner, host, port, backlog=1024).start()
    bound_host, bound_port = runner.addresses[0][:2]
    url_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    return runner, f"http://{url_host}:{bound_port}/v1"


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    profile: Profile,
    latency_s: float | None = None,
    api_key: str | None = None,
    model_id: str = DEFAULT_MODEL_ID,
    exit_with_stdin: bool = False,
    fixtures_dir: Path | None = None,
    output_bytes: int | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT (or stdin EOF); the first stdout line is the base URL."""
    app = build_app(
        profile,
        latency_s=latency_s,
        api_key=api_key,
        model_id=model_id,
        fixtures_dir=fixtures_dir,
        output_bytes=output_bytes,
    )
    asyncio.run(_serve_until_stopped(app, host, port, profile.name, exit_with_stdin))


async def _serve_until_stopped(
    app: web.Application, host: str, port: int, profile_name: str, exit_with_stdin: bool
) -> None:
    runner, url = await _start_site(app, host, port)
    print(url, flush=True)
    print(startup_notice(url, profile_name), file=sys.stderr, flush=True)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # Windows, or not the main thread
            loop.add_signal_handler(signal_number, stop.set)
    if exit_with_stdin:
        threading.Thread(target=_set_at_stdin_eof, args=(loop, stop), name="stdin-watch", daemon=True).start()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def _set_at_stdin_eof(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    # EOF means the parent closed the pipe or died. The raw fd is read, not
    # sys.stdin, so this thread holds no buffer lock that could stall interpreter exit.
    try:
        while os.read(sys.stdin.fileno(), 65536):
            pass
    except (OSError, ValueError):
        pass
    loop.call_soon_threadsafe(stop.set)


class RunningServer:
    """A reference server on its own event loop in a daemon thread; `stop()` or use as a context manager."""

    def __init__(self, url: str, loop: asyncio.AbstractEventLoop, runner: web.AppRunner, thread: threading.Thread):
        self.url = url
        self._loop = loop
        self._runner = runner
        self._thread = thread

    def stop(self) -> None:
        if self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def start_in_thread(
    profile: Profile,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    latency_s: float | None = None,
    api_key: str | None = None,
    model_id: str = DEFAULT_MODEL_ID,
    fixtures_dir: Path | None = None,
    output_bytes: int | None = None,
) -> RunningServer:
    app = build_app(
        profile,
        latency_s=latency_s,
        api_key=api_key,
        model_id=model_id,
        fixtures_dir=fixtures_dir,
        output_bytes=output_bytes,
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="k3conformance-reference", daemon=True)
    thread.start()
    try:
        runner, url = asyncio.run_coroutine_threadsafe(_start_site(app, host, port), loop).result(timeout=30)
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
        raise
    return RunningServer(url, loop, runner, thread)
