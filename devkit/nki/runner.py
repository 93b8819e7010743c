"""Running a kernel function on the simulated NeuronCore.

:func:`run_kernel` wraps host arguments as HBM tensors, executes every SPMD program instance of the
launch grid, and converts what the kernel returns back to NumPy arrays.  It is the single entry
point used by ``nki.jit``/``simulate_kernel``/``baremetal``/``benchmark``, ``devkit.simulate`` and
``devkit.estimate``.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import textwrap
from dataclasses import dataclass
from typing import Any

import numpy as np

from devkit import dtypes as dt
from devkit.errors import DtypeError, KernelArgumentError
from devkit.sim import gcpolicy
from devkit.sim.machine import Machine
from devkit.sim.options import Geometry, SimOptions
from devkit.sim.storage import ever_written
from devkit.sim.tensor import Tensor
from devkit.targets import TARGETS, load_target
from devkit.trace import MemoryStats, NullSink, TraceSink


@functools.cache
def geometry(target: str) -> Geometry:
    """On-chip geometry of a target, read from its target file (:mod:`devkit.targets`)."""
    t = load_target(target)
    return Geometry(
        name=t.name,
        partitions=t.sbuf.partitions,
        sbuf_bytes_per_partition=t.sbuf.bytes_per_partition,
        sbuf_usable_bytes_per_partition=t.sbuf.usable_bytes_per_partition,
        psum_banks=t.psum.banks,
        psum_bank_bytes=t.psum.bank_bytes_per_partition,
        nc_version=t.core.nc_version,
    )


@functools.cache
def largest_sbuf_bytes_per_partition() -> int:
    """The largest physical SBUF partition of any known target (bytes)."""
    return max(geometry(t).sbuf_bytes_per_partition for t in TARGETS)


class TensorSpec:
    """A shape/dtype placeholder for a kernel argument (``nt.tensor[[8192, 4096], nl.bfloat16]``).

    Passing placeholders runs the kernel cost-only: control flow and bookkeeping without values.
    """

    def __init__(self, shape: Any, dtype: Any) -> None:
        self.shape = tuple(int(s) for s in shape)
        try:
            self.dtype = dt.as_dtype(dtype)
        except dt.DtypeNotSupported as e:
            raise DtypeError(str(e)) from None

    def __repr__(self) -> str:
        return f"tensor[{list(self.shape)}, {dt.name_of(self.dtype)}]"


@dataclass
class RunResult:
    outputs: Any
    stats: MemoryStats
    numerics: bool
    #: returned tensors the kernel never wrote, described for a message (see :func:`unwritten_outputs`)
    unwritten: tuple[str, ...] = ()


def unwritten_outputs(result: Any) -> tuple[str, ...]:
    """Descriptions of the tensors in a kernel's return value that no instruction ever wrote.

    Such an output holds NaN (numerics) and costs nothing (cost-only): almost certainly a missing store.
    """
    flat: list[Tensor] = []
    _collect_tensors(result, flat)
    out = []
    for i, t in enumerate(flat):
        if ever_written(t.st) or t.st.is_input:
            continue
        label = "the returned tensor" if len(flat) == 1 else f"returned tensor {i}"
        fn, ln = t.st.origin
        where = f" allocated at {fn}:{ln}" if fn else ""
        out.append(f"{label} ({t.st.describe()}{where})")
    return tuple(out)


def _collect_tensors(v: Any, into: list[Tensor]) -> None:
    """Append the tensors of a (nested tuple/list) return value to ``into``.

    A module-level function on purpose: a recursive closure is a reference cycle (function -> cell -> function)
    that would keep the returned tensors -- the run's output storages -- alive until the next full garbage
    collection (nki-library's harness ran out of memory across tests that way)."""
    if isinstance(v, Tensor):
        into.append(v)
    elif isinstance(v, (tuple, list)):
        for item in v:
            _collect_tensors(item, into)


def _returns_value(func: Any) -> bool:
    """Whether a kernel function returns a value (post-2.21 convention) or writes its arguments.

    Read from the source once per code object (parsing it took about a third of a small kernel's run)."""
    code = getattr(func, "__code__", None)
    if code is not None:
        known = _RETURNS_VALUE.get(code)
        if known is None:
            known = _RETURNS_VALUE[code] = _parse_returns_value(func)
        return known
    return _parse_returns_value(func)


#: ``_returns_value`` by kernel code object (a code object is immutable; redefining a kernel makes a new one).
_RETURNS_VALUE: dict[Any, bool] = {}


def _parse_returns_value(func: Any) -> bool:
    try:
        src = textwrap.dedent(inspect.getsource(func))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError):
        return True
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None:
        return True
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and node.value is not None:
            return True
    return False


