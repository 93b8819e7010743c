"""Issue 3, ``affine_range`` races: iterations writing overlapping locations, or reading what another
iteration writes, are a RaceError naming both statements and the iteration pair.  Associative in-place
reductions (``psum += nc_matmul``, ``sbuf += x``: NKI allows "associative reductions") are not races;
reading a partially reduced value in the loop is.  ``SimOptions(affine_order="shuffled")`` executes the
iterations in a random order as a second line of defence.
"""

from __future__ import annotations

import inspect

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import assert_blames, line_of, simulate_raises

import devkit
from devkit.errors import RaceError
from devkit.sim.options import SimOptions

A = np.linspace(-1, 1, 128 * 512, dtype=np.float32).reshape(128, 512)
SHUFFLED = SimOptions(affine_order="shuffled", seed=3)


def raises_race(kernel, *args, other: str, **kw) -> RaceError:
    """The race is blamed on the ``# <- blame`` line and names the ``other`` marked statement."""
    err = simulate_raises(RaceError, kernel, *args, rule="affine-race", **kw)
    src = inspect.getsourcefile(kernel.func)
    assert f"{src}:{line_of(kernel, other)} (iteration" in str(err)
    return err


# ---- write / write -----------------------------------------------------------------------------------


@nki.jit
def every_iteration_stores_the_same_tile(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        x = nl.load(a)
        nl.store(out, value=nl.multiply(x, i))  # <- blame  # first write
    return out


@nki.jit
def every_iteration_stores_its_own_tile(a):
    out = nl.ndarray((4, 128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        x = nl.load(a)
        nl.store(out[i], value=nl.multiply(x, i))
    return out


def test_two_iterations_writing_one_location():
    err = raises_race(every_iteration_stores_the_same_tile, A, other="# first write")
    assert "iterations 0 and 1" in str(err) and "write the same location" in str(err)
    res = devkit.simulate(every_iteration_stores_its_own_tile, A)
    np.testing.assert_allclose(res, np.stack([A * i for i in range(4)]))


@nki.jit
def sbuf_buffer_shared_by_iterations(a):
    out = nl.ndarray((4, 128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)  # allocated outside the loop
    for i in nl.affine_range(4):
        t[...] = nl.load(a)  # <- blame
        nl.store(out[i], value=t)
    return out


@nki.jit
def sbuf_buffer_per_iteration(a):
    out = nl.ndarray((4, 128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)  # one per iteration
        t[...] = nl.load(a)
        nl.store(out[i], value=t)
    return out


def test_a_tile_allocated_outside_the_loop_is_shared_by_all_iterations():
    raises_race(sbuf_buffer_shared_by_iterations, A, other="# <- blame")
    np.testing.assert_array_equal(devkit.simulate(sbuf_buffer_per_iteration, A), np.stack([A] * 4))


# ---- read / write across iterations ------------------------------------------------------------------------


@nki.jit
def reads_the_previous_iterations_block(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    buf = nl.zeros((4, nl.par_dim(128), 512), dtype=a.dtype)
    for i in nl.affine_range(3):
        prev = nl.exp(buf[i])  # <- blame
        buf[i + 1] = nl.add(prev, 1.0)  # the write
    nl.store(out, value=buf[3])
    return out


@nki.jit
def reads_the_previous_iterations_block_sequential(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    buf = nl.zeros((4, nl.par_dim(128), 512), dtype=a.dtype)
    for i in nl.sequential_range(3):
        prev = nl.exp(buf[i])
        buf[i + 1] = nl.add(prev, 1.0)
    nl.store(out, value=buf[3])
    return out


def test_read_after_write_across_iterations_and_the_sequential_twin():
    err = raises_race(reads_the_previous_iterations_block, A, other="# the write")
    assert "iterations 0 and 1" in str(err) and "writes at" in str(err) and "reads here" in str(err)
    x = np.zeros((128, 512), np.float32)
    for _ in range(3):
        x = np.exp(x) + 1
    np.testing.assert_allclose(
        devkit.simulate(reads_the_previous_iterations_block_sequential, A), x, rtol=1e-5
    )


@nki.jit
def overwrites_what_an_earlier_iteration_read(a):
    out = nl.ndarray((3, 128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    buf = nl.zeros((3, nl.par_dim(128), 512), dtype=a.dtype)
    for i in nl.affine_range(2):
        y = nl.exp(buf[2 - 2 * i])  # the read: iteration 0 reads block 2, iteration 1 block 0
        buf[i + 1] = y  # <- blame  (iteration 1 overwrites block 2)
    for i in nl.affine_range(3):
        nl.store(out[i], value=buf[i])
    return out


def test_write_after_read_across_iterations():
    err = raises_race(overwrites_what_an_earlier_iteration_read, A, other="# the read")
    assert "reads at" in str(err) and "writes here" in str(err)


@nki.jit
def nested_loops_race_on_the_outer_loop(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        for j in nl.affine_range(2):
            x = nl.load(a[:, j * 256 : (j + 1) * 256])
            nl.store(out[:, j * 256 : (j + 1) * 256], value=nl.multiply(x, i + 1))  # <- blame
    return out


@nki.jit
def nested_loops_sequential_outer(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.sequential_range(2):
        for j in nl.affine_range(2):
            x = nl.load(a[:, j * 256 : (j + 1) * 256])
            nl.store(out[:, j * 256 : (j + 1) * 256], value=nl.multiply(x, i + 1))
    return out


def test_nested_loops_report_the_level_and_iterations_of_the_conflict():
    err = raises_race(nested_loops_race_on_the_outer_loop, A, other="# <- blame")
    assert "affine nesting level 0" in str(err) and "iterations 0 and 1" in str(err)
    np.testing.assert_allclose(devkit.simulate(nested_loops_sequential_outer, A), 2 * A)


# ---- reductions -----------------------------------------------------------------------------------------


@nki.jit
def psum_accumulation_over_k(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(4):
        x = nl.load(a[:, k * 128 : (k + 1) * 128])
        y = nl.load(a)
        ps += nisa.nc_matmul(x, y)
    nl.store(out, value=nl.copy(ps))
    return out


@nki.jit
def sbuf_accumulation_over_states(a):
    """The fused-mamba tutorial pattern: scanC_accum[...] += scanC in an affine_range."""
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), dtype=nl.float32)
    for s in nl.affine_range(4):
        x = nl.load(a)
        acc[0:128, 0:512] += nl.multiply(x, s)
    nl.store(out, value=acc)
    return out


def test_associative_reductions_are_not_races():
    want = sum(A[:, k * 128 : (k + 1) * 128].T @ A for k in range(4))
    np.testing.assert_allclose(devkit.simulate(psum_accumulation_over_k, A), want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(
        devkit.simulate(psum_accumulation_over_k, A, options=SHUFFLED), want, rtol=1e-4, atol=1e-3
    )
    np.testing.assert_allclose(devkit.simulate(sbuf_accumulation_over_states, A), 6 * A, rtol=1e-6)
    np.testing.assert_allclose(
        devkit.simulate(sbuf_accumulation_over_states, A, options=SHUFFLED), 6 * A, rtol=1e-6
    )


@nki.jit
def reads_a_partial_sum(a):
    out = nl.ndarray((4, 128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), dtype=nl.float32)
    for s in nl.affine_range(4):
        acc += nl.load(a)  # <- blame
        nl.store(out[s], value=acc)  # the read
    return out


@nki.jit
def reduction_written_as_a_plain_assignment(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), dtype=nl.float32)
    for _s in nl.affine_range(4):
        acc[...] = nl.add(acc, nl.load(a))  # <- blame
    nl.store(out, value=acc)
    return out


@nki.jit
def two_kinds_of_update(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.ones((128, 512), dtype=nl.float32)
    for _s in nl.affine_range(2):
        acc += nl.load(a)  # <- blame  (iteration 1 adds to what iteration 0 multiplied)
        acc *= 2.0  # the multiply
    nl.store(out, value=acc)
    return out


def test_reading_or_mixing_partial_reductions_is_a_race():
    raises_race(reads_a_partial_sum, A, other="# the read")
    raises_race(reduction_written_as_a_plain_assignment, A, other="# <- blame")
    err = raises_race(two_kinds_of_update, A, other="# the multiply")
    assert "(mul reduction)" in str(err) and "(add reduction)" in str(err)


# ---- exact overlap: interleaved and gathered accesses ---------------------------------------------------


@nki.jit
def interleaved_columns(a):
    out = nl.ndarray((128, 1024), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    for j in nl.affine_range(2):
        x = nl.load(a)
        nl.store(out[i_p, 2 * i_f + j], value=nl.multiply(x, j + 1))
    return out


@nki.jit
def overlapping_strided_columns(a):
    out = nl.ndarray((128, 1026), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    for j in nl.affine_range(2):
        x = nl.load(a)
        nl.store(out[i_p, 2 * i_f + 2 * j], value=x)  # <- blame
    return out


def test_interleaved_strided_writes_are_disjoint_but_shifted_ones_overlap():
    res = devkit.simulate(interleaved_columns, A)
    np.testing.assert_allclose(res[:, 0::2], A)
    np.testing.assert_allclose(res[:, 1::2], 2 * A)
    raises_race(overlapping_strided_columns, A, other="# <- blame")


@nki.jit
def scatter_per_iteration(a, idx):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(512)[None, :]
    for j in nl.affine_range(2):
        rows = nl.load(idx[j])
        x = nl.load(a[j * 64 : (j + 1) * 64, :])
        nl.store(out[rows[i_p, 0], i_f], value=x)  # <- blame
    return out


def test_scatters_are_compared_element_by_element():
    perm = np.random.default_rng(1).permutation(128).astype(np.int32).reshape(2, 64, 1)
    res = devkit.simulate(scatter_per_iteration, A, perm)
    np.testing.assert_array_equal(res[perm.reshape(-1)], A)
    clash = perm.copy()
    clash[1, 10, 0] = clash[0, 5, 0]
    raises_race(scatter_per_iteration, A, clash, other="# <- blame")


# ---- shuffled execution order ---------------------------------------------------------------------------


def test_shuffled_order_runs_every_iteration_in_a_permuted_order():
    order: list[int] = []

    @nki.jit
    def k(a):
        out = nl.ndarray((16, 128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(16):
            order.append(i)
            nl.store(out[i], value=nl.multiply(nl.load(a), i))
        return out

    res = devkit.simulate(k, A, options=SHUFFLED)
    assert sorted(order) == list(range(16)) and order != list(range(16))
    np.testing.assert_allclose(res, np.stack([A * i for i in range(16)]))


def test_shuffled_order_still_reports_races_with_the_iterations_it_ran():
    with pytest.raises(RaceError) as e:
        devkit.simulate(every_iteration_stores_the_same_tile, A, options=SHUFFLED)
    assert_blames(e, every_iteration_stores_the_same_tile)


def test_shuffling_exposes_a_dependency_when_the_race_checker_is_off():
    @nki.jit
    def running_sum(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.zeros((9, nl.par_dim(128), 512), dtype=nl.float32)
        for i in nl.affine_range(8):  # a loop-carried dependency: should be sequential_range
            buf[i + 1] = nl.add(buf[i], i)
        nl.store(out, value=buf[8])
        return out

    in_order = devkit.simulate(running_sum, A, options=SimOptions(check_races=False))
    np.testing.assert_array_equal(in_order, 28.0)
    shuffled = devkit.simulate(
        running_sum, A, options=SimOptions(check_races=False, affine_order="shuffled", seed=3)
    )
    assert not np.array_equal(shuffled, in_order)
    with pytest.raises(RaceError):
        devkit.simulate(running_sum, A)


def test_checks_off_lets_a_racy_kernel_run():
    devkit.simulate(every_iteration_stores_the_same_tile, A, options=SimOptions(check_races=False))
