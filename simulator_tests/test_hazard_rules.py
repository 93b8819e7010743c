"""Issue 3, program rules the NKI compiler enforces: kernel inputs are immutable, a tensor created in a
loop body dies with its iteration, masks combine with ``&`` (never Python ``and``/``or``), ``nl.arange``
indices are lifted to 2-D, and one index never mixes slices with arange expressions.

Negative tests assert the class, the rule code and the blamed line (``# <- blame``); each has a twin.
"""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from _nki_support import simulate_raises

import devkit
from devkit.errors import ImmutableInputError, IndexingError, KernelError, ScopeError

A = np.linspace(-1, 1, 128 * 512, dtype=np.float32).reshape(128, 512)


def raises(cls, rule, kernel, *args, **kw):
    return simulate_raises(cls, kernel, *args, rule=rule, **kw)


# ---- kernel inputs are immutable -------------------------------------------------------------------------


@nki.jit
def store_into_the_input(a):
    x = nl.load(a)
    nl.store(a, value=nl.exp(x))  # <- blame
    return a


@nki.jit
def assign_into_the_input(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    a[0:64, :] = x[0:64, :]  # <- blame
    nl.store(out, value=x)
    return out


@nki.jit
def dma_into_the_input(a):
    x = nl.load(a)
    nisa.dma_copy(dst=a, src=x)  # <- blame
    return a


@nki.jit
def store_into_a_new_output(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.exp(nl.load(a)))
    return out


@pytest.mark.parametrize(
    "kernel", [store_into_the_input, assign_into_the_input, dma_into_the_input], ids=lambda k: k.__name__
)
def test_writing_a_kernel_input_is_an_error(kernel):
    a = A.copy()
    err = raises(ImmutableInputError, "immutable-input", kernel, a)
    assert "'a'" in str(err) and "shared_hbm" in str(err)
    np.testing.assert_array_equal(a, A)  # the host array is untouched


def test_writing_a_new_output_instead():
    np.testing.assert_allclose(devkit.simulate(store_into_a_new_output, A), np.exp(A), rtol=1e-6)


def test_mutable_tensor_parameters_are_writable():
    @nki.jit
    def k(a, acc: nt.mutable_tensor):
        nl.store(acc, value=nl.add(nl.load(acc), nl.load(a)))
        return acc

    acc = np.ones_like(A)
    np.testing.assert_allclose(devkit.simulate(k, A, acc), A + 1)


def test_legacy_kernels_that_return_nothing_write_their_output_arguments():
    def k(a, out):  # the pre-2.21 calling convention: outputs are passed in
        nl.store(out, value=nl.multiply(nl.load(a), 2.0))

    out = np.zeros_like(A)
    devkit.simulate(k, A, out)
    np.testing.assert_allclose(out, 2 * A)


# ---- a tensor lives in the loop body that created it ----------------------------------------------------


@nki.jit
def use_after_the_loop(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for _i in nl.affine_range(2):
        x = nl.load(a)
    nl.store(out, value=x)  # <- blame
    return out


@nki.jit
def carry_by_assignment(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)  # allocated before the loop
    for _i in nl.sequential_range(2):
        x[...] = nl.load(a)
    nl.store(out, value=x)
    return out


@nki.jit
def use_in_the_next_iteration(a):
    out = nl.ndarray((2, 128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    prev = None
    for i in nl.static_range(2):
        if prev is not None:
            nl.store(out[i], value=prev)  # <- blame
        prev = nl.load(a)
    return out


def test_using_a_loop_local_tensor_after_its_iteration():
    err = raises(ScopeError, "out-of-scope", use_after_the_loop, A)
    assert "created at" in str(err)
    raises(ScopeError, "out-of-scope", use_in_the_next_iteration, A)
    np.testing.assert_array_equal(devkit.simulate(carry_by_assignment, A), A)


# ---- masks combine with & --------------------------------------------------------------------------------


@nki.jit
def mask_with_and(a):
    out = nl.ndarray((64, 100), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    x = nl.load(a[i_p, i_f], mask=(i_p < 64 and i_f < 100))  # <- blame
    nl.store(out[i_p, i_f], value=x, mask=(i_p < 64) & (i_f < 100))
    return out


@nki.jit
def mask_with_or(a):
    out = nl.ndarray((64, 100), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    x = nl.load(a[i_p, i_f], mask=(i_p >= 64 or i_f >= 100))  # <- blame
    nl.store(out[i_p, i_f], value=x, mask=(i_p < 64) & (i_f < 100))
    return out


@nki.jit
def mask_with_not(a):
    out = nl.ndarray((64, 100), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    x = nl.load(a[i_p, i_f], mask=not (i_p >= 64))  # <- blame
    nl.store(out[i_p, i_f], value=x, mask=(i_p < 64) & (i_f < 100))
    return out


@nki.jit
def mask_with_ampersand(a):
    out = nl.ndarray((64, 100), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    x = nl.load(a[i_p, i_f], mask=(i_p < 64) & (i_f < 100))
    nl.store(out[i_p, i_f], value=x, mask=(i_p < 64) & (i_f < 100))
    return out


@pytest.mark.parametrize("kernel", [mask_with_and, mask_with_or, mask_with_not], ids=lambda k: k.__name__)
def test_masks_combined_with_python_logic(kernel):
    err = raises(IndexingError, "mask-python-logic", kernel, A)
    assert "&" in str(err)


def test_masks_combined_with_ampersand():
    np.testing.assert_array_equal(devkit.simulate(mask_with_ampersand, A), A[:64, :100])


# ---- arange indices must be 2-D; no slices mixed with aranges --------------------------------------------


@nki.jit
def one_d_arange(a):
    out = nl.ndarray((64, 1), dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.arange(64)
    x = nl.load(a[i, 0])  # <- blame
    nl.store(out, value=x)
    return out


@nki.jit
def two_d_arange(a):
    out = nl.ndarray((64, 1), dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.arange(64)[:, None]
    x = nl.load(a[i, 0])
    nl.store(out, value=x)
    return out


def test_one_d_arange_index():
    raises(IndexingError, "1d-arange", one_d_arange, A)
    np.testing.assert_array_equal(devkit.simulate(two_d_arange, A), A[:64, 0:1])


@nki.jit
def slice_and_arange(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    x = nl.load(a[i_p, 0:512])  # <- blame
    nl.store(out, value=x)
    return out


@nki.jit
def arange_and_integer(a):
    out = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    x = nl.load(a[i_p, 7])  # integers (and loop variables) mix with aranges
    nl.store(out, value=x)
    return out


def test_mixing_basic_and_advanced_indexing():
    raises(IndexingError, "mixed-indexing", slice_and_arange, A)
    np.testing.assert_array_equal(devkit.simulate(arange_and_integer, A), A[:, 7:8])


def test_every_rule_here_is_a_kernel_error():
    for cls in (ImmutableInputError, ScopeError, IndexingError):
        assert issubclass(cls, KernelError)
