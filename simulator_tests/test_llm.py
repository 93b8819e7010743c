"""Model configurations and the operators of one forward pass."""

from __future__ import annotations

import pytest

from devkit.workflow import llm
from devkit.workflow.llm import MODELS, MlpRanks, forward_ops, get_config, mlp_ops

# (layers, H, I) from reference/neuronmm.md §4.2, and published total sizes in billions of parameters
# (model cards: Llama 3.2 1B = 1.24, 3B = 3.21, Llama 3.1 8B = 8.03; Qwen3 1.7B / 4B / 8B = 1.7 / 4.0 / 8.2).
EXPECTED = {
    "Llama-3.2-1B": (16, 2048, 8192, 1.24),
    "Llama-3.2-3B": (28, 3072, 8192, 3.21),
    "Llama-3.1-8B": (32, 4096, 14336, 8.03),
    "Qwen3-1.7B": (28, 2048, 6144, 1.72),
    "Qwen3-4B": (36, 2560, 9728, 4.02),
    "Qwen3-8B": (36, 4096, 12288, 8.19),
}


def test_six_models_with_sources() -> None:
    assert set(MODELS) == set(EXPECTED)
    for name, (layers, hidden, inter, billions) in EXPECTED.items():
        c = MODELS[name]
        assert (c.layers, c.hidden, c.intermediate) == (layers, hidden, inter)
        assert c.params / 1e9 == pytest.approx(billions, rel=0.01)
        assert c.source.startswith("https://huggingface.co/") and c.source.endswith("config.json")
        assert c.heads % c.kv_heads == 0


def test_get_config_lookup_and_error() -> None:
    assert get_config("llama-3.2-1b") is MODELS["Llama-3.2-1B"]
    assert get_config("Qwen/Qwen3-4B") is MODELS["Qwen3-4B"]
    with pytest.raises(KeyError, match=r"valid models: Llama-3\.2-1B, .*Qwen3-8B"):
        get_config("gpt-2")


def test_mlp_flops_dense_and_svd() -> None:
    c = MODELS["Llama-3.2-1B"]
    t = 32
    dense = [op for op in forward_ops(c, "prefill", 1, t) if op.category == "mlp"]
    matmul_flops = sum(op.total_flops for op in dense if op.kind == "matmul")
    assert matmul_flops == 2 * t * 3 * c.hidden * c.intermediate * c.layers
    r = llm.mlp_ranks(c, 0.2)
    assert r == MlpRanks(1280, 1280, 1280)
    svd = [op for op in forward_ops(c, "prefill", 1, t, ranks=r) if op.category == "mlp"]
    svd_flops = sum(op.total_flops for op in svd if op.kind == "matmul")
    assert svd_flops == 2 * t * 1280 * (c.hidden + c.intermediate) * 3 * c.layers
    # everything except the MLP is identical
    rest = [op for op in forward_ops(c, "prefill", 1, t) if op.category != "mlp"]
    assert rest == [op for op in forward_ops(c, "prefill", 1, t, ranks=r) if op.category != "mlp"]


def test_fused_svd_mlp_keeps_the_intermediate_on_chip() -> None:
    r = MlpRanks(256, 256, 256)
    fused = sum(op.bytes for op in mlp_ops(64, 1024, 4096, ranks=r))
    unfused = sum(op.bytes for op in mlp_ops(64, 1024, 4096, ranks=r, fused=False))
    weights = 2 * 3 * 256 * (1024 + 4096)
    x_in, act, y_out = 2 * 64 * 1024, 2 * 64 * 4096, 2 * 64 * 1024
    assert fused == weights + 2 * x_in + act + act + y_out  # x read by gate and up; SwiGLU product out/in
    # unfused: the three (64, r) strips are written and read back, gate/up outputs too
    assert unfused - fused == 3 * 2 * (2 * 64 * 256) + 2 * 2 * act


