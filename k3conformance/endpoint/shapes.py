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
from dataclasses import dataclass, fields, replace
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


_PLAIN = ShapeSettings(
    tp=8,
    ep=1,
    dp=1,
    pp=1,
    dcp=1,
    dp_attention=False,
    moe_a2a_backend=NO_A2A,
    moe_runner_backend="auto",
    kv_cache_dtype="auto",
    state_dtype="float32",
    speculative_algorithm=NO_SPECULATION,
    disaggregation_mode=UNIFIED,
)
_COOKBOOK = "SGLang Kimi-K3 cookbook"
# A later version of the cookbook's command panel (sgl-project/sglang commit 0722c4c,
# `docs_new/src/snippets/configs/moonshotai/kimi-k3.jsx`): H200, B300 and GB300 cells.
_COOKBOOK_PANEL = "SGLang Kimi-K3 cookbook command panel (sglang 0722c4c)"
_B300 = "B300 1×8"


def _peak(gpus: int, dcp: int, disaggregation_mode: str = UNIFIED) -> ShapeSettings:
    return replace(
        _PLAIN,
        tp=gpus,
        ep=gpus,
        dp=gpus // 8,
        dcp=dcp,
        dp_attention=True,
        moe_a2a_backend="megamoe",
        moe_runner_backend="deep_gemm",
        kv_cache_dtype="fp8_e4m3",
        state_dtype="bfloat16",
        disaggregation_mode=disaggregation_mode,
    )


def _large_scale_shapes() -> list[Shape]:
    nodes = {16: "2×8", 32: "4×8", 64: "8×8"}
    gb_nodes = {16: "4×4", 32: "8×4", 64: "16×4"}
    shapes = []
    for gpus in (16, 32, 64):
        hardware = f"B200/B300 {nodes[gpus]} or GB200/GB300 {gb_nodes[gpus]}"
        base = f"dp{gpus // 8}-ep{gpus}-megamoe"
        shapes.append(
            Shape(
                base,
                f"Peak Throughput, {gpus} GPUs (DP attention + MegaMoE)",
                hardware,
                gpus,
                _peak(gpus, 1),
                f"{_COOKBOOK}, 3.6 Large-Scale Serving Presets: Peak Throughput",
            )
        )
        shapes.append(
            Shape(
                f"{base}-dcp8",
                f"Peak Capacity, {gpus} GPUs (Peak Throughput + DCP8)",
                hardware,
                gpus,
                _peak(gpus, 8),
                f"{_COOKBOOK}, 3.6 Large-Scale Serving Presets: Peak Capacity (+DCP8)",
            )
        )
    return shapes


# The command panel's newer version (sgl-project/sglang
# `docs_new/src/snippets/configs/moonshotai/kimi-k3.jsx`, the stored copy of 89,181 characters
# whose `supportedHardware` lists "a3" and "a5"; the published page is
# https://docs.sglang.io/cookbook/autoregressive/Moonshotai/Kimi-K3). Each shape carries only
# the shape-defining flags of its cell; the rest (memory fraction, attention backends, loader
# options) is recorded as deployment identity, not as shape.
_PANEL_2026 = "SGLang Kimi-K3 cookbook command panel (kimi-k3.jsx with Ascend cells)"
_B200 = "B200 2×8"


