"""Block-size search: enumerate, prune, rank with the closed-form model, re-rank with the trace model.

:func:`tune` follows four steps for one kernel, shape, dtype and target:

1. **enumerate** the Cartesian product of the registry's block candidates (registry order);
2. **prune** with the registry's feasibility rule (the same plan the kernel checks in its prologue:
   SBUF bytes per partition, PSUM banks, tile limits); infeasible choices are values with a reason,
   never exceptions.  Candidates that are the same configuration once clamped to the shape (a token
   block larger than S is one block of S; a chunk of more tiles than the contraction has is the whole
   contraction) are merged into the first of them;
3. **rank** with the closed-form model (:mod:`devkit.cost.closed_form`): the latency lower bound
   ``max(FLOPs at peak, HBM bytes at bandwidth) + fixed DMA latency``, then fewer HBM bytes.  The
   closed form does not see every block parameter (chunking, PSUM banks), so its ties are broken
   toward the kernel's current default (fewest parameters changed), then registry order: the
   re-ranked set is the closed-form optimum's neighbourhood of the hand-picked default;
4. **re-rank** the best ``rerank`` and the current default with the trace-based model (a cost-only
   run of the unmodified kernel scheduled on the target), in worker processes.  The default is always
   a contender, so the answer is never worse than it (modelled).

A kernel without a ``movement`` hook has no closed form to rank by, so step 3 would only pick the
default's neighbourhood; instead :func:`model_free_search` traces its whole feasible space when it is
small (``EXHAUSTIVE`` distinct configs), else an even sample of it and then the one-parameter
neighbours of the best configs found, round after round (progress is reported per round).

The answer is deterministic: the same inputs give the same ranking (ties keep registry order).
:func:`write_tuning` merges the winner into the project's tuning table (``[tool.devkit] tuning``, see
:mod:`devkit.project`), which runs without explicit blocks read first (see :mod:`devkit.tuning_table`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit import atomic
from devkit.workflow import executor


class TuneError(ValueError):
    """Bad tuning input (unknown kernel, malformed shape, nothing to tune, nothing feasible)."""


@dataclass(frozen=True)
class Candidate:
    """One block configuration and what each model says about it (times in us)."""

    index: int
    blocks: dict[str, int]
    feasible: bool
    reason: str = ""
    footprint: int = 0
    closed_form_us: float | None = None
    closed_form_key: tuple = ()
    trace_us: float | None = None
    trace_error: str | None = None
    equivalents: int = 0
    is_default: bool = False

    def replace(self, **changes: Any) -> Candidate:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class TuneResult:
    """Outcome of :func:`tune` (``ranked``: trace-ranked candidates, best first)."""

    kernel: str
    shape: dict[str, int]
    dtype: str
    target: str
    enumerated: int
    feasible: int
    distinct: int
    ranked: list[Candidate]
    default_blocks: dict[str, int]
    default_us: float | None
    infeasible_examples: list[Candidate] = field(default_factory=list)

    @property
    def best(self) -> Candidate:
        return self.ranked[0]

    @property
    def speedup_over_default(self) -> float | None:
        if self.default_us and self.best.trace_us:
            return self.default_us / self.best.trace_us
        return None


def parse_shape(text: str, params: Sequence[str]) -> dict[str, int]:
    """``"1024,8192,4096,16384"`` (in ``params`` order) or ``"S=1024,H=8192,..."`` -> dict."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise TuneError(f"empty shape; expected {','.join(params)}")
    try:
        if all("=" in p for p in parts):
            shape = {k.strip(): int(v) for k, v in (p.split("=", 1) for p in parts)}
        elif any("=" in p for p in parts):
            raise TuneError(f"shape {text!r}: use either all NAME=VALUE or all positional values")
        else:
            if len(parts) != len(params):
                raise TuneError(f"shape {text!r}: expected {len(params)} values ({','.join(params)})")
            shape = dict(zip(params, (int(p) for p in parts)))
    except ValueError as exc:
        if isinstance(exc, TuneError):
            raise
        raise TuneError(f"shape {text!r}: values must be integers") from None
    unknown = set(shape) - set(params)
    missing = [p for p in params if p not in shape]
    if unknown or missing:
        raise TuneError(
            f"shape {text!r}: parameters are {','.join(params)} (missing {missing}, "
            f"unknown {sorted(unknown)})"
        )
    if any(v < 1 for v in shape.values()):
        raise TuneError(f"shape {text!r}: dimensions must be >= 1")
    return {p: shape[p] for p in params}


