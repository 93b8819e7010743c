"""Rich rendering of a :class:`devkit.cost.report.CostReport` for the command line."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table

from devkit.cost.report import BUSY_KEYS, CostReport


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1024
    return f"{n}"  # pragma: no cover


#: Longest ``file:line`` shown in a table; longer paths lose their leading directories, never the line.
LOCATION_WIDTH = 36


def source_location(filename: str, lineno: int, width: int = LOCATION_WIDTH) -> str:
    """``file:line`` for a terminal table: relative to the working directory when below it, and cut
    from the left (``…/dir/file.py:12``) when longer than ``width`` characters, so the line number stays."""
    import os

    path = filename
    if os.path.isabs(path):
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    text = f"{path}:{lineno}"
    if len(text) > width:
        tail = text[len(text) - width + 1 :]
        cut = tail.find(os.sep)
        text = "…" + (tail[cut:] if 0 <= cut < len(tail) - len(os.path.basename(path)) else tail)
    return text


def render_table(report: CostReport, hotspots: int = 10) -> Group:
    """A rich renderable: summary, engine busy time, bytes by level and the top source lines."""
    title = f"{report.kernel or 'kernel'} on {report.target} (modelled)"
    summary = Table(title=title, show_header=False)
    summary.add_column("metric")
    summary.add_column("value", justify="right")
    from devkit.cost.uncertainty import band

    b = band(report.target)
    spread = f" ±{b.pct:.0f} %" if b is not None else f" (no uncertainty band for {report.target})"
    summary.add_row("latency", f"{report.latency_us:,.2f} us{spread}")
    summary.add_row("bound by", f"{report.bound_by} (lower bound {report.roofline_us:,.2f} us)")
    summary.add_row("instructions", f"{report.instructions:,}")
    summary.add_row("TensorE FLOPs", f"{report.flops:,}")
    summary.add_row("TensorE utilization", f"{report.tensor_utilization:.1%}")
    summary.add_row("HBM bandwidth utilization (MBU)", f"{report.mbu:.1%}")
    summary.add_row("DMA transfers / descriptors", f"{report.dma_transfers:,} / {report.dma_descriptors:,}")
    summary.add_row(
        "SBUF peak",
        f"{_bytes(report.sbuf_peak_bytes)} ({_bytes(report.sbuf_peak_bytes_per_partition)}/partition)",
    )
    summary.add_row(
        "PSUM peak",
        f"{_bytes(report.psum_peak_bytes)} ({_bytes(report.psum_peak_bytes_per_partition)}/partition)",
    )
    summary.add_row("spill", _bytes(report.spill_bytes))

    engines = Table(title="engines")
    engines.add_column("engine")
    engines.add_column("busy us", justify="right")
    engines.add_column("busy / latency", justify="right")
    engines.add_column("instructions", justify="right")
    for name in BUSY_KEYS:
        busy = report.engine_busy_us[name]
        share = busy / report.latency_us if report.latency_us else 0.0
        engines.add_row(name, f"{busy:,.2f}", f"{share:.1%}", f"{report.instructions_by_engine[name]:,}")

    levels = Table(title="bytes by level")
    levels.add_column("path")
    levels.add_column("bytes", justify="right")
    for name, value in report.bytes_by_level.items():
        levels.add_row(name, _bytes(value))

    hot = Table(title=f"hotspots (top {hotspots} source lines by busy time)")
    locations = [source_location(h.filename, h.lineno) for h in report.hotspots[:hotspots]]
    hot.add_column("line", no_wrap=True, min_width=max((len(t) for t in locations), default=4))
    hot.add_column("instructions", justify="right")
    for name in BUSY_KEYS:
        hot.add_column(f"{name} us", justify="right")
    for h, where in zip(report.hotspots[:hotspots], locations):
        hot.add_row(
            where,
            f"{h.instructions:,}",
            *(f"{h.busy_us[name]:,.1f}" for name in BUSY_KEYS),
        )
    parts = [summary, engines, levels, hot]
    if report.unknown_opcodes:
        parts.append(
            f"[yellow]opcodes without a cost rule (engine default used): "
            f"{', '.join(report.unknown_opcodes)}[/yellow]"
        )
    return Group(*parts)


def print_report(report: CostReport, console: Console | None = None) -> None:
    """Print :func:`render_table` to ``console`` (default: stdout)."""
    (console or Console()).print(render_table(report))