def _cookbook_2026_shapes() -> list[Shape]:
    # B200 Unified: Low-Latency `--tp-size 8 --pp-size 2`; Balanced "PP2 × DCPEP8"
    # `--tp-size 8 --pp-size 2 --dcp-size 8 --ep-size 8 --moe-runner-backend flashinfer_mxfp4`.
    # Under DSPARK (pp_size == 1) these cells set `specCollapsePp` and the panel's
    # `specCollapsedFlags` re-lays them flat at the same 16 GPUs: tp 8×2 = 16, dcp and ep ×2.
    b200_balanced = replace(_PLAIN, tp=8, pp=2, dcp=8, ep=8, moe_runner_backend="flashinfer_mxfp4")
    dspark = "DSPARK"
    shapes = [
        Shape(
            "b200-pp2-tp8",
            "B200 PP2×TP8 Low-Latency",
            _B200,
            16,
            replace(_PLAIN, tp=8, pp=2),
            f"{_PANEL_2026}, b200 unified low-latency",
        ),
        Shape(
            "b200-pp2-dcpep8",
            "B200 PP2×DCPEP8 Balanced (FlashInfer MXFP4 runner)",
            _B200,
            16,
            b200_balanced,
            f"{_PANEL_2026}, b200 unified balanced",
        ),
        Shape(
            "b200-tp16-dspark",
            "B200 Low-Latency + DSPARK, re-laid flat as TP16",
            _B200,
            16,
            replace(_PLAIN, tp=16, speculative_algorithm=dspark),
            f"{_PANEL_2026}, b200 unified low-latency with Spec Decode DSPARK (specCollapsedFlags)",
        ),
        Shape(
            "b200-tp16-dcpep16-dspark",
            "B200 Balanced + DSPARK, re-laid flat as TP16/DCP16/EP16",
            _B200,
            16,
            replace(b200_balanced, tp=16, pp=1, dcp=16, ep=16, speculative_algorithm=dspark),
            f"{_PANEL_2026}, b200 unified balanced with Spec Decode DSPARK (specCollapsedFlags)",
        ),
        # GB200 4×4 Unified: Low-Latency `--tp-size 16`; Balanced `--tp-size 16 --dcp-size 16`.
        Shape(
            "gb200-tp16",
            "GB200 TP16 Low-Latency",
            "GB200 4×4",
            16,
            replace(_PLAIN, tp=16),
            f"{_PANEL_2026}, gb200 unified low-latency",
        ),
        Shape(
            "gb200-tp16-dcp16",
            "GB200 TP16/DCP16 Balanced",
            "GB200 4×4",
            16,
            replace(_PLAIN, tp=16, dcp=16),
            f"{_PANEL_2026}, gb200 unified balanced",
        ),
        # H100 4×8, all three Unified strategies: `--tp-size 32 --ep-size 32 --moe-runner-backend
        # marlin` (+ FlashMLA decode). The same settings as H200's tp32-ep32: only the hardware
        # recorded with --k3-server-args tells the two apart.
        Shape(
            "h100-tp32-ep32",
            "H100 TP32/EP32 (Marlin + FlashMLA)",
            "H100 4×8",
            32,
            replace(_PLAIN, tp=32, ep=32, moe_runner_backend="marlin"),
            f"{_PANEL_2026}, h100 unified balanced",
        ),
        # The 32-GPU decode domain: H100's decode role, the same flags plus `--disaggregation-mode decode`.
        Shape(
            "decode-tp32-ep32",
            "Decode role, H100 TP32/EP32 (Marlin + FlashMLA)",
            "H100 4×8",
            32,
            replace(_PLAIN, tp=32, ep=32, moe_runner_backend="marlin", disaggregation_mode="decode"),
            f"{_PANEL_2026}, h100 decode balanced",
        ),
        # MI350X/MI355X 1×8 Unified Balanced: `--tp-size 8 --dcp-size 8 --kv-cache-dtype fp8_e4m3`
        # (+ AITER attention and the SGLANG_USE_AITER / AITER_* environment).
        Shape(
            "mi35x-tp8-dcp8",
            "MI350X/MI355X TP8/DCP8 (ROCm/AITER, FP8 KV)",
            "MI350X/MI355X 1×8",
            8,
            replace(_PLAIN, dcp=8, kv_cache_dtype="fp8_e4m3"),
            f"{_PANEL_2026}, mi355x unified balanced",
        ),
        # NVFP4 (Quantization row, Blackwell only): the nvidia/Kimi-K3-NVFP4 checkpoint and
        # `--moe-runner-backend flashinfer_trtllm` layered onto a cell; here onto B300 Low-Latency.
        Shape(
            "tp8-nvfp4",
            "TP8 Low-Latency, NVFP4 checkpoint (FlashInfer TRT-LLM runner)",
            _B300,
            8,
            replace(_PLAIN, moe_runner_backend="flashinfer_trtllm"),
            f"{_PANEL_2026}, Quantization NVFP4 on b300 unified low-latency",
        ),
        # The 16-GPU platforms' prefill role, Default and Long-Context alike: `--tp-size 1 --pp-size 16`.
        Shape(
            "prefill-pp16",
            "Prefill role, deep PP16 (16-GPU platforms)",
            f"{_B200} or GB200 4×4",
            16,
            replace(_PLAIN, tp=1, pp=16, disaggregation_mode="prefill"),
            f"{_PANEL_2026}, b200/gb200 prefill default and long-context",
        ),
        # Decode role on the 16-GPU platforms, each the unified cell's widths plus
        # `--disaggregation-mode decode`: B200 Low-Latency `--tp-size 16`, Balanced and
        # High-Throughput `--tp-size 16 --dcp-size 16`; GB200 Low-Latency `--tp-size 8 --pp-size 2`
        # (paired with a PP2×TP8 prefill: decode pp must equal prefill pp or be 1), Balanced
        # `--tp-size 16 --dcp-size 16 --ep-size 16`, High-Throughput `--tp-size 16 --dcp-size 8
        # --dp-size 2 --enable-dp-attention --ep-size 16`.
        Shape(
            "decode-tp16",
            "Decode role, B200 TP16 Low-Latency",
            _B200,
            16,
            replace(_PLAIN, tp=16, disaggregation_mode="decode"),
            f"{_PANEL_2026}, b200 decode low-latency",
        ),
        Shape(
            "decode-tp16-dcp16",
            "Decode role, B200 TP16/DCP16 Balanced and High-Throughput",
            _B200,
            16,
            replace(_PLAIN, tp=16, dcp=16, disaggregation_mode="decode"),
            f"{_PANEL_2026}, b200 decode balanced and high-throughput",
        ),
        Shape(
            "decode-gb200-pp2-tp8",
            "Decode role, GB200 PP2×TP8 Low-Latency",
            "GB200 4×4",
            16,
            replace(_PLAIN, tp=8, pp=2, disaggregation_mode="decode"),
            f"{_PANEL_2026}, gb200 decode low-latency",
        ),
        Shape(
            "decode-gb200-tp16-dcpep16",
            "Decode role, GB200 TP16/DCP16/EP16 Balanced",
            "GB200 4×4",
            16,
            replace(_PLAIN, tp=16, dcp=16, ep=16, disaggregation_mode="decode"),
            f"{_PANEL_2026}, gb200 decode balanced",
        ),
        Shape(
            "decode-gb200-dp2-dcp8-ep16",
            "Decode role, GB200 TP16 with DP attention ×2, DCP8, EP16, High-Throughput",
            "GB200 4×4",
            16,
            replace(_PLAIN, tp=16, dcp=8, dp=2, dp_attention=True, ep=16, disaggregation_mode="decode"),
            f"{_PANEL_2026}, gb200 decode high-throughput",
        ),
    ]
    return shapes


