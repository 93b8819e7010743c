"""``benchmarks/nki_library_fixes.py``: the opt-in fixes to nki-library @d2ad3a5's own bugs (issue 12).

Apply and revert are idempotent, refuse (writing nothing) when a fix's text is not where the table says, and
every entry of ``benchmarks/nki_library_env/library_fixes.toml`` matches the published corpus exactly once and
turns the broken files into ones Python compiles.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from benchmarks import nki_library_fixes as nlf

ROOT = Path(__file__).resolve().parents[1]
_CANDIDATES = [
    base / "shared" / "corpora" / "nki-library-d2ad3a5.tar.gz" for base in (ROOT.parent, ROOT.parent.parent)
]
ARCHIVE = next((p for p in _CANDIDATES if p.exists()), _CANDIDATES[0])


def _one_fix(tmp_path: Path, body: str) -> tuple[Path, list[nlf.LibraryFix]]:
    (tmp_path / "pkg").mkdir()
    target = tmp_path / "pkg" / "m.py"
    target.write_text(body)
    fix = nlf.LibraryFix(
        name="demo", file="pkg/m.py", old="x = 1\ny = 2\n", new="x = 1\n", why="demo", upstream="none"
    )
    return target, [fix]


def test_apply_then_apply_again_then_revert(tmp_path):
    target, fixes = _one_fix(tmp_path, "a = 0\nx = 1\ny = 2\nz = 3\n")
    assert nlf.apply(tmp_path, fixes) == [("demo", "applied")]
    assert target.read_text() == "a = 0\nx = 1\nz = 3\n"
    assert nlf.apply(tmp_path, fixes) == [("demo", "already fixed")]
    assert target.read_text() == "a = 0\nx = 1\nz = 3\n"
    assert nlf.revert(tmp_path, fixes) == [("demo", "reverted")]
    assert target.read_text() == "a = 0\nx = 1\ny = 2\nz = 3\n"
    assert nlf.revert(tmp_path, fixes) == [("demo", "already original")]


def test_refuses_when_the_old_text_is_missing(tmp_path):
    target, fixes = _one_fix(tmp_path, "a = 0\nx = 5\n")
    with pytest.raises(nlf.LibraryFixError, match=r"'demo'.*pkg/m\.py.*old text 0 time\(s\)"):
        nlf.apply(tmp_path, fixes)
    assert target.read_text() == "a = 0\nx = 5\n"


def test_refuses_an_ambiguous_old_text_and_writes_no_file(tmp_path):
    good, fixes = _one_fix(tmp_path, "x = 1\ny = 2\n")
    (tmp_path / "pkg" / "n.py").write_text("x = 1\ny = 2\nx = 1\ny = 2\n")
    twice = nlf.LibraryFix(name="twice", file="pkg/n.py", old="x = 1\ny = 2\n", new="", why="", upstream="")
    with pytest.raises(nlf.LibraryFixError, match=r"'twice'.*old text 2 time\(s\)"):
        nlf.apply(tmp_path, [*fixes, twice])
    assert good.read_text() == "x = 1\ny = 2\n"  # checked all before writing any


def test_refuses_a_missing_file(tmp_path):
    fix = nlf.LibraryFix(name="gone", file="no/such.py", old="a", new="b", why="", upstream="")
    with pytest.raises(nlf.LibraryFixError, match=r"'gone'.*does not exist"):
        nlf.apply(tmp_path, [fix])


def test_table_rejects_unknown_keys(tmp_path):
    table = tmp_path / "t.toml"
    table.write_text('[[fix]]\nname = "a"\nfile = "f"\nold = "x"\nnew = "y"\nwhy = ""\n')
    with pytest.raises(nlf.LibraryFixError, match="expected exactly"):
        nlf.load(table)


def test_every_entry_names_why_and_upstream():
    fixes = nlf.load()
    assert {f.name for f in fixes} == {
        "mlp-docstring-tail",
        "mlp-tkg-unset-field",
        "qkv-tkg-platforms-import",
        "gen-mask-output-key",
    }
    assert all(f.why.strip() and f.upstream.strip() for f in fixes)


@pytest.mark.skipif(not ARCHIVE.exists(), reason=f"corpus archive {ARCHIVE} not present")
def test_table_matches_the_published_corpus(tmp_path):
    fixes = nlf.load()
    wanted = {f.file for f in fixes}
    with tarfile.open(ARCHIVE) as tar:
        members = [m for m in tar.getmembers() if m.name.split("/", 1)[-1] in wanted]
        tar.extractall(tmp_path, members=members, filter="data")
    root = next(tmp_path.iterdir())
    assert [nlf.state(root, f) for f in fixes] == ["original"] * len(fixes)
    broken = root / "src/nkilib_src/nkilib/core/mlp/mlp.py"
    with pytest.raises(IndentationError):
        compile(broken.read_text(), str(broken), "exec")
    assert [what for _, what in nlf.apply(root, fixes)] == ["applied"] * len(fixes)
    for f in fixes:
        compile((root / f.file).read_text(), f.file, "exec")  # every fixed file is valid Python
    unset_field = next(f for f in fixes if f.name == "mlp-tkg-unset-field")
    assert "remainderIFused" not in (root / unset_field.file).read_text()
