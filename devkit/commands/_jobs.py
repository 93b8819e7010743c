"""The executor of a command's jobs (``--executor``, ``--ray-address``, ``--jobs``) and its progress line.

:func:`executor_from_args` builds the backend (:mod:`devkit.workflow.executor`); :func:`job_progress`
counts finished jobs wherever they ran: a rich progress bar on a terminal, one plain line every
``EVERY_S`` seconds when stderr is piped (:class:`devkit.commands._progress.Heartbeat`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from devkit.commands._errors import bad_value
from devkit.commands._progress import Heartbeat, count_bar
from devkit.workflow import executor as executors


def executor_from_args(args: argparse.Namespace) -> executors.Executor:
    """The executor the options name (``--jobs`` is the local worker count; >= 1)."""
    jobs = getattr(args, "jobs", None)
    if jobs is not None and jobs < 1:
        raise bad_value("--jobs", str(jobs), "a number of worker processes >= 1")
    kind = getattr(args, "executor", "local") or "local"
    return executors.create(kind, jobs=jobs, address=getattr(args, "ray_address", None))


@contextmanager
def job_progress(prog: str, total: int, console: Console) -> Iterator[Callable[[Any], None]]:
    """Yields ``on_done(result)``: call it once per finished job; the bar (or plain line) counts them."""
    finished = [0]

    def status() -> str:
        return f"{finished[0]}/{total} jobs done"

    with (
        Heartbeat(prog, status=status, terminal=False),
        count_bar(f"[bold]{prog}[/]", console) as bar,
    ):
        task = bar.add_task("", total=total)

        def on_done(_: Any) -> None:
            finished[0] += 1
            bar.update(task, completed=finished[0])

        yield on_done