def _mutable_params(func: Any) -> set[str]:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return set()
    out = set()
    for name, p in sig.parameters.items():
        ann = p.annotation
        if getattr(ann, "_nki_mutable", False) or (isinstance(ann, str) and "mutable_tensor" in ann):
            out.add(name)
    return out


def _param_names(func: Any) -> list[str]:
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return []


def _wrap(m: Machine, value: Any, name: str, mutable: bool) -> Any:
    if isinstance(value, TensorSpec):
        st = m.input_storage(None, value.shape, value.dtype, name)
        st.kind = "hbm" if mutable else "input"
        st.is_input = not mutable
        return Tensor.whole(st)
    if isinstance(value, np.ndarray) and value.dtype != object:
        try:
            d = dt.as_dtype(value.dtype)
        except dt.DtypeNotSupported as e:
            raise DtypeError(f"kernel argument '{name}': {e}") from None
        st = m.input_storage(value, tuple(value.shape), d, name)
        if mutable:
            st.kind = "hbm"
            st.is_input = False
        return Tensor.whole(st)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
        return type(value)(_wrap(m, v, f"{name}[{i}]", mutable) for i, v in enumerate(value))
    return value


def _to_host(m: Machine, value: Any) -> Any:
    if isinstance(value, Tensor):
        if not m.numerics:
            return np.zeros(
                value.shape,
                dtype=np.float32
                if dt.name_of(value.dtype) == "tfloat32"
                else dt.to_external(np.zeros(1), value.dtype).dtype,
            )
        return dt.to_external(value.read(check_init=False), value.dtype)  # (always a new array)
    if isinstance(value, tuple):
        return tuple(_to_host(m, v) for v in value)
    if isinstance(value, list):
        return [_to_host(m, v) for v in value]
    return value


def _release_inputs(m: Machine, result: Any) -> None:
    """Drop the values of the run's argument storages once the kernel finished and written arguments were copied
    back, before the outputs are converted to host arrays: the outputs' host copies then do not coexist with the
    arguments' storage copies (fp32 for every float format: twice a bf16 input).  Storages the result refers to
    (a kernel may return an argument, or a view of one) keep theirs."""
    keep: set[int] = set()
    flat: list[Tensor] = []
    _collect_tensors(result, flat)
    for t in flat:
        st: Any = t.st
        while st is not None:
            keep.add(id(st))
            st = st.base
    for st in m.inputs:
        if id(st) not in keep:
            st.release_values()


def _blas_threads() -> Any:
    """BLAS threads for the run: ``DEVKIT_BLAS_THREADS`` (default 1).  Tile-sized products (128x128x512)
    are faster on one thread -- thread synchronisation costs more than it saves at that size -- and one
    thread per process cannot oversubscribe the cores when several simulations run at once.  Stacked
    accumulation chains (:mod:`devkit.sim.deferred`) are large enough to use every core unless
    ``DEVKIT_BLAS_THREADS`` is set (the worker pools of ``devkit run``/``tune`` set it to 1)."""
    import os

    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()  # finds the loaded BLAS libraries once (about 1 ms a call)
    n = os.environ.get("DEVKIT_BLAS_THREADS", "").strip()
    return _BLAS.limit(limits=max(1, int(n)) if n.isdigit() else 1, user_api="blas")


