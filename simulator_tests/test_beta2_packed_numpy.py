"""The packed MX x4 types as NumPy dtypes (``devkit.packed_numpy``), and the rows of an MX scale tile.

nki-library @d2ad3a5 uses ``nl.float8_e4m3fn_x4`` as a NumPy dtype (``np.zeros(..., dtype=out_quant_dtype)``,
``test_rmsnorm_mx_quantize_tkg.py:192``), views x4 arrays as their containers (``mx_torch_common.py``) and
expects ``astype(np.float32)`` of one to raise ``TypeError`` (``test/utils/output_validator.py:248-251``).
``quantize_mx`` writes, and ``nc_matmul_mx`` reads, only the first 4 partitions of each 32-partition quadrant
of a scale tile (``reference/nki_beta2.md`` §5.4); ``mlp_tkg/gate_up_projection_mx_shard_H.py:120-131`` loads
only those rows and hands the whole tile to ``nc_matmul_mx``.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from devkit import dtypes as dt
from devkit import packed_numpy
from devkit.errors import UninitializedReadError

X4 = ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4")
SIZE = {"float8_e4m3fn_x4": 4, "float8_e5m2_x4": 4, "float4_e2m1fn_x4": 2}
CONTAINER = {"float8_e4m3fn_x4": np.uint32, "float8_e5m2_x4": np.uint32, "float4_e2m1fn_x4": np.uint16}


@pytest.mark.parametrize("name", X4)
def test_nl_x4_types_are_usable_as_numpy_dtypes(name):
    marker = getattr(nl, name)
    a = np.zeros((3, 5), dtype=marker)
    assert a.dtype.itemsize == SIZE[name] and a.shape == (3, 5)
    assert a.view(CONTAINER[name]).dtype == CONTAINER[name]  # the container bits, same shape
    assert np.empty((2,), dtype=marker).dtype == a.dtype
    with pytest.raises(TypeError):  # four values per element: no numeric cast (output_validator.py:248)
        a.astype(np.float32)
    assert a.dtype == marker and marker == a.dtype  # compare both ways ...
    assert {marker: name}[a.dtype] == name  # ... and hash alike (dict keys of either kind)
    assert dt.as_dtype(a.dtype) is marker and dt.name_of(a.dtype) == name
    assert str(marker) == name and name in str(a.dtype)  # the dtype's repr names the type


def test_the_three_x4_dtypes_differ():
    dtypes = [np.dtype(getattr(nl, n)) for n in X4]
    assert len(set(dtypes)) == 3
    assert nl.float8_e4m3fn_x4 != nl.float8_e5m2_x4
    assert packed_numpy.name_of(np.dtype(np.uint32)) is None  # a container is not an x4 type


def test_fp8_x4_fields_are_the_packed_values_low_byte_first():
    bits = np.array([0x4038_3000], dtype=np.uint32)  # bytes 0x00, 0x30, 0x38, 0x40 (e4m3fn 0, 0.5, 1, 2)
    a = packed_numpy.from_bits(bits, "float8_e4m3fn_x4")
    assert [float(a[f"v{i}"][0]) for i in range(4)] == [0.0, 0.5, 1.0, 2.0]
    assert packed_numpy.to_bits(a)[0] == 0x4038_3000


@nki.jit(platform_target="trn3")
def copy_out(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("name", X4)
def test_x4_arrays_round_trip_through_nki_simulate(name):
    bits = np.arange(1, 33, dtype=CONTAINER[name]).reshape(8, 4) * 0x0101
    typed = packed_numpy.from_bits(bits, name)
    out = nki.simulate(copy_out)(typed)
    assert out.dtype == np.dtype(getattr(nl, name))  # outputs come back typed, not as the container
    np.testing.assert_array_equal(out.view(CONTAINER[name]), bits)


@nki.jit(platform_target="trn3")
def view_as_x4(x):
    """A uint32 container array viewed as x4 inside the kernel (nki-samples' mxfp-matmul tutorial)."""
    p, f = x.shape
    t = nl.ndarray((p, f), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap(pattern=[[f, p], [1, f]], dtype=nl.float8_e4m3fn_x4))
    out = nl.ndarray((p, f), dtype=nl.float8_e4m3fn_x4, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_container_inputs_still_work_and_come_back_typed():
    bits = np.arange(32, dtype=np.uint32).reshape(8, 4) * 0x01010101
    out = nki.simulate(view_as_x4)(bits)
    np.testing.assert_array_equal(packed_numpy.to_bits(out), bits)


# ---- scale tiles: only the scale rows are written / read (good and bad twins) --------------------------------


def _line_of(func, text: str) -> int:
    """The file line number of the first line of ``func`` that contains ``text``."""
    lines, first = inspect.getsourcelines(func)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _quantize(x, scale_out_rows):
    p, f = x.shape
    src = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    data = nl.ndarray((p, f // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    scale = nl.ndarray((p, f // 4), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=data, src=src, dst_scale=scale)
    out_d = nl.ndarray((p, f // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out_d, src=data)
    out_s = nl.ndarray((16, f // 4), dtype=nl.uint8, buffer=nl.shared_hbm)
    for q in range(4):
        nisa.dma_copy(dst=out_s[4 * q : 4 * q + 4, :], src=scale[scale_out_rows(q), :])
    return out_d, out_s


@nki.jit(platform_target="trn3")
def quantize_copies_scale_rows(x):
    return _quantize(x, lambda q: slice(32 * q, 32 * q + 4))


@nki.jit(platform_target="trn3")
def quantize_copies_gap_rows(x):
    return _quantize(x, lambda q: slice(32 * q + 4, 32 * q + 8))  # rows quantize_mx never wrote


def _mx_input() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.uniform(-3, 3, (128, 16)).astype(ml_dtypes.bfloat16)


def test_quantize_mx_output_is_typed_and_scales_sit_in_quadrant_rows():
    x = _mx_input()
    data, scales = nki.simulate(quantize_copies_scale_rows)(x)
    assert data.dtype == np.dtype(nl.float8_e4m3fn_x4) and data.shape == (128, 4)
    values = data.view(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64).reshape(16, 8, 4, 4)
    factor = np.exp2(scales.astype(np.float64) - 127)[:, None, :, None]
    # dequantised values are within half an e4m3fn step (3 mantissa bits) of the input
    np.testing.assert_allclose(values * factor, x.astype(np.float64).reshape(16, 8, 4, 4), rtol=2**-4)


def test_quantize_mx_leaves_the_gap_partitions_never_written():
    with pytest.raises(UninitializedReadError) as e:
        nki.simulate(quantize_copies_gap_rows)(_mx_input())
    assert e.value.rule == "uninitialized-read"
    assert e.value.lineno == _line_of(_quantize, "src=scale[")  # the scale dma_copy


def _matmul_mx(w, ws, h, hs, scale_rows):
    """``w``/``h``: [128, F] x4 data; ``ws``/``hs``: [16, F] uint8 scales, loaded into the scale rows of a
    [128, F] tile (``scale_rows(q)`` for quadrant ``q``), the other partitions left unwritten."""
    tiles = []
    for x, s in ((w, ws), (h, hs)):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        st = nl.ndarray(x.shape, dtype=nl.uint8, buffer=nl.sbuf)
        for q in range(4):
            nisa.dma_copy(dst=st[scale_rows(q), :], src=s[4 * q : 4 * q + 4, :])
        tiles += [t, st]
    acc = nl.ndarray((w.shape[1], h.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(acc, tiles[0], tiles[2], tiles[1], tiles[3])
    res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit(platform_target="trn3")
def matmul_mx_scale_rows_loaded(w, ws, h, hs):
    return _matmul_mx(w, ws, h, hs, lambda q: slice(32 * q, 32 * q + 4))


@nki.jit(platform_target="trn3")
def matmul_mx_scale_rows_shifted(w, ws, h, hs):
    return _matmul_mx(w, ws, h, hs, lambda q: slice(32 * q + 1, 32 * q + 5))  # row 32q never loaded


def _mx_operands() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(5)

    def data(f: int) -> np.ndarray:
        v = rng.choice([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0], size=(128, 4 * f)).astype(np.float32)
        return packed_numpy.from_bits(v.astype(ml_dtypes.float8_e4m3fn).view(np.uint32), "float8_e4m3fn_x4")

    w, h = data(8), data(6)
    ws = rng.integers(125, 130, (16, 8), dtype=np.uint8)
    hs = rng.integers(125, 130, (16, 6), dtype=np.uint8)
    return w, ws, h, hs


def test_nc_matmul_mx_reads_only_the_scale_rows():
    w, ws, h, hs = _mx_operands()
    out = nki.simulate(matmul_mx_scale_rows_loaded)(w, ws, h, hs)

    def deq(x: np.ndarray, s: np.ndarray) -> np.ndarray:
        v = x.view(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64).reshape(128, -1, 4)
        return v * np.repeat(np.exp2(s.astype(np.float64) - 127), 8, axis=0)[:, :, None]

    np.testing.assert_allclose(out, np.einsum("kiq,kjq->ij", deq(w, ws), deq(h, hs)), rtol=1e-6)


def test_nc_matmul_mx_with_a_scale_row_never_loaded_is_an_uninitialised_read():
    with pytest.raises(UninitializedReadError) as e:
        nki.simulate(matmul_mx_scale_rows_shifted)(*_mx_operands())
    assert e.value.lineno == _line_of(_matmul_mx, "nisa.nc_matmul_mx(")


# ---- the environment stand-in for neuron_dtypes (benchmarks/nki_library_env/) --------------------------------


@pytest.fixture
def neuron_dtypes():
    env = str(Path(__file__).resolve().parents[1] / "benchmarks" / "nki_library_env")
    sys.path.insert(0, env)
    try:
        import neuron_dtypes as mod

        yield mod
    finally:
        sys.path.remove(env)
        sys.modules.pop("neuron_dtypes", None)


@pytest.mark.parametrize("name", X4)
def test_neuron_dtypes_static_cast_packs_and_unpacks_the_last_axis(neuron_dtypes, name):
    values = np.array([[0.5, -1.0, 1.5, 6.0, 0.0, -0.5, 2.0, -4.0]], dtype=np.float32)
    packed = neuron_dtypes.static_cast(values, getattr(neuron_dtypes, name))
    assert packed.shape == (1, 2) and packed.dtype == np.dtype(getattr(nl, name))
    back = neuron_dtypes.static_cast(packed, np.float32)  # [P, F] x4 -> [P, 4F] (mx_utils.py:222-228)
    assert back.shape == (1, 8) and back.dtype == np.float32
    np.testing.assert_array_equal(back, values)
    assert neuron_dtypes.sizeinbytes(getattr(neuron_dtypes, name)) == SIZE[name]


def test_neuron_dtypes_fp4_x4_is_low_nibble_first(neuron_dtypes):
    packed = neuron_dtypes.static_cast(np.array([[0.5, 1.0, 1.5, 6.0]], np.float32), nl.float4_e2m1fn_x4)
    assert packed.view(np.uint16)[0, 0] == 0x7321  # codes 1, 2, 3, 7 from the low nibble up
