"""The public kernel declaration (devkit.declare) and the kit's kernels declared through it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import devkit
from devkit import declare
from devkit.workflow import catalog

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "your-kernel"
SCALED_ADD = f"{EXAMPLE / 'my_kernels.py'}:scaled_add"


def test_the_kit_kernels_are_public_declarations():
    from devkit.kernels import registry

    table = declare.declared()
    assert registry.names()  # ten kernels
    for spec in registry.all_specs():
        assert isinstance(spec, devkit.KernelSpec)
        assert table[spec.name] is spec  # registered through devkit.register, nowhere else
        assert catalog.get(spec.name) is spec


def test_decorator_declares_and_checks_against_the_reference():
    spec = catalog.get(SCALED_ADD)
    assert spec.name == "scaled_add" and spec.shape_params == ("R", "N")
    res = spec.check({"R": 130, "N": 77}, "float32", seed=3)
    assert res.ok and res.max_error <= res.tolerance == 1e-6
    assert catalog.get(f"{EXAMPLE / 'my_kernels.py'}:scaled_add_narrow").baselines == ()
    assert [b.name for b in spec.baselines] == ["scaled_add_narrow"]


def _write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


_KERNEL = """
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    import numpy as np

    import devkit


    @devkit.declare_kernel(
        reference=lambda x: {reference},
        arg_shapes=lambda s: [(s["P"], s["F"])],
        default_shape={{"P": 128, "F": 64}},
        shape_space={{"P": (1, 128), "F": [1, 64, 300]}},
        tolerances={{"float32": 1e-6}},
        dtypes=("float32",),
        name="{name}",
    )
    @nki.jit
    def double(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, value=nl.multiply(t, 2.0))
        return out
"""


def test_good_and_bad_reference_twins(tmp_path):
    good = _write(tmp_path, "good.py", _KERNEL.format(reference="(2 * x).astype(x.dtype)", name="double_ok"))
    bad = _write(tmp_path, "bad.py", _KERNEL.format(reference="(3 * x).astype(x.dtype)", name="double_bad"))
    assert catalog.get(f"{good}:double").check(None, "float32").ok
    res = catalog.get(f"{bad}:double").check(None, "float32")
    assert not res.ok and "EXCEEDS" in res.message and res.max_error > 0.3


def test_declaration_mistakes_are_named():
    ref = np.copy
    with pytest.raises(declare.SpecError, match="shape_space names"):
        devkit.KernelSpec("k1", "m:f", ref, lambda s: [(1,)], {"N": 1}, shape_space={"M": (1, 2)})
    with pytest.raises(declare.SpecError, match="callable"):
        devkit.KernelSpec("k2", "m:f", "not a function", lambda s: [(1,)], {"N": 1})
    with pytest.raises(declare.SpecError, match="kernel name"):
        devkit.KernelSpec("bad name!", "m:f", ref, lambda s: [(1,)], {"N": 1})
    devkit.register(devkit.KernelSpec("dup_name_test", "m:f", ref, lambda s: [(1,)], {"N": 1}))
    with pytest.raises(declare.SpecError, match="declared twice"):
        devkit.register(devkit.KernelSpec("dup_name_test", "m:g", ref, lambda s: [(1,)], {"N": 1}))


def test_constraint_verdicts_become_feasibility():
    def rule(shape, cfg, dtype, target):
        if cfg["t"] > shape["N"]:
            return f"t={cfg['t']} exceeds N"
        return cfg["t"] != 3

    spec = devkit.KernelSpec(
        "constraint_test", "m:f", np.copy, lambda s: [(s["N"],)], {"N": 8}, block_params={"t": (1, 2, 3, 16)}
    )
    spec = devkit.KernelSpec(**{**spec.__dict__, "constraint": rule})
    assert spec.feasible(None, {"t": 2}).ok
    assert spec.feasible(None, {"t": 16}).reason == "constraint_test: t=16 exceeds N"
    assert "violates the declared constraint" in spec.feasible(None, {"t": 3}).reason
    assert "unknown block parameters ['u']" in spec.feasible(None, {"u": 1}).reason
    assert spec.default_blocks() == {"t": 1}  # first candidate without declared defaults
    assert len(spec.candidate_blocks()) == 4


def test_unknown_names_say_how_to_name_a_kernel(tmp_path):
    with pytest.raises(catalog.UnknownKernelError, match=r"FILE\.py:KERNEL"):
        catalog.get("no_such_kernel_anywhere")
    plain = _write(tmp_path, "plain.py", "def helper():\n    return 1\n")
    with pytest.raises(catalog.UnknownKernelError, match="not a declared kernel"):
        catalog.get(f"{plain}:helper")
    with pytest.raises(catalog.KernelRefError, match="no such file"):
        catalog.get(f"{tmp_path}/missing.py:k")


def test_a_file_keeps_its_declarations_when_a_copy_redeclares_the_names(tmp_path, monkeypatch):
    from devkit import project

    monkeypatch.setattr(catalog, "_PROJECT_LOADED", {})
    theirs = catalog.get(SCALED_ADD)
    copy = tmp_path / "my_kernels.py"
    copy.write_text((EXAMPLE / "my_kernels.py").read_text())
    ours = catalog.get(f"{copy}:scaled_add")  # same module name, same kernel names, another file
    assert ours is not theirs and catalog.get(f"{copy}:scaled_add") is ours
    names = [s.name for s in catalog.project_specs(project.find(EXAMPLE))]
    assert names == ["scaled_add", "scaled_add_narrow"]
