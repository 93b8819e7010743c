"""SPMD launch grids (program_id / num_programs / program_ndim, kernel[g0, g1], simulate_kernel,
baremetal, nl.nc on trn2), loops (affine / sequential / static / Python range, every iteration executed),
and small language utilities (tile_size, static_cast, device_print, dtypes)."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import BF16, F32, FAST, assert_exact, rand, rng_of, seeds
from hypothesis import given
from hypothesis import strategies as st

import devkit
from devkit.errors import IndexingError


@nki.jit
def tensor_add_spmd(a_input, b_input):
    """The NKI 'tensor addition' tutorial: each program adds one 128x512 tile."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    offset_i_x = nl.program_id(0) * 128
    offset_i_y = nl.program_id(1) * 512
    ix = offset_i_x + nl.arange(128)[:, None]
    iy = offset_i_y + nl.arange(512)[None, :]
    a_tile = nl.load(a_input[ix, iy])
    b_tile = nl.load(b_input[ix, iy])
    c_tile = a_tile + b_tile
    nl.store(c_output[ix, iy], value=c_tile)
    return c_output


@FAST
@given(gx=st.integers(1, 3), gy=st.integers(1, 3), seed=seeds, dtype=st.sampled_from([F32, BF16]))
def test_tensor_addition_tutorial_spmd(gx, gy, seed, dtype):
    rng = rng_of(seed)
    a = rand(rng, (gx * 128, gy * 512), dtype)
    b = rand(rng, (gx * 128, gy * 512), dtype)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(dtype)
    assert_exact(tensor_add_spmd[gx, gy](a, b), want)
    assert_exact(nki.simulate_kernel(tensor_add_spmd[gx, gy], a, b), want)
    assert_exact(nki.simulate_kernel(nki.baremetal(tensor_add_spmd)[gx, gy], a, b), want)
    assert_exact(devkit.simulate(tensor_add_spmd, a, b, grid=(gx, gy)), want)


@FAST
@given(grid=st.lists(st.integers(1, 4), min_size=1, max_size=3))
def test_program_ids_cover_the_grid(grid):
    n = int(np.prod(grid))

    @nki.jit
    def k(a):
        out = nl.ndarray((n, 4 + len(grid)), dtype=nl.int32, buffer=nl.shared_hbm)
        lin = 0
        for ax in range(len(grid)):
            lin = lin * nl.num_programs(ax) + nl.program_id(ax)
        row = nl.ndarray((1, 4 + len(grid)), dtype=nl.int32, buffer=nl.sbuf)
        row[0:1, 0:1] = lin
        row[0:1, 1:2] = nl.num_programs()
        row[0:1, 2:3] = nl.program_ndim()
        row[0:1, 3:4] = nl.num_programs(axes=tuple(range(len(grid))))
        for ax in range(len(grid)):
            row[0:1, 4 + ax : 5 + ax] = nl.program_id(ax)
        nl.store(out[lin : lin + 1, :], value=row)
        return out

    got = k[tuple(grid)](np.zeros((1, 1), np.float32))
    ids = np.array(list(np.ndindex(*grid)))
    assert_exact(got[:, 0], np.arange(n, dtype=np.int32))
    assert (got[:, 1] == n).all() and (got[:, 2] == len(grid)).all() and (got[:, 3] == n).all()
    assert_exact(got[:, 4:], ids.astype(np.int32))


def test_program_id_without_grid_is_zero_and_axis_out_of_range_is_an_error():
    @nki.jit
    def k(a):
        out = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.sbuf)
        t[0:1, 0:1] = nl.program_id(0)
        t[0:1, 1:2] = nl.num_programs()
        nl.store(out, value=t)
        return out

    assert_exact(k(np.zeros((1, 1), np.float32)), np.array([[0, 1]], np.int32))

    @nki.jit
    def bad(a):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.program_id(2))
        return out

    with pytest.raises(IndexingError):
        bad[2, 2](np.zeros((1, 1), np.float32))


def test_lnc2_grid_on_trn2():
    """kernel[nl.nc(2), 2]: program_id along the NC axis ranges over 0..1; results as for a plain grid."""
    a = rand(rng_of(1), (256, 1024), F32)
    b = rand(rng_of(2), (256, 1024), F32)
    k = nki.jit(tensor_add_spmd.func, platform_target="trn2")
    assert_exact(k[nl.nc(2), 2](a, b), a + b)
    assert_exact(k[nl.spmd_dim(nl.nc(2), 1), 2](a, b), a + b)


def test_legacy_calling_convention_writes_outputs_in_place():
    """Pre-2.21 kernels take the output as an argument and return nothing."""
    a = rand(rng_of(3), (64, 32), F32)
    out = np.zeros((64, 32), np.float32)

    def k(a_in, c_out):
        nl.store(c_out, value=nl.exp(nl.load(a_in)))

    nki.simulate_kernel(k, a, out)
    np.testing.assert_allclose(out, np.exp(a), rtol=1e-6)


# ---- loops ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["affine_range", "sequential_range", "static_range", "range"])
@FAST
@given(start=st.integers(0, 3), stop=st.integers(0, 9), step=st.integers(1, 3))
def test_loops_execute_every_iteration(kind, start, stop, step):
    iters = list(range(start, stop, step))

    @nki.jit
    def k(a):
        out = nl.ndarray((1, 12), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=0.0)
        it = range(start, stop, step) if kind == "range" else getattr(nl, kind)(start, stop, step)
        for i in it:
            nl.store(out[0:1, i : i + 1], value=float(i) + 1.0)
        return out

    got = k(np.zeros((1, 1), np.float32))
    want = np.zeros((1, 12), np.float32)
    for i in iters:
        want[0, i] = i + 1
    assert_exact(got, want)