# --- the closed-form model and the clamps: the kernel's declared hooks --------------------------------


def _spec(kernel: Any, registry: Any = None) -> Any:
    """The declaration of ``kernel`` (a spec, a ``FILE.py:KERNEL`` reference or a declared name)."""
    from devkit.declare import KernelSpec
    from devkit.workflow import catalog

    if isinstance(kernel, KernelSpec):
        return kernel
    try:
        return registry.get(kernel) if registry is not None else catalog.get(kernel)
    except (KeyError, catalog.KernelRefError) as exc:
        raise TuneError(str(exc.args[0])) from None


def closed_form_movement(
    kernel: Any, shape: Mapping[str, int], blocks: Mapping[str, int], dtype: str, target: str
) -> Any:
    """FLOPs and HBM bytes of one call (a :class:`devkit.cost.closed_form.Movement`), from the kernel's
    declared ``movement`` hook."""
    spec = _spec(kernel)
    if spec.movement is None:
        raise TuneError(f"no closed-form model for kernel {spec.name!r}")
    return spec.movement(shape, blocks, dtype, target)


def closed_form_key(
    kernel: Any, shape: Mapping[str, int], blocks: Mapping[str, int], dtype: str, target: str
) -> tuple[float | None, tuple]:
    """(lower-bound latency in us, the closed-form part of the sort key) of one candidate; a kernel
    without a ``movement`` hook gives ``(None, ())`` (every candidate ties; the default's neighbourhood
    and declaration order decide which are re-ranked)."""
    from devkit.cost.closed_form import latency_bound

    spec = _spec(kernel)
    if spec.movement is None:
        return None, ()
    mv = spec.movement(shape, blocks, dtype, target)
    bound = latency_bound(target, mv.flops, mv.hbm_bytes, dtype)
    return bound.latency_us, (round(bound.latency_us, 6), mv.hbm_bytes)


def effective_blocks(kernel: Any, shape: Mapping[str, int], blocks: Mapping[str, int]) -> dict[str, int]:
    """``blocks`` as the kernel clamps them to ``shape`` (its declared ``canonical`` hook; identity
    without one).  Two candidates with equal effective blocks are one."""
    spec = _spec(kernel)
    return dict(spec.canonical(shape, blocks)) if spec.canonical else dict(blocks)


def distance(blocks: Mapping[str, int], other: Mapping[str, int]) -> int:
    """Number of block parameters whose values differ."""
    return sum(1 for k, v in blocks.items() if other.get(k) != v)


# --- the trace-based model (runs in workers) ---------------------------------------------------------


def trace_latency(
    kernel: str, shape: Mapping[str, int], dtype: str, target: str, blocks: Mapping[str, int] | None
) -> tuple[float | None, str | None]:
    """Cost-only latency (us) of one call; ``blocks=None`` = the kernel's own defaults."""
    try:
        spec = _spec(kernel)
        report = spec.estimate(dict(shape), dtype, target, dict(blocks) if blocks is not None else None)
    except Exception as exc:  # an infeasible or failing configuration is a value, not a crash
        return None, f"{type(exc).__name__}: {exc}"
    return float(report.latency_us), None


def _trace_job(args: tuple) -> tuple[int, float | None, str | None]:
    key, kernel, shape, dtype, target, blocks = args
    us, err = trace_latency(kernel, shape, dtype, target, blocks)
    return key, us, err


