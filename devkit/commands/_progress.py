"""A heartbeat for long work: large jobs are announced up front, and work that runs for a while says so.

:class:`Heartbeat` wraps work that runs in the calling thread (a kernel simulation or estimate, a loop
over models).  A watcher thread samples the working thread's stack: the user's source line it is on
and, inside a kernel run, the simulated machine's instruction count and loop iteration.  On a terminal
this is a rich status line on stderr; when stderr is piped, one plain line every ``every_s`` seconds.
Nothing is shown for work that ends within ``first_after_s`` seconds.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from devkit.commands._errors import is_kit_file

#: Work whose arguments hold more than this many bytes is announced before it starts.
ANNOUNCE_BYTES = 8 * 2**30
#: Seconds of silence before the first progress report, and between plain-text reports.
FIRST_AFTER_S = 5.0
EVERY_S = 15.0


def count_bar(
    label: str, console: Console, *, spinner: bool = False, description: bool = False, **options: Any
) -> Progress:
    """The commands' progress bar: ``label`` (rich markup; may use ``{task.description}``), the bar,
    ``done/total`` and the time elapsed; ``spinner`` puts a spinner first, ``description`` the task's
    description last.  Transient unless ``options`` (passed to :class:`rich.progress.Progress`) say not."""
    columns: list[ProgressColumn] = [SpinnerColumn()] if spinner else []
    columns += [TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    if description:
        columns.append(TextColumn("{task.description}"))
    return Progress(*columns, console=console, **{"transient": True, **options})


def human_bytes(n: float) -> str:
    """``1.5 GiB`` (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n}"  # pragma: no cover


def sample(thread_id: int) -> dict[str, Any]:
    """Where thread ``thread_id`` is: the innermost user source line, and the simulated machine if any.

    Returns ``{"where": "file:line (function)" or None, "instructions": int or None}`` (instructions
    issued so far by the kernel being simulated; None outside a kernel run).
    """
    frame = sys._current_frames().get(thread_id)
    where = None
    machine = None
    while frame is not None:
        code = frame.f_code
        if where is None and not is_kit_file(code.co_filename):
            where = f"{_short(code.co_filename)}:{frame.f_lineno} ({code.co_name})"
        if machine is None and code.co_name == "run_kernel" and code.co_filename.endswith("runner.py"):
            machine = frame.f_locals.get("m")
        frame = frame.f_back
    info: dict[str, Any] = {"where": where, "instructions": None}
    if machine is not None:
        info["instructions"] = getattr(machine, "_iid", None)
    return info


def _short(path: str) -> str:
    import os

    try:
        rel = os.path.relpath(path)
    except ValueError:  # pragma: no cover - another drive on Windows
        return path
    return rel if not rel.startswith(".." + os.sep + "..") else path


def describe(elapsed: float, info: dict[str, Any]) -> str:
    """``42 s, 1,234,567 instructions, at k.py:21 (kernel)``."""
    parts = [f"{elapsed:,.0f} s"]
    if info.get("instructions") is not None:
        parts.append(f"{info['instructions']:,} instructions")
    if info.get("where"):
        parts.append(f"at {info['where']}")
    return ", ".join(parts)


@dataclass(eq=False)
class Heartbeat:
    """Context manager: announce large work, then report progress while the body runs (see module doc).

    ``work_bytes`` is the size of the problem (e.g. the bytes of the kernel's arguments); above
    ``announce_bytes`` a line says so before the work starts (``announce`` gives that reason directly).
    ``only_in_kernel`` reports only while a kernel is being simulated (for ``devkit simulate``, whose
    script may legitimately run long).
    ``status()`` supplies the progress text instead of the stack sample (e.g. ``3/40 tasks done``);
    ``terminal=False`` leaves a terminal alone (the caller draws its own progress bar there) and only
    prints the plain lines when stderr is piped.
    """

    prog: str
    _: KW_ONLY
    work_bytes: int = 0
    announce_bytes: int = ANNOUNCE_BYTES
    announce: str | None = None
    first_after_s: float = FIRST_AFTER_S
    every_s: float = EVERY_S
    only_in_kernel: bool = False
    status: Callable[[], str] | None = None
    terminal: bool = True
    stream: TextIO | None = None
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    #: Progress reports made (plain lines or status updates).
    reports: int = field(default=0, init=False)

    def __enter__(self) -> Heartbeat:
        out = self.stream or sys.stderr
        why = self.announce
        if why is None and self.work_bytes > self.announce_bytes:
            why = f"the arguments hold {human_bytes(self.work_bytes)}"
        if why:
            out.write(
                f"{self.prog}: large problem: {why}; this may take minutes (progress follows; Ctrl-C stops it)\n"
            )
            out.flush()
            self.first_after_s = min(self.first_after_s, 1.0)
        self._t0 = time.monotonic()
        self._thread = threading.Thread(
            target=self._watch, args=(threading.get_ident(),), name="devkit-heartbeat", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _watch(self, thread_id: int) -> None:
        out = self.stream or sys.stderr
        if self._stop.wait(self.first_after_s):
            return
        tty = self.stream is None and out.isatty()
        if tty:
            if self.terminal:
                self._watch_terminal(thread_id)
            return
        while True:
            text = self._text(thread_id)
            if text is not None:
                out.write(f"{self.prog}: still running: {text}\n")
                out.flush()
                self.reports += 1
            if self._stop.wait(self.every_s):
                return

    def _watch_terminal(self, thread_id: int) -> None:
        from rich.console import Console

        console = Console(stderr=True)
        with console.status("", spinner="dots") as status:
            while not self._stop.wait(0.5):
                text = self._text(thread_id)
                status.update("" if text is None else f"{self.prog}: running: {text}")
                self.reports += text is not None

    def _text(self, thread_id: int) -> str | None:
        """The progress text now (None: nothing to say)."""
        elapsed = time.monotonic() - self._t0
        if self.status is not None:
            return f"{elapsed:,.0f} s, {self.status()}"
        info = sample(thread_id)
        if self.only_in_kernel and info["instructions"] is None:
            return None
        return describe(elapsed, info)
