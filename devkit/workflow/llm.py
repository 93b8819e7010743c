"""LLM configurations and the operators of one forward pass (shapes, FLOPs, HBM bytes).

Six decoder-only models from the NeuronMM evaluation (reference/neuronmm.md §4.2), kept as data in
``llm_models.json`` next to this module, each with the Hugging Face ``config.json`` it was taken from
(:func:`load_models` reads it strictly).  :func:`forward_ops` lists what one forward pass does, either
*prefill* (context encoding of ``context`` tokens per sequence) or one *decode* step (one new token per
sequence attending ``context`` cached positions plus itself), with dense or SVD-factored MLPs.

Units: FLOPs count a multiply-add as 2; bytes are HBM bytes (weights read once per operator, activations
read and written once, attention score/probability tiles assumed to stay on chip, flash-style);
``elements`` is the element count a vector/scalar engine has to stream.  Counts are per operator
instance; ``repeat`` says how many instances one forward pass runs (e.g. once per layer).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NamedTuple

from devkit.dtype_names import itemsize

__all__ = [
    "MODELS",
    "LlmConfig",
    "MlpRanks",
    "Op",
    "bytes_per_element",
    "forward_ops",
    "get_config",
    "mlp_ops",
    "mlp_ranks",
]

PREFILL = "prefill"
DECODE = "decode"

#: Operator categories used in :attr:`Op.category`.
CATEGORIES = ("embedding", "norm", "attention_proj", "attention", "elementwise", "mlp", "lm_head")


@dataclass(frozen=True)
class LlmConfig:
    """Architecture of a Llama/Qwen3-style decoder (sizes in elements).

    ``hidden``/``intermediate`` are the MLP's H and I, ``heads``/``kv_heads`` the query and key/value head
    counts (grouped-query attention), ``head_dim`` the per-head width (``heads*head_dim`` may differ from
    ``hidden``, e.g. Qwen3-4B), ``tied_embeddings`` whether the LM head reuses the embedding matrix,
    ``qk_norm`` whether q/k get a per-head RMSNorm (Qwen3), ``max_context`` the most positions (prompt
    plus generated tokens) one sequence may hold (``max_position_embeddings``).  ``source`` is the config
    the numbers come from.
    """

    name: str
    family: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied_embeddings: bool
    qk_norm: bool
    max_context: int
    source: str

    @property
    def q_width(self) -> int:
        """Width of the query projection output (heads x head_dim)."""
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Width of each of the key and value projection outputs (kv_heads x head_dim)."""
        return self.kv_heads * self.head_dim

    @property
    def mlp_params(self) -> int:
        """Parameters of all dense MLP projections (3 x H x I per layer)."""
        return self.layers * 3 * self.hidden * self.intermediate

    @property
    def params(self) -> int:
        """Total parameters (embeddings counted once when tied; norms included)."""
        attn = self.hidden * (self.q_width + 2 * self.kv_width) + self.q_width * self.hidden
        norms = 2 * self.hidden + (2 * self.head_dim if self.qk_norm else 0)
        per_layer = attn + 3 * self.hidden * self.intermediate + norms
        embed = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * per_layer + embed + self.hidden


#: The data file holding the model architectures (one entry per model, with its source).
MODELS_PATH = Path(__file__).with_name("llm_models.json")


class ModelConfigError(ValueError):
    """The model data file is malformed (the message names the file, the entry and the field)."""


def _check_field(where: str, name: str, value: Any, kind: str) -> Any:
    if kind == "bool":
        if not isinstance(value, bool):
            raise ModelConfigError(f"{where}: {name!r} must be true/false, got {value!r}")
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ModelConfigError(f"{where}: {name!r} must be a positive integer, got {value!r}")
    elif not isinstance(value, str) or not value.strip():
        raise ModelConfigError(f"{where}: {name!r} must be a non-empty string, got {value!r}")
    return value


