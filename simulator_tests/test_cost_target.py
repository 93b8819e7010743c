"""Hardware targets as data: every entry sourced, strict loading, documented values."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from devkit.cost import _toml
from devkit.cost.target import (
    KINDS,
    SOURCE_KEYS,
    TARGET_DIR,
    TARGETS,
    TargetError,
    load_target,
    load_target_file,
    parse_target,
)

COST_DIR = Path(__file__).resolve().parents[1] / "devkit" / "cost"


def _raw(name: str) -> dict:
    return _toml.loads((TARGET_DIR / f"{name}.toml").read_text(encoding="utf-8"))


def test_bundled_targets() -> None:
    assert TARGETS == ("inf2", "trn1", "trn2", "trn3")


@pytest.mark.parametrize("name", TARGETS)
def test_every_entry_has_source_and_kind(name: str) -> None:
    target = load_target(name)
    raw = _raw(name)
    n_entries = sum(len(v) for v in raw.values() if isinstance(v, dict))
    assert len(target.entries) == n_entries > 40
    for key, entry in target.entries.items():
        assert entry.kind in KINDS, key
        assert entry.source.strip(), key
        if entry.kind == "documented":
            assert entry.source.startswith(SOURCE_KEYS), key
        if entry.kind == "derived":
            assert entry.source.startswith("derived:"), key


@pytest.mark.parametrize("name", TARGETS)
def test_derived_entries_reproduce(name: str) -> None:
    target = load_target(name)
    assert target.psum.bytes_per_partition == target.psum.banks * target.psum.bank_bytes_per_partition
    assert target.hbm.bw_bytes_per_ns == pytest.approx(
        target.hbm.chip_bw_bytes_per_ns / target.hbm.cores_per_chip
    )
    assert target.dma.partitions_per_engine * target.dma.engines == target.sbuf.partitions


def test_documented_values() -> None:
    trn1, inf2, trn2 = load_target("trn1"), load_target("inf2"), load_target("trn2")
    assert trn1.sbuf.usable_bytes_per_partition == inf2.sbuf.usable_bytes_per_partition == 180224
    assert trn2.sbuf.usable_bytes_per_partition == 212984
    assert (trn1.sbuf.partitions, trn1.psum.banks, trn1.psum.bank_bytes_per_partition) == (128, 8, 2048)
    assert (trn1.clock.tensor_ghz, trn1.clock.vector_ghz, trn1.clock.scalar_ghz) == (2.8, 1.12, 1.4)
    assert (trn2.clock.tensor_ghz, trn2.clock.vector_ghz, trn2.clock.scalar_ghz) == (2.4, 0.96, 1.2)
    assert trn1.dma.engines == trn2.dma.engines == 16
    assert (trn1.dma.engine_bw_bytes_per_ns, trn2.dma.engine_bw_bytes_per_ns) == (17.0, 23.0)
    assert trn1.hbm.bw_bytes_per_ns == 410.0 and trn2.hbm.bw_bytes_per_ns == 362.5
    assert trn1.tensor.moving_min_cycles == 64 and trn1.tensor.fp32_cycle_factor == 4
    assert (trn2.vector.perf_mode_factor_contiguous, trn2.vector.perf_mode_factor_other) == (4, 2)
    assert trn1.vector.perf_mode_factor_contiguous == 1
    assert trn1.pipeline.vector_gpsimd_share_sbuf_port and not trn2.pipeline.vector_gpsimd_share_sbuf_port


def test_peak_flops_by_dtype() -> None:
    trn1, trn2 = load_target("trn1"), load_target("trn2")
    assert trn1.peak_flops_per_ns("bfloat16") == 92_000.0
    assert trn1.peak_flops_per_ns("float32") == 23_000.0
    assert trn2.peak_flops_per_ns("float8_e4m3") == 158_000.0
    # the documented peak agrees with the array: 2 * 128 * 128 flop per cycle at the tensor clock
    for t in (trn1, trn2):
        array_peak = 2 * t.tensor.pe_rows * t.tensor.pe_cols * t.clock.tensor_ghz
        assert t.peak_flops_per_ns("bfloat16") == pytest.approx(array_peak, rel=0.01)


def test_unknown_target_name_lists_valid_names() -> None:
    with pytest.raises(ValueError, match=r"unknown target 'trn9'.*inf2, trn1, trn2"):
        load_target("trn9")


def _write(tmp_path: Path, data: dict, name: str = "trn1") -> Path:
    lines = [f'name = "{data["name"]}"', f'description = "{data["description"]}"']
    for section, table in data.items():
        if not isinstance(table, dict):
            continue
        lines.append(f"[{section}]")
        for key, entry in table.items():
            if isinstance(entry, dict):
                inner = ", ".join(f"{k} = {_toml._scalar(v)}" for k, v in entry.items())
                lines.append(f"{key} = {{ {inner} }}")
            else:
                lines.append(f"{key} = {_toml._scalar(entry)}")
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_roundtrip_of_helper_loads(tmp_path: Path) -> None:
    assert load_target_file(_write(tmp_path, _raw("trn1"))) == load_target("trn1")


def test_unknown_key_rejected(tmp_path: Path) -> None:
    data = _raw("trn1")
    data["dma"]["engine_bandwidth"] = dict(data["dma"]["engine_bw_bytes_per_ns"])
    with pytest.raises(TargetError, match=r"\[dma\] unknown keys \['engine_bandwidth'\]"):
        load_target_file(_write(tmp_path, data))


def test_missing_key_rejected() -> None:
    data = _raw("trn1")
    del data["sbuf"]["usable_bytes_per_partition"]
    with pytest.raises(TargetError, match="missing keys \\['usable_bytes_per_partition'\\]"):
        parse_target(data)


def test_unknown_section_rejected() -> None:
    data = _raw("trn1")
    data["l2"] = {}
    with pytest.raises(TargetError, match="unknown top-level keys \\['l2'\\]"):
        parse_target(data)


@pytest.mark.parametrize(
    ("field", "change", "message"),
    [
        ("unit", "MHz", "unit must be 'GHz'"),
        ("kind", "guessed", "kind must be one of"),
        ("source", "", "source must be a non-empty string"),
        ("source", "some blog", "documented source must start with a reference key"),
        ("value", "fast", "value must be a number"),
    ],
)
def test_bad_entry_rejected(field: str, change: object, message: str) -> None:
    data = _raw("trn1")
    data["clock"]["tensor_ghz"][field] = change
    with pytest.raises(TargetError, match=re.escape(message)):
        parse_target(data)


def test_entry_without_source_rejected() -> None:
    data = _raw("trn1")
    del data["clock"]["tensor_ghz"]["source"]
    with pytest.raises(TargetError, match="missing \\['source'\\]"):
        parse_target(data)


def test_integer_field_rejects_float() -> None:
    data = _raw("trn1")
    data["dma"]["engines"]["value"] = 16.5
    with pytest.raises(TargetError, match=r"dma\.engines: value must be an integer"):
        parse_target(data)


def test_derived_formula_is_checked() -> None:
    data = _raw("trn1")
    data["hbm"]["bw_bytes_per_ns"]["value"] = 820.0
    with pytest.raises(TargetError, match=r"hbm\.bw_bytes_per_ns = 820\.0 but its formula"):
        parse_target(data)


def test_name_must_match_file(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="does not match the file name"):
        load_target_file(_write(tmp_path, _raw("trn2"), name="trn1"))


def test_cost_package_never_imports_the_simulator() -> None:
    """Lesson 11: devkit.cost reads only trace types, never devkit.sim / devkit.nki internals."""
    offenders = []
    for path in COST_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith(("devkit.sim", "devkit.nki"))]
    assert offenders == []


def test_model_code_holds_no_hardware_numbers() -> None:
    """Lesson 3: clocks, bandwidths and capacities live in the target files, not in the code."""
    suspicious = {2.8, 1.12, 1.4, 2.4, 0.96, 1.2, 17.0, 23.0, 410.0, 362.5, 180224, 212984, 1300.0}
    found = []
    for path in COST_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and type(node.value) in (int, float)
                and node.value in suspicious
            ):
                found.append(f"{path.name}:{node.lineno}: {node.value}")
    assert found == []
