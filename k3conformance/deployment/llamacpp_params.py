"""Launch settings of llama.cpp's server beyond the launcher's defaults, as `NAME=VALUE`
strings: the "shape" of a llama.cpp deployment in the real-engine benchmark
(benchmarks/bench_real_engine.py) and the CI pair (tests/e2e/test_llamacpp_gate.py).

Each name sets one or two fields of `xllamacpp.CommonParams`; the strings travel on the
launcher's command line (`--param`) and are what a run records as its launch arguments.
Only names listed in `SETTINGS` are accepted: a typo must stop the launch, not run the
default deployment under another label.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["SETTINGS", "apply_params", "parse_param"]

KV_TYPES = ("f16", "q8_0", "q4_0")
SPECULATIVE_TYPES = ("ngram-simple", "ngram-cache", "ngram-mod")


def _threads(params: Any, xllamacpp: Any, value: str) -> None:
    params.cpuparams.n_threads = int(value)
    params.cpuparams_batch.n_threads = int(value)


def _flash_attention(params: Any, xllamacpp: Any, value: str) -> None:
    kinds = xllamacpp.llama_flash_attn_type
    params.flash_attn_type = {
        "on": kinds.LLAMA_FLASH_ATTN_TYPE_ENABLED,
        "off": kinds.LLAMA_FLASH_ATTN_TYPE_DISABLED,
        "auto": kinds.LLAMA_FLASH_ATTN_TYPE_AUTO,
    }[_choice(value, ("on", "off", "auto"))]


def _kv_type(params: Any, xllamacpp: Any, value: str) -> None:
    # K and V together: llama.cpp quantizes V only with flash attention, which the caller sets.
    kind = getattr(xllamacpp.ggml_type, f"GGML_TYPE_{_choice(value, KV_TYPES).upper()}")
    params.cache_type_k = kind
    params.cache_type_v = kind


def _speculative(params: Any, xllamacpp: Any, value: str) -> None:
    name = _choice(value, SPECULATIVE_TYPES).upper().replace("-", "_")
    params.speculative.types = [getattr(xllamacpp.common_speculative_type, f"COMMON_SPECULATIVE_TYPE_{name}")]


def _field(name: str, convert: Callable[[str], Any]) -> Callable[[Any, Any, str], None]:
    def apply(params: Any, xllamacpp: Any, value: str) -> None:
        setattr(params, name, convert(value))

    return apply


def _boolean(value: str) -> bool:
    return {"on": True, "off": False}[_choice(value, ("on", "off"))]


def _choice(value: str, choices: Iterable[str]) -> str:
    allowed = tuple(choices)
    if value not in allowed:
        raise ValueError(f"expected one of {', '.join(allowed)}, got {value!r}")
    return value


SETTINGS: Mapping[str, Callable[[Any, Any, str], None]] = {
    "threads": _threads,
    "batch": _field("n_batch", int),
    "ubatch": _field("n_ubatch", int),
    "parallel": _field("n_parallel", int),
    "context": _field("n_ctx", int),
    "flash_attention": _flash_attention,
    "prompt_cache": _field("cache_prompt", _boolean),
    "kv_cache": _kv_type,
    "speculative": _speculative,
    "rope_freq_base": _field("rope_freq_base", float),
    "rope_freq_scale": _field("rope_freq_scale", float),
}


def parse_param(text: str) -> tuple[str, str]:
    """`NAME=VALUE` -> (NAME, VALUE); ValueError naming the known settings otherwise."""
    name, separator, value = text.partition("=")
    if not separator or name not in SETTINGS or not value:
        raise ValueError(f"expected NAME=VALUE with NAME one of {', '.join(SETTINGS)}, got {text!r}")
    return name, value


def apply_params(params: Any, xllamacpp: Any, settings: Iterable[str]) -> None:
    """Set each `NAME=VALUE` on `params` (an `xllamacpp.CommonParams`), in order."""
    for text in settings:
        name, value = parse_param(text)
        try:
            SETTINGS[name](params, xllamacpp, value)
        except (ValueError, KeyError) as error:
            raise ValueError(f"llama.cpp setting {text!r}: {error}") from None
