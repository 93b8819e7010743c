"""Case files: the data of a generated hardware test, ``hw_tests/cases/<kernel>.json``.

``devkit promote`` writes one JSON file per kernel next to a tiny generated module that loads it
(:func:`devkit.hw.promoted_tests_from`).  A file holds::

    {
      "format": "devkit-hw-cases/1",
      "kernel": "xuv_fused",                 # registry name, or FILE.py:KERNEL relative to the project root
      "generation": "beta1",                 # the kernel's NKI API ("beta1" / "beta2")
      "description": "...",                  # the kernel's declared description
      "provenance": {"command": "devkit promote --all", "devkit_version": "0.1.0",
                     "git_commit": "...", "generated": "2026-12-03 14:47 UTC"},
      "timing": {"warmup": 5, "iters": 20, "seed": 0},   # timed calls per latency test; input seed
      "cases": [                             # one case a line
        {"shape": {"S": 256, ...}, "dtype": "bfloat16", "blocks": {...},
         "predicted_us": {"trn1": 144.544}, "slack": 0.25},
        ...
      ]
    }

``predicted_us`` is the latency (microseconds) the cost model predicted at promotion for each target;
``slack`` the relative deviation of the measured P50 from it that passes silently.  :func:`load` is
strict: a missing or unknown field, a value of the wrong type, an unknown generation or dtype is a
:class:`CaseFileError` naming the file and the field (``cases[1].shape.S``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit.dtype_names import ITEMSIZE
from devkit.workflow.hw.harness import Case
from devkit.workflow.hw.host import GENERATION_MODULES

__all__ = ["FORMAT", "CaseFile", "CaseFileError", "case_path", "dumps", "load", "parse"]

#: The ``format`` field of the files this module reads and writes.
FORMAT = "devkit-hw-cases/1"
#: Where a test directory keeps its case files.
CASES_DIR = "cases"

_NAME = re.compile(r"[A-Za-z_]\w*\Z")
_TOP = ("format", "kernel", "generation", "description", "provenance", "timing", "cases")
_PROVENANCE = ("command", "devkit_version", "git_commit", "generated")
_TIMING = ("warmup", "iters", "seed")
_CASE = ("shape", "dtype", "blocks", "predicted_us", "slack")


class CaseFileError(ValueError):
    """A missing or garbled case file; the message names the file and the field."""


@dataclass(frozen=True)
class CaseFile:
    """What one case file holds: the kernel, its NKI generation, the timing of its latency tests, the
    provenance of the promotion (command, devkit version, git commit, UTC date) and the cases."""

    kernel: str
    generation: str
    description: str
    cases: tuple[Case, ...]
    warmup: int
    iters: int
    seed: int = 0
    provenance: Mapping[str, str] = field(default_factory=dict)


def case_path(directory: str | Path, name: str) -> Path:
    """``directory/cases/<name>.json``: the case file of the test module ``directory/test_<name>.py``."""
    return Path(directory) / CASES_DIR / f"{name}.json"


def kernel_name(ref: str) -> str:
    """The kernel's name in a reference: ``NAME`` or the part after the colon of ``FILE.py:NAME``."""
    return ref.rsplit(":", 1)[-1]


# ---- reading -------------------------------------------------------------------------------------------


