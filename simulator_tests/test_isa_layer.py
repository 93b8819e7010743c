"""Issue 12 item 5: one instruction layer, two thin front ends.

Every ``neuronxcc.nki.isa`` instruction function is generated from a declaration of the layer
(:mod:`devkit.nki._isa_layer`), every adapter row of ``nki.isa`` runs a declaration of the same layer, and the
two generations of one instruction issue the same trace event (its cost class) and compute the same values.
"""

from __future__ import annotations

import inspect

import neuronxcc.nki as nki1
import neuronxcc.nki.isa as nisa1
import neuronxcc.nki.language as nl1
import neuronxcc.nki.typing as nt1
import nki as nki2
import nki.isa as nisa2
import nki.language as nl2
import nki.typing as nt2
import numpy as np
import pytest

import devkit
from devkit.nki import isa as b1_isa
from devkit.nki._isa_layer import Instruction
from devkit.nki.beta2 import isa_table


def test_every_beta1_instruction_function_is_generated_from_its_declaration():
    names = [ins.name for ins in b1_isa.DECLARED]
    assert len(names) == len(set(names)), "an instruction is declared twice"
    for ins in b1_isa.DECLARED:
        fn = getattr(nisa1, ins.name)
        assert fn.instruction is ins
        plan = list(inspect.signature(ins.plan).parameters.values())
        public = list(inspect.signature(fn).parameters.values())
        assert [(p.name, p.kind, p.default) for p in public] == [
            (p.name, p.kind, p.default) for p in plan[1:]
        ]
        assert fn.__doc__ == ins.plan.__doc__ and fn.__doc__


def test_every_beta2_adapter_row_runs_a_declaration_of_the_layer():
    for spec in isa_table.ADAPTERS:
        ins = spec.instruction or getattr(b1_isa, spec.name).instruction
        assert isinstance(ins, Instruction)
        assert ins.name == spec.name or spec.instruction is not None


@nki1.jit
def b1_chain(x):
    out = nl1.ndarray((128, 1), dtype=nl1.float32, buffer=nl1.shared_hbm)
    t = nl1.load(x)
    u = nisa1.tensor_scalar(t, np.multiply, 2.0, op1=np.add, operand1=1.0)
    v = nisa1.activation(nl1.exp, u, scale=0.5)
    r = nisa1.tensor_reduce(np.add, v, axis=(1,), keepdims=True)
    nl1.store(out, value=r)
    return out


def _sbuf(free):
    return nl2.ndarray((128, free), dtype=nl2.float32, buffer=nl2.sbuf)


@nki2.jit
def b2_chain(x):
    out = nl2.ndarray((128, 1), dtype=nl2.float32, buffer=nl2.shared_hbm)
    t, u, v, r = _sbuf(64), _sbuf(64), _sbuf(64), _sbuf(1)
    nisa2.dma_copy(dst=t, src=x)
    nisa2.tensor_scalar(dst=u, data=t, op0=np.multiply, operand0=2.0, op1=np.add, operand1=1.0)
    nisa2.activation(dst=v, op=nl2.exp, data=u, scale=0.5)
    nisa2.tensor_reduce(dst=r, op=np.add, data=v, axis=(1,), keepdims=True)
    nisa2.dma_copy(dst=out, src=r)
    return out


def test_both_front_ends_issue_the_same_instructions_and_compute_the_same_values():
    x = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    want = np.exp((x * 2 + 1) * 0.5).sum(axis=1, keepdims=True)
    got1 = devkit.simulate(b1_chain, x)
    got2 = nki2.simulate(b2_chain)(x)
    np.testing.assert_allclose(got1, want, rtol=1e-5)
    np.testing.assert_array_equal(got1, got2)
    rep1 = devkit.estimate(b1_chain, nt1.tensor[[128, 64], nl1.float32], target="trn2").to_dict()
    rep2 = devkit.estimate(b2_chain, nt2.tensor[[128, 64], nl2.float32], target="trn2").to_dict()
    assert rep1["instructions_by_engine"] == rep2["instructions_by_engine"]
    assert rep1["instructions_by_engine"] == {"tensor": 0, "vector": 2, "scalar": 1, "gpsimd": 0, "dma": 2}
    assert rep1["latency_us"] == pytest.approx(rep2["latency_us"]) and rep1["latency_us"] > 0


@nki1.jit
def b1_predicated(x, p):
    out = nl1.ndarray((128, 64), dtype=nl1.float32, buffer=nl1.shared_hbm)
    d = nl1.zeros((128, 64), dtype=nl1.float32)
    nisa1.tensor_copy_predicated(src=nl1.load(x), dst=d, predicate=nl1.load(p))
    nl1.store(out, value=d)
    return out


@pytest.mark.parametrize("numerics", [True, False], ids=["numerics", "cost-only"])
def test_an_in_place_instruction_writes_its_destination_in_both_modes(numerics):
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    p = (np.arange(128 * 64).reshape(128, 64) % 3 == 0).astype(np.uint8)
    if numerics:
        np.testing.assert_array_equal(devkit.simulate(b1_predicated, x, p), np.where(p != 0, x, 0))
    else:
        specs = (nt1.tensor[[128, 64], nl1.float32], nt1.tensor[[128, 64], nl1.uint8])
        rep = devkit.estimate(b1_predicated, *specs)
        assert rep.outputs_unwritten == () and rep.instructions_by_engine["vector"] == 2