def run_trace_jobs(
    jobs_args: list[tuple], jobs: int | executor.Executor, progress: Callable[[int, int], None] | None
) -> dict[Any, tuple[float | None, str | None]]:
    """Trace-model latencies of ``(key, kernel, shape, dtype, target, blocks)`` jobs on ``jobs`` workers
    or an executor (``{key: (latency_us, error)}``; a failing configuration gives ``(None, message)``).
    Results are checkpointed as they arrive: a rerun after an interruption skips the finished ones."""
    total, finished = len(jobs_args), [0]

    def on_done(_: tuple) -> None:
        finished[0] += 1
        if progress:
            progress(finished[0], total)

    checkpoint = executor.Checkpoint.for_jobs("tune", executor.fn_ref(_trace_job), jobs_args)
    results = executor.run_jobs(_trace_job, jobs_args, jobs=jobs, on_done=on_done, checkpoint=checkpoint)
    return {key: (us, err) for key, us, err in results}


# --- the search -----------------------------------------------------------------------------------

#: Without a closed-form model: trace every distinct feasible config when there are at most this many ...
EXHAUSTIVE = 64
#: ... else trace a sample of this many (spread evenly over the declared order) and climb from its best.
SAMPLE = 32
#: The search climbs from this many of the best configs traced so far ...
BEAM = 3
#: ... and stops after tracing this many times ``exhaustive`` configs.
BUDGET_FACTOR = 4


def model_free_search(
    candidates: Sequence[Candidate],
    default: Candidate,
    trace: Callable[[list[Candidate], str], list[Candidate]],
    *,
    exhaustive: int = EXHAUSTIVE,
    sample: int = SAMPLE,
) -> list[Candidate]:
    """Trace-model search of a config space the closed form cannot rank (no ``movement`` hook).

    Up to ``exhaustive`` distinct feasible configs: all of them are traced.  Beyond: a sample of ``sample``
    configs spread evenly over the declared order (and the default), then rounds that trace every
    untraced config one parameter away from any of the ``BEAM`` best so far, until a round finds nothing
    new or ``BUDGET_FACTOR * exhaustive`` configs are traced.  ``trace(batch, phase)`` returns the batch
    with ``trace_us`` set and reports its progress under ``phase``.  Returns every traced candidate.
    """
    pool_ = list(candidates)
    with_default = pool_ if any(c.is_default for c in pool_) else [*pool_, default]
    if len(pool_) <= exhaustive:
        return trace(with_default, f"trace model: all {len(with_default)} configs")
    step = len(pool_) / max(1, sample)
    first = [pool_[int(i * step)] for i in range(min(sample, len(pool_)))]
    if not any(c.is_default for c in first):
        first.append(default)
    done = {c.index: c for c in trace(first, f"trace model: sample of {len(first)} of {len(pool_)}")}
    budget = BUDGET_FACTOR * exhaustive
    rounds = 0
    while len(done) < budget:
        best = sorted(done.values(), key=lambda c: (c.trace_us is None, c.trace_us or 0.0, c.index))[:BEAM]
        near: dict[int, Candidate] = {}  # neighbours of the best first, then of the next best
        for b in (b for b in best if b.trace_us is not None):
            near.update(
                (c.index, c) for c in pool_ if c.index not in done and distance(c.blocks, b.blocks) == 1
            )
        batch = list(near.values())[: budget - len(done)]
        if not batch:
            break
        rounds += 1
        phase = f"trace model: neighbours of the best {BEAM}, round {rounds}"
        done.update((c.index, c) for c in trace(batch, phase))
    return list(done.values())


