"""``nki.isa`` random-number instructions (NKI 0.x): ``rng``, ``rand2``, ``set_rng_seed``, ``rand_set_state``,
``rand_get_state`` (``reference/nki_beta2.md`` §5.4, PRNG family).

The numbers come from the per-lane XORWOW generators of :mod:`devkit.nki._rng` (GpSimd: 6 state words per lane,
Vector: 24).  ``dropout`` is an adapter row in :mod:`devkit.nki.beta2.isa_table` over the Beta-1 instruction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.dtype_names import itemsize
from devkit.errors import DtypeError, KernelArgumentError, TileShapeError, UnsupportedError
from devkit.nki import _isa_layer as _layer
from devkit.nki import _rng
from devkit.nki._isa_common import _val, _vector_operand
from devkit.nki._isa_layer import Instruction
from devkit.nki.beta2._convention import _dst, _machine_at_least, _member, declared
from devkit.nki.beta2.constants import engine
from devkit.sim import instr as _x
from devkit.sim.tensor import Tensor
from devkit.trace import GPSIMD, VECTOR

_TRACE_ENGINE = {"vector": VECTOR, "gpsimd": GPSIMD}


def _engine_name(api: str, e: Any, *, allowed: tuple[str, ...], default: str) -> str:
    """``engine=`` as ``"vector"``/``"gpsimd"`` (``unknown`` -> ``default``)."""
    e = _member(e, engine, api, "engine")
    if e == engine.unknown:
        return default
    name = e.name
    if name not in allowed:
        raise KernelArgumentError(
            f"{api}: engine must be {' or '.join(f'nki.isa.engine.{a}' for a in allowed)}, got engine.{name}",
            rule="bad-engine",
        )
    return name


def _state_engine(api: str, m: Any, e: Any, words: int, operand: str) -> str:
    """The engine whose PRNG state a ``rand_set_state``/``rand_get_state`` touches: given, or by the operand's
    words per lane (6 GpSimd, 24 Vector); the Vector engine's state is reachable on NeuronCore-v4 only."""
    allowed = ("gpsimd", "vector") if m.geometry.nc_version >= 4 else ("gpsimd",)
    by_size = {v: k for k, v in _rng.WORDS.items()}.get(words, "gpsimd")
    name = _engine_name(api, e, allowed=allowed, default=by_size if by_size in allowed else "gpsimd")
    if words != _rng.WORDS[name]:
        raise TileShapeError(
            f"{api}: {operand} must hold {_rng.WORDS[name]} uint32 state words per lane for the {name} engine, "
            f"got {words}",
            rule="rng-state-shape",
        )
    return name


def _uint32_lanes(api: str, t: Tensor, operand: str, eng: str) -> None:
    if _dt.name_of(t.dtype) != "uint32":
        raise DtypeError(f"{api}: {operand} must be uint32, got {_dt.name_of(t.dtype)}", rule="dtype")
    if eng == "gpsimd" and t.st.buffer == "psum":
        raise UnsupportedError(f"{api}: the GpSimd engine cannot access PSUM ({operand})", rule="gpsimd-psum")


def _on_engine(s: _layer.Step, eng: str, op: str) -> None:
    """The instruction runs on engine ``eng`` (``"vector"``/``"gpsimd"``, kept for the numerics) as ``op``."""
    s.engine = _TRACE_ENGINE[eng]
    s.attrs = {"op": op}
    s.args = eng


# ---- plans (parameters after the step: the NKI 0.x signature) and numerics -------------------------------


def _rng_plan(s: _layer.Step, dst: Any, engine: Any = engine.vector, name: Any = None) -> None:
    """Fill an integer ``dst`` with random bits: each element is 32 random bits truncated to dst's dtype."""
    api = s.api
    d = _dst(dst, api)
    eng = _engine_name(api, engine, allowed=("vector", "gpsimd"), default="vector")
    if eng == "gpsimd" and d.st.buffer == "psum":
        raise UnsupportedError(f"{api}: the GpSimd engine cannot access PSUM (dst)", rule="gpsimd-psum")
    if not _dt.is_int(d.dtype):
        raise UnsupportedError(
            f"{api}: only integer dst dtypes are simulated (random bits truncated to the dtype), got "
            f"{_dt.name_of(d.dtype)}",
            rule="not-simulated",
        )
    s.dst = d
    _on_engine(s, eng, "rng")


def _rng_values(s: _layer.Step) -> Any:
    d = s.dst
    assert d is not None
    raw = _rng.bits(s.m, s.args, d.partitions, d.free_size)
    store = np.dtype(_dt.storage_dtype(d.dtype))
    low = raw.astype(np.dtype(f"u{store.itemsize}"))  # keeps the low bits
    d.write(low.view(store).reshape(d.shape))
    return _layer.WRITTEN


