"""A small deterministic Nelder-Mead minimiser over a box (no scipy).

The search runs on the unit cube; callers map ``[0, 1]^d`` onto their parameter ranges.  Points are
clipped into the cube before evaluation, the initial simplex is fixed (``x0`` plus ``step`` along
each axis, reflected inwards at the box edge), and the search restarts from the best point until a
restart no longer improves it, which is enough for the <= 8 parameters of the cost model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Minimum:
    x: tuple[float, ...]
    value: float
    evaluations: int


def _clip(x: Sequence[float]) -> list[float]:
    return [min(1.0, max(0.0, v)) for v in x]


def minimize(
    f: Callable[[list[float]], float],
    x0: Sequence[float],
    *,
    step: float = 0.15,
    max_evaluations: int = 400,
    tolerance: float = 1e-9,
    restarts: int = 3,
) -> Minimum:
    """Minimise ``f`` over ``[0, 1]^d`` from ``x0``; returns the best point found."""
    evaluations = 0

    def g(x: Sequence[float]) -> float:
        nonlocal evaluations
        evaluations += 1
        return f(_clip(x))

    best_x = _clip(x0)
    best_f = g(best_x)
    for _ in range(restarts + 1):
        x, fx = _search(g, best_x, best_f, step, max_evaluations, tolerance, lambda: evaluations)
        improved = fx < best_f - tolerance
        if fx <= best_f:
            best_x, best_f = _clip(x), fx
        if not improved or evaluations >= max_evaluations:
            break
    return Minimum(tuple(best_x), best_f, evaluations)


def _search(
    g: Callable[[Sequence[float]], float],
    x0: list[float],
    f0: float,
    step: float,
    max_evaluations: int,
    tolerance: float,
    used: Callable[[], int],
) -> tuple[list[float], float]:
    d = len(x0)
    simplex = [list(x0)]
    values = [f0]
    for i in range(d):
        x = list(x0)
        x[i] = x[i] + step if x[i] + step <= 1.0 else x[i] - step
        simplex.append(x)
        values.append(g(x))
    while used() < max_evaluations:
        order = sorted(range(d + 1), key=lambda j: values[j])
        simplex = [simplex[j] for j in order]
        values = [values[j] for j in order]
        if values[-1] - values[0] <= tolerance:
            break
        centroid = [sum(p[i] for p in simplex[:-1]) / d for i in range(d)]
        worst = simplex[-1]

        def toward(t: float, worst: list[float] = worst, centroid: list[float] = centroid) -> list[float]:
            return [c + t * (w - c) for c, w in zip(centroid, worst)]

        xr = toward(-1.0)
        fr = g(xr)
        if fr < values[0]:
            xe = toward(-2.0)
            fe = g(xe)
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            xc = toward(0.5 if fr >= values[-1] else -0.5)
            fc = g(xc)
            if fc < min(fr, values[-1]):
                simplex[-1], values[-1] = xc, fc
            else:  # shrink towards the best point
                best = simplex[0]
                for j in range(1, d + 1):
                    simplex[j] = [b + 0.5 * (x - b) for b, x in zip(best, simplex[j])]
                    values[j] = g(simplex[j])
    j = min(range(d + 1), key=lambda i: values[i])
    return simplex[j], values[j]
