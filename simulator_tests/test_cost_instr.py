"""Per-instruction cost rules (reference/nki_api.md sections 3, 4.4, 4.5)."""

from __future__ import annotations

import pytest

from devkit.cost.dma_cost import DmaCostModel
from devkit.cost.instr_cost import CostModel, covered_opcodes, instr_duration_ns
from devkit.cost.params import default_params
from devkit.cost.trace_builder import TraceBuilder, access
from devkit.targets import load_target
from devkit.trace import DMA, GPSIMD, HBM, PSUM, SBUF, SCALAR, TENSOR, VECTOR

TRN1 = CostModel("trn1")
TRN2 = CostModel("trn2")


def _one(build) -> object:
    b = TraceBuilder()
    build(b)
    return b.instrs[-1]


def _instr(engine: str, opcode: str, ins: list[tuple], outs: list[tuple], **attrs: object) -> object:
    """One instruction whose operands are ``access(*operand)`` of each tuple (buffer, dtype, partitions,
    elements)."""
    return _one(
        lambda b: b.add(
            engine, opcode, tuple(access(*a) for a in ins), tuple(access(*o) for o in outs), **attrs
        )
    )


# --- TensorE -------------------------------------------------------------------------------------


def test_matmul_128x512_bf16_is_512_cycles() -> None:
    mm = _one(lambda b: b.matmul(128, 512, 128, "bfloat16"))
    assert TRN1.cycles(mm) == 512
    assert TRN1.duration_ns(mm) == pytest.approx(512 / 2.8)
    assert TRN2.duration_ns(mm) == pytest.approx(512 / 2.4)


def test_matmul_fp32_costs_four_times() -> None:
    assert TRN1.cycles(_one(lambda b: b.matmul(128, 512, 128, "float32"))) == 4 * 512


def test_matmul_fp32_onezero_costs_twice() -> None:
    mm = _one(lambda b: b.matmul(128, 512, 128, "float32", is_moving_onezero=True))
    assert TRN1.cycles(mm) == 2 * 512


def test_matmul_moving_free_one_is_64_cycles() -> None:
    assert TRN1.cycles(_one(lambda b: b.matmul(128, 1, 128))) == 64


def test_matmul_small_stationary_bounds_the_minimum() -> None:
    # max(min(64, M), N): M = 32, N = 16 -> 32 cycles
    assert TRN1.cycles(_one(lambda b: b.matmul(32, 16, 128))) == 32
    assert TRN1.cycles(_one(lambda b: b.matmul(128, 100, 128))) == 100


def test_matmul_shapes_from_operands_when_attrs_missing() -> None:
    ins = [(SBUF, "bfloat16", 128, 128), (SBUF, "bfloat16", 128, 300)]
    assert TRN1.cycles(_instr(TENSOR, "nc_matmul", ins, [(PSUM, "float32", 128, 300)])) == 300


def test_pe_transpose() -> None:
    b = TraceBuilder()
    b.add(TENSOR, "nc_transpose", (access(SBUF, "bfloat16", 128, 32),), (access(PSUM, "float32", 32, 128),))
    b.add(TENSOR, "nc_transpose", (access(SBUF, "bfloat16", 16, 128),), (access(PSUM, "float32", 128, 16),))
    assert TRN1.cycles(b.instrs[0]) == 128  # max(P, min(64, F)) = max(128, 32)
    assert TRN1.cycles(b.instrs[1]) == 64  # max(16, min(64, 128))


# --- VectorE / ScalarE / GpSimd ------------------------------------------------------------------


def _compute(engine: str, opcode: str, elems: int, **kw: object) -> object:
    return _one(lambda b: b.compute(engine, opcode, elems, **kw))


def test_vector_one_input_and_min_ii() -> None:
    assert TRN1.cycles(_compute(VECTOR, "tensor_copy", 512)) == 512
    assert TRN1.cycles(_compute(VECTOR, "tensor_scalar", 8)) == 64
    assert TRN1.duration_ns(_compute(VECTOR, "tensor_copy", 512)) == pytest.approx(512 / 1.12)


def test_vector_two_inputs() -> None:
    assert TRN1.cycles(_compute(VECTOR, "tensor_tensor", 512, inputs=2)) == 1024
    # one input in PSUM: single pass
    ins = [(PSUM, "float32", 128, 512), (SBUF, "float32", 128, 512)]
    assert TRN1.cycles(_instr(VECTOR, "tensor_tensor", ins, [(SBUF, "float32", 128, 512)], op="add")) == 512
    # all-bf16 SBUF add: single pass on trn1, and perf mode 2x on trn2
    add = _compute(VECTOR, "tensor_tensor", 512, inputs=2, dtype="bfloat16", op="add")
    assert TRN1.cycles(add) == 512
    assert TRN2.cycles(add) == 256
    # bf16 but a divide: two passes
    assert (
        TRN1.cycles(_compute(VECTOR, "tensor_tensor", 512, inputs=2, dtype="bfloat16", op="divide")) == 1024
    )


