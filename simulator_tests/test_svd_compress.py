"""`devkit svd compress` round-trips small synthetic Llama-shaped checkpoints (sharded and not)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from devkit.commands.svd import main
from devkit.workflow.svd.compress import summary_path_for
from devkit.workflow.svd.factor import activation_error, rank_for, truncated_svd

HIDDEN, INTER, LAYERS, VOCAB, BLOCK, RATIO = 64, 160, 2, 50, 16, 0.2
RANK = rank_for(HIDDEN, INTER, RATIO, BLOCK)  # 64*160*0.8/(224*16) = 2.29 -> 2 blocks = 32


def _decaying(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """A weight with a smoothly decaying spectrum, so truncation error is neither 0 nor everything."""
    k = min(rows, cols)
    left, _ = np.linalg.qr(rng.standard_normal((rows, k)))
    right, _ = np.linalg.qr(rng.standard_normal((cols, k)))
    return (left * np.geomspace(1.0, 0.01, k)) @ right.T


def _checkpoint(dtype: type | np.dtype = np.float32, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t: dict[str, np.ndarray] = {"model.embed_tokens.weight": rng.standard_normal((VOCAB, HIDDEN))}
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            t[f"{p}.self_attn.{name}.weight"] = rng.standard_normal((HIDDEN, HIDDEN))
        t[f"{p}.input_layernorm.weight"] = np.ones(HIDDEN)
        t[f"{p}.post_attention_layernorm.weight"] = np.ones(HIDDEN)
        t[f"{p}.mlp.gate_proj.weight"] = _decaying(rng, INTER, HIDDEN)  # HF Linear: (out, in)
        t[f"{p}.mlp.up_proj.weight"] = _decaying(rng, INTER, HIDDEN)
        t[f"{p}.mlp.down_proj.weight"] = _decaying(rng, HIDDEN, INTER)
    t["model.norm.weight"] = np.ones(HIDDEN)
    t["lm_head.weight"] = rng.standard_normal((VOCAB, HIDDEN))
    return {k: v.astype(dtype) for k, v in t.items()}


def _write_sharded(tensors: dict[str, np.ndarray], root: Path) -> Path:
    """Two shards; layer 0's down_proj sits in the shard after its gate/up (a cross-shard layer)."""
    root.mkdir()
    names = list(tensors)
    cut = names.index("model.layers.0.mlp.down_proj.weight")
    shards = {
        "model-00001-of-00002.safetensors": names[:cut],
        "model-00002-of-00002.safetensors": names[cut:],
    }
    weight_map = {}
    for fname, members in shards.items():
        save_file({n: tensors[n] for n in members}, str(root / fname), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(members, fname))
    index = root / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return index


def _expected_rel_error(w_in_out: np.ndarray, r: int) -> float:
    s = np.linalg.svd(w_in_out.astype(np.float64), compute_uv=False)
    return math.sqrt(float(np.sum(s[r:] ** 2))) / math.sqrt(float(np.sum(s**2)))


