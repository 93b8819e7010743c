"""The HTML report of ``devkit run`` / ``devkit hw report``: matplotlib plots and a jinja2 page.

Every plot function takes plain data and returns a PNG as a base64 string, so the page is one
self-contained file (no external scripts, styles or images).  :func:`render_html` fills
``templates/report.html.j2`` with ``StrictUndefined``: a missing value is an error, never a blank.

Plots:

* :func:`plot_sweep` - one metric against sequence length, one line per kernel (log-log axes);
* :func:`plot_timeline` - which engine is busy when: a Gantt chart of the first scheduled
  instructions and a utilisation strip over the whole run, from a scheduler
  :class:`~devkit.cost.timeline.Timeline`;
* :func:`plot_measured_vs_predicted` - hardware P50 against the cost model's prediction;
* :func:`plot_roofline` / :func:`roofline_figure` - kernels' arithmetic intensity and achieved
  throughput under the target's compute, HBM and DMA roofs (:mod:`devkit.cost.roofline`), with
  the uncertainty band as error bars when known.
"""

from __future__ import annotations

import base64
import io
import linecache
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from devkit import atomic

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"
#: The per-kernel sections of ``report.html.j2`` (``devkit run``), absent from other pages.
NO_KERNEL_SECTIONS = {"kernels": None, "sweeps": None, "tuning": None, "generations": None}
#: Colours per engine (tensor, vector, scalar, gpsimd, dma) and per kernel role.
ENGINE_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759")
KERNEL_COLOURS = ("#4e79a7", "#e15759", "#76b7b2", "#f28e2b", "#59a14f", "#b07aa1", "#9c755f")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _tokens(n: float) -> str:
    n = int(n)
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def plot_sweep(
    x: Sequence[int],
    series: Mapping[str, Sequence[float | None]],
    *,
    ylabel: str,
    title: str,
    xlabel: str = "sequence length S (tokens)",
    band: float | None = None,
) -> str:
    """Lines of ``series[name][i]`` at ``x[i]`` (None = missing point), log-log, tick labels at ``x``;
    ``band`` (a fraction, e.g. 0.12) shades ``y x (1 ± band)`` around each line."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    markers = "osD^v<>"
    for i, (name, ys) in enumerate(series.items()):
        pts = [(xi, yi) for xi, yi in zip(x, ys) if yi is not None and yi > 0]
        if not pts:
            continue
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker=markers[i % len(markers)],
            label=name,
            color=KERNEL_COLOURS[i % len(KERNEL_COLOURS)],
            linewidth=1.8,
            markersize=5,
        )
        if band:
            ax.fill_between(
                [p[0] for p in pts],
                [p[1] * (1 - band) for p in pts],
                [p[1] * (1 + band) for p in pts],
                color=KERNEL_COLOURS[i % len(KERNEL_COLOURS)],
                alpha=0.15,
                linewidth=0,
            )
    if len(set(x)) > 1:
        ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    # 1-2-5 ticks with plain labels: a sweep often spans less than a decade
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xticks(list(x))
    ax.set_xticklabels([_tokens(v) for v in x])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(
        frameon=False, title=f"shaded: ±{band:.0%} model uncertainty" if band else None, title_fontsize=8
    )
    return _png(fig)


def plot_timeline(
    timeline: Any, *, dma_engines: int, latency_us: float, title: str, max_events: int = 4000
) -> str:
    """Gantt chart of the first ``max_events`` scheduled intervals + utilisation over the whole run.

    ``timeline`` is a :class:`devkit.cost.timeline.Timeline` (or its ``to_dict()``).
    """
    plt = _pyplot()
    data = timeline.to_dict() if hasattr(timeline, "to_dict") else dict(timeline)
    engines = list(data["engines"])
    events = data["events"][:max_events]
    fig, (gantt, strip) = plt.subplots(2, 1, figsize=(9.0, 4.8), gridspec_kw={"height_ratios": [3, 2]})
    rows = list(range(len(engines)))
    if events:
        t_end_us = max(ev[2] for ev in events) * 1e-3
        for e in range(len(engines)):
            spans = [
                (ev[1] * 1e-3, max((ev[2] - ev[1]) * 1e-3, t_end_us * 1e-4)) for ev in events if ev[0] == e
            ]
            if spans:
                gantt.broken_barh(
                    spans,
                    (e - 0.4, 0.8),
                    facecolors=ENGINE_COLOURS[e % len(ENGINE_COLOURS)],
                    edgecolor="none",
                )
        gantt.set_xlim(0, t_end_us)
        shown = f"first {len(events):,} instructions ({t_end_us:,.1f} us of {latency_us:,.1f} us)"
    else:
        shown = "no instructions recorded"
    gantt.set_yticks(rows)
    gantt.set_yticklabels(engines)
    gantt.invert_yaxis()
    gantt.set_xlabel("time (us)")
    gantt.set_title(f"{title}: {shown}", fontsize=10)
    gantt.grid(True, axis="x", alpha=0.3)

    bin_us = float(data["bin_ns"]) * 1e-3
    used = max(1, min(len(next(iter(data["histogram"].values()))), int(latency_us / bin_us) + 1))
    matrix = []
    for name in engines:
        row = data["histogram"][name][:used]
        div = bin_us * 1e3 * (dma_engines if name == "dma" else 1)
        matrix.append([min(1.0, v / div) for v in row])
    im = strip.imshow(
        matrix,
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        vmin=0.0,
        vmax=1.0,
        extent=(0, used * bin_us, len(engines) - 0.5, -0.5),
    )
    strip.set_yticks(rows)
    strip.set_yticklabels(engines)
    strip.set_xlabel("time (us), whole kernel")
    strip.set_title("engine utilisation over the whole run (DMA: share of all DMA engines)", fontsize=10)
    fig.colorbar(im, ax=strip, fraction=0.025, pad=0.01, label="busy")
    fig.tight_layout()
    return _png(fig)


def plot_measured_vs_predicted(
    points: Sequence[tuple[str, float, float]],
    *,
    slack: float | None = None,
    title: str = "hardware P50 vs cost-model prediction",
) -> str:
    """Scatter of ``(label, predicted_us, measured_us)`` on log-log axes with y = x and a ±slack band."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 5.0))
    xs = [p[1] for p in points]
    ys = [p[2] for p in points]
    lo = min(xs + ys) / 1.5 if points else 1.0
    hi = max(xs + ys) * 1.5 if points else 10.0
    line = [lo, hi]
    ax.plot(line, line, color="#555555", linewidth=1, label="measured = predicted")
    if slack:
        ax.fill_between(
            line,
            [v * (1 - slack) for v in line],
            [v * (1 + slack) for v in line],
            color="#bbbbbb",
            alpha=0.35,
            label=f"±{slack:.0%}",
        )
    labels = sorted({p[0] for p in points})
    for i, label in enumerate(labels):
        sel = [p for p in points if p[0] == label]
        ax.scatter(
            [p[1] for p in sel],
            [p[2] for p in sel],
            label=label,
            s=28,
            color=KERNEL_COLOURS[i % len(KERNEL_COLOURS)],
            zorder=3,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("predicted latency (us)")
    ax.set_ylabel("measured P50 (us)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(frameon=False, fontsize=8)
    return _png(fig)


def roofline_figure(points: Sequence[Any], roofs: Any, *, title: str) -> Any:
    """A matplotlib figure: log-log roofline of ``roofs`` (:class:`~devkit.cost.roofline.Roofs`) with
    one marker per :class:`~devkit.cost.roofline.RooflinePoint` (error bars = its ``band``)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.8, 4.6))
    finite = [p for p in points if p.hbm_bytes > 0 and p.flops > 0 and p.latency_us > 0]
    xs = [p.intensity for p in finite] + [roofs.ridge_flop_per_byte]
    lo, hi = min(xs) / 4, max(xs) * 4
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(
        grid,
        [roofs.attainable_tflops(x) for x in grid],
        color="#222222",
        linewidth=2,
        label=f"roof: {roofs.peak_tflops:g} TFLOP/s ({roofs.dtype}), {roofs.memory_gbps:g} GB/s",
    )
    if roofs.hbm_gbps != roofs.memory_gbps:
        ax.plot(
            grid,
            [min(roofs.peak_tflops, roofs.hbm_gbps * x / 1000) for x in grid],
            color="#888888",
            linestyle="--",
            linewidth=1,
            label=f"HBM {roofs.hbm_gbps:g} GB/s (above the DMA engines' {roofs.dma_gbps:g} GB/s)",
        )
    labels = list(dict.fromkeys(p.label for p in finite))
    markers = "osD^v<>P*"
    for i, label in enumerate(labels):
        sel = [p for p in finite if p.label == label]
        ys = [p.achieved_tflops for p in sel]
        err = None
        if all(p.band for p in sel):
            err = [
                [y - y / (1 + p.band) for y, p in zip(ys, sel)],
                [y / (1 - p.band) - y for y, p in zip(ys, sel)],
            ]
        ax.errorbar(
            [p.intensity for p in sel],
            ys,
            yerr=err,
            fmt=markers[i % len(markers)],
            label=label,
            color=KERNEL_COLOURS[i % len(KERNEL_COLOURS)],
            markersize=6,
            capsize=3,
            linewidth=1,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    top = roofs.peak_tflops * 2
    bottom = min([p.achieved_tflops for p in finite] + [roofs.attainable_tflops(lo)]) / 3
    ax.set_ylim(bottom, top)
    ax.axvline(roofs.ridge_flop_per_byte, color="#bbbbbb", linewidth=0.8, linestyle=":")
    ax.set_xlabel("arithmetic intensity (TensorE FLOP per HBM byte)")
    ax.set_ylabel("achieved throughput (TFLOP/s, modelled)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(frameon=False, fontsize=7.5, loc="lower right")
    fig.tight_layout()
    return fig


def plot_roofline(points: Sequence[Any], roofs: Any, *, title: str) -> str:
    """:func:`roofline_figure` as a base64 PNG for the HTML report."""
    return _png(roofline_figure(points, roofs, title=title))


def save_figure(fig: Any, path: str | os.PathLike) -> Path:
    """Write a figure to ``path`` in the format its suffix names (``.png`` or ``.svg``), atomically."""
    out = Path(path)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        _pyplot().close(fig)
        raise ValueError(f"{out}: plot files must end in .png or .svg")
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    data = buf.getvalue()
    return atomic.write_with(out, lambda tmp: tmp.write_bytes(data))


def trace_view_data(trace: Mapping[str, Any], *, title: str, max_slices: int = 60_000) -> dict[str, Any]:
    """Compact data of the zoomable timeline (``templates/trace_viewer.html.j2``) from an exported
    Chrome/Perfetto trace (:func:`devkit.cost.chrome_trace.build_trace`): tracks in the trace's order,
    slices as ``[start us, duration us, name index, source index, busy fraction 0..1, count]``, and the
    occupancy counters.  Past ``max_slices`` the shortest slices are dropped (the note says so)."""
    info = dict(trace.get("otherData", {}).get("devkit", {}))
    dma_engines = max(1, int(info.get("dma_engines", 1)))
    names: dict[str, int] = {}
    sources: dict[str, int] = {}
    threads: dict[int, str] = {}
    order: dict[int, int] = {}
    counters: dict[str, list[list[float]]] = {}
    slices: dict[int, list[list[Any]]] = {}
    for ev in trace.get("traceEvents", ()):
        ph = ev.get("ph")
        if ph == "M" and ev.get("name") == "thread_name":
            threads[ev["tid"]] = ev["args"]["name"]
        elif ph == "M" and ev.get("name") == "thread_sort_index":
            order[ev["tid"]] = ev["args"]["sort_index"]
        elif ph == "X":
            a = ev.get("args", {})
            dur = float(ev["dur"])
            busy_us = float(a.get("engine_ns", a.get("busy_ns", 0.0))) * 1e-3
            engines = dma_engines if a.get("engine") == "dma" else 1
            frac = min(1.0, busy_us / (dur * engines)) if dur > 0 else 1.0
            n = names.setdefault(ev["name"], len(names))
            src = sources.setdefault(str(a.get("source", "?")), len(sources))
            slices.setdefault(ev["tid"], []).append(
                [float(ev["ts"]), dur, n, src, round(frac, 3), int(a.get("count", 1))]
            )
        elif ph == "C":
            value = next(iter(ev["args"].values()))
            counters.setdefault(ev["name"], []).append([float(ev["ts"]), float(value)])
    total = sum(len(v) for v in slices.values())
    dropped = 0
    if total > max_slices:  # drop exactly the shortest (ties: the later ones in program order)
        ranked = sorted((sl[1], -i, tid) for tid, v in slices.items() for i, sl in enumerate(v))
        gone: dict[int, set[int]] = {}
        for _, neg_i, tid in ranked[: total - max_slices]:
            gone.setdefault(tid, set()).add(-neg_i)
        for tid, idx in gone.items():
            slices[tid] = [sl for i, sl in enumerate(slices[tid]) if i not in idx]
        dropped = total - max_slices
    tracks = []
    for tid in sorted(slices, key=lambda t: (order.get(t, 1 << 30), t)):
        name = threads.get(tid, f"track {tid}")
        tracks.append({"name": name, "engine": name.split(" ")[0], "slices": sorted(slices[tid])})
    all_slices = [s for t in tracks for s in t["slices"]]
    end_us = max([s[0] + s[1] for s in all_slices], default=0.0)
    note = f"Whole kernel: {info.get('aggregation', 'all instructions')}."
    if dropped:
        note += f" {dropped:,} of the shortest slices are not drawn here (the trace file has them)."
    return {
        "title": title,
        "end_us": max(end_us, float(info.get("latency_us") or 0.0)),
        "max_dur_us": max([s[1] for s in all_slices], default=0.0),
        "tracks": tracks,
        "names": list(names),
        "sources": [short_path(src.rpartition(":")[0]) + ":" + src.rpartition(":")[2] for src in sources],
        "counters": [
            {
                "name": f"{name.split()[0]} peak {max(v for _, v in pts):,.0f} B/partition",
                "points": pts,
                "max": max(1.0, max(v for _, v in pts)),
            }
            for name, pts in counters.items()
        ]
        or None,
        "note": note,
    }


def render_trace_page(trace: Mapping[str, Any], *, title: str) -> str:
    """A standalone HTML page showing one exported trace with the zoomable timeline (no external files)."""
    return (
        environment()
        .get_template("trace_page.html.j2")
        .render(view=trace_view_data(trace, title=title), viewer_id="trace-viewer", title=title)
    )


def source_line(filename: str, lineno: int) -> str:
    """The stripped text of a kernel source line (empty when unavailable)."""
    return linecache.getline(filename, lineno).strip()


def short_path(filename: str, root: str | os.PathLike | None = None) -> str:
    """``filename`` relative to ``root`` (default: the current directory) when it lies below it."""
    base = os.path.abspath(root or os.getcwd())
    full = os.path.abspath(filename)
    return os.path.relpath(full, base) if full.startswith(base + os.sep) else filename


def hotspot_code(report: Any, limit: int = 12) -> dict[str, str]:
    """``{"file:line": source text}`` of the top hotspots, read now (call it where the kernel ran, so the
    text matches the code that was traced even if the file changes later)."""
    return {f"{h.filename}:{h.lineno}": source_line(h.filename, h.lineno) for h in report.hotspots[:limit]}


def hotspot_rows(report: Any, limit: int = 12, code: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Rows for the hotspot table of a :class:`~devkit.cost.report.CostReport` (busy us per engine).

    ``code`` maps ``"file:line"`` to the source text (see :func:`hotspot_code`); missing lines are read now.
    """
    rows = []
    for h in report.hotspots[:limit]:
        key = f"{h.filename}:{h.lineno}"
        text = code[key] if code and key in code else source_line(h.filename, h.lineno)
        rows.append(
            {
                "where": f"{short_path(h.filename)}:{h.lineno}",
                "code": text,
                "instructions": h.instructions,
                "busy_us": dict(h.busy_us),
                "total_us": h.total_busy_us,
            }
        )
    return rows


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def fmt_us(us: float | None) -> str:
    """Latency with a unit that keeps 3-4 significant digits."""
    if us is None:
        return "-"
    if us >= 1000:
        return f"{us / 1000:,.2f} ms"
    if us >= 1:
        return f"{us:,.1f} us"
    return f"{us * 1000:,.0f} ns"


def environment() -> Any:
    """The jinja2 environment of the devkit templates (StrictUndefined, HTML autoescape)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["us"] = fmt_us
    env.filters["bytes"] = fmt_bytes
    env.filters["pct"] = lambda v: "-" if v is None else f"{v:.1%}"
    env.filters["x"] = lambda v: "-" if v is None else f"{v:.2f}x"
    env.filters["err"] = lambda v: "-" if v is None else f"{v:.2e}"
    return env


def render_html(context: Mapping[str, Any], template: str = "report.html.j2") -> str:
    """Render the report page (every name the template uses must be in ``context``)."""
    return environment().get_template(template).render(**context)


def write_report(context: Mapping[str, Any], out_dir: str | Path, filename: str = "index.html") -> Path:
    """Render and write ``out_dir/filename`` atomically; returns the path."""
    return atomic.write_text(Path(out_dir) / filename, render_html(context))
