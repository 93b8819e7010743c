"""Export a scheduled trace in the Chrome / Perfetto trace-event JSON format.

The file opens without conversion in https://ui.perfetto.dev and ``chrome://tracing``.  It is the
"JSON Object Format" of the Trace Event Format: ``{"traceEvents": [...], "displayTimeUnit": "ns",
"otherData": {...}}`` with timestamps in microseconds.

What it holds (one process: the kernel on the target core):

* one thread (track) per compute engine and per DMA queue (:func:`devkit.cost.trace_recorder.track_of`);
  a track whose slices overlap in time (DMA transfers of one queue in flight together) is split
  into lanes ``"<track> (2)"``, ``"<track> (3)"``... because the format needs the slices of one
  thread to nest;
* one complete event (``"ph": "X"``) per instruction, named by its opcode, with ``args``: ``id``,
  ``source`` (``file:line`` of the kernel statement), ``engine``, ``ins``/``outs`` (operands as
  ``buffer dtype[partitions x elements]``), ``bytes_in``/``bytes_out``, ``flops``, ``busy_ns``
  and for DMA ``queue``, ``dma_engines``, ``engine_ns``; elided instructions are instant events;
* flow arrows (``"ph": "s"``/``"f"``) from each producer to its consumer across tracks (dependencies
  on the same track are program order and not drawn), at most ``flow_limit`` of them;
* counter tracks ``SBUF occupancy`` and ``PSUM occupancy`` (bytes per partition) when the
  simulator supplied occupancy (:attr:`devkit.trace.MemoryStats.occupancy`);
* past the recorder's verbatim limit, one slice per track and time bin named ``[aggregated]
  <main opcode>`` with ``count``, ``busy_ns`` and the top source ``lines``;
* ``otherData.devkit``: kernel, target, latency, how many instructions are verbatim or aggregated
  (and the bin width), how DMA busy time is accounted, and busy time per track.

Per-track totals: the sum of ``args.busy_ns`` over a compute engine's track(s) equals the report's
``engine_busy_us[engine]``; the sum over all DMA tracks divided by the target's DMA engine count
equals ``engine_busy_us["dma"]`` (DMA busy is engine time summed over the engines of each transfer).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from devkit import atomic
from devkit.cost.report import CostReport
from devkit.cost.trace_recorder import Aggregate, Placed, TraceRecorder
from devkit.targets import Target
from devkit.trace import DMA, ENGINES, Access

#: Format identifier in ``otherData.devkit.format`` (bump on incompatible changes).
FORMAT = "devkit-chrome-trace/1"
PID = 1
_EPS_NS = 1e-6


def _operand(a: Access) -> str:
    return f"{a.buffer} {a.dtype}[{a.partitions}x{a.elems}]"


def _jsonable(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool)) or v is None else str(v)


def _source(filename: str, lineno: int) -> str:
    return f"{filename}:{lineno}"


def _display(track: str) -> str:
    """Track label: a DMA queue named by a source line shows the file's base name."""
    if track.startswith("dma ") and os.sep in track:
        return "dma " + os.path.basename(track[4:])
    return track


def _track_order(track: str) -> tuple[int, str]:
    if track in ENGINES:
        return (ENGINES.index(track), "")
    return (len(ENGINES), track)


class _Lanes:
    """Greedy lane assignment so that slices on one thread never partially overlap."""

    def __init__(self) -> None:
        self.ends: dict[str, list[float]] = {}

    def lane(self, track: str, start: float, end: float) -> int:
        ends = self.ends.setdefault(track, [])
        for i, e in enumerate(ends):
            if e <= start + _EPS_NS:
                ends[i] = end
                return i
        ends.append(end)
        return len(ends) - 1


def _slices(rec: TraceRecorder) -> list[tuple[float, float, str, Placed | Aggregate]]:
    items: list[tuple[float, float, str, Placed | Aggregate]] = [
        (p.start_ns, p.end_ns, p.track, p) for p in rec.placed if p.busy_ns >= 0.0
    ]
    items += [(a.start_ns, a.end_ns, a.track, a) for a in rec.aggregates.values()]
    items.sort(key=lambda x: (x[0], -x[1]))
    return items