def test_trn2_vector_perf_mode() -> None:
    copy_bf16 = _compute(VECTOR, "tensor_copy", 1024, dtype="bfloat16")
    assert TRN1.cycles(copy_bf16) == 1024
    assert TRN2.cycles(copy_bf16) == 256  # 4x: SBUF, bf16, contiguous
    assert TRN2.cycles(_compute(VECTOR, "tensor_copy", 1024, dtype="bfloat16", in_buffer=PSUM)) == 512  # 2x
    assert TRN2.cycles(_compute(VECTOR, "tensor_copy", 1024, dtype="float32")) == 1024  # no perf mode


def test_vector_special_rules() -> None:
    assert TRN1.cycles(_compute(VECTOR, "reciprocal", 100)) == 800
    assert TRN1.cycles(_compute(VECTOR, "bn_aggr", 300)) == pytest.approx(1300, rel=1e-5)
    assert TRN1.cycles(_compute(VECTOR, "tensor_reduce", 512, dtype="bfloat16", op="add")) == 256
    assert TRN1.cycles(_compute(VECTOR, "tensor_reduce", 512, dtype="float32", op="add")) == 512
    assert TRN1.cycles(_compute(VECTOR, "tensor_scalar_reduce", 512)) == 512 + 64
    assert TRN1.cycles(_compute(VECTOR, "tensor_tensor_scan", 512, inputs=2)) == 1024
    assert TRN1.cycles(_compute(VECTOR, "tensor_copy_dynamic_src", 100)) == 600
    assert TRN1.cycles(_compute(VECTOR, "memset", 512, dtype="bfloat16", value=0)) == 256
    assert TRN1.cycles(_compute(VECTOR, "memset", 512, dtype="bfloat16", value=1)) == 512


def test_scalar_rules() -> None:
    assert TRN1.cycles(_compute(SCALAR, "activation", 512)) == 512
    assert TRN1.cycles(_compute(SCALAR, "activation", 10)) == 64
    # reducing into the accumulation registers is free; writing the result out reads them (+ MIN_II)
    assert TRN1.cycles(_compute(SCALAR, "activation", 512, reduce_op="add")) == 512
    assert TRN1.cycles(_compute(SCALAR, "activation", 512, reduce=True)) == 512
    assert TRN1.cycles(_compute(SCALAR, "activation", 512, reduce=False)) == 512
    outs = [(SBUF, "float32", 128, 512), (SBUF, "float32", 128, 1)]
    two_outs = _instr(SCALAR, "activation", [(SBUF, "float32", 128, 512)], outs, reduce=True)
    assert TRN1.cycles(two_outs) == 512 + 64
    assert TRN1.cycles(_compute(SCALAR, "activation_reduce", 512)) == 512 + 64
    assert TRN1.duration_ns(_compute(SCALAR, "activation", 512)) == pytest.approx(512 / 1.4)


def test_gpsimd_rules() -> None:
    assert TRN1.cycles(_compute(GPSIMD, "iota", 512)) == 150 + 512
    assert TRN1.cycles(_compute(GPSIMD, "affine_select", 100)) == 250
    assert TRN1.cycles(_compute(GPSIMD, "tensor_tensor", 100, inputs=2)) == 350


def test_unknown_opcode_uses_default_and_is_recorded() -> None:
    model = CostModel("trn1")
    assert model.cycles(_compute(VECTOR, "frobnicate", 300)) == 300
    assert model.cycles(_compute(SCALAR, "frobnicate", 10)) == 64
    assert model.duration_ns(_one(lambda b: b.dma(opcode="teleport"))) > 0
    assert model.unknown_opcodes == {
        (VECTOR, "frobnicate"): 1,
        (SCALAR, "frobnicate"): 1,
        (DMA, "teleport"): 1,
    }


def test_unknown_engine_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown engine 'npu'"):
        CostModel("trn1").rule("npu", "nc_matmul")


def test_covered_opcodes_lists_rules() -> None:
    covered = covered_opcodes()
    assert "nc_matmul" in covered[TENSOR] and "activation" in covered[SCALAR]
    assert {"dma_copy", "load", "store", "load_transpose2d", "dma_transpose"} <= covered[DMA]
    assert "activation" not in covered[VECTOR]


