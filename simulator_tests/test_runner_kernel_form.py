"""The runner tells a value-returning kernel from an output-argument kernel once per code object."""

from __future__ import annotations

import numpy as np

import devkit
from devkit.nki import runner

SOURCE = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

def copy_kernel(a{extra}):
    t = nl.load(a)
{body}
"""
RETURNS = "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n    nl.store(out, t)\n    return out\n"
WRITES = "    nl.store(out, t)\n"


def _define(body: str, extra: str = ""):
    ns: dict = {}
    exec(compile(SOURCE.format(body=body, extra=extra), "<kernel-form>", "exec"), ns)
    return ns["copy_kernel"]


def test_a_redefined_kernel_is_read_again():
    import linecache

    a = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    # inspect.getsource reads the source through linecache: give each definition its own text
    for body, extra in ((RETURNS, ""), (WRITES, ", out")):
        src = SOURCE.format(body=body, extra=extra)
        linecache.cache["<kernel-form>"] = (len(src), None, src.splitlines(True), "<kernel-form>")
        k = _define(body, extra)
        returns = body is RETURNS
        assert runner._returns_value(k) is returns
        assert runner._returns_value(k) is returns  # the cached answer is the same
        if returns:
            np.testing.assert_array_equal(devkit.simulate(k, a), a)
        else:
            out = np.zeros_like(a)
            devkit.simulate(k, a, out)
            np.testing.assert_array_equal(out, a)
    linecache.cache.pop("<kernel-form>", None)