def tune(
    kernel: str,
    shape: Mapping[str, int],
    *,
    dtype: str = "bfloat16",
    target: str = "trn1",
    rerank: int = 8,
    jobs: int | executor.Executor = 1,
    progress: Callable[[str, int, int], None] | None = None,
    registry: Any = None,
    exhaustive: int = EXHAUSTIVE,
    sample: int = SAMPLE,
) -> TuneResult:
    """Search the block space of ``kernel`` on ``shape`` (see the module docstring; ``rerank`` applies to
    kernels with a ``movement`` hook, ``exhaustive`` and ``sample`` to those without one)."""
    from devkit.workflow import catalog

    spec = _spec(kernel, registry)
    ref = spec.name if registry is not None else catalog.ref_of(spec)
    if not spec.block_params:
        tunable = registry.all_specs() if registry is not None else catalog.all_specs(include_kit=True)
        raise TuneError(
            f"{spec.name} has no block parameters to tune (declare block_params; tunable: "
            f"{', '.join(s.name for s in tunable if s.block_params)})"
        )
    kernel = spec.name
    if dtype not in spec.dtypes:
        raise TuneError(f"{kernel} supports dtypes {', '.join(spec.dtypes)}, not {dtype!r}")
    shape = {p: int(shape[p]) for p in spec.shape_params}
    blocks_list = spec.candidate_blocks()
    default_blocks = spec.default_blocks(shape, dtype, target)

    def signature(blocks: Mapping[str, int], key: tuple) -> tuple:
        return (key, tuple(sorted(effective_blocks(spec, shape, blocks).items())))

    candidates: list[Candidate] = []
    infeasible: list[Candidate] = []
    seen: dict[tuple, int] = {}
    for idx, blocks in enumerate(blocks_list):
        if progress and (idx % 64 == 0 or idx == len(blocks_list) - 1):
            progress("prune + closed form", idx + 1, len(blocks_list))
        feas = spec.feasible(shape, blocks, dtype, target)
        if not feas.ok:
            if len(infeasible) < 3:
                infeasible.append(Candidate(idx, dict(blocks), False, feas.reason, feas.footprint))
            continue
        bound_us, key = closed_form_key(spec, shape, blocks, dtype, target)
        sig = signature(blocks, key)
        if sig in seen:
            pos = seen[sig]
            candidates[pos] = candidates[pos].replace(equivalents=candidates[pos].equivalents + 1)
            continue
        seen[sig] = len(candidates)
        candidates.append(Candidate(idx, dict(blocks), True, "", feas.footprint, bound_us, key))
    feasible_count = sum(1 + c.equivalents for c in candidates)
    if not candidates:
        reasons = "; ".join(c.reason for c in infeasible) or "no candidates"
        raise TuneError(
            f"no feasible block configuration for {kernel} on {shape} ({dtype}, {target}): {reasons}"
        )

    # the current default is always a contender (found among the candidates when one has its plan)
    d_bound, d_key = closed_form_key(spec, shape, default_blocks, dtype, target)
    d_pos = seen.get(signature(default_blocks, d_key))
    if d_pos is not None:
        default = candidates[d_pos].replace(is_default=True)
        candidates[d_pos] = default
    else:
        feas = spec.feasible(shape, default_blocks, dtype, target)
        default = Candidate(
            -1, dict(default_blocks), feas.ok, feas.reason, feas.footprint, d_bound, d_key, is_default=True
        )

    def rank_key(c: Candidate) -> tuple:
        return (c.closed_form_key, distance(c.blocks, default_blocks), c.index)

    def trace(batch: list[Candidate], phase: str) -> list[Candidate]:
        job_args = [(i, ref, shape, dtype, target, c.blocks) for i, c in enumerate(batch)]

        def on_progress(done: int, total: int) -> None:
            if progress:
                progress(phase, done, total)

        traced = run_trace_jobs(job_args, jobs, on_progress)
        return [c.replace(trace_us=traced[i][0], trace_error=traced[i][1]) for i, c in enumerate(batch)]

    candidates.sort(key=rank_key)
    if spec.movement is None:
        ranked = model_free_search(candidates, default, trace, exhaustive=exhaustive, sample=sample)
    else:
        short = candidates[: max(1, rerank)]
        if not any(c.is_default for c in short):
            short.append(default)
        ranked = trace(short, "trace model")
    ranked.sort(key=lambda c: (c.trace_us is None, c.trace_us or 0.0, *rank_key(c)))
    if ranked[0].trace_us is None:
        raise TuneError(
            f"every re-ranked configuration failed in the trace model; first error: {ranked[0].trace_error}"
        )
    default_us = next(c.trace_us for c in ranked if c.is_default)
    return TuneResult(
        kernel=kernel,
        shape=shape,
        dtype=dtype,
        target=target,
        enumerated=len(blocks_list),
        feasible=feasible_count,
        distinct=len(candidates),
        ranked=ranked,
        default_blocks=default_blocks,
        default_us=default_us,
        infeasible_examples=infeasible,
    )


