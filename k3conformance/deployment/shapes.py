"""Kimi K3 deployment shapes: the ones the SGLang cookbook publishes, the one a server says it
runs, and whether two runs differ in a way that only the long-output suites can vouch for.

A shape is the handful of server settings that change the arithmetic of the model: the
parallel widths, the MoE path, the KV and recurrent-state dtypes, speculative decoding and
the disaggregation role. Anything else (ports, memory fractions, parsers) is not a shape.

Sources, looked up when this module was written:

- SGLang's Kimi-K3 cookbook, https://docs.sglang.io/cookbook/autoregressive/Moonshotai/Kimi-K3
  (sgl-project/sglang `docs_new/cookbook/autoregressive/Moonshotai/Kimi-K3.mdx` and its command
  panel `docs_new/src/snippets/configs/moonshotai/kimi-k3.jsx`): Low-Latency is plain TP8 on
  B300 1x8; Balanced is TP8/DCP8 there; DSPARK (`--speculative-algorithm DSPARK`) layers onto
  any `pp_size == 1` recipe; H200 runs TP16/EP16 on 2x8 (4x8, TP32/EP32, on High-Throughput,
  which adds `--mamba-radix-cache-strategy extra_buffer_lazy`) and pins `--moe-runner-backend
  marlin`, while Blackwell leaves the runner unset; section 3.6's large-scale presets at
  N = 16/32/64 GPUs, Peak Throughput (`--tp-size N --ep-size N --enable-dp-attention --dp-size
  N/8 --moe-a2a-backend megamoe --moe-runner-backend deep_gemm --kv-cache-dtype fp8_e4m3
  --mamba-ssm-dtype bfloat16`) and Peak Capacity (`+ --dcp-size 8`); section 3.4's PD roles
  (prefill Default TP8 or Long-Context `--pp-size 8 --tp-size 1`). The command panel labels
  the unset dtypes "Auto (BF16)" for the KV cache and "Auto (FP32)" for the SSM state.
- SGLang's `ServerArgs` (sgl-project/sglang `python/sglang/srt/server_args.py`), which
  `GET /get_server_info` returns as one flat JSON object: `tp_size`, `ep_size`, `dp_size`,
  `pp_size`, `dcp_size` (`--dcp-size`, alias `--decode-context-parallel-size`, default 1),
  `enable_dp_attention`, `moe_a2a_backend` (default "none"), `moe_runner_backend` (default
  "auto"), `kv_cache_dtype` (default "auto"), `mamba_ssm_dtype` (default null: the
  checkpoint's), `speculative_algorithm` (default null), `disaggregation_mode`
  ("null" / "prefill" / "decode"). `--moe-runner-backend megamoe` is SGLang's alias for
  `--moe-a2a-backend megamoe` with the runner left on auto (`handle_moe_runner_backend_alias`).
- sgl-project/sglang issue 40751: on GB300, the EP32 decode server with the fused MegaMoE
  kernel (DP attention in groups of 4) scored 42.48% on DeepSWE against 68.14% on TP8 and
  about 65.5% with DeepEP; a math check still looked fine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

# Known values that mean "not used", kept distinct from None, which means "not known".
NO_SPECULATION = "none"


UNIFIED = "null"  # SGLang's disaggregation_mode when prefill and decode share a server


NO_A2A = "none"


# ShapeSettings field -> the SGLang ServerArgs field that reports it.
SERVER_ARG_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "tp": "tp_size",
        "ep": "ep_size",
        "dp": "dp_size",
        "pp": "pp_size",
        "dcp": "dcp_size",
        "dp_attention": "enable_dp_attention",
        "moe_a2a_backend": "moe_a2a_backend",
        "moe_runner_backend": "moe_runner_backend",
        "kv_cache_dtype": "kv_cache_dtype",
        "state_dtype": "mamba_ssm_dtype",
        "speculative_algorithm": "speculative_algorithm",
        "disaggregation_mode": "disaggregation_mode",
    }
)


WIDTH_FIELDS = ("tp", "ep", "dp", "pp", "dcp", "dp_attention")


_INT_FIELDS = ("tp", "ep", "dp", "pp", "dcp")


ATTN_DP_SIZE = "attn_dp_size"


# Where the plugin and SGLang versions put the arguments (see endpoint.fetch_server_info).
_WRAPPER_KEYS = ("get_server_info", "server_info")


_NESTED_ARGS_KEY = "server_args"


@dataclass(frozen=True)
class ShapeSettings:
    """The settings that define a shape; None means unknown."""

    tp: int | None = None
    ep: int | None = None
    dp: int | None = None
    pp: int | None = None
    dcp: int | None = None
    dp_attention: bool | None = None
    moe_a2a_backend: str | None = None  # "none", "deepep", "megamoe", ...
    moe_runner_backend: str | None = None  # "auto", "deep_gemm", "marlin", ...
    kv_cache_dtype: str | None = None  # "auto" (bf16 for K3) or "fp8_e4m3"
    state_dtype: str | None = None  # mamba_ssm_dtype: "float32" (K3's own) or "bfloat16"
    speculative_algorithm: str | None = None  # "none", "DSPARK", ...
    disaggregation_mode: str | None = None  # "null", "prefill", "decode"

    def unknown(self) -> list[str]:
        return [field.name for field in fields(self) if getattr(self, field.name) is None]


@dataclass(frozen=True)
class Shape:
    name: str
    title: str
    hardware: str
    gpus: int
    settings: ShapeSettings
    source: str


def server_args(shape: Shape) -> dict[str, Any]:
    """The SGLang `/get_server_info` fields a server of this shape reports."""
    return settings_args(shape.settings)


def settings_args(settings: ShapeSettings) -> dict[str, Any]:
    """The SGLang server-args fields for these settings; unknown settings are left out. A
    setting at SGLang's unset value is reported as SGLang reports an unset flag (null)."""
    args: dict[str, Any] = {}
    for name, arg in SERVER_ARG_NAMES.items():
        value = getattr(settings, name)
        if value is None:
            continue
        if (name, value) in (("state_dtype", "float32"), ("speculative_algorithm", NO_SPECULATION)):
            value = None
        args[arg] = value
    return args