_BLAS: Any = None


def _grid_points(grid: tuple[int, ...]) -> list[tuple[int, ...]]:
    return list(itertools.product(*[range(int(g)) for g in grid])) if grid else [()]


def run_kernel(
    func: Any,
    args: tuple,
    kwargs: dict,
    *,
    grid: Any = None,
    target: str = "trn1",
    options: SimOptions | None = None,
    sink: TraceSink | None = None,
    mutable_inputs: bool = False,
    programs: Any = None,
    host_outputs: bool = True,
) -> RunResult:
    """Execute ``func(*args, **kwargs)`` on a fresh simulated NeuronCore and return its outputs.

    ``mutable_inputs``: every array argument may be written and is updated in place after the run (NKI 0.x,
    as AWS's simulator does); otherwise inputs are immutable unless annotated ``mutable_tensor`` or the kernel
    returns nothing (Beta-1 conventions).  ``programs(machine, func, args, kwargs, grid_points)``: runs the
    programs of a launch grid of more than one program instead of one after the other (NKI 0.x LNC-2
    launches, :mod:`devkit.nki.beta2.lnc`).  ``host_outputs=False``: the caller does not want the outputs
    (``RunResult.outputs`` is None; a cost estimate would otherwise allocate a zero array per output)."""
    if options is None:
        options = SimOptions()
    placeholders = any(isinstance(a, TensorSpec) for a in list(args) + list(kwargs.values()))
    if placeholders and options.numerics:
        options = SimOptions(**{**options.__dict__, "numerics": False})
    g = geometry(target)
    grid_t: tuple[int, ...] = ()
    if grid is not None:
        grid_t = tuple(int(x) for x in (grid if isinstance(grid, (tuple, list)) else (grid,)))
        if any(x < 1 for x in grid_t):
            raise KernelArgumentError(f"launch grid {list(grid_t)} must have positive sizes")
    m = Machine(options, g, sink if sink is not None else NullSink())
    legacy = mutable_inputs or not _returns_value(func)
    mutable = _mutable_params(func)
    names = _param_names(func)
    with m, _blas_threads(), gcpolicy.during_simulation():
        wrapped = []
        for i, a in enumerate(args):
            nm = names[i] if i < len(names) else f"arg{i}"
            wrapped.append(_wrap(m, a, nm, legacy or nm in mutable))
        wkw = {k: _wrap(m, v, k, legacy or k in mutable) for k, v in kwargs.items()}
        m.grid = grid_t
        result = None
        points = _grid_points(grid_t)
        if programs is not None and len(points) > 1:
            result = programs(m, func, tuple(wrapped), wkw, points)
            points = []
        for pid in points:
            m.program_ids = pid
            m._shared_cursor = 0
            m.accumulators = {}
            result = func(*wrapped, **wkw)
            m.flush()
        if m.stored_garbage:
            from devkit.sim.unwritten import check_outputs

            check_outputs(m)
        stats = m.finish()
        unwritten = unwritten_outputs(result)
        if legacy and m.numerics:
            pairs = list(zip(args, wrapped)) + [(kwargs[k], wkw[k]) for k in kwargs]
            for a, w in pairs:
                if isinstance(a, np.ndarray) and isinstance(w, Tensor) and w.st.written:
                    a[...] = dt.to_external(w.st.data, w.dtype)
        _release_inputs(m, result)
        outputs = _to_host(m, result) if host_outputs else None
    if unwritten and m.numerics:
        import warnings

        from devkit.errors import UnwrittenOutputWarning

        for what in unwritten:
            warnings.warn(
                f"{getattr(func, '__name__', 'kernel')}: {what} was never written by the kernel; "
                "it holds NaN (a missing store?)",
                UnwrittenOutputWarning,
                stacklevel=3,
            )
    return RunResult(outputs, stats, m.numerics, unwritten)