def _placed_args(p: Placed) -> dict[str, Any]:
    i = p.instr
    args: dict[str, Any] = {
        "id": i.id,
        "source": _source(i.filename, i.lineno),
        "engine": i.engine,
        "ins": [_operand(a) for a in i.ins],
        "outs": [_operand(a) for a in i.outs],
        "bytes_in": sum(a.bytes for a in i.ins),
        "bytes_out": sum(a.bytes for a in i.outs),
        "flops": i.flops,
        "busy_ns": max(p.busy_ns, 0.0),
    }
    if i.engine == DMA:
        args["queue"] = p.track[4:]
        args["dma_engines"] = p.dma_engines
        args["engine_ns"] = max(p.busy_ns, 0.0)
    if p.busy_ns < 0.0:
        args["elided"] = True
    if i.attrs:
        args["attrs"] = {k: _jsonable(v) for k, v in i.attrs.items()}
    if i.deps:
        args["deps"] = list(i.deps)
    return args


def _aggregate_args(a: Aggregate, top: int = 5) -> dict[str, Any]:
    lines = sorted(a.lines.items(), key=lambda kv: (-kv[1], kv[0]))
    main = lines[0][0] if lines else ("", 0)
    return {
        "aggregated": True,
        "count": a.count,
        "source": _source(*main),
        "engine": a.engine,
        "busy_ns": a.busy_ns,
        "bytes": a.bytes,
        "flops": a.flops,
        "lines": {_source(*k): v for k, v in lines[:top]},
        "opcodes": dict(sorted(a.opcodes.items(), key=lambda kv: -kv[1])[:top]),
        **({"engine_ns": a.busy_ns} if a.engine == DMA else {}),
    }


def _us(ns: float) -> float:
    return round(ns * 1e-3, 6)


def build_trace(
    rec: TraceRecorder,
    report: CostReport,
    target: Target,
    *,
    flow_limit: int = 5_000,
) -> dict[str, Any]:
    """The trace-event JSON object (see module docstring) of a recorded, finished schedule."""
    events: list[dict[str, Any]] = []
    lanes = _Lanes()
    tids: dict[tuple[str, int], int] = {}
    where: dict[int, tuple[int, float, str]] = {}  # instruction id -> (tid, start us, track)

    def tid_of(track: str, lane: int) -> int:
        key = (track, lane)
        if key not in tids:
            tids[key] = len(tids) + 1
        return tids[key]

    for start, end, track, item in _slices(rec):
        lane = lanes.lane(track, start, end)
        tid = tid_of(track, lane)
        if isinstance(item, Placed):
            name, args = item.instr.opcode, _placed_args(item)
            where[item.instr.id] = (tid, _us(start), track)
        else:
            main_op = max(item.opcodes.items(), key=lambda kv: kv[1])[0] if item.opcodes else "?"
            name, args = f"[aggregated] {main_op}", _aggregate_args(item)
        events.append(
            {
                "name": name,
                "cat": "aggregate" if not isinstance(item, Placed) else track.split(" ")[0],
                "ph": "X",
                "pid": PID,
                "tid": tid,
                "ts": _us(start),
                "dur": _us(end - start),
                "args": args,
            }
        )
    for p in rec.placed:  # elided instructions: instants on their engine's first lane
        if p.busy_ns < 0.0:
            tid = tid_of(p.track, 0)
            events.append(
                {
                    "name": p.instr.opcode,
                    "cat": "elided",
                    "ph": "i",
                    "s": "t",
                    "pid": PID,
                    "tid": tid,
                    "ts": _us(p.start_ns),
                    "args": _placed_args(p),
                }
            )
    flows = 0
    flows_dropped = 0
    for p in rec.placed:
        if p.busy_ns < 0.0 or not p.instr.deps:
            continue
        dst = where.get(p.instr.id)
        for d in p.instr.deps:
            src = where.get(d)
            if src is None or dst is None or src[2] == dst[2]:
                continue
            if flows >= flow_limit:
                flows_dropped += 1
                continue
            flows += 1
            common = {"name": "dependency", "cat": "flow", "id": flows, "pid": PID}
            events.append({**common, "ph": "s", "tid": src[0], "ts": src[1]})
            events.append({**common, "ph": "f", "bp": "e", "tid": dst[0], "ts": dst[1]})
    counters = _occupancy_events(rec)
    events += counters
    meta: list[dict[str, Any]] = [
        {
            "name": "process_name",
            "ph": "M",
            "pid": PID,
            "tid": 0,
            "args": {"name": f"{report.kernel or 'kernel'} on {report.target} (devkit cost model)"},
        }
    ]
    ordered = sorted(tids.items(), key=lambda kv: (_track_order(kv[0][0]), kv[0][1]))
    for sort_index, ((track, lane), tid) in enumerate(ordered):
        label = _display(track) if lane == 0 else f"{_display(track)} ({lane + 1})"
        meta.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": label}})
        meta.append(
            {
                "name": "thread_sort_index",
                "ph": "M",
                "pid": PID,
                "tid": tid,
                "args": {"sort_index": sort_index},
            }
        )
    verbatim = len(rec.placed)
    aggregated = rec.aggregated
    statement = (
        f"all {verbatim:,} instructions verbatim"
        if not aggregated
        else (
            f"first {verbatim:,} instructions verbatim; the remaining {aggregated:,} aggregated per track into "
            f"{len(rec.aggregates):,} slices of {rec.bin_ns / 1000:,.3f} us bins (limit {rec.limit:,} verbatim)"
        )
    )
    other = {
        "format": FORMAT,
        "kernel": report.kernel,
        "target": report.target,
        "latency_us": report.latency_us,
        "instructions": rec.instructions,
        "verbatim_instructions": verbatim,
        "aggregated_instructions": aggregated,
        "elided_instructions": rec.elided,
        "aggregation": statement,
        "aggregation_bin_us": rec.bin_ns / 1000 if aggregated else None,
        "flows": flows,
        "flows_dropped": flows_dropped,
        "flow_rule": "producer -> consumer across tracks, verbatim instructions only "
        f"(same-track dependencies are program order; at most {flow_limit:,} arrows)",
        "dma_engines": target.dma.engines,
        "dma_busy_accounting": "DMA events carry engine_ns = engine time summed over the DMA engines the "
        "transfer used; engine_busy_us.dma = sum of engine_ns over all DMA tracks / dma_engines",
        "occupancy": "bytes per partition of tracked on-chip tiles live at each program position, drawn at "
        "the running maximum of instruction start times"
        if counters
        else "not available (the simulator supplied no occupancy)",
        "track_busy_us": {t: v * 1e-3 for t, v in sorted(rec.busy_by_track.items())},
        "track_instructions": dict(sorted(rec.count_by_track.items())),
        "engine_busy_us": dict(report.engine_busy_us),
    }
    return {"traceEvents": meta + events, "displayTimeUnit": "ns", "otherData": {"devkit": other}}