def test_decode_streams_every_weight_once() -> None:
    for c in MODELS.values():
        ops = forward_ops(c, "decode", 1, 100)
        weight_bytes = 2 * (c.params - c.vocab * c.hidden * (1 if c.tied_embeddings else 2))
        weight_bytes += 2 * c.vocab * c.hidden  # the LM head
        matmul_bytes = sum(op.total_bytes for op in ops if op.kind == "matmul" and op.category != "attention")
        norms = 2 * c.hidden * (2 * c.layers + 1) + (2 * 2 * c.head_dim * c.layers if c.qk_norm else 0)
        assert weight_bytes - norms < matmul_bytes < 1.01 * weight_bytes


def test_kv_cache_traffic_grows_with_context() -> None:
    c = MODELS["Qwen3-4B"]

    def attn_bytes(ctx: int) -> int:
        return sum(op.total_bytes for op in forward_ops(c, "decode", 2, ctx) if op.category == "attention")

    # K and V of (ctx + 1) positions, 8 kv heads x 128, bf16, 2 sequences, 36 layers (+ q in / out)
    per_position = 2 * 2 * 8 * 128 * 2 * 36
    assert attn_bytes(1000) - attn_bytes(100) == per_position * 900


def test_lm_head_only_for_the_last_prompt_token() -> None:
    c = MODELS["Llama-3.2-3B"]
    head = next(op for op in forward_ops(c, "prefill", 4, 32) if op.name == "lm_head")
    assert head.shape == (4, c.hidden, c.vocab)
    head_all = next(op for op in forward_ops(c, "prefill", 4, 32, all_logits=True) if op.name == "lm_head")
    assert head_all.shape == (128, c.hidden, c.vocab)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"phase": "train"}, "phase"),
        ({"batch": 0}, "batch"),
        ({"context": -1}, "context"),
        ({"phase": "prefill", "context": 0}, "context"),
        ({"dtype": "int33"}, "dtype"),
    ],
)
def test_forward_ops_bad_input(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        forward_ops(MODELS["Llama-3.2-1B"], **kwargs)  # type: ignore[arg-type]


# --- the model data file -------------------------------------------------------------------------------


def test_the_bundled_model_file_holds_six_sourced_models():
    models = llm.load_models()
    assert list(models) == list(MODELS) and len(models) == 6
    for cfg in models.values():
        assert cfg.source.startswith("https://huggingface.co/") and cfg.source.endswith("/config.json")


def _write_models(tmp_path, entries):
    import json

    path = tmp_path / "models.json"
    path.write_text(json.dumps({"models": entries}), encoding="utf-8")
    return path


def _entry(**changes):
    import dataclasses

    return {**dataclasses.asdict(get_config("Llama-3.2-1B")), **changes}


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([], "non-empty 'models' list"),
        ([{k: v for k, v in _entry().items() if k != "hidden"}], r"missing fields \['hidden'\]"),
        ([_entry(extra=1)], r"unknown fields \['extra'\]"),
        ([_entry(layers="16")], "'layers' must be a positive integer"),
        ([_entry(heads=0)], "'heads' must be a positive integer"),
        ([_entry(qk_norm=1)], "'qk_norm' must be true/false"),
        ([_entry(source="")], "'source' must be a non-empty string"),
        ([_entry(), _entry()], "duplicate model name 'Llama-3.2-1B'"),
    ],
)
def test_a_malformed_model_file_is_refused_naming_the_entry_and_field(tmp_path, entries, message):
    path = _write_models(tmp_path, entries)
    with pytest.raises(llm.ModelConfigError, match=message):
        llm.load_models(path)


def test_an_unreadable_model_file_is_refused(tmp_path):
    path = tmp_path / "models.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(llm.ModelConfigError, match="cannot read"):
        llm.load_models(path)


def test_element_sizes_come_from_the_one_dtype_table():
    from devkit.dtype_names import itemsize

    for name in ("bfloat16", "float32", "float8_e4m3", "float16"):
        assert llm.bytes_per_element(name) == itemsize(name)
    with pytest.raises(ValueError, match="no_such_dtype"):
        llm.bytes_per_element("no_such_dtype")
