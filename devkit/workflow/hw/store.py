"""The hardware results store: append-only JSON lines, one file per kernel, and its record schema.

:class:`ResultsStore` lives under ``results/``: one JSON object per line, one file per kernel
(``results/<kernel>.jsonl``), each record appended with one ``O_APPEND`` write and fsynced
(:func:`devkit.atomic.append_line`), so an interrupted run loses nothing already recorded.

Record schema 1 (units: microseconds)::

    {"schema": 1, "id": "<uuid>", "kind": "latency" | "numerics", "kernel": "xuv_fused",
     "shape": {"S": 1024, ...}, "dtype": "bfloat16", "blocks": {...}, "target": "trn1",
     "instance_type": "trn1.2xlarge", "sdk_version": "2.21.0", "git_commit": "abc123[+dirty]",
     "devkit_version": "0.1.0", "backend": "neuron-sdk" | "fake", "timestamp": "<ISO 8601 UTC>",
     "host": "...", "warmup": 5, "iters": 20,
     "generation": "beta1" | "beta2",                      # NKI API of the kernel (absent: beta1)
     "latency_clock": "neuron-bench" | "host",             # latency records: what measured them
     "measured_us": {"p0": ..., "p1": ..., "p10": ..., "p25": ..., "p50": ..., "p90": ..., "p99": ...,
                     "p100": ...},                          # latency records
     "predicted_us": 1234.5 | null, "slack": 0.25,          # latency records
     "passed": true, "max_error": ..., "tolerance": ...}    # numerics records (max|out-ref|/max|ref|)
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit import atomic
from devkit.workflow.hw.host import RESULTS_DIR, HostContext
from devkit.workflow.hw.runners import PERCENTILES as PERCENTILES  # the percentiles every record holds

SCHEMA = 1


class StoreError(ValueError):
    """A results-store file or record is malformed."""


def shape_key(shape: Mapping[str, Any]) -> str:
    """``{"S": 1024, "H": 8192}`` -> ``"S=1024,H=8192"`` (insertion order: the registry's)."""
    return ",".join(f"{k}={v}" for k, v in shape.items())


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def make_record(
    ctx: HostContext,
    *,
    kind: str,
    kernel: str,
    shape: Mapping[str, int],
    dtype: str,
    blocks: Mapping[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A store record with the context stamped on (``fields`` add the kind-specific figures)."""
    if kind not in ("latency", "numerics"):
        raise StoreError(f"record kind must be 'latency' or 'numerics', got {kind!r}")
    return {
        "schema": SCHEMA,
        "id": uuid.uuid4().hex,
        "kind": kind,
        "kernel": kernel,
        "shape": dict(shape),
        "dtype": dtype,
        "blocks": dict(blocks or {}),
        "target": ctx.target,
        "instance_type": ctx.instance_type,
        "sdk_version": ctx.sdk_version,
        "git_commit": ctx.git_commit,
        "devkit_version": ctx.devkit_version,
        "backend": ctx.backend,
        "host": ctx.host,
        "timestamp": _now(),
        **fields,
    }


_REQUIRED = ("schema", "kind", "kernel", "shape", "dtype", "target", "backend")


def validate_record(record: Any, where: str = "<record>") -> dict[str, Any]:
    """Check a record's required keys and types; returns it."""
    if not isinstance(record, dict):
        raise StoreError(f"{where}: expected a JSON object")
    missing = [k for k in _REQUIRED if k not in record]
    if missing:
        raise StoreError(f"{where}: missing keys {missing}")
    if record["schema"] != SCHEMA:
        raise StoreError(f"{where}: schema {record['schema']!r} is not {SCHEMA}")
    if not isinstance(record["shape"], dict):
        raise StoreError(f"{where}: 'shape' must be an object of named dimensions")
    if record["kind"] == "latency":
        measured = record.get("measured_us")
        if not isinstance(measured, dict) or not isinstance(measured.get("p50"), (int, float)):
            raise StoreError(f"{where}: latency record without measured_us.p50")
    return record


@dataclass
class ReadResult:
    """Records read from a store plus the lines that could not be read (an interrupted write leaves one)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)


class ResultsStore:
    """Append-only JSON-lines store, one file per kernel (``<root>/<kernel>.jsonl``)."""

    def __init__(self, root: str | Path = RESULTS_DIR) -> None:
        self.root = Path(root)

    def path_for(self, kernel: str) -> Path:
        """``<root>/<kernel>.jsonl``; a ``FILE.py:KERNEL`` reference stores under its kernel name."""
        if ".py:" in kernel:
            kernel = kernel.rsplit(":", 1)[1]
        if not kernel or any(c in kernel for c in "/\\") or kernel.startswith("."):
            raise StoreError(f"bad kernel name for the store: {kernel!r}")
        return self.root / f"{kernel}.jsonl"

    def append(self, record: Mapping[str, Any]) -> Path:
        """Validate and append one record (one write, fsynced)."""
        rec = validate_record(dict(record))
        line = json.dumps(rec, separators=(",", ":"), allow_nan=False)  # keeps the shape order
        return atomic.append_line(self.path_for(rec["kernel"]), line)

    def files(self) -> list[Path]:
        return sorted(self.root.glob("*.jsonl")) if self.root.is_dir() else []

    def read(self, kernel: str | None = None) -> ReadResult:
        """Every readable record (file order); damaged lines are reported, not raised."""
        out = ReadResult()
        paths = [self.path_for(kernel)] if kernel else self.files()
        for path in paths:
            if not path.exists():
                continue
            out_records, damaged = read_jsonl(path)
            out.records.extend(out_records)
            out.damaged.extend(damaged)
        return out


def read_jsonl(path: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, damaged-line descriptions) of one store file."""
    records, damaged = [], []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        try:
            records.append(validate_record(json.loads(text), where))
        except (json.JSONDecodeError, StoreError) as exc:
            damaged.append(f"{where}: {exc}")
    return records, damaged
