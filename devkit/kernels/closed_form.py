"""Tuner hooks of the NeuronMM kernels: closed-form data movement of a block choice, and the block choice
as the kernel clamps it to a shape (declared as ``movement`` / ``canonical`` in :mod:`devkit.kernels.registry`).

``movement(name)(shape, blocks, dtype, target)`` gives the FLOPs and HBM bytes of one call (a
:class:`devkit.cost.closed_form.Movement`, bytes and FLOPs); ``canonical(name)(shape, blocks)`` gives the
blocks with the clamps of :mod:`devkit.kernels.plans` applied (token blocks to S, ``block_m`` to M, chunks to the
128-row tiles of their contraction), so two candidates with equal canonical blocks are one configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from devkit.dtype_names import itemsize

_XUV = ("xuv_fused", "xuv_fused_t", "xtuv_fused")


def _xuv_movement(s: int, h: int, r: int, n: int, blocks: Mapping[str, int], dtype: str, target: str) -> Any:
    from devkit.cost.closed_form import fused_xuv

    bt = min(blocks.get("block_tokens", s), s)
    return fused_xuv(s, h, r, n, block_tokens=bt, dtype=dtype, target=target)


def _svd_mlp(shape: Mapping[str, int], blocks: Mapping[str, int], dtype: str, target: str) -> Any:
    s, h, i, r = shape["S"], shape["H"], shape["I"], shape["r"]
    gate = _xuv_movement(s, h, r, i, blocks, dtype, target)
    up = _xuv_movement(s, h, r, i, blocks, dtype, target)
    down = _xuv_movement(s, i, r, h, blocks, dtype, target)
    x_bytes = s * h * itemsize(dtype)  # gate and up share one read of X
    act_bytes = s * i * itemsize(dtype)  # ... and write one activation
    total = gate + up + down
    return type(total)(
        total.flops,
        total.hbm_read_bytes - x_bytes,
        total.hbm_write_bytes - act_bytes,
        total.sbuf_bytes,
        total.spill_bytes,
    )


def _matmul(shape: Mapping[str, int], blocks: Mapping[str, int], dtype: str, target: str) -> Any:
    from devkit.cost.closed_form import blocked_matmul

    k, m, n = shape["K"], shape["M"], shape["N"]
    return blocked_matmul(
        k, m, n, dtype=dtype, block_m=min(blocks.get("block_m", m), m), reuse="lhsT", target=target
    )


def _dense_mlp(shape: Mapping[str, int], blocks: Mapping[str, int], dtype: str, target: str) -> Any:
    from devkit.cost.closed_form import blocked_matmul

    s, h, i = shape["S"], shape["H"], shape["I"]
    bt = min(blocks.get("block_tokens", s), s)
    gate_up = blocked_matmul(h, s, 2 * i, dtype=dtype, block_m=bt, reuse="lhsT", target=target)
    down = blocked_matmul(i, s, h, dtype=dtype, block_m=bt, reuse="lhsT", target=target)
    return gate_up + down


def _xuv(shape: Mapping[str, int], blocks: Mapping[str, int], dtype: str, target: str) -> Any:
    return _xuv_movement(shape["S"], shape["H"], shape["r"], shape["N"], blocks, dtype, target)


def movement(name: str) -> Callable[..., Any] | None:
    """The closed-form movement hook of kernel ``name`` (None: no closed form)."""
    if name in _XUV:
        return _xuv
    return {"svd_mlp": _svd_mlp, "matmul_optimized": _matmul, "dense_mlp": _dense_mlp}.get(name)


def _tiles(n: int) -> int:
    return -(-n // 128)


def canonical(name: str) -> Callable[[Mapping[str, int], Mapping[str, int]], dict[str, int]]:
    """The clamping hook of kernel ``name`` (see the module docstring)."""

    def clamp(shape: Mapping[str, int], blocks: Mapping[str, int]) -> dict[str, int]:
        out = dict(blocks)
        if "S" in shape:
            for key in ("block_tokens", "stage1_tokens"):
                if key in out:
                    out[key] = min(out[key], shape["S"])
            if "stage1_tokens" in out and "block_tokens" in out:
                out["stage1_tokens"] = min(out["stage1_tokens"], out["block_tokens"])
        if name in _XUV:
            for key, dim in (("u_chunk_tiles", "H"), ("v_chunk_tiles", "r")):
                if key in out:
                    out[key] = min(out[key], _tiles(shape[dim]))
        if name == "matmul_optimized":
            if "block_m" in out:
                out["block_m"] = min(out["block_m"], shape["M"])
            if "k_chunk_tiles" in out:
                out["k_chunk_tiles"] = min(out["k_chunk_tiles"], _tiles(shape["K"]))
        return out

    return clamp