def _occupancy_events(rec: TraceRecorder) -> list[dict[str, Any]]:
    stats = rec.stats
    if stats is None or not stats.occupancy or not rec.starts:
        return []
    # program position -> time: the running maximum of start times (monotone, as a counter needs)
    times: list[float] = []
    run = 0.0
    for t in rec.starts:
        run = t if t > run else run
        times.append(run)
    n = len(times)
    out: list[dict[str, Any]] = []
    for buf, label in (("sbuf", "SBUF occupancy"), ("psum", "PSUM occupancy")):
        steps = stats.occupancy.get(buf) or []
        last_ts = None
        for iid, level in steps:
            ts = times[iid] if iid < n else rec.end_ns
            ts_us = _us(ts)
            if ts_us == last_ts and out and out[-1]["name"] == label:
                out[-1]["args"]["bytes_per_partition"] = max(out[-1]["args"]["bytes_per_partition"], level)
                continue
            out.append(
                {
                    "name": label,
                    "ph": "C",
                    "pid": PID,
                    "ts": ts_us,
                    "args": {"bytes_per_partition": level},
                }
            )
            last_ts = ts_us
    return out


def tracing_scheduler(target: str | Target = "trn1", *, kernel_name: str = "", limit: int = 20_000) -> Any:
    """A :class:`devkit.cost.scheduler.Scheduler` with a :class:`TraceRecorder` attached (``.recorder``)."""
    from devkit.cost.scheduler import Scheduler

    rec = TraceRecorder(limit=limit)
    sched = Scheduler(target, kernel_name=kernel_name, recorder=rec)
    rec.dma_timing = sched.cost.dma.raw
    return sched


def write_trace(
    path: str | os.PathLike, rec: TraceRecorder, report: CostReport, target: Target, **kw: Any
) -> Path:
    """Write :func:`build_trace` to ``path`` atomically (compact JSON); returns the path."""
    data = build_trace(rec, report, target, **kw)
    return atomic.write_text(Path(path), json.dumps(data, separators=(",", ":")))
