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
    b = TraceBuilder()
    b.add(
        TENSOR,
        "nc_matmul",
        (access(SBUF, "bfloat16", 128, 128), access(SBUF, "bfloat16", 128, 300)),
        (access(PSUM, "float32", 128, 300),),
    )
    assert TRN1.cycles(b.instrs[0]) == 300


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
    b = TraceBuilder()
    b.add(
        VECTOR,
        "tensor_tensor",
        (access(PSUM, "float32", 128, 512), access(SBUF, "float32", 128, 512)),
        (access(SBUF, "float32", 128, 512),),
        op="add",
    )
    assert TRN1.cycles(b.instrs[0]) == 512
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
    assert TRN1.cycles(_compute(SCALAR, "activation", 512, reduce_op="add")) == 512 + 64
    assert TRN1.cycles(_compute(SCALAR, "activation", 512, reduce=True)) == 512 + 64
    assert TRN1.cycles(_compute(SCALAR, "activation", 512, reduce=False)) == 512
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
        dma_descriptor_ns=descriptor_ns, dma_transpose_efficiency=transpose_eff
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


def test_dma_transpose_uses_contiguous_side_and_lower_bandwidth() -> None:
    b = TraceBuilder()
    b.add(
        DMA,
        "load_transpose2d",
        (access(HBM, "bfloat16", 128, 512, run_bytes=2),),
        (access(SBUF, "bfloat16", 128, 512),),
    )
    t = _dma_model("trn1", transpose_eff=0.25).timing(b.instrs[0])
    assert t.transpose and t.descriptors == 128
    assert t.engine_ns == pytest.approx(8 * 60 + 8 * 1024 / (17 * 0.25))


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