def _registry() -> dict[str, Shape]:
    issue = "sglang issue 40751"
    issue_note = (
        "; DP attention in groups of 4 (dp 8 of tp 32); runner, KV and state dtypes are not in the issue "
        "and are taken from the cookbook's Peak Throughput preset"
    )
    shapes = [
        Shape("tp8", "TP8 Low-Latency", _B300, 8, _PLAIN, f"{_COOKBOOK}, Deployment: B300 Unified Low-Latency"),
        Shape(
            "tp8-dcp8",
            "TP8+DCP8 Balanced",
            _B300,
            8,
            replace(_PLAIN, dcp=8),
            f"{_COOKBOOK}, Deployment: B300 Unified Balanced",
        ),
        Shape(
            "tp8-dspark",
            "TP8 Low-Latency + DSPARK speculative decoding",
            _B300,
            8,
            replace(_PLAIN, speculative_algorithm="DSPARK"),
            f"{_COOKBOOK}, Spec Decode: DSPARK",
        ),
        Shape(
            "tp8-dcp8-dspark",
            "TP8+DCP8 Balanced + DSPARK speculative decoding",
            _B300,
            8,
            replace(_PLAIN, dcp=8, speculative_algorithm="DSPARK"),
            f"{_COOKBOOK}, Spec Decode: DSPARK",
        ),
        Shape(
            "tp16-ep16",
            "H200 TP16/EP16 (Marlin + FlashMLA)",
            "H200 2×8",
            16,
            replace(_PLAIN, tp=16, ep=16, moe_runner_backend="marlin"),
            f"{_COOKBOOK}, Deployment: H200 2×8 Balanced",
        ),
        Shape(
            "tp32-ep32",
            "H200 TP32/EP32 High-Throughput (Marlin + FlashMLA, extra_buffer_lazy)",
            "H200 4×8",
            32,
            replace(_PLAIN, tp=32, ep=32, moe_runner_backend="marlin"),
            f"{_COOKBOOK}, Deployment: H200 4×8 Unified High-Throughput",
        ),
        Shape(
            "tp16-ep16-dspark",
            "H200 TP16/EP16 Low-Latency (Marlin + FlashMLA) + DSPARK speculative decoding",
            "H200 2×8",
            16,
            replace(_PLAIN, tp=16, ep=16, moe_runner_backend="marlin", speculative_algorithm="DSPARK"),
            f"{_COOKBOOK_PANEL}, H200 multi-2 low-latency (unverified cell)",
        ),
        Shape(
            "gb300-tp8",
            "GB300 TP8 over MNNVL, Balanced (Marlin)",
            "GB300 2×4",
            8,
            replace(_PLAIN, moe_runner_backend="marlin"),
            f"{_COOKBOOK_PANEL}, GB300 multi-2 balanced",
        ),
        Shape(
            "gb300-tp8-dspark",
            "GB300 TP8 over MNNVL, Low-Latency (Marlin) + DSPARK speculative decoding",
            "GB300 2×4",
            8,
            replace(_PLAIN, moe_runner_backend="marlin", speculative_algorithm="DSPARK"),
            f"{_COOKBOOK_PANEL}, GB300 multi-2 low-latency (unverified cell)",
        ),
        Shape(
            "gb300-ep8-megamoe",
            "GB300 EP8 + MegaMoE + SP-MoE, High-Throughput",
            "GB300 2×4",
            8,
            replace(_PLAIN, ep=8, moe_a2a_backend="megamoe"),
            f"{_COOKBOOK_PANEL}, GB300 multi-2 high-throughput (its environment sets the MegaMoE "
            "tokens-per-rank cap: record it with --k3-server-args)",
        ),
        *_large_scale_shapes(),
        Shape(
            "prefill-tp8",
            "Prefill role, Default (TP8)",
            _B300,
            8,
            replace(_PLAIN, disaggregation_mode="prefill"),
            f"{_COOKBOOK}, 3.4 PD Disaggregation: prefill Default",
        ),
        Shape(
            "prefill-pp8",
            "Prefill role, Long-Context (deep PP8)",
            _B300,
            8,
            replace(_PLAIN, tp=1, pp=8, disaggregation_mode="prefill"),
            f"{_COOKBOOK}, 3.4 PD Disaggregation: Deep PP for long-context prefill",
        ),
        Shape(
            "decode-tp8-dcp8",
            "Decode role, TP8+DCP8",
            _B300,
            8,
            replace(_PLAIN, dcp=8, disaggregation_mode="decode"),
            f"{_COOKBOOK}, 3.4 PD Disaggregation: decode role",
        ),
        *_cookbook_2026_shapes(),
        Shape(
            "ep32-deepep",
            "EP32 decode with DeepEP (the regression's control)",
            "GB300",
            32,
            replace(_peak(32, 1, "decode"), dp=8, moe_a2a_backend="deepep"),
            issue + issue_note,
        ),
        Shape(
            "ep32-megamoe",
            "EP32 decode with the fused MegaMoE kernel (the regression)",
            "GB300",
            32,
            replace(_peak(32, 1, "decode"), dp=8),
            issue + issue_note,
        ),
    ]
    return {shape.name: shape for shape in shapes}