def test_sequential_loop_carried_dependency():
    x = rand(rng_of(4), (32, 8 * 16), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((32, 16), dtype=nl.float32)
        for i in nl.sequential_range(8):
            acc[...] = nl.add(nl.multiply(acc, 0.5), nl.load(a[:, i * 16 : (i + 1) * 16]))
        nl.store(out, value=acc)
        return out

    want = np.zeros((32, 16), np.float32)
    for i in range(8):
        want = want * np.float32(0.5) + x[:, i * 16 : (i + 1) * 16]
    assert_exact(k(x), want)


def test_affine_range_with_results_written_per_iteration_is_legal():
    x = rand(rng_of(5), (4, 64, 32), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((4, 64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            for j in nl.affine_range(2):
                t = nl.load(a[i, j * 32 : (j + 1) * 32, :])
                nl.store(out[i, j * 32 : (j + 1) * 32, :], value=nl.exp(t))
        return out

    np.testing.assert_allclose(k(x), np.exp(x), rtol=1e-6)


def test_loop_variable_in_mask():
    x = rand(rng_of(6), (4, 16), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((4, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=0.0)
        i_f = nl.arange(16)[None, :]
        for r in nl.affine_range(4):
            t = nl.load(a[r : r + 1, :])
            nl.store(out[r : r + 1, :], value=t, mask=(i_f < 4 * r + 3))
        return out

    want = np.zeros((4, 16), np.float32)
    for r in range(4):
        want[r, : 4 * r + 3] = x[r, : 4 * r + 3]
    assert_exact(k(x), want)


# ---- utilities -------------------------------------------------------------------------------------


def test_tile_size_constants():
    ts = nl.tile_size
    assert (ts.pmax, ts.psum_fmax, ts.gemm_stationary_fmax, ts.gemm_moving_fmax, ts.bn_stats_fmax) == (
        128,
        512,
        128,
        512,
        512,
    )
    assert (ts.psum_min_align, ts.sbuf_min_align, ts.psum_num_banks) == (4, 1, 8)
    assert ts.total_available_sbuf_size == 180224  # outside a kernel: the default target, trn1


@pytest.mark.parametrize(
    ("target", "usable", "nc"), [("trn1", 180224, 2), ("trn2", 212984, 3), ("trn3", 245752, 4)]
)
def test_tile_size_follows_the_kernel_target(target, usable, nc):
    """Inside a kernel, nl.tile_size reads the target file of the target being simulated."""
    import neuronxcc.nki.isa as nisa

    seen = {}

    @nki.jit
    def k(x):
        seen["usable"] = nl.tile_size.total_available_sbuf_size
        seen["pmax"] = nl.tile_size.pmax
        seen["nc"] = int(nisa.get_nc_version())
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert_exact(devkit.simulate(k, x, target=target), x)
    assert seen == {"usable": usable, "pmax": 128, "nc": nc}


def test_dtypes_are_numpy_and_ml_dtypes():
    import ml_dtypes

    assert np.dtype(nl.bfloat16) == np.dtype(ml_dtypes.bfloat16)
    assert np.dtype(nl.float8_e4m3) == np.dtype(ml_dtypes.float8_e4m3)
    assert float(ml_dtypes.finfo(nl.float8_e4m3).max) == 240.0
    assert np.dtype(nl.float8_e5m2) == np.dtype(ml_dtypes.float8_e5m2)
    for name in ("int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32"):
        assert np.dtype(getattr(nl, name)) == np.dtype(name)
    assert nl.fp32.min == float(np.finfo(np.float32).min)


def test_static_cast_rounds_to_nearest_even():
    x = np.array([1.0 + 2**-8, 1.0 + 3 * 2**-8, 2.5, -2.5], np.float32)
    assert_exact(nl.static_cast(x, nl.bfloat16), x.astype(BF16))
    assert_exact(nl.static_cast(x, np.int32), np.array([1, 1, 2, -2], np.int32))


def test_device_print_prints_in_simulation(capsys):
    x = np.array([[1.5, 2.5]], np.float32)

    @nki.jit
    def k(a):
        nl.device_print("value:", nl.load(a))
        return a

    k(x)
    out = capsys.readouterr().out
    assert "value:" in out and "1.5" in out and "2.5" in out


def test_nl_calls_outside_a_kernel_are_an_error():
    from devkit.errors import KernelError

    with pytest.raises(KernelError):
        nl.zeros((4, 4), dtype=nl.float32)


def test_jit_modes_and_benchmark_latency():
    a = rand(rng_of(7), (128, 512), F32)
    b = rand(rng_of(8), (128, 512), F32)
    for mode in ("simulation", "baremetal", "auto"):
        k = nki.jit(tensor_add_spmd.func, mode=mode)
        assert_exact(k[1, 1](a, b), a + b)

    def add(x, y):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(x), nl.load(y)))
        return out

    bench = nki.benchmark(warmup=2, iters=3)(add)
    bench(a, b)
    lat = bench.benchmark_result.nc_latency.get_latency_percentile(50)
    assert lat > 0
