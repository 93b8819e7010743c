"""End-to-end LLM inference latency estimator: dense MLPs vs SVD-compressed MLPs.

The estimate of one generation (``batch`` sequences, ``context`` prompt tokens, ``generate`` new tokens) is

* **prefill**: one context-encoding forward pass over ``batch x context`` tokens (it also yields the first
  new token), plus
* **decode**: ``generate - 1`` token-generation steps, step ``k`` attending ``context + k`` cached
  positions plus itself.

Every forward pass is the operator list of :func:`devkit.workflow.llm.forward_ops`.  MLP time comes from a pluggable
:class:`MlpCostProvider` (per layer, at the MLP's token count); everything else from a roofline with the
named efficiencies of :class:`Efficiencies` (the roofline rule ``max(compute, memory) + fixed`` is the cost
model's :class:`devkit.cost.closed_form.Bound`).  The default provider, :class:`RooflineMlpCost`, applies the
same roofline to the MLP, so with it the speedup isolates the effect of compression (fewer FLOPs and
bytes); a provider that runs the project's kernels through the simulator's cost model adds the kernel
effect.  Provider results are cached on disk (:class:`DiskCache`).

Units: times in microseconds (``*_us``) or milliseconds (``*_ms``, the result), bandwidths in bytes/s,
throughputs in FLOP/s or elements/s.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from devkit import atomic
from devkit.cost.closed_form import Bound
from devkit.jsondict import pick
from devkit.workflow import llm
from devkit.workflow.llm import LlmConfig, MlpRanks, Op

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_CONTEXT",
    "DEFAULT_GENERATE",
    "PROVIDERS",
    "TARGETS",
    "CachedMlpCost",
    "DiskCache",
    "E2EResult",
    "Efficiencies",
    "MlpCostProvider",
    "RooflineMlpCost",
    "RooflineTarget",
    "StackBaseline",
    "estimate",
    "get_provider",
    "measured_stack",
    "op_time_us",
    "register_provider",
    "stack_baseline",
]

#: Defaults follow the paper's end-to-end runs (NMM ``run.sh``: batch 1, ``--max-context-length 32``,
#: ``--seq-len 64``, i.e. 32 prompt tokens and 32 new tokens), reference/neuronmm.md §4.1.
DEFAULT_BATCH = 1
DEFAULT_CONTEXT = 32
DEFAULT_GENERATE = 32

#: Bumped when the meaning of cached values changes.
CACHE_SCHEMA = 1


# ------------------------------------------------------------------------------------ hardware data


@dataclass(frozen=True)
class RooflineTarget:
    """Per-NeuronCore peak rates of a target (sources in ``sources``).

    ``tensor_flops_16`` is the TensorE peak for 16-bit (and fp8/tf32) operands, ``tensor_flops_32`` for
    fp32, in FLOP/s; ``hbm_bytes_per_s`` the HBM bandwidth available to one core; ``vector_elems_per_s``
    the VectorE element rate (16-bit data); ``min_moving`` the moving-free size below which a matmul
    costs the same as at that size (TensorE initiation interval, cycles).
    """

    name: str
    tensor_flops_16: float
    tensor_flops_32: float
    hbm_bytes_per_s: float
    vector_elems_per_s: float
    min_moving: int
    sources: str


def _roofline_target(name: str) -> RooflineTarget:
    """Peak rates of a target, read from the cost model's target description (one source of truth)."""
    from devkit.targets import load_target

    t = load_target(name)
    lanes = t.sbuf.partitions
    return RooflineTarget(
        name,
        tensor_flops_16=t.tensor.peak_tflops_bf16 * 1e12,
        tensor_flops_32=t.tensor.peak_tflops_fp32 * 1e12,
        hbm_bytes_per_s=t.hbm.bw_bytes_per_ns * 1e9,
        vector_elems_per_s=t.clock.vector_ghz * 1e9 * lanes * t.vector.perf_mode_factor_contiguous,
        min_moving=t.tensor.moving_min_cycles,
        sources=(
            f"devkit/targets/{name}.toml: tensor.peak_tflops_bf16/fp32, hbm.bw_bytes_per_ns, "
            "clock.vector_ghz x partitions (x vector.perf_mode_factor_contiguous), tensor.moving_min_cycles"
        ),
    )


