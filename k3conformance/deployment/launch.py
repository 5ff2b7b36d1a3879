"""The launch arguments and environment a user records with `--k3-server-args FILE`.

vLLM's `/version` and llama.cpp's `/props` say nothing about the parallel layout, and no
server reports the environment its kernels read (SGLANG_K3_KDA_FUSED_BACKEND, AITER flags,
the MegaMoE tokens-per-rank cap) or the hardware it runs on. The file fills that gap:

    {"args": "--tp-size 8 --attn-dp-size 2 --moe-a2a-backend megamoe ...",
     "env": {"SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK": "8320"},
     "hardware": "MI355X 1x8", "stack": "vllm 0.33.0"}

`args` is a command line (a string or a list of words) or an object of flag names to
values; everything else is kept as given. The whole file is recorded in the run summary
and compared by the gate (gate/policy.py); the arguments also supply the shape when the
server does not report its own.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from k3conformance.deployment.shapes import settings_from_server_info
from k3conformance.runs.records import UnreadableJson, read_json

# Spellings of the shape-defining flags in SGLang and vLLM -> SGLang's ServerArgs field.
_ALIASES = {
    "tp": "tp_size",
    "tensor_parallel_size": "tp_size",
    "ep": "ep_size",
    "expert_parallel_size": "ep_size",
    "dp": "dp_size",
    "data_parallel_size": "dp_size",
    "pp": "pp_size",
    "pipeline_parallel_size": "pp_size",
    "dcp": "dcp_size",
    "decode_context_parallel_size": "dcp_size",
}


# SGLang's ServerArgs defaults for the shape-defining fields (python/sglang/srt/server_args.py):
# a launch command line leaves out what it does not change, so an absent flag there means
# the default (not "unknown", as an absent field of a server's report does).
SGLANG_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "tp_size": 1,
        "ep_size": 1,
        "dp_size": 1,
        "pp_size": 1,
        "dcp_size": 1,
        "enable_dp_attention": False,
        "moe_a2a_backend": "none",
        "moe_runner_backend": "auto",
        "kv_cache_dtype": "auto",
        "mamba_ssm_dtype": None,
        "speculative_algorithm": None,
        "disaggregation_mode": "null",
    }
)


class LaunchFileError(ValueError):
    """The --k3-server-args file cannot be used; the message says why."""


def read_launch_file(path: Path, known_secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """The file as the run summary records it: arguments parsed, and key-like arguments and
    variables (`--api-key`, `HF_TOKEN`) and the known secrets redacted, as server information is."""
    from k3conformance.endpoint.preflight import redact_secrets

    try:
        data = read_json(path, "the --k3-server-args file")
    except UnreadableJson as error:
        raise LaunchFileError(str(error)) from None
    if not isinstance(data, dict):
        raise LaunchFileError(f"{path} must hold a JSON object with 'args' and/or 'env'")
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(value, (str, int, float, bool)) for value in env.values()):
        raise LaunchFileError(f"{path}: 'env' must map variable names to values")
    args = data.get("args", {})
    if not isinstance(args, (str, list, dict)):
        raise LaunchFileError(f"{path}: 'args' must be a command line, a list of words or an object")
    recorded: dict[str, Any] = redact_secrets({**data, "args": parse_args(args)}, known_secrets)
    return recorded


def parse_args(args: str | list[Any] | Mapping[str, Any]) -> dict[str, Any]:
    """`--tp-size 8 --enable-dp-attention` -> {"tp_size": "8", "enable_dp_attention": True}."""
    if isinstance(args, Mapping):
        return {_field(str(name)): value for name, value in args.items()}
    words = shlex.split(args) if isinstance(args, str) else [str(word) for word in args]
    parsed: dict[str, Any] = {}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("-"):
            continue
        name, equals, value = word.lstrip("-").partition("=")
        if equals:
            parsed[_field(name)] = value
        elif index < len(words) and not words[index].startswith("--"):
            parsed[_field(name)] = words[index]
            index += 1
        else:
            parsed[_field(name)] = True
    return parsed


def _field(name: str) -> str:
    snake = name.lstrip("-").replace("-", "_")
    return _ALIASES.get(snake, snake)


def merged_server_args(
    server_info: Mapping[str, Any] | None, launch: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """What shapes.settings_from_server_info should read: the server's own arguments when it
    reports them, else the recorded launch arguments."""
    if settings_from_server_info(server_info) is not None or not launch:
        return server_info
    args = launch.get("args")
    if not isinstance(args, Mapping) or not any(name in args for name in (*SGLANG_DEFAULTS, "attn_dp_size")):
        return server_info
    return {**SGLANG_DEFAULTS, **args}
