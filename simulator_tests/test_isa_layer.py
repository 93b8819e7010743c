"""Issue 12 item 5: one instruction layer, two thin front ends.

Every ``neuronxcc.nki.isa`` instruction function is generated from a declaration of the layer
(:mod:`devkit.nki._isa_layer`), every adapter row of ``nki.isa`` runs a declaration of the same layer, the
NKI 0.x-only instructions (MX, random numbers) and every ``nl`` element-wise function of both generations are
generated from declarations too, and the two generations of one instruction issue the same trace event (its
cost class) and compute the same values.
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
from devkit.errors import KernelArgumentError
from devkit.nki import _isa_nl
from devkit.nki import isa as b1_isa
from devkit.nki._isa_layer import Instruction
from devkit.nki.beta2 import isa_mx, isa_rng, isa_table
from devkit.nki.beta2 import language as b2_language
from devkit.nki.runner import run_kernel
from devkit.sim.options import SimOptions
from devkit.trace import Trace


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


def _public_params(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def _plan_params(ins):
    return [(p.name, p.kind, p.default) for p in list(inspect.signature(ins.plan).parameters.values())[1:]]


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (isa_mx, {"nc_matmul_mx", "quantize_mx"}),
        (isa_rng, {"rng", "rand2", "set_rng_seed", "rand_set_state", "rand_get_state"}),
    ],
    ids=["isa_mx", "isa_rng"],
)
def test_every_beta2_only_instruction_function_is_generated_from_its_declaration(module, names):
    assert {ins.name for ins in module.INSTRUCTIONS} == names
    for ins in module.INSTRUCTIONS:
        for fn in (getattr(module, ins.name), getattr(nisa2, ins.name)):
            assert fn.instruction is ins
            assert _public_params(fn) == _plan_params(ins)
            assert fn.__doc__ == ins.plan.__doc__ and fn.__doc__


def test_every_nl_elementwise_function_is_generated_from_its_declaration():
    names = [ins.name for ins in _isa_nl.INSTRUCTIONS]
    assert len(names) == len(set(names)), "an nl function is declared twice"
    for ins in _isa_nl.INSTRUCTIONS:
        fn = getattr(nl1, ins.name)
        assert fn.instruction is ins, ins.name
        assert _public_params(fn) == _plan_params(ins)
    # Beta 2's nl wrappers (NKI 0.x signatures) run the same declarations; abs_max/abs_min are Beta 2 only
    b2_names = b2_language._BINARY + b2_language._COMPARE + b2_language._UNARY
    assert set(b2_names) <= set(names)
    for name in b2_names:
        assert getattr(nl2, name).instruction is getattr(nl1, name).instruction
    assert nl2.abs_max.instruction is _isa_nl.ABS_MAX and nl2.abs_min.instruction is _isa_nl.ABS_MIN
    # the tokens nki.isa instructions take as op= are kept: activations and ALU operations
    assert (
        nl1.exp._nki_activation == "exp" and nl1.add._nki_alu == "add" and nl2.abs_max._nki_alu == "abs_max"
    )


def _nl_chain(nki, nl):
    """One chain of nl element-wise functions, written once for both generations (their common signatures)."""

    def nl_chain(x, y):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        t, u = nl.load(x), nl.load(y)
        a = nl.multiply(nl.add(t, u), 0.5)
        e = nl.exp(nl.negative(nl.abs(a)))
        c = nl.greater(e, 0.5, dtype=nl.float32)
        r = nl.where(c, e, nl.maximum(t, u))
        nl.store(out, value=nl.copy(r, dtype=nl.bfloat16))
        return out

    return nki.jit(nl_chain)


b1_nl_chain = _nl_chain(nki1, nl1)
b2_nl_chain = _nl_chain(nki2, nl2)


def test_both_generations_nl_elementwise_chains_agree():
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((128, 64)).astype(np.float32) for _ in range(2))
    e = np.exp(-np.abs((x + y) * 0.5))
    want = np.where(e > 0.5, e, np.maximum(x, y))
    got1 = devkit.simulate(b1_nl_chain, x, y)
    got2 = nki2.simulate(b2_nl_chain)(x, y)
    np.testing.assert_allclose(got1, want, rtol=1e-2)  # through bf16
    np.testing.assert_array_equal(got1, got2)
    spec1, spec2 = nt1.tensor[[128, 64], nl1.float32], nt2.tensor[[128, 64], nl2.float32]
    rep1 = devkit.estimate(b1_nl_chain, spec1, spec1, target="trn2").to_dict()
    rep2 = devkit.estimate(b2_nl_chain, spec2, spec2, target="trn2").to_dict()
    assert rep1["instructions_by_engine"] == rep2["instructions_by_engine"]
    # add, multiply, negative, greater, maximum, where, copy on the VectorE; exp, abs on the ScalarE
    assert rep1["instructions_by_engine"] == {"tensor": 0, "vector": 7, "scalar": 2, "gpsimd": 0, "dma": 3}
    assert rep1["latency_us"] == pytest.approx(rep2["latency_us"]) and rep1["latency_us"] > 0


@nki2.jit
def b2_rng_state(state):
    out = nl2.ndarray((16, 8), dtype=nl2.uint32, buffer=nl2.shared_hbm)
    s = nl2.ndarray((16, 6), dtype=nl2.uint32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=s, src=state)
    nisa2.rand_set_state(s)
    seed = nl2.ndarray((1, 1), dtype=nl2.uint32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=seed, src=state[0:1, 0:1])
    nisa2.set_rng_seed(seed)
    r = nl2.ndarray((16, 8), dtype=nl2.uint32, buffer=nl2.sbuf)
    nisa2.rng(r, engine=nisa2.engine.gpsimd)
    nisa2.dma_copy(dst=out, src=r)
    return out


@pytest.mark.parametrize("numerics", [True, False], ids=["numerics", "cost-only"])
def test_declared_state_instructions_issue_their_cost_class_with_no_result(monkeypatch, numerics):
    monkeypatch.setenv("NKI_NC_VERSION", "gen3")
    state = np.random.default_rng(2).integers(1, 2**32, size=(16, 6), dtype=np.uint32)
    tr = Trace()
    run_kernel(b2_rng_state.func, (state,), {}, target="trn2", options=SimOptions(numerics=numerics), sink=tr)
    got = [(i.engine, i.opcode, len(i.ins), len(i.outs)) for i in tr.instrs if i.opcode.startswith("rand")]
    # rand_set_state picks the GpSimd by the state's 6 words per lane; set_rng_seed seeds the VectorE
    assert got == [("gpsimd", "rand_state", 1, 0), ("vector", "rand_state", 1, 0), ("gpsimd", "rand", 0, 1)]


@nki2.jit
def b2_rng_binding(how):
    out = nl2.ndarray((128, 4), dtype=nl2.uint32, buffer=nl2.shared_hbm)
    d = nl2.ndarray((128, 4), dtype=nl2.uint32, buffer=nl2.sbuf)
    if how == "many":
        nisa2.rng(d, nisa2.engine.vector, None, 5)  # <- blame
    elif how == "unknown":
        nisa2.rng(dst=d, seed=1)  # <- blame
    else:
        nisa2.rng()  # <- blame
    nisa2.dma_copy(dst=out, src=d)
    return out


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("many", "rng() takes from 1 to 3 positional arguments but 4 were given"),
        ("unknown", "rng() got an unexpected keyword argument 'seed'"),
        ("missing", "rng() missing 1 required positional argument: 'dst'"),
    ],
)
def test_declared_instructions_bind_arguments_as_python_does_for_their_public_signature(how, words):
    with pytest.raises(KernelArgumentError) as e:
        nki2.simulate(b2_rng_binding)(how)
    assert e.value.rule == "bad-arguments" and words in str(e.value)
    assert e.value.lineno == _blame_line(how)


def _blame_line(how):
    lines, first = inspect.getsourcelines(b2_rng_binding.func)
    marks = [first + n for n, line in enumerate(lines) if "# <- blame" in line]
    return marks[["many", "unknown", "missing"].index(how)]