def _target_names() -> tuple[str, ...]:
    from devkit.targets import TARGETS as names

    return tuple(names)


#: Target names the estimator knows (those of devkit/targets/).
TARGETS: tuple[str, ...] = _target_names()


@dataclass(frozen=True)
class Efficiencies:
    """Achieved fractions of peak and fixed costs of the roofline.  ALL ARE ASSUMPTIONS (uncalibrated).

    Each field's ``metadata["note"]`` says where its value comes from; :meth:`describe` exports them.
    """

    tensor: float = field(
        default=0.75,
        metadata={"note": "assumption: fraction of TensorE peak a well-tiled matmul sustains"},
    )
    hbm: float = field(
        default=0.70,
        metadata={"note": "assumption: fraction of per-core HBM bandwidth a streaming operator achieves"},
    )
    vector: float = field(
        default=0.50,
        metadata={"note": "assumption: fraction of VectorE element rate for norms/elementwise operators"},
    )
    op_overhead_us: float = field(
        default=2.0,
        metadata={
            "note": (
                "assumption: fixed cost per operator/kernel launch in us, of the order of one DMA fixed "
                "cost (~1.3 us, reference/nki_api.md §4.4) plus engine synchronisation"
            )
        },
    )
    mlp_kernel_calls: int = field(
        default=2,
        metadata={
            "note": (
                "assumption: an MLP runs as 2 kernels (gate/up + SwiGLU, then down), dense and SVD "
                "alike, as in NeuronMM's fused MLP (reference/neuronmm.md §2.5)"
            )
        },
    )

    def describe(self) -> dict[str, dict[str, Any]]:
        """``{name: {"value": ..., "note": ...}}`` for reports."""
        return {f.name: {"value": getattr(self, f.name), "note": f.metadata["note"]} for f in fields(self)}


@functools.cache
def get_target(name: str) -> RooflineTarget:
    """The :class:`RooflineTarget` called ``name``; ``ValueError`` naming the valid ones otherwise."""
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}; valid targets: {', '.join(TARGETS)}")
    return _roofline_target(name)


# -------------------------------------------------------------------------------------------- roofline