def _server_args_mapping(info: Mapping[str, Any]) -> Mapping[str, Any] | None:
    candidates: list[Mapping[str, Any]] = [info]
    candidates += [info[key] for key in _WRAPPER_KEYS if isinstance(info.get(key), Mapping)]
    for candidate in list(candidates):
        nested = candidate.get(_NESTED_ARGS_KEY)
        if isinstance(nested, Mapping):
            candidates.append(nested)
    for candidate in candidates:
        if any(arg in candidate for arg in (*SERVER_ARG_NAMES.values(), ATTN_DP_SIZE)):
            return candidate
    return None


def _as_width(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 1 else None
    if isinstance(value, str) and value.strip().isdigit():
        return _as_width(int(value.strip()))
    return None


def _as_flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _as_name(value: Any, unset: str) -> str | None:
    if value is None:
        return unset
    if isinstance(value, str):
        return value.strip() or unset
    return None


def _kv_dtype(value: Any) -> str | None:
    name = _as_name(value, "auto")
    # "auto" is the checkpoint's dtype, bf16 for K3 (the cookbook's "Auto (BF16)").
    return "auto" if name is not None and name.lower() in ("bf16", "bfloat16") else name


def _state_dtype(value: Any) -> str | None:
    # Unset means the checkpoint's state dtype, float32 for K3 (the cookbook's "Auto (FP32)").
    name = _as_name(value, "float32")
    aliases = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
    return aliases.get(name.lower(), name.lower()) if name is not None else None


def _speculative(value: Any) -> str | None:
    name = _as_name(value, NO_SPECULATION)
    if name is None:
        return None
    return NO_SPECULATION if name.lower() == NO_SPECULATION else name.upper()


def settings_from_server_info(info: Mapping[str, Any] | None) -> ShapeSettings | None:
    """The shape a server reports about itself: SGLang's `/get_server_info`, raw or as the
    plugin stores it (under "get_server_info" or "server_info"). None when no shape-defining
    field is there (vLLM's `/version`, llama.cpp). A field that is absent stays unknown; a
    field that is present but null means SGLang's default."""
    if not isinstance(info, Mapping):
        return None
    args = _server_args_mapping(info)
    if args is None:
        return None

    def read(name: str) -> Any:
        return args[SERVER_ARG_NAMES[name]]

    def has(name: str) -> bool:
        return SERVER_ARG_NAMES[name] in args

    values: dict[str, Any] = {name: _as_width(read(name)) for name in _INT_FIELDS if has(name)}
    if has("dp_attention"):
        values["dp_attention"] = _as_flag(read("dp_attention"))
    if ATTN_DP_SIZE in args:
        # Newer SGLang (PR 41818): `--attn-dp-size N` replaces `--dp-size N --enable-dp-attention`.
        width = _as_width(args[ATTN_DP_SIZE])
        if width is None:
            values["dp"], values["dp_attention"] = None, None
        elif width > 1:
            values["dp"], values["dp_attention"] = width, True
        elif not values.get("dp_attention"):
            values.setdefault("dp", 1)
            values["dp_attention"] = False
    if has("moe_a2a_backend"):
        values["moe_a2a_backend"] = _as_name(read("moe_a2a_backend"), NO_A2A)
    if has("moe_runner_backend"):
        values["moe_runner_backend"] = _as_name(read("moe_runner_backend"), "auto")
    if values.get("moe_runner_backend") == "megamoe":
        # SGLang's alias: the runner flag selects the fused a2a kernel and the runner stays auto.
        values["moe_a2a_backend"], values["moe_runner_backend"] = "megamoe", "auto"
    if has("kv_cache_dtype"):
        values["kv_cache_dtype"] = _kv_dtype(read("kv_cache_dtype"))
    if has("state_dtype"):
        values["state_dtype"] = _state_dtype(read("state_dtype"))
    if has("speculative_algorithm"):
        values["speculative_algorithm"] = _speculative(read("speculative_algorithm"))
    if has("disaggregation_mode"):
        mode = _as_name(read("disaggregation_mode"), UNIFIED)
        values["disaggregation_mode"] = mode.lower() if mode is not None else None
    return ShapeSettings(**values)


def width_of(settings: ShapeSettings) -> str:
    parts = [f"tp{settings.tp}"]
    parts += [f"{name}{getattr(settings, name)}" for name in ("ep", "dp", "pp", "dcp") if getattr(settings, name) != 1]
    text = "/".join(parts)
    return f"{text} dp-attention" if settings.dp_attention else text


def _show(value: Any) -> str:
    return "?" if value is None else str(value)


def describe(settings: ShapeSettings) -> str:
    """One line: "tp32 ep32 dp8 dp-attention moe=megamoe/deep_gemm kv=fp8_e4m3 state=bfloat16";
    widths of 1, no speculation and a unified server are left out, unknowns show as "?"."""
    parts = [f"tp{_show(settings.tp)}"]
    parts += [
        f"{name}{_show(getattr(settings, name))}" for name in ("ep", "dp", "pp", "dcp") if getattr(settings, name) != 1
    ]
    if settings.dp_attention is None:
        parts.append("dp-attention?")
    elif settings.dp_attention:
        parts.append("dp-attention")
    parts.append(f"moe={_show(settings.moe_a2a_backend)}/{_show(settings.moe_runner_backend)}")
    parts.append(f"kv={_show(settings.kv_cache_dtype)}")
    parts.append(f"state={_show(settings.state_dtype)}")
    if settings.speculative_algorithm != NO_SPECULATION:
        parts.append(f"spec={_show(settings.speculative_algorithm)}")
    if settings.disaggregation_mode != UNIFIED:
        parts.append(f"role={_show(settings.disaggregation_mode)}")
    return " ".join(parts)