def _rand2(s: _layer.Step, dst: Any, min: Any, max: Any, name: Any = None) -> None:
    """``dst`` uniform in ``[min, max)`` (fp32, cast to dst's dtype); ``min``/``max`` are scalars or ``(P, 1)``
    tiles (Vector engine, NeuronCore-v4)."""
    api = s.api
    _machine_at_least(api, 4)
    d = _dst(dst, api)
    p = d.partitions
    s.reads = [_vector_operand(min, p, api, "min"), _vector_operand(max, p, api, "max")]
    s.dst = d
    s.attrs = {"op": "rand2"}


def _rand2_values(s: _layer.Step) -> np.ndarray:
    d = s.dst
    assert d is not None
    p = d.partitions
    lo, hi = s.reads
    u = _rng.uniform(s.m, "vector", p, d.free_size)
    a = np.asarray(_val(lo, (p, 1)), dtype=np.float32).reshape(-1, 1)
    b = np.asarray(_val(hi, (p, 1)), dtype=np.float32).reshape(-1, 1)
    return (a + u * (b - a)).reshape(d.shape)


def _set_rng_seed(s: _layer.Step, src_seeds: Any, name: Any = None) -> None:
    """Seed the Vector engine's generators from the 32-bit value of a ``[1, 1]`` SBUF/PSUM tensor.

    The simulator's own generator (the one ``dropout`` and ``nl.rand`` draw from) is reseeded too, so a seed
    makes every random instruction after it reproducible."""
    api = s.api
    t = _x.tile(src_seeds, api, "src_seeds")
    if t.size != 1:
        raise TileShapeError(
            f"{api}: src_seeds must be a [1, 1] tensor, got {list(t.shape)}", rule="bad-shape"
        )
    if itemsize(t.dtype) != 4:
        raise DtypeError(f"{api}: src_seeds must be a 32-bit value, got {_dt.name_of(t.dtype)}", rule="dtype")
    s.reads = [t]
    s.buffer = None  # no result: the generators' state changes
    s.attrs = {"op": "set_rng_seed"}


def _seed_values(s: _layer.Step) -> None:
    (t,) = s.reads
    v = t.read().reshape(-1)[:1]
    seed = int(v.view(np.uint32)[0]) if v.dtype.itemsize == 4 and v.dtype.kind in "iu" else int(v[0])
    _rng.seed_all(s.m, "vector", seed)
    s.m.rng = np.random.default_rng(seed)


def _rand_set_state(s: _layer.Step, src_seeds: Any, engine: Any = engine.unknown, name: Any = None) -> None:
    """Load each lane's PRNG state from row ``p`` of a uint32 ``src_seeds`` (6 words per lane for the GpSimd,
    24 for the Vector engine; NeuronCore-v3+, Vector NeuronCore-v4+)."""
    api = s.api
    m = _machine_at_least(api, 3)
    t = _x.tile(src_seeds, api, "src_seeds")
    eng = _state_engine(api, m, engine, t.free_size, "src_seeds")
    _uint32_lanes(api, t, "src_seeds", eng)
    s.reads = [t]
    s.buffer = None  # no result: the generators' state changes
    _on_engine(s, eng, "rand_set_state")


def _set_state_values(s: _layer.Step) -> None:
    (t,) = s.reads
    _rng.set_state(s.m, s.args, t.read().reshape(t.partitions, -1))


def _rand_get_state(s: _layer.Step, dst: Any, engine: Any = engine.unknown, name: Any = None) -> None:
    """Store each lane's PRNG state into row ``p`` of a uint32 ``dst`` (the inverse of ``rand_set_state``)."""
    api = s.api
    m = _machine_at_least(api, 3)
    d = _dst(dst, api)
    eng = _state_engine(api, m, engine, d.free_size, "dst")
    _uint32_lanes(api, d, "dst", eng)
    s.dst = d
    _on_engine(s, eng, "rand_get_state")


def _get_state_values(s: _layer.Step) -> Any:
    d = s.dst
    assert d is not None
    d.write(_rng.state(s.m, s.args)[: d.partitions].copy().reshape(d.shape))
    return _layer.WRITTEN


# ---- the declarations and their nki.isa functions -------------------------------------------------------

RNG = Instruction("rng", VECTOR, "rand", _rng_plan, _rng_values)
RAND2 = Instruction("rand2", VECTOR, "rand", _rand2, _rand2_values)
SET_RNG_SEED = Instruction("set_rng_seed", VECTOR, "rand_state", _set_rng_seed, _seed_values)
RAND_SET_STATE = Instruction("rand_set_state", GPSIMD, "rand_state", _rand_set_state, _set_state_values)
RAND_GET_STATE = Instruction("rand_get_state", GPSIMD, "rand_state", _rand_get_state, _get_state_values)
#: the family's instructions (each public function below is generated from its declaration)
INSTRUCTIONS = (RNG, RAND2, SET_RNG_SEED, RAND_SET_STATE, RAND_GET_STATE)

rng = declared(RNG)
rand2 = declared(RAND2)
set_rng_seed = declared(SET_RNG_SEED)
rand_set_state = declared(RAND_SET_STATE)
rand_get_state = declared(RAND_GET_STATE)