def _load_all(paths: list[Path]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for p in paths:
        out.update(load_file(str(p)))
    return out


def _check_roundtrip(original: dict[str, np.ndarray], compressed: dict[str, np.ndarray]) -> None:
    for name, tensor in original.items():
        if ".mlp." not in name:
            assert compressed[name].dtype == tensor.dtype
            np.testing.assert_array_equal(compressed[name], tensor)  # copied through untouched
            continue
        assert name not in compressed
        base = name[: -len(".weight")]
        u, v = compressed[f"{base}.svd_u"], compressed[f"{base}.svd_v"]
        w = tensor.astype(np.float64).T  # (in, out)
        assert u.shape == (w.shape[0], RANK) and v.shape == (RANK, w.shape[1])
        recon = u.astype(np.float64) @ v.astype(np.float64)
        rel = float(np.linalg.norm(w - recon) / np.linalg.norm(w))
        assert rel == pytest.approx(_expected_rel_error(w, RANK), rel=1e-4)


def test_compress_unsharded_roundtrip(tmp_path: Path) -> None:
    tensors = _checkpoint()
    src, out = tmp_path / "model.safetensors", tmp_path / "model-svd.safetensors"
    save_file(tensors, str(src))
    rc = main(["compress", str(src), str(out), "--ratio", str(RATIO), "--block", str(BLOCK), "--quiet"])
    assert rc == 0
    compressed = load_file(str(out))
    _check_roundtrip(tensors, compressed)
    assert compressed["model.layers.1.mlp.up_proj.svd_u"].dtype == np.float32  # auto: the weight's dtype

    summary = json.loads(summary_path_for(out).read_text())
    assert summary_path_for(out) == tmp_path / "model-svd.svd-summary.json"
    assert len(summary["layers"]) == 3 * LAYERS
    for layer in summary["layers"]:
        w = tensors[layer["name"]].astype(np.float64).T
        assert layer["rank"] == RANK
        assert layer["weight_error"] == pytest.approx(_expected_rel_error(w, RANK), rel=1e-4)
        assert layer["activation_error"] is None and layer["whitened"] is False
        assert layer["svd_params"] == RANK * (HIDDEN + INTER)
    totals = summary["totals"]
    assert totals["mlp_params_before"] == 3 * LAYERS * HIDDEN * INTER
    assert totals["mlp_saving"] == pytest.approx(1 - RANK * (HIDDEN + INTER) / (HIDDEN * INTER))
    assert totals["params_after"] == sum(t.size for t in compressed.values())


@pytest.mark.parametrize("via", ["index", "directory"])
def test_compress_sharded_whitened_roundtrip(tmp_path: Path, via: str) -> None:
    tensors = _checkpoint(seed=1)
    index = _write_sharded(tensors, tmp_path / "ckpt")
    rng = np.random.default_rng(7)
    acts = rng.standard_normal((256, HIDDEN)) * np.geomspace(4.0, 0.25, HIDDEN)
    np.save(tmp_path / "acts.npy", acts.astype(np.float32))
    out = tmp_path / "out"
    src = index if via == "index" else index.parent
    argv = ["compress", str(src), str(out), "--ratio", str(RATIO), "--block", str(BLOCK)]
    rc = main([*argv, "--calib", str(tmp_path / "acts.npy"), "--whiten", "--quiet"])
    assert rc == 0

    shard_files = sorted(out.glob("*.safetensors"))
    assert [p.name for p in shard_files] == sorted(p.name for p in index.parent.glob("*.safetensors"))
    compressed = _load_all(shard_files)
    out_index = json.loads((out / "model.safetensors.index.json").read_text())
    assert set(out_index["weight_map"]) == set(compressed)
    for name, fname in out_index["weight_map"].items():
        assert name in load_file(str(out / fname))
    assert out_index["metadata"]["total_size"] == sum(t.nbytes for t in compressed.values())

    summary = json.loads((out / "svd-summary.json").read_text())
    by_name = {layer["name"]: layer for layer in summary["layers"]}
    for i in range(LAYERS):
        gate = f"model.layers.{i}.mlp.gate_proj"
        u, v = compressed[f"{gate}.svd_u"], compressed[f"{gate}.svd_v"]
        w = tensors[f"{gate}.weight"].astype(np.float64).T
        white_err = activation_error(acts, w, u, v)
        plain = truncated_svd(w, RANK)
        assert white_err == pytest.approx(by_name[f"{gate}.weight"]["activation_error"], rel=1e-4)
        assert white_err < activation_error(acts, w, plain.u, plain.v)  # whitening helps where it aims
        assert by_name[f"{gate}.weight"]["whitened"] is True
        down = by_name[f"model.layers.{i}.mlp.down_proj.weight"]
        assert down["calibration"] == "derived" and down["whitened"] is True
        assert 0.0 < down["activation_error"] < 1.0


def test_compress_bfloat16_checkpoint_keeps_bfloat16(tmp_path: Path) -> None:
    tensors = _checkpoint(dtype=np.dtype(ml_dtypes.bfloat16), seed=2)
    src, out = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    save_file(tensors, str(src))
    assert main(["compress", str(src), str(out), "--ratio", "0.2", "--block", "16", "--quiet"]) == 0
    compressed = load_file(str(out))
    assert compressed["model.layers.0.mlp.down_proj.svd_v"].dtype == np.dtype(ml_dtypes.bfloat16)
    assert compressed["lm_head.weight"].dtype == np.dtype(ml_dtypes.bfloat16)


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str, src: Path | None = None) -> str:
    if src is None:
        src = tmp_path / "m.safetensors"
        if not src.exists():
            save_file(_checkpoint(), str(src))
    rc = main(["compress", str(src), str(tmp_path / "o.safetensors"), "--quiet", *extra])
    assert rc == 2
    return capsys.readouterr().err