# --- DMA -----------------------------------------------------------------------------------------


def _dma_model(target: str, descriptor_ns: float = 60.0, transpose_eff: float = 0.25) -> DmaCostModel:
    params = default_params(target).replace(
        dma_descriptor_ns=descriptor_ns, dma_transpose_efficiency=transpose_eff, dma_transfer_engine_ns=0.0
    )
    return DmaCostModel(load_target(target), params)


def test_dma_128_partitions_spread_over_16_engines() -> None:
    dma = _one(lambda b: b.dma(partitions=128, bytes_per_partition=1024))
    t = _dma_model("trn1").timing(dma)
    assert (t.engines, t.descriptors) == (16, 128)
    assert t.engine_ns == pytest.approx(8 * 60 + 8 * 1024 / 17)
    assert (t.hbm_read_bytes, t.hbm_write_bytes, t.bytes_moved) == (131072, 0, 131072)


def test_dma_few_partitions_use_few_engines() -> None:
    t8 = _dma_model("trn1").timing(_one(lambda b: b.dma(partitions=8, bytes_per_partition=1024)))
    t20 = _dma_model("trn1").timing(_one(lambda b: b.dma(partitions=20, bytes_per_partition=1024)))
    assert (t8.engines, t20.engines) == (1, 3)


def test_dmaov_example1_trn2() -> None:
    """A[4, 4096] bf16 HBM -> SBUF: one engine, 4 runs of 8 KiB (the SBUF side splits per partition)."""
    dma = _one(lambda b: b.dma(partitions=4, bytes_per_partition=8192, run_bytes=32768))
    t = _dma_model("trn2", descriptor_ns=0.0).timing(dma)
    assert (t.engines, t.descriptors) == (1, 4)
    assert t.engine_ns == pytest.approx(32768 / 23)
    # with the bundled parameters the anchor (1416 ns) is reproduced within 25 %
    bundled = CostModel("trn2").dma.timing(dma).engine_ns
    assert abs(bundled / 1416 - 1) < 0.25


def test_dma_short_runs_cost_descriptors() -> None:
    contiguous = _one(lambda b: b.dma(partitions=128, bytes_per_partition=2048))
    strided = _one(lambda b: b.dma(partitions=128, bytes_per_partition=2048, run_bytes=256))
    model = _dma_model("trn1")
    assert model.timing(contiguous).descriptors == 128
    assert model.timing(strided).descriptors == 1024
    assert model.timing(strided).engine_ns - model.timing(contiguous).engine_ns == pytest.approx(56 * 60)


def _transpose(target: str, dtype: str = "bfloat16", src: str = HBM, opcode: str = "load_transpose2d"):
    """A [128, 512]-element transposing load (the source side runs one element long)."""
    b = TraceBuilder()
    item = 2 if dtype == "bfloat16" else 4
    b.add(
        DMA,
        opcode,
        (access(src, dtype, 128, 512, run_bytes=item if src == HBM else None),),
        (access(SBUF, dtype, 128, 512),),
    )
    return CostModel(target).dma.timing(b.instrs[0])


def test_dma_transpose_nc_v2_follows_contiguous_side_at_lower_bandwidth() -> None:
    """NC-v2 load_transpose2d: descriptors along the contiguous side, at a quarter of copy rate."""
    t = _transpose("trn1")
    p = default_params("trn1")
    assert t.transpose and (t.engines, t.descriptors) == (16, 128)
    busy = t.engine_ns - p.dma_transfer_engine_ns
    assert busy == pytest.approx(8 * p.dma_descriptor_ns + 8 * 1024 / (17 * 0.25))


def test_dma_transpose_with_unit_follows_contiguous_side() -> None:
    """NC-v3 transposes 2-byte elements in its DMA unit at 90 % (HBM) / 50 % (SBUF) of copy rate."""
    d = default_params("trn2").dma_descriptor_ns
    hbm = _transpose("trn2")
    assert (hbm.engines, hbm.descriptors) == (16, 128)
    assert hbm.engine_ns == pytest.approx(8 * d + 8 * 1024 / (23 * 0.9))
    sbuf = _transpose("trn2", src=SBUF, opcode="dma_transpose")
    assert sbuf.engine_ns == pytest.approx(8 * d + 8 * 1024 / (23 * 0.5))
    # bad twin: a 4-byte dtype does not go through the unit and is element-granular
    fp32 = _transpose("trn2", dtype="float32")
    assert fp32.descriptors == 65536
    assert fp32.engine_ns == pytest.approx(4096 * (d + 4 / 23))
    assert fp32.engine_ns > 20 * hbm.engine_ns


