"""A small kernel of our own, declared for the devkit workflow: ``out = 2 * x + y`` over a [R, N] array.

``scaled_add`` tiles the rows by the partition size (128) and the columns by ``tile_n`` (its config,
tuned by ``devkit tune``); ragged edges are masked.  ``scaled_add_narrow`` is the same computation with
a fixed 128-column tile, declared as its baseline for ``devkit sweep``.
"""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

import devkit


def reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``2 x + y`` in fp32, cast to the input dtype."""
    return (2.0 * x.astype(np.float32) + y.astype(np.float32)).astype(x.dtype)


def _scaled_add(x, y, out, tile_n):
    rows, cols = x.shape
    p = nl.tile_size.pmax
    for i in nl.affine_range((rows + p - 1) // p):
        for j in nl.affine_range((cols + tile_n - 1) // tile_n):
            ip = i * p + nl.arange(p)[:, None]
            jf = j * tile_n + nl.arange(tile_n)[None, :]
            inside = (ip < rows) & (jf < cols)
            a = nl.load(x[ip, jf], mask=inside)
            b = nl.load(y[ip, jf], mask=inside)
            nl.store(out[ip, jf], value=nl.add(nl.multiply(a, 2.0, mask=inside), b, mask=inside), mask=inside)


SHAPE = {"R": 256, "N": 2048}


@devkit.declare_kernel(
    reference=reference,
    arg_shapes=lambda s: [(s["R"], s["N"]), (s["R"], s["N"])],
    default_shape=SHAPE,
    shape_space={"R": (1, 300), "N": (1, 1500)},
    tolerances={"float32": 1e-6, "bfloat16": 1e-2},
    dtypes=("float32", "bfloat16"),
    block_params={"tile_n": (128, 256, 512, 1024, 2048)},
    defaults={"tile_n": 512},
    constraint=lambda shape, cfg, dtype, target: (
        cfg["tile_n"] <= 2 * shape["N"] or f"tile_n={cfg['tile_n']} is over twice N={shape['N']}"
    ),
    sweep=devkit.Sweep("N", (512, 2048, 8192, 32768), {"R": 1024}, dtype="bfloat16"),
    baselines=("scaled_add_narrow",),
)
@nki.jit
def scaled_add(x, y, tile_n=512):
    """2 x + y, column tiles of ``tile_n``."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    _scaled_add(x, y, out, tile_n)
    return out


@nki.jit
def narrow(x, y):
    """2 x + y, fixed 128-column tiles (the baseline)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    _scaled_add(x, y, out, 128)
    return out


scaled_add_narrow = devkit.register(
    devkit.KernelSpec(
        name="scaled_add_narrow",
        kernel=narrow,
        reference=reference,
        arg_shapes=lambda s: [(s["R"], s["N"]), (s["R"], s["N"])],
        default_shape=SHAPE,
        tolerances={"float32": 1e-6, "bfloat16": 1e-2},
        dtypes=("float32", "bfloat16"),
    )
)
