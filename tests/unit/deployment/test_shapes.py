"""Deployment shapes: the registry against the cookbook's flags, derivation from SGLang's
`/get_server_info`, contradictions with --k3-shape, and the comparison policy."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from k3conformance.deployment.cookbook import SHAPES, contradictions, get_shape, run_shape_settings
from k3conformance.deployment.launch import SGLANG_DEFAULTS, LaunchFileError, merged_server_args, read_launch_file
from k3conformance.deployment.shapes import ShapeSettings, describe, server_args, settings_from_server_info
from k3conformance.gate.policy import (
    REQUIRED_SUITES,
    deployment_differences,
    deployment_identity,
    material_differences,
    shape_policy,
)

SHAPES_PAGE = Path(__file__).resolve().parents[3] / "docs" / "shapes.md"


# The defining flags of each shape, written out from the SGLang Kimi-K3 cookbook (and, for
# the two regression cells, from sglang issue 40751 plus the Peak Throughput preset's dtypes).
PEAK = (
    "--enable-dp-attention --moe-a2a-backend megamoe --moe-runner-backend deep_gemm "
    "--kv-cache-dtype fp8_e4m3 --mamba-ssm-dtype bfloat16"
)
COOKBOOK_FLAGS: dict[str, str] = {
    "tp8": "--tp-size 8",
    "tp8-dcp8": "--tp-size 8 --dcp-size 8",
    "tp8-dspark": "--tp-size 8 --speculative-algorithm DSPARK",
    "tp8-dcp8-dspark": "--tp-size 8 --dcp-size 8 --speculative-algorithm DSPARK",
    "tp16-ep16": "--tp-size 16 --ep-size 16 --moe-runner-backend marlin",
    "tp32-ep32": "--tp-size 32 --ep-size 32 --moe-runner-backend marlin",
    "tp16-ep16-dspark": "--tp-size 16 --ep-size 16 --moe-runner-backend marlin --speculative-algorithm DSPARK",
    "gb300-tp8": "--tp-size 8 --moe-runner-backend marlin",
    "gb300-tp8-dspark": "--tp-size 8 --moe-runner-backend marlin --speculative-algorithm DSPARK",
    "gb300-ep8-megamoe": "--tp-size 8 --ep-size 8 --moe-a2a-backend megamoe",
    "dp2-ep16-megamoe": f"--tp-size 16 --ep-size 16 --dp-size 2 {PEAK}",
    "dp4-ep32-megamoe": f"--tp-size 32 --ep-size 32 --dp-size 4 {PEAK}",
    "dp8-ep64-megamoe": f"--tp-size 64 --ep-size 64 --dp-size 8 {PEAK}",
    "dp2-ep16-megamoe-dcp8": f"--tp-size 16 --ep-size 16 --dp-size 2 {PEAK} --dcp-size 8",
    "dp4-ep32-megamoe-dcp8": f"--tp-size 32 --ep-size 32 --dp-size 4 {PEAK} --dcp-size 8",
    "dp8-ep64-megamoe-dcp8": f"--tp-size 64 --ep-size 64 --dp-size 8 {PEAK} --dcp-size 8",
    "prefill-tp8": "--tp-size 8 --disaggregation-mode prefill",
    "prefill-pp8": "--pp-size 8 --tp-size 1 --disaggregation-mode prefill",
    "decode-tp8-dcp8": "--tp-size 8 --dcp-size 8 --disaggregation-mode decode",
    # The command panel's newer version (kimi-k3.jsx with the Ascend cells), shape flags only.
    "b200-pp2-tp8": "--tp-size 8 --pp-size 2",
    "b200-pp2-dcpep8": "--tp-size 8 --pp-size 2 --dcp-size 8 --ep-size 8 --moe-runner-backend flashinfer_mxfp4",
    "b200-tp16-dspark": "--tp-size 16 --speculative-algorithm DSPARK",
    "b200-tp16-dcpep16-dspark": (
        "--tp-size 16 --dcp-size 16 --ep-size 16 --moe-runner-backend flashinfer_mxfp4 --speculative-algorithm DSPARK"
    ),
    "gb200-tp16": "--tp-size 16",
    "gb200-tp16-dcp16": "--tp-size 16 --dcp-size 16",
    "h100-tp32-ep32": "--tp-size 32 --ep-size 32 --moe-runner-backend marlin",
    "decode-tp32-ep32": "--tp-size 32 --ep-size 32 --moe-runner-backend marlin --disaggregation-mode decode",
    "mi35x-tp8-dcp8": "--tp-size 8 --dcp-size 8 --kv-cache-dtype fp8_e4m3",
    "tp8-nvfp4": "--tp-size 8 --moe-runner-backend flashinfer_trtllm",
    "prefill-pp16": "--tp-size 1 --pp-size 16 --disaggregation-mode prefill",
    "decode-tp16": "--tp-size 16 --disaggregation-mode decode",
    "decode-tp16-dcp16": "--tp-size 16 --dcp-size 16 --disaggregation-mode decode",
    "decode-gb200-pp2-tp8": "--tp-size 8 --pp-size 2 --disaggregation-mode decode",
    "decode-gb200-tp16-dcpep16": "--tp-size 16 --dcp-size 16 --ep-size 16 --disaggregation-mode decode",
    "decode-gb200-dp2-dcp8-ep16": (
        "--tp-size 16 --dcp-size 8 --dp-size 2 --enable-dp-attention --ep-size 16 --disaggregation-mode decode"
    ),
    "ep32-deepep": (
        "--tp-size 32 --ep-size 32 --dp-size 8 --enable-dp-attention --moe-a2a-backend deepep "
        "--moe-runner-backend deep_gemm --kv-cache-dtype fp8_e4m3 --mamba-ssm-dtype bfloat16 --disaggregation-mode decode"
    ),
    "ep32-megamoe": f"--tp-size 32 --ep-size 32 --dp-size 8 {PEAK} --disaggregation-mode decode",
}


def parse_flags(command: str) -> dict[str, Any]:
    """SGLang launch flags as ServerArgs fields (`--tp-size 8` -> tp_size=8, a bare flag -> True)."""
    words = shlex.split(command)
    args: dict[str, Any] = {}
    index = 0
    while index < len(words):
        name = words[index].removeprefix("--").replace("-", "_")
        if index + 1 < len(words) and not words[index + 1].startswith("--"):
            value = words[index + 1]
            args[name] = int(value) if value.isdigit() else value
            index += 2
        else:
            args[name] = True
            index += 1
    return args


def test_the_registry_is_the_cookbook_list() -> None:
    assert set(SHAPES) == set(COOKBOOK_FLAGS)
    for name, shape in SHAPES.items():
        assert shape.name == name and shape.title and shape.source and shape.hardware
        assert shape.settings.unknown() == [], name


@pytest.mark.parametrize("name", sorted(COOKBOOK_FLAGS))
def test_server_args_carry_the_cookbook_flags(name: str) -> None:
    shape = get_shape(name)
    assert shape is not None
    assert server_args(shape) == {**SGLANG_DEFAULTS, **parse_flags(COOKBOOK_FLAGS[name])}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_round_trips_through_server_info(name: str) -> None:
    shape = SHAPES[name]
    args = server_args(shape)
    assert settings_from_server_info(args) == shape.settings
    # As the plugin stores it, and with the arguments nested as some SGLang versions do.
    assert settings_from_server_info({"get_server_info": {**args, "version": "0.5"}}) == shape.settings
    assert (
        settings_from_server_info({"server_info": {"server_args": args}, "version": {"version": "x"}}) == shape.settings
    )


@pytest.mark.parametrize(
    "name", ["tp8", "dp4-ep32-megamoe", "ep32-megamoe", "prefill-pp8", "b200-pp2-dcpep8", "prefill-pp16"]
)
def test_gpu_count_is_the_product_of_the_widths(name: str) -> None:
    settings = SHAPES[name].settings
    assert settings.tp is not None and settings.pp is not None
    assert SHAPES[name].gpus == settings.tp * settings.pp


def test_the_regression_cells_differ_only_in_the_moe_backend() -> None:
    deepep, megamoe = SHAPES["ep32-deepep"].settings, SHAPES["ep32-megamoe"].settings
    assert material_differences(deepep, megamoe) == ["MoE backend: deepep → megamoe"]
    # DP attention in groups of 4: 32 ranks, 8 attention replicas.
    assert (megamoe.tp, megamoe.ep, megamoe.dp, megamoe.dp_attention) == (32, 32, 8, True)
    assert megamoe.disaggregation_mode == "decode"


def test_describe_is_compact() -> None:
    assert describe(SHAPES["ep32-megamoe"].settings) == (
        "tp32 ep32 dp8 dp-attention moe=megamoe/deep_gemm kv=fp8_e4m3 state=bfloat16 role=decode"
    )
    assert describe(SHAPES["tp8"].settings) == "tp8 moe=none/auto kv=auto state=float32"
    assert describe(SHAPES["tp8-dcp8-dspark"].settings) == "tp8 dcp8 moe=none/auto kv=auto state=float32 spec=DSPARK"
    assert describe(ShapeSettings(tp=8)) == "tp8 ep? dp? pp? dcp? dp-attention? moe=?/? kv=? state=? spec=? role=?"


def test_tp8_against_itself_is_the_same_shape() -> None:
    tp8 = SHAPES["tp8"].settings
    assert material_differences(tp8, tp8) == []
    assert shape_policy(tp8, tp8).differs == [] and shape_policy(tp8, tp8).required_suites == ()


@pytest.mark.parametrize("name", sorted(set(SHAPES) - {"tp8"}))
def test_tp8_against_every_other_shape_differs(name: str) -> None:
    decided = shape_policy(SHAPES["tp8"].settings, SHAPES[name].settings)
    assert decided.differs, name
    assert decided.required_suites == REQUIRED_SUITES == ("agentic_coding", "math")


def test_dcp_is_a_width_difference() -> None:
    assert material_differences(SHAPES["tp8"].settings, SHAPES["tp8-dcp8"].settings) == ["width: tp8 → tp8/dcp8"]


def test_fp8_kv_is_a_kv_dtype_difference() -> None:
    tp8 = SHAPES["tp8"].settings
    assert material_differences(tp8, replace(tp8, kv_cache_dtype="fp8_e4m3")) == ["KV cache dtype: auto → fp8_e4m3"]


def test_each_kind_of_difference_has_its_reason() -> None:
    tp8 = SHAPES["tp8"].settings
    assert material_differences(tp8, SHAPES["tp8-dspark"].settings) == ["speculative decoding: none → DSPARK"]
    assert material_differences(tp8, replace(tp8, state_dtype="bfloat16")) == ["state dtype: float32 → bfloat16"]
    assert material_differences(tp8, SHAPES["prefill-tp8"].settings) == ["disaggregation role: null → prefill"]
    assert material_differences(tp8, SHAPES["ep32-megamoe"].settings) == [
        "width: tp8 → tp32/ep32/dp8 dp-attention",
        "MoE backend: none → megamoe",
        "MoE runner: auto → deep_gemm",
        "KV cache dtype: auto → fp8_e4m3",
        "state dtype: float32 → bfloat16",
        "disaggregation role: null → decode",
    ]


def test_unknown_shapes_are_treated_as_different() -> None:
    tp8 = SHAPES["tp8"].settings
    for baseline, candidate in ((tp8, None), (None, tp8), (None, None)):
        reasons = material_differences(baseline, candidate)
        assert len(reasons) == 1 and "could not be determined" in reasons[0]
        assert shape_policy(baseline, candidate).required_suites == REQUIRED_SUITES
    # A server that reports only its TP width: everything else is unknown, so not "the same".
    partial = settings_from_server_info({"get_server_info": {"tp_size": 8}})
    assert partial == ShapeSettings(tp=8)
    reasons = material_differences(tp8, partial)
    assert reasons and all("could not be determined" in reason for reason in reasons)
    assert "candidate reports no dcp_size" in reasons[0]


def test_a_label_contradicted_by_the_server_is_reported_per_setting() -> None:
    derived = settings_from_server_info({"get_server_info": server_args(SHAPES["ep32-megamoe"])})
    lines = contradictions("tp8", derived)
    contradicted = [line.split(" means ", 1)[1].split("=", 1)[0] for line in lines]
    assert contradicted == [
        "tp_size",
        "ep_size",
        "dp_size",
        "enable_dp_attention",
        "moe_a2a_backend",
        "moe_runner_backend",
        "kv_cache_dtype",
        "mamba_ssm_dtype",
        "disaggregation_mode",
    ]
    assert lines[0] == "--k3-shape tp8 means tp_size=8 (TP8 Low-Latency), but the server reports tp_size=32"


def test_no_contradiction_without_a_registry_label_or_a_reported_setting() -> None:
    megamoe = SHAPES["ep32-megamoe"].settings
    assert contradictions("ep32-megamoe", megamoe) == []
    assert contradictions("my-own-label", megamoe) == []
    assert contradictions(None, megamoe) == []
    assert contradictions("tp8", None) == []
    assert contradictions("tp8", ShapeSettings(tp=8)) == []  # the rest unknown, not contradicted


@pytest.mark.parametrize(
    "info",
    [
        {},
        {"version": {"version": "0.11.0"}},  # vLLM's /version, as the plugin stores it
        {"server_info": {"vllm_config": "ModelConfig(model='Kimi-K3', tensor_parallel_size=8)"}},
        {"server_info": {"build_info": "b4500", "n_ctx": 8192, "total_slots": 4, "model_path": "k3.gguf"}},
        {"get_server_info": "not a mapping"},
    ],
    ids=["empty", "vllm-version", "vllm-server-info", "llama-cpp", "garbage"],
)
def test_servers_without_sglang_arguments_have_no_derived_shape(info: dict[str, Any]) -> None:
    assert settings_from_server_info(info) is None


def test_sglang_values_are_read_as_sglang_means_them() -> None:
    info = {
        "tp_size": "8",
        "enable_dp_attention": "false",
        "moe_a2a_backend": None,
        "moe_runner_backend": "megamoe",  # SGLang's alias for the fused a2a kernel
        "kv_cache_dtype": "bfloat16",  # K3's own dtype: the same as auto
        "mamba_ssm_dtype": "fp32",
        "speculative_algorithm": "dspark",
        "disaggregation_mode": None,
    }
    assert settings_from_server_info(info) == ShapeSettings(
        tp=8,
        dp_attention=False,
        moe_a2a_backend="megamoe",
        moe_runner_backend="auto",
        kv_cache_dtype="auto",
        state_dtype="float32",
        speculative_algorithm="DSPARK",
        disaggregation_mode="null",
    )
    assert settings_from_server_info({"tp_size": True, "dp_size": 0}) == ShapeSettings(tp=None, dp=None)


def test_run_settings_come_from_the_server_first() -> None:
    megamoe_info = {"get_server_info": server_args(SHAPES["ep32-megamoe"])}
    assert run_shape_settings("tp8", megamoe_info) == (SHAPES["ep32-megamoe"].settings, "server")
    assert run_shape_settings("tp8", {"version": {"version": "0.11.0"}}) == (SHAPES["tp8"].settings, "registry")
    assert run_shape_settings("tp8", None) == (SHAPES["tp8"].settings, "registry")
    assert run_shape_settings("unlabelled", None) == (None, "unknown")
    assert run_shape_settings(None, {}) == (None, "unknown")


def test_the_shapes_page_lists_every_shape() -> None:
    section = SHAPES_PAGE.read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE)
    assert sorted(listed) == sorted(SHAPES)
    for shape in SHAPES.values():
        row = next(line for line in section.splitlines() if line.startswith(f"| `{shape.name}` |"))
        assert f"| {shape.gpus} |" in row and f"| {shape.hardware} |" in row


# --- launch arguments, --attn-dp-size and the deployment identity (issue 11) -------------


def test_attn_dp_size_reads_as_dp_attention() -> None:
    """Newer SGLang reports `attn_dp_size` in place of `dp_size` + `enable_dp_attention`."""
    args = {**server_args(SHAPES["dp4-ep32-megamoe"]), "attn_dp_size": 4}
    del args["dp_size"], args["enable_dp_attention"]
    derived = settings_from_server_info({"get_server_info": args})
    assert derived is not None and (derived.dp, derived.dp_attention) == (4, True)
    assert material_differences(SHAPES["dp4-ep32-megamoe"].settings, derived) == []
    plain = settings_from_server_info({"get_server_info": {**server_args(SHAPES["tp8"]), "attn_dp_size": 1}})
    assert plain == SHAPES["tp8"].settings


def test_launch_arguments_supply_the_shape_when_the_server_reports_none(tmp_path: Path) -> None:
    launch_file = tmp_path / "launch.json"
    launch_file.write_text(
        '{"args": "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --attn-dp-size 2 '
        '--moe-a2a-backend=megamoe", "env": {"VLLM_ROCM_USE_AITER": "1"}, "hardware": "MI355X 1x8"}'
    )
    launch = read_launch_file(launch_file)
    assert launch["args"]["tp_size"] == "8" and launch["env"] == {"VLLM_ROCM_USE_AITER": "1"}
    settings, source = run_shape_settings(None, merged_server_args({"version": {"version": "0.33.0"}}, launch))
    assert source == "server" and settings is not None
    assert (settings.tp, settings.dp, settings.dp_attention, settings.moe_a2a_backend) == (8, 2, True, "megamoe")
    assert settings.kv_cache_dtype == "auto" and settings.state_dtype == "float32"


@pytest.mark.parametrize(
    ("content", "message"),
    [("[1]", "must hold a JSON object"), ('{"env": [1]}', "'env' must map"), ("{", "is corrupt (not JSON")],
)
def test_bad_launch_file_is_one_message(tmp_path: Path, content: str, message: str) -> None:
    launch_file = tmp_path / "launch.json"
    launch_file.write_text(content)
    with pytest.raises(LaunchFileError, match=re.escape(message)):
        read_launch_file(launch_file)


def test_every_recorded_server_fact_is_compared() -> None:
    info = {"get_server_info": {**server_args(SHAPES["tp8"]), "attention_backend": "fa3", "port": 30000}}
    other = {"get_server_info": {**server_args(SHAPES["tp8"]), "attention_backend": "trtllm_mla", "port": 30001}}
    assert deployment_differences(deployment_identity(info, None), deployment_identity(info, None)) == []
    (reason,) = deployment_differences(deployment_identity(info, None), deployment_identity(other, None))
    # The port says where a server listens, not what it computes.
    assert "attention_backend" in reason and "port" not in reason
    assert "nothing recorded about the candidate" in deployment_differences(deployment_identity(info, None), None)[0]


def test_launch_file_secrets_are_redacted(tmp_path: Path) -> None:
    launch_file = tmp_path / "launch.json"
    launch_file.write_text('{"args": "--tp 8 --api-key sk-abc", "env": {"HF_TOKEN": "hf_x", "OTHER": "uses sk-abc"}}')
    launch = read_launch_file(launch_file, ("sk-abc",))
    assert launch["args"]["api_key"] == "<redacted>" and launch["env"]["HF_TOKEN"] == "<redacted>"
    assert "sk-abc" not in str(launch)


# --- equal width, different deployment (issue 11: the cookbook shapes) -------------------


@pytest.mark.parametrize(
    ("before", "after", "reason"),
    [
        ("tp8", "tp8-nvfp4", "MoE runner: auto → flashinfer_trtllm"),  # quantization
        ("tp8-dcp8", "mi35x-tp8-dcp8", "KV cache dtype: auto → fp8_e4m3"),  # hardware and backend
        ("gb200-tp16", "b200-tp16-dspark", "speculative decoding: none → DSPARK"),
        ("b200-pp2-dcpep8", "b200-tp16-dcpep16-dspark", "width: tp8/ep8/pp2/dcp8 → tp16/ep16/dcp16"),
    ],
)
def test_equal_gpu_counts_with_other_kernels_are_different_deployments(before: str, after: str, reason: str) -> None:
    baseline, candidate = SHAPES[before], SHAPES[after]
    assert baseline.gpus == candidate.gpus
    verdict = shape_policy(baseline.settings, candidate.settings)
    assert reason in verdict.differs and verdict.required_suites == REQUIRED_SUITES


def test_same_settings_on_other_hardware_are_different_deployments() -> None:
    # H200 and H100 run the cookbook's TP32/EP32 with identical flags: only the recorded hardware differs.
    h200, h100 = SHAPES["tp32-ep32"], SHAPES["h100-tp32-ep32"]
    assert h200.settings == h100.settings and h200.gpus == h100.gpus
    assert shape_policy(h200.settings, h100.settings).differs == []
    identities = [
        deployment_identity({"get_server_info": server_args(shape)}, {"hardware": shape.hardware})
        for shape in (h200, h100)
    ]
    other = deployment_differences(*identities)
    assert other == ['deployment: launch.hardware: "H200 4×8" → "H100 4×8"']
    assert shape_policy(h200.settings, h100.settings, other).required_suites == REQUIRED_SUITES
