"""Import latencies measured with the real SDK's tools as calibration measurements.

Two formats, defined here from the public API documentation (reference/nki_api.md section 2:
``nki.benchmark`` and ``nki.profile``); both become :class:`devkit.cost.calibrate.Measurement`
values that ``devkit calibrate`` fits the cost model to.

**Benchmark records** (``nki.benchmark``): after a benchmarked call, ``f.benchmark_result.nc_latency
.get_latency_percentile(p)`` returns the latency percentile ``p`` in microseconds, for ``p`` in
0, 1, 10, 25, 50, 90, 99, 100.  A benchmark file holds one JSON object per line (or one JSON array of
them) recording those values for one call::

    {"kernel": "matmul_tiled" | "path/file.py:KERNEL", "target": "trn1",
     "args": {"shape": {"K": 8192, ...}, "blocks": {...}}        # registry kernel
           | {"lhsT": "bfloat16[8192,4096]", "rhs": "bfloat16[8192,8192]"},   # FILE.py:KERNEL
     "dtype": "bfloat16",                                         # registry kernels
     "percentiles_us": {"p50": 51234.0, "p99": 51800.0, ...},     # at least the chosen percentile
     "warmup": 5, "iters": 10, "id": "...", "source": "..."}      # optional

The measured latency is the ``percentile`` chosen on import (P50 by default; AWS's tutorials
quote P99).

**Profile summaries** (``nki.profile`` / ``neuron-profile``): ``nki.profile`` saves NEFF and NTFF
files "along with json files containing a profile summary"; the summary's ``total_time`` is the
kernel's device time in **seconds**.  A summary file is one JSON object with ``total_time`` at the
top level or in one nested object per profiled NEFF (``{"<name>": {"total_time": ..., ...}}``).  It
does not name the call, so the kernel, its arguments and the target come from the command line.
Other summary fields are ignored.

Units: microseconds for every measurement produced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Percentiles ``get_latency_percentile`` accepts (reference/nki_api.md).
SDK_PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)


class ImportFormatError(ValueError):
    """A file that is not a benchmark-record or profile-summary file (the message says what is wrong)."""


def _load_json(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    records = []
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ImportFormatError(f"{path}:{n}: not JSON ({e.msg})") from None
    return records


def _profile_times(data: Any) -> list[tuple[str, float]]:
    """``(name, total_time s)`` of a profile summary object (top level or one level down)."""
    if not isinstance(data, Mapping):
        return []
    if "total_time" in data:
        return [("", data["total_time"])]
    return [
        (str(k), v["total_time"]) for k, v in data.items() if isinstance(v, Mapping) and "total_time" in v
    ]


def detect(path: str | Path) -> str:
    """``"benchmark"``, ``"profile"`` or ``"other"`` (e.g. a measurements or results-store file)."""
    try:
        data = _load_json(Path(path))
    except ImportFormatError:
        return "other"
    if _profile_times(data):
        return "profile"
    first = data[0] if isinstance(data, list) and data else data
    if isinstance(first, Mapping) and "percentiles_us" in first:
        return "benchmark"
    return "other"


def read_benchmark(path: str | Path, percentile: int = 50) -> list[Any]:
    """Measurements from a benchmark-record file (see module docstring), at ``percentile``."""
    from devkit.cost.calibrate import Measurement

    if percentile not in SDK_PERCENTILES:
        raise ImportFormatError(f"percentile must be one of {SDK_PERCENTILES}, got {percentile}")
    p = Path(path)
    data = _load_json(p)
    records = data if isinstance(data, list) else [data]
    out = []
    for i, r in enumerate(records, start=1):
        where = f"{p} record {i}"
        if not isinstance(r, Mapping):
            raise ImportFormatError(f"{where}: expected a JSON object")
        missing = [k for k in ("kernel", "target", "args", "percentiles_us") if k not in r]
        if missing:
            raise ImportFormatError(f"{where}: missing {', '.join(missing)}")
        pct = r["percentiles_us"]
        key = f"p{percentile}"
        value = pct.get(key, pct.get(str(percentile))) if isinstance(pct, Mapping) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise ImportFormatError(f"{where}: percentiles_us has no positive {key} (us)")
        out.append(
            Measurement(
                kernel=str(r["kernel"]),
                target=str(r["target"]),
                measured_us=float(value),
                shape=r.get("shape"),
                dtype=r.get("dtype"),
                args=dict(r["args"]),
                id=str(r.get("id") or f"{r['kernel']}@{r['target']}#{i}:{key}"),
                source=str(r.get("source") or f"nki.benchmark {key} from {p.name}"),
            )
        )
    return out


def read_profile(path: str | Path, *, kernel: str, target: str, args: Mapping[str, Any],
                 dtype: str | None = None) -> list[Any]:  # fmt: skip
    """Measurements from a profile summary (``total_time`` in seconds) of the call ``kernel(args)`` on
    ``target`` (one per profiled NEFF in the file)."""
    from devkit.cost.calibrate import Measurement

    p = Path(path)
    times = _profile_times(_load_json(p))
    if not times:
        raise ImportFormatError(f"{p}: no total_time in the profile summary")
    out = []
    for name, seconds in times:
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds <= 0:
            raise ImportFormatError(
                f"{p}: total_time of {name or 'the summary'} must be a positive number (s)"
            )
        out.append(
            Measurement(
                kernel=kernel,
                target=target,
                measured_us=float(seconds) * 1e6,
                dtype=dtype,
                args=dict(args),
                id=f"{kernel}@{target}:{p.stem}{'/' + name if name else ''}",
                source=f"neuron-profile summary total_time of {p.name}{' / ' + name if name else ''}",
            )
        )
    return out
