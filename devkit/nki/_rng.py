"""The engines' pseudo-random number generators: XORWOW state per compute lane.

NKI 0.x documents the PRNG state as XORWOW words cached in the engine, one row per compute lane: 6 uint32 per
lane on the GpSimd, 24 on the Vector engine (``reference/nki_beta2.md`` §5.4, ``rand_set_state``).  The kit
models each 6-word group as one XORWOW generator (five xorshift words and a Weyl counter, Marsaglia 2003), so a
Vector lane runs four generators and element ``j`` of a row comes from generator ``j % 4``.  The sequence is
the kit's (AWS does not publish the hardware's), but the contract kernels rely on holds: the same state gives
the same numbers, and ``rand_get_state`` after ``rand_set_state`` reads back what was set.

State lives in the machine's accumulators (``"rng:gpsimd"`` / ``"rng:vector"``), so each LNC program has
its own, like the other engine registers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

LANES = 128
WORDS = {"gpsimd": 6, "vector": 24}  # uint32 state words per lane
_GEN = 6  # words of one XORWOW generator
_WEYL = np.uint32(362437)


def _key(engine: str) -> str:
    return f"rng:{engine}"


def state(m: Any, engine: str) -> np.ndarray:
    """The ``(128, WORDS[engine])`` uint32 state of ``engine`` (seeded from the machine's generator on first
    use, so a run is reproducible from the simulator's seed)."""
    st = m.accumulators.get(_key(engine))
    if st is None:
        st = m.rng.integers(1, 2**32, size=(LANES, WORDS[engine]), dtype=np.uint32)
        m.accumulators[_key(engine)] = st
    return st


def set_state(m: Any, engine: str, rows: np.ndarray) -> None:
    """Replace the state of the first ``len(rows)`` lanes of ``engine``."""
    st = state(m, engine)
    st[: rows.shape[0]] = np.asarray(rows, dtype=np.uint32).reshape(rows.shape[0], WORDS[engine])


def seed_all(m: Any, engine: str, seed: int) -> None:
    """Derive every lane's state of ``engine`` from one 32-bit seed (``set_rng_seed``)."""
    n = LANES * WORDS[engine]
    idx = np.arange(1, n + 1, dtype=np.uint64)
    z = (np.uint64(seed & 0xFFFFFFFF) + idx * np.uint64(0x9E3779B97F4A7C15)) & np.uint64(2**64 - 1)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    words = (z & np.uint64(0xFFFFFFFF)).astype(np.uint32).reshape(LANES, WORDS[engine])
    words[words == 0] = 1  # an all-zero xorshift state would stay zero
    m.accumulators[_key(engine)] = words


def bits(m: Any, engine: str, p: int, n: int) -> np.ndarray:
    """``(p, n)`` random uint32 values from lanes ``0..p-1`` of ``engine``, advancing their state."""
    st = state(m, engine)
    g = WORDS[engine] // _GEN
    gens = st[:p].reshape(p * g, _GEN)
    steps = -(-n // g)
    out = np.empty((steps, p * g), dtype=np.uint32)
    x = [gens[:, i].copy() for i in range(5)]
    d = gens[:, 5].copy()
    for k in range(steps):
        t = x[4]
        s = x[0]
        t = t ^ (t >> np.uint32(2))
        t = t ^ (t << np.uint32(1))
        t = t ^ s ^ (s << np.uint32(4))
        x = [t, s, x[1], x[2], x[3]]
        d = d + _WEYL
        out[k] = t + d
    for i in range(5):
        gens[:, i] = x[i]
    gens[:, 5] = d
    st[:p] = gens.reshape(p, WORDS[engine])
    # element j of a row: step j // g of the row's generator j % g
    return out.reshape(steps, p, g).transpose(1, 0, 2).reshape(p, steps * g)[:, :n]


def uniform(m: Any, engine: str, p: int, n: int) -> np.ndarray:
    """``(p, n)`` fp32 values uniform in ``[0, 1)`` (the top 24 bits of each draw)."""
    return (bits(m, engine, p, n) >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)
