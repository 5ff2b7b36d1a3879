"""A llama.cpp deployment as a run records it: llama.cpp's `/props` (its build, model file,
slots, context and default sampling) and the launch settings given with `--k3-server-args`
(flash attention, KV cache type, RoPE scaling, threads..., which `/props` does not report).

SGLang's shape settings (widths, MoE path, state dtype) do not exist in llama.cpp, so the gate
cannot read a llama.cpp run's shape from them; when both runs are llama.cpp deployments whose
launch settings were recorded, these two records are the whole deployment identity and the gate
compares them field by field instead (gate/policy.py). Kimi K3's own long-output suites stay
required when the model served is, or may be, a Kimi model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LlamaCppDeployment", "llamacpp_deployment"]

# Where the preflight stores llama.cpp's `/props` in the run's server information.
PROPS_KEY = "props"
# A model whose name says this gets Kimi K3's required suites wherever it is served.
_KIMI = "kimi"


@dataclass(frozen=True)
class LlamaCppDeployment:
    """What a run recorded about the llama.cpp server it ran against."""

    model_path: str | None  # the GGUF file, from /props
    launch_args: Mapping[str, Any]  # the --k3-server-args arguments ({} for llama.cpp's defaults)

    def may_serve_kimi(self, model_id: str | None) -> bool:
        """Whether the model may be a Kimi model: the served model id or the GGUF file names
        Kimi, or the file is not known (an alias alone does not rule Kimi out)."""
        if self.model_path is None:
            return True
        return any(_KIMI in name.lower() for name in (self.model_path, model_id or ""))

    @property
    def described(self) -> str:
        launched = ", ".join(f"{name}={value}" for name, value in sorted(self.launch_args.items()))
        return f"llama.cpp, launched with {launched or 'its defaults'}"


def llamacpp_deployment(
    server_info: Mapping[str, Any] | None, launch: Mapping[str, Any] | None
) -> LlamaCppDeployment | None:
    """The llama.cpp deployment a run recorded, or None when the run does not show one whole:
    the server answered llama.cpp's `/props` (and nothing that reports SGLang arguments), and
    its launch settings were recorded as a mapping of arguments."""
    if not isinstance(server_info, Mapping) or set(server_info) - {PROPS_KEY, "version"}:
        return None
    props = server_info.get(PROPS_KEY)
    if not isinstance(props, Mapping) or not isinstance(launch, Mapping):
        return None
    args = launch.get("args")
    if not isinstance(args, Mapping):
        return None
    model_path = props.get("model_path")
    return LlamaCppDeployment(model_path if isinstance(model_path, str) and model_path else None, args)
