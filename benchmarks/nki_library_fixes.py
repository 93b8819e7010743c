"""Opt-in fixes to nki-library @d2ad3a5's own bugs, applied to an extracted working copy (issue 12).

The fixes are data: ``benchmarks/nki_library_env/library_fixes.toml`` lists, per fix, the file (relative to the
repository root), the exact old text, the new text, why, and what upstream did.  :func:`apply` puts every fix
in place and :func:`revert` takes every fix out again, both idempotently: a fix whose old text occurs exactly
once is applied; one whose old text is absent and whose new text occurs exactly once is already applied; any
other state (the file changed in another way, or a different corpus) raises :class:`LibraryFixError` naming the
file and the fix, and no file is written.  Used by ``benchmarks/run_nki_library.py --library-fixes``; a
benchmark helper, not simulator code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

try:  # stdlib from Python 3.11; the project's 3.10 dependency `tomli` before that
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TABLE = Path(__file__).resolve().parent / "nki_library_env" / "library_fixes.toml"


class LibraryFixError(RuntimeError):
    """A fix's old text (or, when reverting, its new text) is not found exactly once in its file."""


@dataclass(frozen=True)
class LibraryFix:
    """One replacement: ``old`` -> ``new`` in ``file`` (a path relative to the nki-library root)."""

    name: str
    file: str
    old: str
    new: str
    why: str
    upstream: str


def load(table: Path = TABLE) -> list[LibraryFix]:
    """The fixes of ``table`` (TOML, one ``[[fix]]`` per fix), checked for missing or unknown keys."""
    with table.open("rb") as fh:
        entries = tomllib.load(fh).get("fix", [])
    keys = {"name", "file", "old", "new", "why", "upstream"}
    fixes = []
    for i, entry in enumerate(entries):
        if set(entry) != keys:
            raise LibraryFixError(
                f"{table}: fix #{i + 1} has keys {sorted(entry)}; expected exactly {sorted(keys)}"
            )
        if entry["old"] == entry["new"] or not entry["old"]:
            raise LibraryFixError(f"{table}: fix {entry['name']!r} has an empty or unchanged old text")
        fixes.append(LibraryFix(**entry))
    return fixes


def state(root: Path, fix: LibraryFix) -> str:
    """``"original"`` or ``"fixed"`` for ``fix`` in the working copy at ``root``; raises if neither."""
    path = root / fix.file
    if not path.is_file():
        raise LibraryFixError(f"library fix {fix.name!r}: {path} does not exist")
    text = path.read_text(encoding="utf-8")
    n_old, n_new = text.count(fix.old), text.count(fix.new)
    if n_old == 1:
        return "original"
    if n_old == 0 and n_new == 1:
        return "fixed"
    first = fix.old.strip().splitlines()[0].strip()
    raise LibraryFixError(
        f"library fix {fix.name!r}: {path} holds its old text {n_old} time(s) and its new text {n_new} "
        f"time(s) (old text begins {first!r}); expected exactly one of either -- "
        "is this nki-library @d2ad3a5, unmodified?"
    )


def _rewrite(root: Path, fixes: list[LibraryFix], want: str) -> list[tuple[str, str]]:
    """Bring every fix to ``want`` ("fixed" or "original"); (name, what happened) per fix."""
    states = [state(root, fix) for fix in fixes]  # check them all before writing anything
    done = []
    for fix, now in zip(fixes, states):
        if now == want:
            done.append((fix.name, f"already {want}"))
            continue
        path = root / fix.file
        text = path.read_text(encoding="utf-8")
        src, dst = (fix.old, fix.new) if want == "fixed" else (fix.new, fix.old)
        path.write_text(text.replace(src, dst, 1), encoding="utf-8")
        done.append((fix.name, "applied" if want == "fixed" else "reverted"))
    return done


def apply(root: Path, fixes: list[LibraryFix]) -> list[tuple[str, str]]:
    """Apply every fix to the working copy at ``root``; (name, "applied" | "already fixed") per fix."""
    return _rewrite(root, fixes, "fixed")


def revert(root: Path, fixes: list[LibraryFix]) -> list[tuple[str, str]]:
    """Restore every fixed text at ``root``; (name, "reverted" | "already original") per fix."""
    return _rewrite(root, fixes, "original")