SHAPES: Mapping[str, Shape] = MappingProxyType(_registry())


def get_shape(name: str) -> Shape | None:
    return SHAPES.get(name)


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


def run_shape_settings(label: str | None, server_info: Mapping[str, Any] | None) -> tuple[ShapeSettings | None, str]:
    """A run's settings and where they came from: "server" (its own arguments win), else
    "registry" (the --k3-shape label names a registry shape), else "unknown"."""
    derived = settings_from_server_info(server_info)
    if derived is not None:
        return derived, "server"
    shape = get_shape(label) if label else None
    if shape is not None:
        return shape.settings, "registry"
    return None, "unknown"


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


def contradictions(label: str | None, derived: ShapeSettings | None) -> list[str]:
    """When --k3-shape names a registry shape and the server's own arguments say otherwise:
    one line per contradicting setting. Settings the server does not report contradict nothing."""
    shape = get_shape(label) if label else None
    if shape is None or derived is None:
        return []
    lines = []
    for name, arg in SERVER_ARG_NAMES.items():
        expected, reported = getattr(shape.settings, name), getattr(derived, name)
        if reported is not None and reported != expected:
            lines.append(
                f"--k3-shape {label} means {arg}={expected} ({shape.title}), but the server reports {arg}={reported}"
            )
    return lines
