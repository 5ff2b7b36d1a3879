"""The Kimi K3 shapes SGLang's cookbook and the public reports publish (the registry `--k3-shape`
names), and a run's label resolved against them: the shape it claims, and where the server says otherwise.

Sources: see `deployment/shapes.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from k3conformance.deployment.launch import merged_server_args
from k3conformance.deployment.shapes import (
    NO_A2A,
    NO_SPECULATION,
    SERVER_ARG_NAMES,
    UNIFIED,
    Shape,
    ShapeSettings,
    describe,
    settings_from_server_info,
)

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


@dataclass(frozen=True)
class RunShape:
    """A run's deployment shape as the run's header and the gate both read it: its settings (the
    server's own arguments where it reports them, else the registry shape it is labelled with),
    where they came from, and every contradiction between the label and the server."""

    settings: ShapeSettings | None
    source: str
    contradictions: list[str]

    @property
    def described(self) -> str | None:
        return describe(self.settings) if self.settings else None


def read_run_shape(
    label: str | None, server_info: Mapping[str, Any] | None, launch: Mapping[str, Any] | None
) -> RunShape:
    """The shape of a run labelled `label` whose server reported `server_info` and was started from `launch`."""
    info = merged_server_args(server_info, launch)
    settings, source = run_shape_settings(label, info)
    derived, _ = run_shape_settings(None, info)
    return RunShape(settings, source, contradictions(label, derived))
