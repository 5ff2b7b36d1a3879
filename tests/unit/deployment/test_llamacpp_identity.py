"""A llama.cpp deployment read from what a run recorded: `/props` and the launch settings."""

from __future__ import annotations

from k3conformance.deployment.llamacpp_identity import llamacpp_deployment

PROPS = {"props": {"model_path": "/m/SmolLM2-135M-Instruct.Q4_1.gguf", "total_slots": 2}}


def test_props_and_a_launch_record_make_a_llamacpp_deployment() -> None:
    deployment = llamacpp_deployment(PROPS, {"args": {"flash_attention": "off"}, "env": {}})
    assert deployment is not None
    assert deployment.described == "llama.cpp, launched with flash_attention=off"
    assert llamacpp_deployment(PROPS, {"args": {}, "env": {}}) is not None


def test_anything_less_is_not_one() -> None:
    launch: dict[str, dict[str, str]] = {"args": {}, "env": {}}
    assert llamacpp_deployment(PROPS, None) is None
    assert llamacpp_deployment(PROPS, {"env": {}}) is None
    assert llamacpp_deployment(None, launch) is None
    assert llamacpp_deployment({}, launch) is None
    assert llamacpp_deployment({"props": "not an object"}, launch) is None
    # A server that also reports SGLang's arguments is SGLang's.
    assert llamacpp_deployment({**PROPS, "get_server_info": {"tp_size": 8}}, launch) is None


def test_kimi_is_ruled_out_only_by_a_model_file_and_id_that_do_not_name_it() -> None:
    smol = llamacpp_deployment(PROPS, {"args": {}})
    assert smol is not None and not smol.may_serve_kimi("smollm2-135m-instruct")
    assert smol.may_serve_kimi("moonshotai/Kimi-K3")
    kimi_file = llamacpp_deployment({"props": {"model_path": "/m/Kimi-K3-Q2_K.gguf"}}, {"args": {}})
    assert kimi_file is not None and kimi_file.may_serve_kimi("default")
    no_file = llamacpp_deployment({"props": {"model_alias": "smollm2"}}, {"args": {}})
    assert no_file is not None and no_file.may_serve_kimi("smollm2")
