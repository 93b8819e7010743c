"""``neuronxcc.nki.language.constants``: constants and helpers of the Beta-1 language module that kernels
import from this submodule (nki-samples 0898a77 ``contributed/neuron-team-kernels/conv.py`` and
``reference/rmsnorm_quant/rmsnorm_quant_constants.py`` import ``sizeinbytes`` from it)."""

from __future__ import annotations

from typing import Any

from devkit.dtype_names import itemsize


def sizeinbytes(dtype: Any) -> int:
    """Bytes per element of ``dtype`` (an NKI dtype, NumPy dtype or dtype name)."""
    return itemsize(dtype)


__all__ = ["sizeinbytes"]
