"""Loop replay of NKI 0.x kernels is exact down to every JSON field of the estimate, and the pieces made faster
for it (batched emission, the paused cyclic GC, the signature and interval-map shortcuts, the scheduler's gap
choice) behave as the code they replace.

The tiled matmul here is large enough that the outermost loop synthesises more instructions than one emission
batch holds (``replay2._BATCH``), and its inner loops are synthesised while the outer one records.
"""

from __future__ import annotations

import bisect
import gc
import json

import nki
import nki.isa as nisa
import nki.language as nl
import nki.typing as nt
from hypothesis import given, settings
from hypothesis import strategies as st

import devkit
from devkit.cost.scheduler import _forget_shortest
from devkit.nki.runner import run_kernel
from devkit.sim import replay2
from devkit.sim.deps import _IntervalMap
from devkit.sim.options import SimOptions
from devkit.sim.replay import _sig
from devkit.trace import Access, Instr, Trace

NO_REPLAY = SimOptions(numerics=False, replay_loops=False)
M_TILES, N_TILES, K_TILES = 10, 6, 6
SPECS = (
    nt.tensor[[K_TILES * 128, M_TILES * 128], nl.bfloat16],
    nt.tensor[[K_TILES * 128, N_TILES * 512], nl.bfloat16],
)


@nki.jit
def tiled_matmul(lhsT, rhs):
    k_dim, m_dim = lhsT.shape
    _, n_dim = rhs.shape
    out = nl.ndarray((m_dim, n_dim), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_dim // 128):
        for n in nl.affine_range(n_dim // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_dim // 128):
                a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                nisa.dma_copy(dst=b, src=rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            res = nl.ndarray((128, 512), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], src=res)
    return out


def test_the_outer_loop_spans_several_emission_batches():
    per_m = N_TILES * (3 * K_TILES + 2)
    synthesised = (M_TILES - 4) * per_m  # iterations 3 .. M-2
    assert synthesised > replay2._BATCH > per_m  # flushed at an iteration end, and again at the end


def test_every_json_field_of_the_estimate_is_identical_with_and_without_replay(monkeypatch):
    seen: list[int] = []
    real = replay2.synthesise
    monkeypatch.setattr(
        replay2, "synthesise", lambda m, rec, tmpl, n: (seen.append(n), real(m, rec, tmpl, n))
    )
    full = devkit.estimate(tiled_matmul, *SPECS, target="trn2", options=NO_REPLAY)
    assert seen == []
    fast = devkit.estimate(tiled_matmul, *SPECS, target="trn2")
    assert M_TILES in seen and N_TILES in seen and K_TILES in seen
    assert json.dumps(fast.to_dict(), sort_keys=True) == json.dumps(full.to_dict(), sort_keys=True)
    assert fast.instructions == M_TILES * N_TILES * (3 * K_TILES + 2)


def test_the_replayed_trace_is_the_executed_one():
    traces = []
    for options in (NO_REPLAY, SimOptions(numerics=False)):
        tr = Trace()
        run_kernel(tiled_matmul.func, SPECS, {}, options=options, sink=tr, target="trn2")
        traces.append(tr)
    full, fast = traces
    assert [i.id for i in fast.instrs] == list(range(len(full.instrs)))  # emitted in order, none twice
    assert fast.instrs == full.instrs  # every field, dependencies included
    assert fast.stats == full.stats


def test_the_cyclic_gc_state_is_restored_after_replay():
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            devkit.estimate(tiled_matmul, *SPECS, target="trn2")
            assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def _instr(**kw) -> Instr:
    acc = (Access("sbuf", "bfloat16", 128, 512, 131072, 1024),)
    fields = dict(
        id=0,
        engine="dma",
        opcode="dma_copy",
        ins=acc,
        outs=acc,
        flops=0,
        deps=(),
        filename="k.py",
        lineno=3,
        attrs=None,
    )
    fields.update(kw)
    return Instr(**fields)


def test_same_sig_agrees_with_sig():
    shared = {"queue": 1}
    other_acc = (Access("hbm", "bfloat16", 128, 512, 131072, 1024),)
    base = _instr(attrs=shared)
    pairs = [
        (base, _instr(attrs=shared, id=7, deps=(1, 2))),  # ids and deps are not part of the signature
        (base, _instr(attrs={"queue": 1})),  # equal attributes in another dict
        (base, _instr(attrs={"queue": 2})),
        (_instr(attrs=None), _instr(attrs={})),  # no attributes and empty ones alike
        (_instr(attrs={"a": 1, "b": 2}), _instr(attrs={"b": 2, "a": 1})),
        (base, _instr(attrs=shared, ins=other_acc)),
        (base, _instr(attrs=shared, outs=other_acc)),
        (base, _instr(attrs=shared, lineno=4)),
        (base, _instr(attrs=shared, filename="j.py")),
        (base, _instr(attrs=shared, flops=5)),
        (base, _instr(attrs=shared, opcode="dma_transpose")),
        (base, _instr(attrs=shared, engine="gpsimd")),
    ]
    verdicts = [replay2._same_sig(a, b) for a, b in pairs]
    assert verdicts == [_sig(a) == _sig(b) for a, b in pairs]
    assert verdicts[:5] == [True, True, False, True, True] and not any(verdicts[5:])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 50)), min_size=1, max_size=12))
def test_forget_shortest_drops_the_first_shortest_gap(raw):
    gaps = [[start, start + length] for start, length in raw]
    lengths = [g[1] - g[0] for g in gaps]
    expected = gaps[: lengths.index(min(lengths))] + gaps[lengths.index(min(lengths)) + 1 :]
    _forget_shortest(gaps)
    assert gaps == expected


def _put_by_take(m: _IntervalMap, lo: int, hi: int, ids: set[int]) -> None:
    """The put of record: take whatever overlaps, then insert the merged range."""
    merged = ids | m.take(lo, hi)
    i = bisect.bisect_left(m.starts, lo)
    m.starts.insert(i, lo)
    m.ends.insert(i, hi)
    m.ids.insert(i, merged)
    m.top.insert(i, max(merged) if merged else -1)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.integers(0, 60),
            st.integers(1, 20),
            st.sets(st.integers(0, 99), max_size=3),
        ),
        max_size=40,
    )
)
def test_interval_map_put_is_take_then_insert(ops):
    fast, ref = _IntervalMap(), _IntervalMap()
    for is_put, lo, size, ids in ops:
        if is_put:
            fast.put(lo, lo + size, ids)
            _put_by_take(ref, lo, lo + size, ids)
        else:
            assert fast.take(lo, lo + size) == ref.take(lo, lo + size)
        assert (fast.starts, fast.ends, fast.ids, fast.top) == (ref.starts, ref.ends, ref.ids, ref.top)
