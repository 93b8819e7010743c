"""Functions shipped by reference: ``module:qualname`` strings a worker imports, never pickled code."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


class ExecutorError(ValueError):
    """Bad executor input: an unknown backend, a missing Ray, a job function that cannot be shipped."""


def fn_ref(fn: Callable[..., Any]) -> str:
    """``module:function`` of a module-level function; :class:`ExecutorError` for lambdas, closures and
    methods (a worker could not import them by name)."""
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None)
    if not module or not name or "<" in name or "." in name or module == "__main__":
        raise ExecutorError(
            f"job function {fn!r} cannot be shipped by reference: use a module-level function of an "
            "importable module"
        )
    ref = f"{module}:{name}"
    if resolve_fn(ref) is not fn:
        raise ExecutorError(f"job function {ref} does not resolve to the function given")
    return ref


def resolve_fn(ref: str) -> Callable[..., Any]:
    """The function named by ``module:function`` (imported on first use)."""
    module, _, name = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ExecutorError(f"cannot import job function {ref}: {exc}") from None