def load_models(path: str | Path = MODELS_PATH) -> dict[str, LlmConfig]:
    """Read the model architectures of ``path`` (see ``llm_models.json``) strictly: every entry has exactly
    the fields of :class:`LlmConfig` with the right types, names are unique; :class:`ModelConfigError`
    otherwise."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelConfigError(f"{path}: cannot read the model data: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("models"), list) or not data["models"]:
        raise ModelConfigError(f"{path}: expected an object with a non-empty 'models' list")
    kinds = {f.name: f.type for f in fields(LlmConfig)}
    out: dict[str, LlmConfig] = {}
    for i, entry in enumerate(data["models"]):
        where = f"{path}: models[{i}]"
        if not isinstance(entry, dict):
            raise ModelConfigError(f"{where}: expected an object")
        missing = [k for k in kinds if k not in entry]
        unknown = sorted(set(entry) - set(kinds))
        if missing or unknown:
            raise ModelConfigError(f"{where}: missing fields {missing}, unknown fields {unknown}")
        values = {k: _check_field(where, k, entry[k], kind) for k, kind in kinds.items()}
        if values["name"] in out:
            raise ModelConfigError(f"{where}: duplicate model name {values['name']!r}")
        out[values["name"]] = LlmConfig(**values)
    return out


#: The six models, keyed by canonical name, in file order (from :data:`MODELS_PATH`).
MODELS: dict[str, LlmConfig] = load_models()


def get_config(name: str) -> LlmConfig:
    """Look a model up by name, case-insensitively; an HF repo id (``meta-llama/Llama-3.2-1B``) also works.

    Raises ``KeyError`` whose message lists the valid names.
    """
    key = name.strip().split("/")[-1].lower()
    for model_name, config in MODELS.items():
        if model_name.lower() == key:
            return config
    raise KeyError(f"unknown model {name!r}; valid models: {', '.join(MODELS)}")


class MlpRanks(NamedTuple):
    """Ranks of the three factored MLP projections (elements)."""

    gate: int
    up: int
    down: int


def mlp_ranks(config: LlmConfig, compression: float, block: int = 128) -> MlpRanks:
    """NeuronMM ranks for every MLP projection of ``config`` at a compression ratio (fraction removed)."""
    from devkit.workflow.svd.factor import rank_for

    h, i = config.hidden, config.intermediate
    return MlpRanks(
        rank_for(h, i, compression, block),
        rank_for(h, i, compression, block),
        rank_for(i, h, compression, block),
    )


def bytes_per_element(dtype: str) -> int:
    """Bytes per element of ``dtype`` (``bfloat16``, ``float16``, ``float32``, ``float8_e4m3``, ...), from
    :func:`devkit.dtype_names.itemsize`; ``ValueError`` naming the dtype otherwise."""
    return itemsize(dtype)


@dataclass(frozen=True)
class Op:
    """One operator of a forward pass.

    ``kind`` is ``matmul`` (``shape`` = (M, K, N): an (M, K) x (K, N) product, ``batch`` independent
    instances), ``elementwise``/``norm``/``gather`` (``shape`` = the tensor it streams).  ``flops``,
    ``bytes`` (HBM) and ``elements`` (vector-engine work) are per instance; ``repeat`` instances run per
    forward pass.  ``category`` is one of :data:`CATEGORIES`; ``mlp`` operators are the ones the SVD
    compression changes.
    """

    name: str
    category: str
    kind: str
    shape: tuple[int, ...]
    flops: int
    bytes: int
    elements: int
    repeat: int = 1
    batch: int = 1

    @property
    def total_flops(self) -> int:
        """FLOPs of all instances in one forward pass."""
        return self.flops * self.repeat

    @property
    def total_bytes(self) -> int:
        """HBM bytes of all instances in one forward pass."""
        return self.bytes * self.repeat


def _matmul(
    name: str,
    category: str,
    m: int,
    k: int,
    n: int,
    s: int,
    *,
    repeat: int,
    batch: int = 1,
    read_a: bool = True,
    read_b: bool = True,
    write_c: bool = True,
) -> Op:
    """(M, K) x (K, N) in dtype of size ``s``; ``batch`` independent products share one Op."""
    nbytes = batch * s * ((m * k if read_a else 0) + (k * n if read_b else 0) + (m * n if write_c else 0))
    return Op(name, category, "matmul", (m, k, n), 2 * batch * m * k * n, nbytes, 0, repeat, batch)


def _stream(
    name: str,
    category: str,
    kind: str,
    elems: int,
    s: int,
    *,
    reads: int,
    writes: int,
    flops_per: int,
    repeat: int,
    extra_bytes: int = 0,
) -> Op:
    return Op(
        name,
        category,
        kind,
        (elems,),
        flops_per * elems,
        s * elems * (reads + writes) + extra_bytes,
        elems * max(reads, 1),
        repeat,
    )


def _rmsnorm(name: str, elems: int, s: int, *, repeat: int, weight_bytes: int) -> Op:
    """An RMSNorm over ``elems`` elements: one read, one write, 4 FLOPs per element, plus its weights."""
    return _stream(
        name,
        "norm",
        "norm",
        elems,
        s,
        reads=1,
        writes=1,
        flops_per=4,
        repeat=repeat,
        extra_bytes=weight_bytes,
    )


def mlp_ops(
    tokens: int,
    hidden: int,
    intermediate: int,
    *,
    ranks: MlpRanks | None = None,
    dtype: str = "bfloat16",
    repeat: int = 1,
    fused: bool = True,
) -> list[Op]:
    """Operators of one SwiGLU MLP ``down(silu(x W_g) * (x W_u))`` on ``tokens`` rows.

    Dense (``ranks`` None): three matmuls plus the SwiGLU epilogue.  SVD: each projection is ``(x U) V``.
    With ``fused`` (NeuronMM's kernel structure, applied to dense and SVD alike) every intermediate stays
    on chip: the rank-r strips ``x U`` and the gate/up outputs cost no HBM bytes, and the SwiGLU epilogue
    only writes its product.  Without ``fused`` every operator reads its inputs from and writes its output
    to HBM.
    """
    s = bytes_per_element(dtype)
    t, h, i = tokens, hidden, intermediate
    on_hbm = not fused
    ops: list[Op] = []
    for proj in ("gate", "up"):
        if ranks is None:
            ops.append(_matmul(f"mlp.{proj}_proj", "mlp", t, h, i, s, repeat=repeat, write_c=on_hbm))
        else:
            r = getattr(ranks, proj)
            ops.append(_matmul(f"mlp.{proj}_proj.u", "mlp", t, h, r, s, repeat=repeat, write_c=on_hbm))
            ops.append(
                _matmul(f"mlp.{proj}_proj.v", "mlp", t, r, i, s, repeat=repeat, read_a=on_hbm, write_c=on_hbm)
            )
    # silu on one engine plus the product: two element passes over the (tokens, I) tile
    swiglu_bytes = s * t * i * ((2 if on_hbm else 0) + 1)
    ops.append(Op("mlp.swiglu", "mlp", "elementwise", (t * i,), 5 * t * i, swiglu_bytes, 2 * t * i, repeat))
    if ranks is None:
        ops.append(_matmul("mlp.down_proj", "mlp", t, i, h, s, repeat=repeat))
    else:
        r = ranks.down
        ops.append(_matmul("mlp.down_proj.u", "mlp", t, i, r, s, repeat=repeat, write_c=on_hbm))
        ops.append(_matmul("mlp.down_proj.v", "mlp", t, r, h, s, repeat=repeat, read_a=on_hbm))
    return ops


def forward_ops(
    config: LlmConfig,
    phase: str = PREFILL,
    batch: int = 1,
    context: int = 32,
    *,
    dtype: str = "bfloat16",
    ranks: MlpRanks | None = None,
    fused: bool = True,
    all_logits: bool = False,
) -> list[Op]:
    """Operators of one forward pass of ``config``.

    ``phase="prefill"``: context encoding of ``context`` tokens for each of ``batch`` sequences.
    ``phase="decode"``: one token per sequence, attending ``context`` cached positions plus itself.
    ``ranks``: SVD-factored MLPs at these ranks (``None`` = dense); ``fused`` as in :func:`mlp_ops`.
    The LM head runs on the last position of each sequence only (what a serving stack needs to sample
    the next token) unless ``all_logits``.  Attention is causal but counted as the full
    ``context x context`` product in prefill (what a non-flash kernel computes); the K/V projections write
    the new rows to the KV cache and attention reads the cache from HBM.
    """
    if phase not in (PREFILL, DECODE):
        raise ValueError(f"phase must be 'prefill' or 'decode', got {phase!r}")
    for label, value in (("batch", batch), ("context", context)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (1 if label == "batch" else 0):
            raise ValueError(
                f"{label} must be a {'positive' if label == 'batch' else 'non-negative'} "
                f"integer, got {value!r}"
            )
    if phase == PREFILL and context < 1:
        raise ValueError("prefill needs context >= 1 tokens")
    s = bytes_per_element(dtype)
    c, n_layers = config, config.layers
    q_len = context if phase == PREFILL else 1
    kv_len = context if phase == PREFILL else context + 1
    t = batch * q_len
    h, d = c.hidden, c.head_dim

    ops: list[Op] = [
        Op("embed_tokens", "embedding", "gather", (t, h), 0, s * t * h * 2, t * h, 1),
        _rmsnorm("input_layernorm", t * h, s, repeat=n_layers, weight_bytes=s * h),
        _matmul("self_attn.q_proj", "attention_proj", t, h, c.q_width, s, repeat=n_layers),
        _matmul("self_attn.k_proj", "attention_proj", t, h, c.kv_width, s, repeat=n_layers),
        _matmul("self_attn.v_proj", "attention_proj", t, h, c.kv_width, s, repeat=n_layers),
    ]
    if c.qk_norm:
        ops.append(
            _rmsnorm(
                "self_attn.qk_norm", t * (c.q_width + c.kv_width), s, repeat=n_layers, weight_bytes=2 * s * d
            )
        )
    ops.append(
        _stream(
            "self_attn.rope",
            "elementwise",
            "elementwise",
            t * (c.q_width + c.kv_width),
            s,
            reads=1,
            writes=1,
            flops_per=3,
            repeat=n_layers,
        )
    )
    # Scores Q Kᵀ per (sequence, query head): (q_len, d) x (d, kv_len); K read from the KV cache (once per
    # kv head, shared by its query-head group), scores kept on chip.
    kv_read = batch * c.kv_heads * kv_len * d * s

    def from_cache(name: str, m: int, k: int, n: int, **operands: bool) -> Op:
        """An attention product per (sequence, query head) whose K or V operand is read from the KV cache."""
        op = _matmul(name, "attention", m, k, n, s, repeat=n_layers, batch=batch * c.heads, **operands)
        return dataclasses.replace(op, bytes=op.bytes + kv_read)

    ops.append(from_cache("self_attn.scores", q_len, d, kv_len, read_b=False, write_c=False))
    prob_elems = batch * c.heads * q_len * kv_len
    ops.append(
        Op(
            "self_attn.softmax",
            "attention",
            "elementwise",
            (prob_elems,),
            5 * prob_elems,
            0,
            2 * prob_elems,
            n_layers,
        )
    )
    ops.append(from_cache("self_attn.values", q_len, kv_len, d, read_a=False, read_b=False))
    ops += [
        _matmul("self_attn.o_proj", "attention_proj", t, c.q_width, h, s, repeat=n_layers),
        _stream(
            "residual_add",
            "elementwise",
            "elementwise",
            t * h,
            s,
            reads=2,
            writes=1,
            flops_per=1,
            repeat=2 * n_layers,
        ),
        _rmsnorm("post_attention_layernorm", t * h, s, repeat=n_layers, weight_bytes=s * h),
    ]
    ops += mlp_ops(t, h, c.intermediate, ranks=ranks, dtype=dtype, repeat=n_layers, fused=fused)
    ops.append(_rmsnorm("norm", t * h, s, repeat=1, weight_bytes=s * h))
    rows = t if (all_logits or phase == DECODE) else batch
    ops.append(_matmul("lm_head", "lm_head", rows, h, c.vocab, s, repeat=1))
    return ops