# --- the tuning table -----------------------------------------------------------------------------


def default_tuning_path() -> Path:
    """The current project's tuning table (``[tool.devkit] tuning``; see :mod:`devkit.project`)."""
    from devkit import project

    return project.state_path("tuning")


def parse_when(items: Sequence[str], shape: Mapping[str, int]) -> dict[str, list[int | None]]:
    """``when`` bounds of a tuning entry: exact ``[v, v]`` per shape parameter unless widened with
    ``NAME=LO:HI`` (either side may be empty: open)."""
    when: dict[str, list[int | None]] = {k: [v, v] for k, v in shape.items()}
    for item in items:
        if "=" not in item or ":" not in item.split("=", 1)[1]:
            raise TuneError(f"--when {item!r}: expected NAME=LO:HI (LO or HI may be empty)")
        name, rng = item.split("=", 1)
        if name not in shape:
            raise TuneError(f"--when {item!r}: {name!r} is not a shape parameter ({', '.join(shape)})")
        lo, hi = rng.split(":", 1)
        try:
            bounds = [int(lo) if lo.strip() else None, int(hi) if hi.strip() else None]
        except ValueError:
            raise TuneError(f"--when {item!r}: bounds must be integers") from None
        if bounds[0] is not None and bounds[1] is not None and bounds[0] > bounds[1]:
            raise TuneError(f"--when {item!r}: LO > HI")
        when[name] = bounds
    return when


def read_tuning_table(path: str | Path) -> dict[str, Any]:
    """The tuning table at ``path``; :class:`TuneError` naming the file if it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TuneError(f"{path}: not a readable tuning table: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != 1:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise TuneError(f"{path}: unsupported tuning schema {found!r} (expected 1)")
    if not isinstance(data.get("kernels", {}), dict):
        raise TuneError(f"{path}: 'kernels' must be an object")
    return data


def _table_key(kernel: str) -> str:
    """The tuning-table key of a declared kernel: its family (the Beta-1 and Beta-2 versions of a kernel
    share one table entry), else the name itself."""
    from devkit.declare import declared

    spec = declared().get(kernel)
    return spec.family if spec is not None else kernel


def write_tuning(
    result: TuneResult,
    path: str | Path | None = None,
    *,
    when: Mapping[str, Any] | None = None,
    command: str = "devkit tune",
) -> Path:
    """Merge ``result.best`` into the tuning table at ``path`` (atomic rewrite; other entries kept).

    The new entry goes first in its (kernel, target, dtype) list, replacing an entry with the same
    ``when``; lookups take the first match, so an exact-shape entry wins over broader buckets.
    """
    path = Path(path) if path else default_tuning_path()
    if path.exists():
        data = read_tuning_table(path)
    else:
        data = {"schema": 1, "generated_by": command, "kernels": {}}
    when = dict(when) if when is not None else {k: [v, v] for k, v in result.shape.items()}
    best = result.best
    entry = {
        "when": when,
        "blocks": dict(best.blocks),
        "note": f"{command}: {best.trace_us:.1f} us modelled on {result.target}"
        + (f" (default {result.default_us:.1f} us)" if result.default_us else ""),
    }
    by_dtype = (
        data.setdefault("kernels", {}).setdefault(_table_key(result.kernel), {}).setdefault(result.target, {})
    )
    entries = [e for e in by_dtype.get(result.dtype, []) if e.get("when") != when]
    by_dtype[result.dtype] = [entry, *entries]
    data["generated_by"] = f"{command} (merged; hand entries kept)"
    atomic.write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path