def _pad(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _compute_us(op: Op, target: RooflineTarget, eff: Efficiencies, dtype: str) -> float:
    """TensorE or VectorE time of one instance of ``op`` (no memory, no overhead)."""
    if op.kind == "matmul":
        m, k, n = op.shape
        # moving free size below min_moving costs like min_moving; contraction occupies 128 partitions
        flops = 2.0 * op.batch * max(m, target.min_moving) * _pad(k, 128) * n
        peak = target.tensor_flops_32 if llm.bytes_per_element(dtype) >= 4 else target.tensor_flops_16
        return flops / (peak * eff.tensor) * 1e6
    return op.elements / (target.vector_elems_per_s * eff.vector) * 1e6


def op_time_us(
    op: Op, target: str | RooflineTarget, eff: Efficiencies | None = None, dtype: str = "bfloat16"
) -> float:
    """Roofline time of all ``op.repeat`` instances of ``op``, microseconds.

    Per instance: ``max(compute, hbm_bytes / (BW·η_hbm)) + op_overhead_us``, where compute is TensorE
    FLOPs at ``peak·η_tensor`` (matmuls; padded to the TensorE tile granularity) or vector elements at
    ``rate·η_vector`` (everything else).
    """
    tgt = get_target(target) if isinstance(target, str) else target
    e = eff or Efficiencies()
    memory = op.bytes / (tgt.hbm_bytes_per_s * e.hbm) * 1e6
    return op.repeat * Bound(_compute_us(op, tgt, e, dtype), memory, e.op_overhead_us).latency_us


# ---------------------------------------------------------------------------------------- providers


@runtime_checkable
class MlpCostProvider(Protocol):
    """Latency of one transformer MLP (gate/up projections, SwiGLU, down projection) on one NeuronCore.

    ``S`` tokens, hidden size ``H``, intermediate size ``I``, ``dtype`` an NKI dtype name, ``target`` a
    target name (``trn1``/``inf2``/``trn2``); ``ranks`` are the factor ranks of the SVD variant.
    Returns microseconds.  ``name`` identifies the provider/kernels and ``version`` changes whenever its
    numbers would (both go into cache keys).
    """

    name: str
    version: str

    def dense_mlp_us(self, S: int, H: int, I: int, dtype: str, target: str) -> float:
        """Dense MLP time, microseconds."""
        ...

    def svd_mlp_us(self, S: int, H: int, I: int, ranks: MlpRanks, dtype: str, target: str) -> float:
        """SVD-factored MLP time, microseconds."""
        ...


class RooflineMlpCost:
    """MLP cost from the roofline: all MLP operators overlapped inside ``mlp_kernel_calls`` fused kernels.

    Time = ``max(Σ compute, Σ bytes / (BW·η_hbm)) + mlp_kernel_calls·op_overhead_us`` over the operators of
    :func:`devkit.workflow.llm.mlp_ops` (fused: intermediates stay on chip).  Dense and SVD get identical
    assumptions, so their ratio is the effect of compression alone.
    """

    name = "roofline"

    def __init__(self, efficiencies: Efficiencies | None = None) -> None:
        self.efficiencies = efficiencies or Efficiencies()
        blob = json.dumps(self.efficiencies.describe(), sort_keys=True)
        self.version = hashlib.sha256(blob.encode()).hexdigest()[:16]

    def _time(self, ops: list[Op], dtype: str, target: str) -> float:
        tgt, e = get_target(target), self.efficiencies
        compute = sum(_compute_us(op, tgt, e, dtype) * op.repeat for op in ops)
        memory = sum(op.total_bytes for op in ops) / (tgt.hbm_bytes_per_s * e.hbm) * 1e6
        return Bound(compute, memory, e.mlp_kernel_calls * e.op_overhead_us).latency_us

    def dense_mlp_us(self, S: int, H: int, I: int, dtype: str, target: str) -> float:
        """Dense MLP roofline time, microseconds."""
        return self._time(llm.mlp_ops(S, H, I, dtype=dtype), dtype, target)

    def svd_mlp_us(self, S: int, H: int, I: int, ranks: MlpRanks, dtype: str, target: str) -> float:
        """SVD MLP roofline time (fused X·U·V, intermediates on chip), microseconds."""
        return self._time(llm.mlp_ops(S, H, I, ranks=MlpRanks(*ranks), dtype=dtype), dtype, target)


class KernelMlpCost:
    """MLP cost from the cost model running the project's NKI kernels (cost-only simulation).

    Dense: ``dense_mlp`` (gate/up, SwiGLU, down in one kernel); SVD: ``svd_mlp`` (the fused NeuronMM
    chain).  ``version`` hashes the kernels, the simulator and the cost model, so a cached number is
    recomputed whenever any of them changes.
    """

    name = "kernels"

    def __init__(self) -> None:
        self.version = _sources_version(["devkit/kernels", "devkit/sim", "devkit/cost", "devkit/nki"])

    @staticmethod
    def _latency(kernel: str, shape: dict[str, int], dtype: str, target: str) -> float:
        from devkit.kernels import registry

        return float(registry.get(kernel).estimate(shape, dtype, target).latency_us)

    def dense_mlp_us(self, S: int, H: int, I: int, dtype: str, target: str) -> float:
        """Dense MLP kernel time, microseconds."""
        return self._latency("dense_mlp", {"S": S, "H": H, "I": I}, dtype, target)

    def svd_mlp_us(self, S: int, H: int, I: int, ranks: MlpRanks, dtype: str, target: str) -> float:
        """SVD MLP kernel time, microseconds (one rank for all projections: the rank rule is symmetric)."""
        r = max(ranks.gate, ranks.up, ranks.down)
        return self._latency("svd_mlp", {"S": S, "H": H, "I": I, "r": r}, dtype, target)


def _sources_version(paths: list[str]) -> str:
    """Hash of the Python/TOML/JSON sources under ``paths`` (relative to the project root)."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for rel in paths:
        base = root / rel
        for f in sorted(base.rglob("*")) if base.is_dir() else [base]:
            if f.suffix in (".py", ".toml", ".json") and f.is_file():
                digest.update(str(f.relative_to(root)).encode())
                digest.update(f.read_bytes())
    return digest.hexdigest()[:16]


def _project_cache() -> Path:
    """The current project's cache directory (``[tool.devkit] cache``, see :mod:`devkit.project`)."""
    from devkit import project

    return project.state_path("cache")


#: Provider factories by name (``devkit e2e --provider NAME``).
PROVIDERS: dict[str, Callable[[], MlpCostProvider]] = {"kernels": KernelMlpCost, "roofline": RooflineMlpCost}
DEFAULT_PROVIDER = "kernels"


def register_provider(name: str, factory: Callable[[], MlpCostProvider]) -> None:
    """Make a provider available as ``devkit e2e --provider NAME`` (e.g. the kernel-based one)."""
    PROVIDERS[name] = factory


def get_provider(name: str) -> MlpCostProvider:
    """Instantiate the provider registered as ``name``; ``ValueError`` listing valid names otherwise."""
    if name not in PROVIDERS:
        raise ValueError(f"unknown MLP cost provider {name!r}; valid providers: {', '.join(PROVIDERS)}")
    return PROVIDERS[name]()


# -------------------------------------------------------------------------------------------- cache


def _code_version() -> str:
    digest = hashlib.sha256()
    for source in (llm.__file__, __file__):
        if source and os.path.exists(source):
            digest.update(Path(source).read_bytes())
    return digest.hexdigest()[:16]


#: Hash of this module's and devkit.workflow.llm's source; part of every cache key.
CODE_VERSION = _code_version()


class DiskCache:
    """JSON-file cache under ``root`` (default ``$DEVKIT_CACHE_DIR`` or the project's ``.devkit-cache``),
    sub-dir ``e2e``.

    One file per key (the SHA-256 of the canonical JSON of the key), written atomically
    (:mod:`devkit.atomic`) so concurrent writers never leave a torn entry; unreadable entries count as misses.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        base = root if root is not None else os.environ.get("DEVKIT_CACHE_DIR") or _project_cache()
        self.dir = Path(base) / "e2e"

    @staticmethod
    def _digest(key: Mapping[str, Any]) -> str:
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()

    def get(self, key: Mapping[str, Any]) -> Any | None:
        """The cached value for ``key`` or None."""
        path = self.dir / f"{self._digest(key)}.json"
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if entry.get("key") != json.loads(json.dumps(key, sort_keys=True)):
            return None
        return entry.get("value")

    def put(self, key: Mapping[str, Any], value: Any) -> None:
        """Store ``value`` (JSON-serialisable) under ``key`` atomically (:func:`devkit.atomic.write_text`)."""
        path = self.dir / f"{self._digest(key)}.json"
        atomic.write_text(path, json.dumps({"key": key, "value": value}, sort_keys=True))


class CachedMlpCost:
    """Wraps a provider with an in-memory memo and a :class:`DiskCache`.

    Keys: (provider name, provider version, method, S, H, I, ranks, dtype, target, :data:`CODE_VERSION`).
    ``calls`` counts calls that reached the wrapped provider.
    """

    def __init__(self, provider: MlpCostProvider, cache: DiskCache | None = None) -> None:
        self.provider, self.cache = provider, cache
        self.name, self.version = provider.name, provider.version
        self.calls = 0
        self._memo: dict[str, float] = {}

    def _lookup(self, key: dict[str, Any], compute: Callable[[], float]) -> float:
        key = {
            "schema": CACHE_SCHEMA,
            "code_version": CODE_VERSION,
            "provider": self.name,
            "provider_version": self.version,
            **key,
        }
        memo_key = json.dumps(key, sort_keys=True)
        if memo_key in self._memo:
            return self._memo[memo_key]
        value = self.cache.get(key) if self.cache is not None else None
        if not isinstance(value, (int, float)):
            self.calls += 1
            value = float(compute())
            if not value > 0:
                raise ValueError(f"MLP cost provider {self.name!r} returned {value} us for {key}")
            if self.cache is not None:
                self.cache.put(key, value)
        self._memo[memo_key] = float(value)
        return float(value)

    def dense_mlp_us(self, S: int, H: int, I: int, dtype: str, target: str) -> float:
        """Cached :meth:`MlpCostProvider.dense_mlp_us`."""
        key = {"method": "dense_mlp", "S": S, "H": H, "I": I, "dtype": dtype, "target": target}
        return self._lookup(key, lambda: self.provider.dense_mlp_us(S, H, I, dtype, target))

    def svd_mlp_us(self, S: int, H: int, I: int, ranks: MlpRanks, dtype: str, target: str) -> float:
        """Cached :meth:`MlpCostProvider.svd_mlp_us`."""
        key = {
            "method": "svd_mlp",
            "S": S,
            "H": H,
            "I": I,
            "ranks": list(ranks),
            "dtype": dtype,
            "target": target,
        }
        return self._lookup(key, lambda: self.provider.svd_mlp_us(S, H, I, MlpRanks(*ranks), dtype, target))


# ------------------------------------------------------------------------------------------ baseline

#: The published NeuronMM end-to-end measurements (``e2e_measured.json``) behind ``--baseline``.
MEASURED_PATH = Path(__file__).with_name("e2e_measured.json")


def _run_settings(data: Mapping[str, Any]) -> dict[str, Any]:
    """The generation's settings (``batch``, ``context``, ``generate``, ``target``) of a plain-data record
    (the measured stack, an executor job), as :func:`estimate` takes them."""
    return {key: data[key] for key in ("batch", "context", "generate", "target")}


@functools.cache
def measured_stack() -> dict[str, Any]:
    """The published end-to-end measurements of the NeuronMM stack (see ``e2e_measured.json``)."""
    return json.loads(MEASURED_PATH.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class StackBaseline:
    """The measured serving stack's efficiencies relative to this estimator, per phase.

    The published pair (dense and SVD runs of one model, same stack) differ only in the MLP.  Taking the
    SVD MLP (the paper's own kernels) as this estimator models it, the rest of a step (attention,
    norms, framework and launch costs) took ``measured_svd - modelled_svd_mlp`` on the stack, and the
    stack's dense MLP ``measured_dense - measured_svd + modelled_svd_mlp``.  The efficiencies are this
    estimator's time over the stack's: ``rest`` for everything but the MLP, ``dense_mlp`` for the
    compiler-generated dense MLP.  Prefill is calibrated on CTE, decode on TKG per step.
    """

    prefill_dense_mlp: float
    prefill_rest: float
    decode_dense_mlp: float
    decode_rest: float
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "efficiency": {
                "prefill_dense_mlp": self.prefill_dense_mlp,
                "prefill_rest": self.prefill_rest,
                "decode_dense_mlp": self.decode_dense_mlp,
                "decode_rest": self.decode_rest,
            },
            "source": self.source,
        }


def stack_baseline(
    provider: MlpCostProvider | None = None, cache: DiskCache | bool | None = True
) -> StackBaseline:
    """Calibrate :class:`StackBaseline` from :func:`measured_stack` with this estimator's own numbers."""
    m = measured_stack()
    r = estimate(m["model"], m["compression"], **_run_settings(m), provider=provider, cache=cache)
    steps = max(r.decode_steps, 1)
    pre_dense_mlp, pre_svd_mlp = r.prefill_mlp_dense_ms, r.prefill_mlp_svd_ms
    dec_dense_mlp = (r.mlp_dense_ms - pre_dense_mlp) / steps
    dec_svd_mlp = (r.mlp_svd_ms - pre_svd_mlp) / steps
    pre_rest = r.prefill_svd_ms - pre_svd_mlp
    dec_rest = r.decode_svd_ms_per_token - dec_svd_mlp
    dense, svd = m["dense"], m["svd"]
    stack = {
        "prefill_dense_mlp": dense["cte_ms"] - svd["cte_ms"] + pre_svd_mlp,
        "prefill_rest": svd["cte_ms"] - pre_svd_mlp,
        "decode_dense_mlp": dense["tkg_ms_per_step"] - svd["tkg_ms_per_step"] + dec_svd_mlp,
        "decode_rest": svd["tkg_ms_per_step"] - dec_svd_mlp,
    }
    if min(stack.values()) <= 0:
        raise ValueError(f"the measured stack numbers do not split into positive parts: {stack}")
    return StackBaseline(
        prefill_dense_mlp=pre_dense_mlp / stack["prefill_dense_mlp"],
        prefill_rest=pre_rest / stack["prefill_rest"],
        decode_dense_mlp=dec_dense_mlp / stack["decode_dense_mlp"],
        decode_rest=dec_rest / stack["decode_rest"],
        source=m["source"],
    )


# ------------------------------------------------------------------------------------------ estimate


@dataclass(frozen=True)
class E2EResult:
    """One end-to-end estimate, times in milliseconds; :meth:`to_dict` is the ``devkit e2e --json`` object."""

    model: str
    compression: float
    target: str
    dtype: str
    batch: int
    context: int
    generate: int
    provider: str
    ranks: MlpRanks
    prefill_dense_ms: float
    prefill_svd_ms: float
    prefill_mlp_dense_ms: float
    prefill_mlp_svd_ms: float
    decode_steps: int
    decode_dense_ms: float
    decode_svd_ms: float
    decode_dense_ms_per_token: float
    decode_svd_ms_per_token: float
    mlp_dense_ms: float
    mlp_svd_ms: float
    breakdown_dense_ms: dict[str, float]
    breakdown_svd_ms: dict[str, float]
    params_dense: int
    params_svd: int
    assumptions: dict[str, Any]
    #: with ``baseline``: the dense run as the measured stack runs its dense MLP (see :class:`StackBaseline`)
    baseline: dict[str, Any] | None = None

    @property
    def dense_ms(self) -> float:
        """Dense end-to-end time (prefill + decode), ms."""
        return self.prefill_dense_ms + self.decode_dense_ms

    @property
    def svd_ms(self) -> float:
        """SVD end-to-end time (prefill + decode), ms."""
        return self.prefill_svd_ms + self.decode_svd_ms

    @property
    def speedup(self) -> float:
        """``dense_ms / svd_ms``."""
        return self.dense_ms / self.svd_ms

    @property
    def mlp_share(self) -> float:
        """Fraction of the dense end-to-end time spent in the MLPs."""
        return self.mlp_dense_ms / self.dense_ms

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with the contract keys (``model``, ``compression``, ``rank``, ``dense_ms``...)."""
        return {
            **pick(self, "model compression target dtype batch context generate provider"),
            "rank": {"gate_proj": self.ranks.gate, "up_proj": self.ranks.up, "down_proj": self.ranks.down},
            **pick(self, "dense_ms svd_ms speedup"),
            "prefill": {
                "tokens": self.batch * self.context,
                "dense_ms": self.prefill_dense_ms,
                "svd_ms": self.prefill_svd_ms,
                "mlp_dense_ms": self.prefill_mlp_dense_ms,
                "mlp_svd_ms": self.prefill_mlp_svd_ms,
            },
            "decode": {
                "steps": self.decode_steps,
                "dense_ms": self.decode_dense_ms,
                "svd_ms": self.decode_svd_ms,
                "dense_ms_per_token": self.decode_dense_ms_per_token,
                "svd_ms_per_token": self.decode_svd_ms_per_token,
            },
            "mlp_share": self.mlp_share,
            "mlp_ms": {"dense": self.mlp_dense_ms, "svd": self.mlp_svd_ms},
            "breakdown_ms": {"dense": self.breakdown_dense_ms, "svd": self.breakdown_svd_ms},
            "params": {"dense": self.params_dense, "svd": self.params_svd},
            "assumptions": self.assumptions,
            **({"baseline": self.baseline} if self.baseline is not None else {}),
        }


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def check_context(config: llm.LlmConfig, context: int, generate: int) -> None:
    """A sequence of ``context`` prompt plus ``generate`` new tokens must fit the model's context window."""
    if context + generate > config.max_context:
        raise ValueError(
            f"context {context:,} + generate {generate:,} = {context + generate:,} tokens exceeds "
            f"{config.name}'s maximum context of {config.max_context:,} positions"
        )


@dataclass
class _Pass:
    """Accumulated milliseconds of forward passes, by category."""

    by_category: dict[str, float] = field(default_factory=dict)

    def add(self, category: str, us: float) -> None:
        self.by_category[category] = self.by_category.get(category, 0.0) + us / 1000.0

    @property
    def total(self) -> float:
        return sum(self.by_category.values())


def _non_mlp_us(ops: list[Op], target: RooflineTarget, eff: Efficiencies, dtype: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for op in ops:
        if op.category != "mlp":
            out[op.category] = out.get(op.category, 0.0) + op_time_us(op, target, eff, dtype)
    return out


def estimate(
    model: str | LlmConfig,
    compression: float,
    *,
    batch: int = DEFAULT_BATCH,
    context: int = DEFAULT_CONTEXT,
    generate: int = DEFAULT_GENERATE,
    target: str = "trn1",
    dtype: str = "bfloat16",
    provider: MlpCostProvider | None = None,
    cache: DiskCache | bool | None = True,
    efficiencies: Efficiencies | None = None,
    baseline: bool = False,
) -> E2EResult:
    """Estimate dense and SVD end-to-end latency of one generation (see the module docstring).

    ``model``: a name from :data:`devkit.workflow.llm.MODELS` (``KeyError`` listing valid names otherwise) or a
    config.  ``compression``: fraction of MLP parameters removed (ranks by :func:`devkit.workflow.svd.factor.rank_for`).
    ``provider``: MLP cost provider (default :class:`KernelMlpCost`: the project's NKI kernels through the
    cost model; :class:`RooflineMlpCost` with ``efficiencies`` is the alternative); ``cache``:
    True = :class:`DiskCache` at its default location, a :class:`DiskCache`, or False/None for none.
    Decode per-token numbers are the mean over the ``generate - 1`` steps; when ``generate == 1`` no step
    runs and they give the cost the next step would have.  ``baseline``: also give the dense run with its
    MLP at the measured stack's efficiency (:func:`stack_baseline`), in ``E2EResult.baseline``.
    """
    config = model if isinstance(model, LlmConfig) else llm.get_config(model)
    _positive_int(batch, "batch")
    _positive_int(context, "context")
    _positive_int(generate, "generate")
    check_context(config, context, generate)
    tgt = get_target(target)
    llm.bytes_per_element(dtype)
    eff = efficiencies or Efficiencies()
    ranks = llm.mlp_ranks(config, compression)
    base = provider if provider is not None else get_provider(DEFAULT_PROVIDER)
    disk = DiskCache() if cache is True else (cache or None)
    mlp = base if isinstance(base, CachedMlpCost) else CachedMlpCost(base, disk)
    h, i, n_layers = config.hidden, config.intermediate, config.layers

    def mlp_ms(tokens: int) -> tuple[float, float]:
        dense = mlp.dense_mlp_us(tokens, h, i, dtype, target) * n_layers / 1000.0
        svd = mlp.svd_mlp_us(tokens, h, i, ranks, dtype, target) * n_layers / 1000.0
        return dense, svd

    dense, svd = _Pass(), _Pass()
    # prefill
    prefill_ops = llm.forward_ops(config, "prefill", batch, context, dtype=dtype)
    for category, us in _non_mlp_us(prefill_ops, tgt, eff, dtype).items():
        dense.add(category, us)
        svd.add(category, us)
    pre_mlp_dense, pre_mlp_svd = mlp_ms(batch * context)
    dense.add("mlp", pre_mlp_dense * 1000.0)
    svd.add("mlp", pre_mlp_svd * 1000.0)
    prefill_dense, prefill_svd = dense.total, svd.total

    # decode: step k attends context + k cached positions plus the new token
    steps = generate - 1
    dec_mlp_dense, dec_mlp_svd = mlp_ms(batch)
    step_range = range(steps) if steps > 0 else range(1)
    dec_dense, dec_svd = _Pass(), _Pass()
    for k in step_range:
        ops = llm.forward_ops(config, "decode", batch, context + k, dtype=dtype)
        for category, us in _non_mlp_us(ops, tgt, eff, dtype).items():
            dec_dense.add(category, us)
            dec_svd.add(category, us)
        dec_dense.add("mlp", dec_mlp_dense * 1000.0)
        dec_svd.add("mlp", dec_mlp_svd * 1000.0)
    per_dense = dec_dense.total / len(step_range)
    per_svd = dec_svd.total / len(step_range)
    decode_dense = dec_dense.total if steps > 0 else 0.0
    decode_svd = dec_svd.total if steps > 0 else 0.0
    if steps > 0:
        for category, ms in dec_dense.by_category.items():
            dense.add(category, ms * 1000.0)
        for category, ms in dec_svd.by_category.items():
            svd.add(category, ms * 1000.0)

    mlp_svd_params = n_layers * (ranks.gate * (h + i) + ranks.up * (h + i) + ranks.down * (h + i))
    base_out = None
    if baseline:
        sb = stack_baseline(provider=base, cache=cache)
        pre_rest = prefill_svd - pre_mlp_svd
        dec_rest = per_svd - dec_mlp_svd
        b_pre_dense = pre_rest / sb.prefill_rest + pre_mlp_dense / sb.prefill_dense_mlp
        b_pre_svd = pre_rest / sb.prefill_rest + pre_mlp_svd
        b_dec_dense = dec_rest / sb.decode_rest + dec_mlp_dense / sb.decode_dense_mlp
        b_dec_svd = dec_rest / sb.decode_rest + dec_mlp_svd
        n_dec = steps if steps > 0 else 0
        b_dense = b_pre_dense + b_dec_dense * n_dec
        b_svd = b_pre_svd + b_dec_svd * n_dec
        base_out = {
            **sb.to_dict(),
            "prefill": {"dense_ms": b_pre_dense, "svd_ms": b_pre_svd},
            "decode": {"dense_ms_per_token": b_dec_dense, "svd_ms_per_token": b_dec_svd},
            "dense_ms": b_dense,
            "svd_ms": b_svd,
            "speedup": b_dense / b_svd,
        }
    return E2EResult(
        model=config.name,
        compression=float(compression),
        target=target,
        dtype=dtype,
        batch=batch,
        context=context,
        generate=generate,
        provider=mlp.name,
        ranks=ranks,
        prefill_dense_ms=prefill_dense,
        prefill_svd_ms=prefill_svd,
        prefill_mlp_dense_ms=pre_mlp_dense,
        prefill_mlp_svd_ms=pre_mlp_svd,
        decode_steps=steps,
        decode_dense_ms=decode_dense,
        decode_svd_ms=decode_svd,
        decode_dense_ms_per_token=per_dense,
        decode_svd_ms_per_token=per_svd,
        mlp_dense_ms=dense.by_category["mlp"],
        mlp_svd_ms=svd.by_category["mlp"],
        breakdown_dense_ms=dict(dense.by_category),
        breakdown_svd_ms=dict(svd.by_category),
        params_dense=config.params,
        params_svd=config.params - config.mlp_params + mlp_svd_params,
        assumptions={
            "target": {"name": tgt.name, "sources": tgt.sources},
            "efficiencies": eff.describe(),
            "provider_version": mlp.version,
            "code_version": CODE_VERSION,
        },
        baseline=base_out,
    )


def estimate_job(item: Mapping[str, Any]) -> E2EResult:
    """One cell of an estimate grid from plain data (an executor job, :mod:`devkit.workflow.executor`):
    ``{"model", "ratio", "batch", "context", "generate", "target", "dtype", "provider", "cache",
    "baseline"}`` with the provider by its registered name and ``cache`` true for the project's disk cache."""
    return estimate(
        item["model"],
        item["ratio"],
        **_run_settings(item),
        dtype=item["dtype"],
        provider=get_provider(item["provider"]),
        cache=DiskCache() if item["cache"] else None,
        baseline=item["baseline"],
    )
