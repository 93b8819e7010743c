"""Beta-1 submodules real kernels import exist under the simulator (nki-samples 0898a77
``contributed/neuron-team-kernels/conv.py`` and ``reference/rmsnorm_quant`` import
``neuronxcc.nki.language.constants.sizeinbytes``)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest


def test_language_constants_sizeinbytes():
    import neuronxcc.nki.language as nl
    from neuronxcc.nki.language.constants import sizeinbytes

    assert sizeinbytes(np.float32) == 4
    assert sizeinbytes(nl.bfloat16) == 2
    assert sizeinbytes(ml_dtypes.float8_e4m3) == 1
    assert sizeinbytes(nl.int32) == 4
    with pytest.raises(ValueError, match="dtype"):
        sizeinbytes("not-a-dtype")
