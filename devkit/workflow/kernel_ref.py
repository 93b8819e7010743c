"""Kernels and their arguments named on a command line: ``FILE.py:KERNEL``, ``DTYPE[D0,D1,...]``, ``NAME=VALUE``.

Used by ``devkit cost`` and by the calibration bridge (:mod:`devkit.workflow.hw.predict`), which rebuilds
measured calls from the same spellings.  A file is imported unmodified with ``neuronxcc.nki`` mapped to
the simulator.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

_ARG_RE = re.compile(r"^\s*([A-Za-z0-9_]+)\s*\[\s*([0-9,\s]*)\]\s*$")


class KernelRefError(ValueError):
    """A bad ``FILE.py:KERNEL`` reference or argument spec (the message names the input; no traceback)."""


def parse_arg_spec(text: str) -> tuple[str, tuple[int, ...]]:
    """``bfloat16[8192,4096]`` -> ("bfloat16", (8192, 4096))."""
    m = _ARG_RE.match(text)
    if not m:
        raise KernelRefError(f"--arg {text!r}: expected DTYPE[D0,D1,...], e.g. bfloat16[8192,4096]")
    dims = tuple(int(d) for d in m.group(2).split(",") if d.strip())
    if not dims or any(d <= 0 for d in dims):
        raise KernelRefError(f"--arg {text!r}: dimensions must be positive integers")
    return m.group(1), dims


def parse_kwarg(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` with VALUE a Python literal (int, float, bool, string, tuple); bare words are strings."""
    if "=" not in text:
        raise KernelRefError(f"--kwarg {text!r}: expected NAME=VALUE")
    name, value = text.split("=", 1)
    if not name.isidentifier():
        raise KernelRefError(f"--kwarg {text!r}: {name!r} is not a valid argument name")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


_MODULES: dict[tuple[str, float], Any] = {}
#: True while the hardware stage loads kernels: files bind to the real SDK, the simulator is not mapped.
_REAL_SDK = [False]


@contextlib.contextmanager
def real_sdk_binding() -> Iterator[None]:
    """Within the block :func:`load_module` leaves the SDK module names alone, so kernel files bind to the
    real Neuron SDK (the hardware stage; nothing else wants it)."""
    _REAL_SDK.append(True)
    try:
        yield
    finally:
        _REAL_SDK.pop()


def load_module(path: str) -> Any:
    """Import ``path`` (once per process and modification time) with the simulator mapped in (unless inside
    :func:`real_sdk_binding`)."""
    from devkit import compat

    if not os.path.isfile(path):
        raise KernelRefError(f"no such file: {path}")
    key = (os.path.realpath(path), os.path.getmtime(path))
    if key in _MODULES:
        return _MODULES[key]
    if not compat.is_installed() and not _REAL_SDK[-1]:
        compat.install()
    mod_name = "_devkit_cost_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise KernelRefError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    from devkit import declare

    before = declare.declared()
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    # the kernels this file declared (devkit.declare), by name: how FILE.py:KERNEL finds them
    module.__devkit_declared__ = {n: s for n, s in declare.declared().items() if before.get(n) is not s}
    _MODULES[key] = module
    return module


def load_kernel(ref: str) -> Any:
    """``path/to/file.py:KERNEL`` -> the kernel object, imported with the simulator mapped in."""
    if ":" not in ref:
        raise KernelRefError(f"{ref!r}: expected FILE.py:KERNEL")
    path, name = ref.rsplit(":", 1)
    if not os.path.isfile(path):
        raise KernelRefError(f"no such file: {path}")
    module = load_module(path)
    if not hasattr(module, name):
        kernels = [k for k, v in vars(module).items() if callable(v) and not k.startswith("_")]
        raise KernelRefError(
            f"{path} has no kernel {name!r}; candidates: {', '.join(sorted(kernels)) or 'none'}"
        )
    return getattr(module, name)
