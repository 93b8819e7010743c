"""What an executor is asked to run: one function over a list of items, with the caller's hooks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Batch:
    """``[fn(item) for item in items]`` as one request to a backend (see
    :func:`devkit.workflow.executor.run_jobs` for the meaning of each hook).

    ``order``: submission order (positions into ``items``; default item order).  ``on_start(item)`` when
    a job is handed to a worker, ``on_done(result)`` as each one finishes, ``on_failure(item, exc, what)``
    turns a job lost with its worker into a result (without it the error propagates).  ``resources``:
    what each job needs on a cluster (the local pool ignores it).
    """

    fn: Callable[[Any], Any]
    items: Sequence[Any]
    order: Sequence[int] | None = None
    on_start: Callable[[Any], None] | None = None
    on_done: Callable[[Any], None] | None = None
    on_failure: Callable[[Any, BaseException, str], Any] | None = None
    resources: dict[str, float] | None = None

    def positions(self) -> list[int]:
        """The item positions in submission order."""
        return list(self.order) if self.order is not None else list(range(len(self.items)))