def load(path: str | Path) -> CaseFile:
    """Read and check the case file at ``path`` (:class:`CaseFileError` naming the file and the field)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CaseFileError(
            f"{path}: no such case file (written by `devkit promote {path.stem}` next to the test module; "
            "re-promote the kernel)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseFileError(f"{path}: cannot read the case file: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CaseFileError(f"{path}: not valid JSON: {exc}") from None
    return parse(data, str(path))


def parse(data: Any, origin: str = "<case file>") -> CaseFile:
    """Check the decoded JSON of a case file and build it (``origin`` names the file in errors)."""
    top = _fields(data, _TOP, origin, "")
    if top["format"] != FORMAT:
        raise CaseFileError(f"{origin}: format: expected {FORMAT!r}, got {top['format']!r}")
    kernel = _text(top["kernel"], origin, "kernel")
    if not _is_kernel_ref(kernel):
        raise CaseFileError(
            f"{origin}: kernel: {kernel!r} is neither a kernel name nor FILE.py:KERNEL (a registry or declared "
            "kernel name)"
        )
    generation = top["generation"]
    if generation not in GENERATION_MODULES:
        raise CaseFileError(
            f"{origin}: generation: expected one of {', '.join(map(repr, GENERATION_MODULES))}, got {generation!r}"
        )
    description = _text(top["description"], origin, "description", empty=True)
    prov = _fields(top["provenance"], _PROVENANCE, origin, "provenance")
    provenance = {k: _text(v, origin, f"provenance.{k}") for k, v in prov.items()}
    timing = _fields(top["timing"], _TIMING, origin, "timing")
    warmup = _int(timing["warmup"], origin, "timing.warmup", least=0)
    iters = _int(timing["iters"], origin, "timing.iters", least=1)
    seed = _int(timing["seed"], origin, "timing.seed", least=0)
    rows = top["cases"]
    if not isinstance(rows, list) or not rows:
        raise CaseFileError(f"{origin}: cases: expected a non-empty list of cases, got {_what(rows)}")
    cases = tuple(_case(kernel, row, origin, f"cases[{i}]") for i, row in enumerate(rows))
    return CaseFile(kernel, generation, description, cases, warmup, iters, seed, provenance)


def _case(kernel: str, row: Any, origin: str, where: str) -> Case:
    c = _fields(row, _CASE, origin, where)
    shape = _int_map(c["shape"], origin, f"{where}.shape", least=1)
    if not shape:
        raise CaseFileError(f"{origin}: {where}.shape: expected at least one named dimension")
    dtype = _text(c["dtype"], origin, f"{where}.dtype")
    if dtype not in ITEMSIZE:
        raise CaseFileError(f"{origin}: {where}.dtype: unknown dtype {dtype!r}")
    blocks = _int_map(c["blocks"], origin, f"{where}.blocks", least=0)
    predicted = _mapping(c["predicted_us"], origin, f"{where}.predicted_us")
    for target, us in predicted.items():
        if not _is_number(us) or not 0 < us < math.inf:
            raise CaseFileError(
                f"{origin}: {where}.predicted_us.{target}: expected a positive latency in us, got {_what(us)}"
            )
    slack = c["slack"]
    if not _is_number(slack) or not 0 < slack < math.inf:
        raise CaseFileError(f"{origin}: {where}.slack: expected a positive fraction, got {_what(slack)}")
    return Case(kernel, shape, dtype, blocks, {t: float(v) for t, v in predicted.items()}, float(slack))


def _fields(value: Any, names: tuple[str, ...], origin: str, where: str) -> dict[str, Any]:
    """``value`` as an object with exactly the fields ``names``."""
    label = f"{where}: " if where else ""
    if not isinstance(value, dict):
        raise CaseFileError(
            f"{origin}: {label}expected an object with {', '.join(names)}, got {_what(value)}"
        )
    prefix = f"{where}." if where else ""
    missing = [n for n in names if n not in value]
    if missing:
        raise CaseFileError(f"{origin}: {prefix}{missing[0]}: missing")
    unknown = [k for k in value if k not in names]
    if unknown:
        raise CaseFileError(f"{origin}: {prefix}{unknown[0]}: unknown field (expected {', '.join(names)})")
    return value


def _mapping(value: Any, origin: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CaseFileError(f"{origin}: {where}: expected an object, got {_what(value)}")
    return value


def _int_map(value: Any, origin: str, where: str, least: int) -> dict[str, int]:
    return {k: _int(v, origin, f"{where}.{k}", least) for k, v in _mapping(value, origin, where).items()}


def _int(value: Any, origin: str, where: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        kind = "a positive integer" if least > 0 else "an integer >= 0"
        raise CaseFileError(f"{origin}: {where}: expected {kind}, got {_what(value)}")
    return value


def _text(value: Any, origin: str, where: str, empty: bool = False) -> str:
    if not isinstance(value, str) or not (empty or value):
        raise CaseFileError(f"{origin}: {where}: expected a non-empty string, got {_what(value)}")
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_kernel_ref(ref: str) -> bool:
    if ":" not in ref:
        return bool(_NAME.match(ref))
    path, name = ref.rsplit(":", 1)
    return path.endswith(".py") and bool(_NAME.match(name))


def _what(value: Any) -> str:
    """A short description of a wrong value: ``"256" (str)``, ``a list``."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else f"{json.dumps(value)} ({type(value).__name__})"


# ---- writing -------------------------------------------------------------------------------------------


def to_data(case_file: CaseFile) -> dict[str, Any]:
    """The JSON object of ``case_file`` (what :func:`parse` reads back)."""
    return {
        "format": FORMAT,
        "kernel": case_file.kernel,
        "generation": case_file.generation,
        "description": case_file.description,
        "provenance": {k: case_file.provenance[k] for k in _PROVENANCE},
        "timing": {"warmup": case_file.warmup, "iters": case_file.iters, "seed": case_file.seed},
        "cases": [
            {
                "shape": dict(c.shape),
                "dtype": c.dtype,
                "blocks": dict(c.blocks),
                "predicted_us": {t: round(float(us), 3) for t, us in c.predicted_us.items()},
                "slack": float(c.slack),
            }
            for c in case_file.cases
        ],
    }


def dumps(case_file: CaseFile) -> str:
    """The text of a case file: two-space indented JSON with one case a line (a diff shows which case
    changed)."""
    data = to_data(case_file)
    rows = data.pop("cases")
    head = json.dumps(data, indent=2)[: -len("\n}")]
    cases = ",\n".join(f"    {json.dumps(c)}" for c in rows)
    return f'{head},\n  "cases": [\n{cases}\n  ]\n}}\n'