def test_dma_two_byte_run_store_costs_the_descriptor_rate() -> None:
    """A store into a transposed HBM view (2-byte runs) pays the documented per-descriptor overhead."""
    strided = _one(lambda b: b.dma(src=SBUF, dst=HBM, bytes_per_partition=1024, run_bytes=2))
    contiguous = _one(lambda b: b.dma(src=SBUF, dst=HBM, bytes_per_partition=1024))
    t, c = CostModel("trn1").dma.timing(strided), CostModel("trn1").dma.timing(contiguous)
    fixed = default_params("trn1").dma_transfer_engine_ns
    assert t.descriptors == 65536 and c.descriptors == 128
    per_descriptor = (t.engine_ns - fixed) / (65536 / 16)
    assert per_descriptor == pytest.approx(216 / 17 + 2 / 17, rel=0.01)
    assert c.engine_ns - fixed == pytest.approx(8 * 12.7 + 8192 / 17)


@pytest.mark.parametrize(
    ("run", "low", "high"),
    [(4096, 0.94, 0.96), (2048, 0.88, 0.92), (256, 0.4, 0.65), (64, 0.0, 0.25)],
)
def test_dma_run_length_follows_the_dmabw_saturation_curve(run: int, low: float, high: float) -> None:
    """DMABW: <256 B/partition severely overhead-bound, >=2 KiB approaches peak, >=4 KiB saturates."""
    for target in ("trn1", "trn2", "trn3"):
        model = CostModel(target).dma
        dma = _one(lambda b: b.dma(partitions=128, bytes_per_partition=8192, run_bytes=run))
        busy = model.timing(dma).engine_ns - default_params(target).dma_transfer_engine_ns
        ideal = 8 * 8192 / load_target(target).dma.engine_bw_bytes_per_ns
        assert low <= ideal / busy <= high, (target, run, ideal / busy)


def test_dma_transpose_attr() -> None:
    dma = _one(lambda b: b.dma(partitions=128, bytes_per_partition=1024, transpose=True))
    assert _dma_model("trn1").timing(dma).transpose


def test_dma_store_counts_hbm_write() -> None:
    t = _dma_model("trn1").timing(_one(lambda b: b.dma(src=SBUF, dst=HBM)))
    assert (t.hbm_read_bytes, t.hbm_write_bytes) == (0, 131072)


def test_instr_duration_helper() -> None:
    mm = _one(lambda b: b.matmul())
    assert instr_duration_ns(mm, "trn1") == pytest.approx(512 / 2.8)


def test_simulator_opcodes_have_cost_rules() -> None:
    """Every ``emit(ENGINE, "opcode", ...)`` in the simulator sources has a specific cost rule.

    (Kernel-level tests should also assert ``not report.unknown_opcodes``.)
    """
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "devkit"
    pattern = re.compile(r"emit\(\s*(TENSOR|VECTOR|SCALAR|GPSIMD|DMA)\s*,\s*\"([a-z_0-9]+)\"")
    names = {"TENSOR": TENSOR, "VECTOR": VECTOR, "SCALAR": SCALAR, "GPSIMD": GPSIMD, "DMA": DMA}
    found = {
        (names[eng], op)
        for sub in ("sim", "nki")
        for path in (root / sub).rglob("*.py")
        for eng, op in pattern.findall(path.read_text(encoding="utf-8"))
    }
    covered = covered_opcodes()
    assert sorted(pair for pair in found if pair[1] not in covered[pair[0]]) == []


def test_psum_memset_is_elided_sbuf_memset_is_not() -> None:
    assert TRN1.cycles(_compute(VECTOR, "memset", 512, out_buffer=PSUM, value=0)) == 0
    assert TRN1.cycles(_compute(VECTOR, "memset", 512, value=0)) == 512


def test_casting_dma_counts_descriptors_in_elements() -> None:
    """An fp32 SBUF tile stored as bf16 into a transposed HBM view: one descriptor per element (2-byte
    runs on the bf16 side), not per 2 bytes of the wider fp32 side; the same-dtype twin agrees."""
    cast, same = TraceBuilder(), TraceBuilder()
    cast.add(
        DMA,
        "store",
        (access(SBUF, "float32", 128, 128),),
        (access(HBM, "bfloat16", 128, 128, run_bytes=2),),
    )
    same.add(
        DMA,
        "store",
        (access(SBUF, "bfloat16", 128, 128),),
        (access(HBM, "bfloat16", 128, 128, run_bytes=2),),
    )
    model = _dma_model("trn1")
    assert model.timing(cast.instrs[0]).descriptors == 128 * 128
    assert model.timing(same.instrs[0]).descriptors == 128 * 128