def test_bad_inputs_exit_2_with_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "compression ratio must be in [0, 1)" in _run(tmp_path, capsys, "--ratio", "1.5")
    assert "--whiten needs" in _run(tmp_path, capsys, "--ratio", "0.2", "--whiten")
    assert "does not exist" in _run(tmp_path, capsys, "--ratio", "0.2", src=tmp_path / "nope.safetensors")

    np.save(tmp_path / "narrow.npy", np.ones((8, HIDDEN - 1), dtype=np.float32))
    err = _run(tmp_path, capsys, "--ratio", "0.2", "--block", "16", "--calib", str(tmp_path / "narrow.npy"))
    assert "width 63" in err and "64" in err

    save_file({"model.norm.weight": np.ones(4, dtype=np.float32)}, str(tmp_path / "nomlp.safetensors"))
    assert "no MLP projection weights" in _run(
        tmp_path, capsys, "--ratio", "0.2", src=tmp_path / "nomlp.safetensors"
    )

    (tmp_path / "junk.safetensors").write_bytes(b"not a checkpoint")
    assert "cannot read" in _run(tmp_path, capsys, "--ratio", "0.2", src=tmp_path / "junk.safetensors")

    same = tmp_path / "o.safetensors"
    save_file(_checkpoint(), str(same))
    assert "overwrite the input" in _run(tmp_path, capsys, "--ratio", "0.2", src=same)


def test_keyed_npz_calibration_per_projection(tmp_path: Path) -> None:
    tensors = _checkpoint(seed=3)
    src, out = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    save_file(tensors, str(src))
    rng = np.random.default_rng(8)
    down_in = rng.standard_normal((128, INTER)).astype(np.float32)
    np.savez(
        tmp_path / "acts.npz",
        default=rng.standard_normal((128, HIDDEN)).astype(np.float32),
        **{"model.layers.1.mlp.down_proj": down_in},
    )
    argv = ["compress", str(src), str(out), "--ratio", "0.2", "--block", "16", "--quiet"]
    assert main([*argv, "--calib", str(tmp_path / "acts.npz"), "--whiten"]) == 0
    layers = {layer["name"]: layer for layer in json.loads(summary_path_for(out).read_text())["layers"]}
    assert layers["model.layers.1.mlp.down_proj.weight"]["calibration"].endswith(
        "acts.npz[model.layers.1.mlp.down_proj]"
    )
    assert layers["model.layers.0.mlp.down_proj.weight"]["calibration"] == "derived"
    assert layers["model.layers.0.mlp.gate_proj.weight"]["calibration"].endswith("acts.npz")
    compressed = load_file(str(out))
    w = tensors["model.layers.1.mlp.down_proj.weight"].astype(np.float64).T
    u, v = compressed["model.layers.1.mlp.down_proj.svd_u"], compressed["model.layers.1.mlp.down_proj.svd_v"]
    expected = layers["model.layers.1.mlp.down_proj.weight"]["activation_error"]
    assert activation_error(down_in, w, u, v) == pytest.approx(expected, rel=1e-4)
