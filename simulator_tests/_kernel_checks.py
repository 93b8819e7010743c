"""Shared by the kernel property tests of both NKI generations (test_kernels.py, test_kernels_beta2.py,
test_kernels_mlp.py): shape and block strategies biased towards tile edges, the reference check of a
registry kernel, and the cost-only runs that look at what a kernel issues.

Shapes are dicts of dimension name -> size (elements), as :mod:`devkit.kernels.registry` takes them.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import devkit
from devkit.kernels import plans, registry
from devkit.nki.runner import run_kernel
from devkit.sim.options import SimOptions
from devkit.trace import Trace

#: a PSUM bank's worth of columns and its neighbours: the edges of a moving free dimension
N_EDGES = (1, 511, 512, 513)

#: the fused X.U.V block parameters (every one given)
XUV_BLOCKS = st.fixed_dictionaries(
    {
        "block_tokens": st.sampled_from([128, 256, 384]),
        "stage1_tokens": st.sampled_from([128, 256]),
        "u_chunk_tiles": st.sampled_from([1, 2, 3]),
        "v_chunk_tiles": st.sampled_from([1, 2, 3]),
        "psum_banks": st.sampled_from([2, 4, 8]),
    }
)


def dim(hi: int, edges: tuple[int, ...] = (1, 127, 128, 129)) -> st.SearchStrategy[int]:
    """A dimension in [1, hi], biased towards tile edges."""
    return st.one_of(st.sampled_from([e for e in edges if e <= hi]), st.integers(1, hi))


def dense_shapes(hi_k: int, hi_m: int, hi_n: int) -> st.SearchStrategy[dict[str, int]]:
    """``{"K", "M", "N"}`` of a dense matmul, each up to its bound, N biased to PSUM-bank edges."""
    return st.fixed_dictionaries({"K": dim(hi_k), "M": dim(hi_m), "N": dim(hi_n, N_EDGES)})


def optional_blocks(**choices: list[int]) -> st.SearchStrategy[dict[str, int]]:
    """Block parameters each drawn from its choices or left to the kernel's default (absent)."""
    draws = {key: st.sampled_from([None, *values]) for key, values in choices.items()}
    return st.fixed_dictionaries(draws).map(lambda d: {k: v for k, v in d.items() if v is not None})


#: ``{"K", "M", "N"}`` of the dense baselines (tiled, hoisted, blocked) of either generation
BASELINE_SHAPES = dense_shapes(300, 300, 700)
#: ``{"K", "M", "N"}`` of matmul_optimized of either generation (several row blocks and PSUM banks)
OPTIMIZED_SHAPES = dense_shapes(400, 400, 1100)

#: matmul_optimized's blocks, each optional
OPTIMIZED_BLOCKS = optional_blocks(block_m=[128, 256, 384], k_chunk_tiles=[1, 2, 3], psum_banks=[1, 2, 4, 8])


def check_inputs(name: str, inputs: tuple[np.ndarray, ...], dtype: str, **blocks: int) -> np.ndarray:
    """Simulate registry kernel ``name`` on ``inputs``; assert the reference's shape, the input dtype and
    an error within the kernel's tolerance for ``dtype``.  Returns the output."""
    spec = registry.get(name)
    out = devkit.simulate(spec.kernel_object(), *inputs, **blocks)
    ref = spec.reference(*inputs)
    assert out.shape == ref.shape
    assert out.dtype == inputs[0].dtype, f"output dtype {out.dtype} != input dtype {inputs[0].dtype}"
    err = registry.max_error(out, ref)
    assert err <= spec.tolerance(dtype), (
        f"{name} {[a.shape for a in inputs]} {dtype} {blocks}: error {err:.3e}"
    )
    return out


def check(name: str, shape: dict[str, int], dtype: str, seed: int = 0, **blocks: int) -> np.ndarray:
    """:func:`check_inputs` on the kernel's seeded inputs for ``shape``."""
    return check_inputs(name, registry.get(name).make_inputs(shape, dtype, seed), dtype, **blocks)


def arg_specs(shapes: list[tuple[int, ...]], dtype: Any = ml_dtypes.bfloat16) -> list[Any]:
    """Tensor specs (shape, dtype, no data) for cost-only runs."""
    from devkit.nki import typing as nt

    return [nt.tensor[list(s), dtype] for s in shapes]


