"""A graded regression of a real model: SmolLM2's GGUF with every quantized weight block
scaled by its own random factor 1 + strength * z (z standard normal, one per block of 32
weights), written to a new file with the `gguf` package.

Why block scales and not dequantize-add-requantize: the model is Q4_1 (each block of 32
weights is d * q + m with 4-bit q), and requantizing noisy weights to 4 bits rounds small
noise away and adds its own quantization error, so strength 0 would not be the original
model. Scaling a block's d and m by one factor scales each of its weights by exactly that
factor (up to the f16 rounding of d and m, 0.05% relative), so strength 0 is the original
file bit for bit and the strength is the weights' relative perturbation. Norm weights
(F32) are left alone. The file is written where the caller says (a temporary folder):
perturbed models are never committed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

# Bytes per block and where its f16 fields sit: Q4_1 is d, m, 16 bytes of nibbles; Q8_0 is d, 32 int8.
_BLOCKS = {"Q4_1": (20, (0, 2)), "Q8_0": (34, (0,))}


def perturb_model(source: Path, destination: Path, strength: float, seed: int) -> int:
    """Copy `source` to `destination` and scale its quantized blocks; returns how many blocks."""
    import gguf

    shutil.copyfile(source, destination)
    reader = gguf.GGUFReader(str(destination), "r+")
    rng = np.random.default_rng(seed)
    blocks = 0
    for tensor in reader.tensors:
        layout = _BLOCKS.get(tensor.tensor_type.name)
        if layout is None:
            continue
        size, offsets = layout
        raw = tensor.data.reshape(-1, size)
        factors = (1.0 + strength * rng.standard_normal(raw.shape[0])).astype(np.float32)
        for offset in offsets:
            field = raw[:, offset : offset + 2].copy().view(np.float16).reshape(-1)
            raw[:, offset : offset + 2] = (
                (field.astype(np.float32) * factors).astype(np.float16).view(np.uint8).reshape(-1, 2)
            )
        blocks += raw.shape[0]
    reader.data.flush()
    return blocks
