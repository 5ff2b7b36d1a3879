"""The embedded reference deployment (a simulator, `k3conformance/reference/`) as a child process
of the plugin, started when the endpoint is `reference` or `reference:PROFILE`."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from typing import IO

from k3conformance.endpoint.errors import EndpointError

# Generous: a loaded 2-core CI machine has been seen taking tens of seconds to import the stack.
REFERENCE_START_TIMEOUT_S = 60.0


class ReferenceProcess:
    """`k3conformance serve` in a child process; it exits when our end of its stdin closes,
    so it cannot outlive this process even after a crash."""

    def __init__(self, profile: str) -> None:
        command = [
            sys.executable,
            "-m",
            "k3conformance",
            "serve",
            "--profile",
            profile,
            "--port",
            "0",
            "--exit-with-stdin",
        ]
        self.profile = profile
        # A file, not a pipe: nobody reads the server's log while it runs, and a full
        # pipe would stall it.
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in stop(): it lives as long as the process)
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self.url = self._read_url()

    def _read_url(self) -> str:
        lines: list[str] = []
        stdout: IO[str] = self._process.stdout  # type: ignore[assignment]
        reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(REFERENCE_START_TIMEOUT_S)
        url = lines[0].strip() if lines else ""
        if not url.startswith("http"):
            self._log.seek(0)
            stderr = self._log.read()
            self.stop()
            raise EndpointError(
                "The embedded reference deployment did not start "
                f"(`{sys.executable} -m k3conformance serve --profile {self.profile}`):\n{stderr.strip()[-2000:]}"
            )
        return url

    def stop(self) -> None:
        if self._process.poll() is None:
            if self._process.stdin:
                self._process.stdin.close()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout:
            self._process.stdout.close()
        self._log.close()