def trace_cost_only(
    kernel: Any, specs: Any, blocks: dict[str, int] | None = None, sink: Trace | None = None
) -> Trace:
    """The instructions a kernel (``@nki.jit`` object or its function) issues on ``specs``, cost-only."""
    sink = Trace() if sink is None else sink
    run_kernel(
        getattr(kernel, "func", kernel),
        tuple(specs),
        blocks or {},
        options=SimOptions(numerics=False),
        sink=sink,
    )
    return sink


#: the fields two traces of one kernel must agree on instruction by instruction
INSTR_FIELDS = ("id", "engine", "opcode", "lineno", "ins", "outs", "flops")


def assert_same_instructions(full: Trace, fast: Trace, extra: tuple[str, ...] = ()) -> None:
    """``fast`` issues the instructions of ``full``, equal in :data:`INSTR_FIELDS` and the ``extra`` fields
    (e.g. ``deps``, ``attrs``), in the same order."""
    assert len(fast.instrs) == len(full.instrs), f"{len(fast.instrs)} instructions, not {len(full.instrs)}"
    fields = INSTR_FIELDS + extra
    for a, b in zip(full.instrs, fast.instrs):
        want, got = (tuple(getattr(i, f) for f in fields) for i in (a, b))
        assert got == want, f"instruction {a.id} ({a.opcode}, line {a.lineno}) differs"


def assert_rejected_before_running(kernel: Any, specs: Any, blocks: dict[str, int], limit: str) -> Any:
    """Infeasible ``blocks`` raise a ``BlockError`` naming ``limit`` before the kernel issues anything;
    returns the pytest ``ExceptionInfo``."""
    sink = Trace()
    with pytest.raises(plans.BlockError, match=limit) as info:
        trace_cost_only(kernel, specs, blocks, sink=sink)
    assert not sink.instrs, "the kernel issued instructions before rejecting its blocks"
    return info


#: the fused X.U.V blocks, or (half the draws) the kernel's default blocks
XUV_OR_DEFAULT_BLOCKS = st.tuples(XUV_BLOCKS, st.booleans()).map(lambda b: {} if b[1] else b[0])


def shapes(**dims: st.SearchStrategy[int]) -> st.SearchStrategy[dict[str, int]]:
    """A shape dict drawn dimension by dimension (``S=dim(600), H=dim(300), ...``)."""
    return st.fixed_dictionaries(dims)


def reference_property(
    names: list[str],
    shape: st.SearchStrategy[dict[str, int]],
    *,
    max_examples: int,
    dtypes: list[str],
    blocks: st.SearchStrategy[dict[str, int]] | None = None,
    seed_dim: str | None = None,
) -> Any:
    """A hypothesis test (``max_examples`` examples): registry kernels ``names`` on drawn shapes, dtypes and
    blocks match their references (:func:`check`).  ``seed_dim`` names the dimension whose size seeds the
    inputs (default seed 0).  Assign the result to a ``test_*`` name in a test module."""

    blocks = st.just({}) if blocks is None else blocks

    @settings(max_examples=max_examples)
    @given(name=st.sampled_from(names), shape=shape, dtype=st.sampled_from(dtypes), blocks=blocks)
    def test(name: str, shape: dict[str, int], dtype: str, blocks: dict[str, int]) -> None:
        check(name, shape, dtype, shape[seed_dim] if seed_dim else 0, **blocks)

    return test


def fused_shapes(hi_s: int) -> st.SearchStrategy[dict[str, int]]:
    """``{"S", "H", "r", "N"}`` of a fused X.U.V kernel: tokens up to ``hi_s`` (decode and tile edges)."""
    return shapes(S=dim(hi_s, (1, 2, 127, 128, 129, 513)), H=dim(300), r=dim(300), N=dim(700, N_EDGES))


#: ``{"S", "H", "r", "N"}`` of the sequential X.U.V baseline
SEQUENTIAL_SHAPES = shapes(S=dim(600, (1, 129, 513)), H=dim(300), r=dim(200), N=dim(600, (1, 513)))
#: ``{"S", "H", "I", "r"}`` of the SVD MLP
SVD_MLP_SHAPES = shapes(S=dim(600, (1, 2, 128, 129, 513)), H=dim(300), I=dim(600, N_EDGES), r=dim(200))
#: ``{"S", "H", "I"}`` of the dense MLP
DENSE_MLP_SHAPES = shapes(S=dim(600, (1, 2, 128, 129, 513)), H=dim(300), I=dim(700, N_EDGES))
