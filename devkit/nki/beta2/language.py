"""``nki.language`` (NKI 0.x / Beta 2): tensors, buffers, loops, programs and the ``nl.*`` wrappers.

What differs from Beta 1 (``reference/nki_beta2.md`` §3, §9): loops are plain Python ranges (``affine_range``
is an alias of ``range``, so a loop-carried write is legal and tensors live as long as the kernel holds
them); ``program_id(axis=0)`` and friends describe the logical-core launch ``kernel[lnc]``; tensors are
created with ``ndarray(shape, dtype, buffer=sbuf, name='', address=None)``.  The element-wise, reduction
and memory convenience wrappers (experimental in NKI 0.3.0+) are the Beta-1 functions of
:mod:`devkit.nki.language`, which allocate and return a new tensor as NKI 0.x documents.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from devkit.errors import KernelArgumentError, UnsupportedError
from devkit.nki import _buffers, _isa_nl
from devkit.nki import language as _b1
from devkit.nki._buffers import Buffer, hbm, private_hbm, psum, sbuf, shared_hbm
from devkit.nki._tilesize import _TileSize
from devkit.nki.beta2 import address as _address
from devkit.nki.beta2 import dtypes
from devkit.nki.beta2 import loopsafety as _safety
from devkit.nki.beta2 import views as _views
from devkit.nki.beta2.dtypes import *  # noqa: F403
from devkit.nki.beta2.registers import VirtualRegister
from devkit.sim import instr as _x
from devkit.sim import replay2 as _replay2
from devkit.sim.index import ds
from devkit.sim.storage import HBM_BUFFERS
from devkit.sim.tensor import Tensor

bool = dtypes.bool_

__all__ = [
    "NKIObject",
    "affine_range",
    "ds",
    "dtypes",
    "hbm",
    "ndarray",
    "private_hbm",
    "program_id",
    "psum",
    "range",
    "sbuf",
    "sequential_range",
    "shared_hbm",
    "static_range",
    "tile_size",
]

# ---- buffers -------------------------------------------------------------------------------------------------


def _kind(x: Any) -> str:
    if isinstance(x, Tensor):
        return x.st.buffer
    if isinstance(x, Buffer):
        return x.kind
    raise KernelArgumentError(f"expected a tensor or a buffer, got {type(x).__name__}", rule="bad-buffer")


def is_sbuf(x: Any) -> builtins.bool:
    return _kind(x) == "sbuf"


def is_psum(x: Any) -> builtins.bool:
    return _kind(x) == "psum"


def is_hbm(x: Any) -> builtins.bool:
    return _kind(x) in HBM_BUFFERS


def is_on_chip(x: Any) -> builtins.bool:
    return _kind(x) in ("sbuf", "psum")


class _TileSize2(_TileSize):
    """``nl.tile_size`` of NKI 0.x (adds the byte-aware PSUM bank limits of 0.4.0)."""

    psum_bank_fmax = 512
    psum_bank_fmax_bytes = 2048


tile_size = _TileSize2()


def _fields(cls: type) -> list[str]:
    """The fields of an :class:`NKIObject` subclass: its annotated names, then its plain data class attributes
    (not methods, properties or dunders), base classes first, each in declaration order."""
    annotated: list[str] = []
    plain: list[str] = []
    for klass in reversed(cls.__mro__):
        if klass in (object, NKIObject):
            continue
        for n in inspect.get_annotations(klass):
            if n not in annotated:
                annotated.append(n)
        for n, v in vars(klass).items():
            if n.startswith("__") or callable(v) or isinstance(v, (property, staticmethod, classmethod)):
                continue
            if n not in plain:
                plain.append(n)
    return annotated + [n for n in plain if n not in annotated]


class NKIObject:
    """Base class for user classes used inside kernels (NKI 0.x compiles only such classes).

    A subclass without an ``__init__`` of its own (and not a dataclass) is built from its fields -- annotated
    names, then plain class attributes -- positionally in that order or by name, class attributes serving as
    defaults; fields not given stay unset (methods fill them in later).  nki-library (hardware-tested) constructs
    ``DimensionSizes(T=T, H=H, ...)`` from annotated fields and derives ``I_TP_sharded`` afterwards
    (moe_cte/bwmm_shard_on_I.py), and ``SectionParams(section_idx=..., ...)`` from unannotated class attributes
    ``section_idx = None`` (attention/attention_cte.py) -- a ``@dataclass`` whose fields carry no annotation, so
    the plain class attributes are recorded as annotated fields when the subclass is created
    (:meth:`__init_subclass__`), before the decorator reads them.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = dict(inspect.get_annotations(cls))
        added = False
        for n, v in list(vars(cls).items()):
            if (
                n in own
                or n.startswith("__")
                or callable(v)
                or isinstance(v, (property, staticmethod, classmethod))
            ):
                continue
            if (
                type(v).__hash__ is None
            ):  # a mutable default (list, dict): a dataclass would refuse it as a field
                continue
            own[n] = Any
            added = True
        if added:
            cls.__annotations__ = own

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        names = _fields(cls)
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__}() takes {len(names)} field(s) but {len(args)} were given")
        given = dict(zip(names, args))
        for n, v in kwargs.items():
            if n not in names:
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {n!r}")
            if n in given:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {n!r}")
            given[n] = v
        for n, v in given.items():
            setattr(self, n, v)


# ---- creation ---------------------------------------------------------------------------------------------------


def ndarray(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "", address: Any = None) -> Tensor:
    """An uninitialised tensor (reading an element before writing it is an UninitializedReadError).

    ``address=(partition_offset, free_offset)`` places an SBUF/PSUM tensor there
    (:mod:`devkit.nki.beta2.address`)."""
    _allow_multibank_psum()
    if address is None:
        return _b1.ndarray(shape, dtype, buffer=buffer, name=name)
    _address.parse_address(address)
    kind = _buffers.resolve(buffer).kind
    if kind in HBM_BUFFERS:
        raise KernelArgumentError(
            "nl.ndarray: address= applies to SBUF/PSUM tensors only", rule="bad-argument"
        )
    return _address.placed_ndarray(shape, dtype, kind, name, address)


def _allow_multibank_psum() -> None:
    """An NKI 0.x PSUM tensor may span several 2 KiB banks (it starts on a bank boundary)."""
    m = _x.current()
    if m is not None:
        m.psum_tile_banks = m.geometry.psum_banks
        m.nki_beta2 = True  # NKI 0.x rules apply to this run (see devkit.nki.beta2: tensor truthiness)


def zeros(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "") -> Tensor:
    _allow_multibank_psum()
    return _b1.zeros(shape, dtype, buffer=buffer, name=name)


def ones(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "") -> Tensor:
    return _b1.ones(shape, dtype, buffer=buffer, name=name)


def full(shape: Any, fill_value: Any, dtype: Any, buffer: Any = sbuf, name: str = "") -> Tensor:
    return _b1.full(shape, fill_value, dtype, buffer=buffer, name=name)


def zeros_like(x: Tensor, dtype: Any = None, buffer: Any = None, name: str = "") -> Tensor:
    return _b1.zeros(x.shape, dtype or x.dtype, buffer=buffer or _buffer_of(x), name=name)


def empty_like(x: Tensor, dtype: Any = None, buffer: Any = None, name: str = "") -> Tensor:
    return _b1.ndarray(x.shape, dtype or x.dtype, buffer=buffer or _buffer_of(x), name=name)


def _buffer_of(x: Tensor) -> Buffer:
    return {"sbuf": sbuf, "psum": psum, "private_hbm": private_hbm, "shared_hbm": shared_hbm}.get(
        x.st.buffer, sbuf
    )


rand = _b1.rand
random_seed = _b1.random_seed


def shared_constant(constant: Any, dtype: Any = None, **kwargs: Any) -> Tensor:
    """``nl.shared_constant(array_or_npy_path)``: a constant tensor in ``shared_hbm``; a ``str``/path argument
    names a ``.npy`` file (nki-library's rotational top-k saves its constants that way)."""
    if isinstance(constant, (str, os.PathLike)):
        try:
            constant = np.load(os.fspath(constant), allow_pickle=False)
        except (OSError, ValueError) as e:
            raise KernelArgumentError(
                f"nl.shared_constant({os.fspath(constant)!r}): cannot read a .npy array from it ({e})",
                rule="bad-argument",
            ) from None
    return _b1.shared_constant(constant, dtype=dtype, **kwargs)


def shared_identity_matrix(n: int, dtype: Any = dtypes.uint8, dst: Any = None) -> Tensor:
    """An ``n x n`` identity usable as an SBUF operand (e.g. the moving tensor of a TensorE transpose); with
    ``dst`` (an SBUF ``n x n`` tensor) the identity is written there."""
    from devkit import dtypes as _dt
    from devkit.errors import user_location

    api = "nl.shared_identity_matrix"
    m = _x.machine(api)
    if not isinstance(n, (int, np.integer)) or not 1 <= int(n) <= 128:
        raise KernelArgumentError(f"{api}: n must be an integer in 1..128, got {n!r}", rule="bad-argument")
    n = int(n)
    if dst is not None:
        if not isinstance(dst, Tensor) or dst.shape != (n, n):
            raise KernelArgumentError(f"{api}: dst must be an ({n}, {n}) tensor", rule="bad-argument")
        from devkit.nki.beta2 import isa as _isa

        _isa.dma_copy(dst, shared_identity_matrix(n, dst.dtype))
        return dst
    try:
        d = _dt.as_dtype(dtype)
    except _dt.DtypeNotSupported as e:
        raise KernelArgumentError(f"{api}: {e}", rule="bad-argument") from None
    data = _dt.round_to(np.identity(n, dtype=np.float32), d) if m.numerics else None
    st = m.new_storage(
        (n, n), d, "sbuf", data=data, fill=None, kind="constant", name="identity", loc=user_location()
    )
    return Tensor.whole(st)


# ---- loops and control flow --------------------------------------------------------------------------------------


def _range(api: str, args: tuple, registers: builtins.bool = False) -> builtins.range:
    if not 1 <= len(args) <= 3:
        raise KernelArgumentError(f"{api} takes 1 to 3 integers, got {len(args)}", rule="bad-argument")
    kinds = (int, np.integer, VirtualRegister) if registers else (int, np.integer)
    for a in args:
        if not isinstance(a, kinds) or isinstance(a, builtins.bool):
            what = (
                "integers or virtual registers" if registers else "integers known when the kernel is traced"
            )
            raise KernelArgumentError(f"{api} bounds must be {what}, got {a!r}", rule="bad-argument")
    return builtins.range(*[int(a) for a in args])


class _Loop:
    """The range of an NKI 0.x loop in a cost-only run: iterating it goes through loop replay
    (:mod:`devkit.sim.replay2`); otherwise it behaves as the ``range`` it holds."""

    __slots__ = ("_body", "_frame", "_range")

    def __init__(self, r: builtins.range, frame: Any, body: Any) -> None:
        self._range = r
        self._frame = frame
        self._body = body

    def __iter__(self) -> Iterator[int]:
        m = _x.current()
        frame, body = self._frame, self._body
        self._frame = None  # one loop: the frame is not kept alive past it
        if m is None or m.numerics or frame is None:
            return iter(self._range)

        def may_replay() -> builtins.bool:
            return body.safe and _safety.values_ok(body, frame)

        return _replay2.iterate(m, self._range, may_replay)

    def __len__(self) -> int:
        return len(self._range)

    def __getitem__(self, k: Any) -> Any:
        return self._range[k]

    def __contains__(self, v: Any) -> builtins.bool:
        return v in self._range

    def __reversed__(self) -> Iterator[int]:
        return reversed(self._range)

    def __getattr__(self, name: str) -> Any:  # start, stop, step, index, count
        return getattr(self._range, name)

    def __repr__(self) -> str:
        return repr(self._range)


def _loop(api: str, args: tuple) -> Any:
    """The range of a kernel loop: a :class:`_Loop` when a cost-only run iterates it in a ``for`` statement
    right away (replay may apply), else Python's range."""
    r = _range(api, args)
    m = _x.current()
    if m is None or m.numerics or not m.tracing:
        return r
    frame = _safety.caller(3)
    body = _safety.loop_site(frame) if frame is not None else None
    if body is None:
        return r  # not iterated by a for statement right away
    return _Loop(r, frame, body)


def affine_range(*args: int) -> Any:
    """Alias of ``range`` in NKI 0.x (iterations may depend on each other)."""
    return _loop("nl.affine_range", args)


def sequential_range(*args: int) -> Any:
    """Alias of ``range`` in NKI 0.x."""
    return _loop("nl.sequential_range", args)


def static_range(*args: int) -> Any:
    """Alias of ``range`` in NKI 0.x."""
    return _loop("nl.static_range", args)


def range(*args: int) -> Any:
    """``nl.range`` (used by nki-library): Python's range."""
    return _loop("nl.range", args)


def dynamic_range(*args: Any) -> builtins.range:
    """A hardware loop on the device; the simulator runs it like ``range`` over the bounds' current values
    (ints or virtual registers)."""
    return _range("nl.dynamic_range", args, registers=True)


def fori_loop(lower: int, upper: int, body_fun: Callable[[int], Any], step: int = 1) -> None:
    """``for i in range(lower, upper, step): body_fun(i)`` (0.6.0); the body returns nothing."""
    for i in _range("nl.fori_loop", (lower, upper, step), registers=True):
        body_fun(i)


def while_loop(init: Any, body_fun: Callable[[Any], Any]) -> None:
    raise UnsupportedError(
        "nl.while_loop needs virtual registers, which the devkit does not simulate yet", rule="not-simulated"
    )


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Program order inside the block (the simulator always runs in program order)."""
    yield


# ---- programs (logical cores) ---------------------------------------------------------------------------------------


def program_id(axis: int = 0) -> int:
    """Index of this program in the launch ``kernel[lnc]`` (0 without a launch grid)."""
    m = _x.machine("nl.program_id")
    _one_axis("nl.program_id", "axis", axis)
    return m.program_ids[0] if m.program_ids else 0


def num_programs(axes: int = 0) -> int:
    """Number of programs of the launch (1 without a grid)."""
    m = _x.machine("nl.num_programs")
    _one_axis("nl.num_programs", "axes", axes)
    return m.grid[0] if m.grid else 1


def _one_axis(api: str, name: str, value: Any) -> None:
    """A logical-core launch has one axis: ``value`` (of argument ``name``) must be 0."""
    if value != 0:
        raise KernelArgumentError(
            f"{api}({name}={value!r}): a logical-core launch has one axis", rule="program-id-axis"
        )


def program_ndim() -> int:
    """Dimensions of the launch grid (0 without a grid, 1 under ``kernel[2]``)."""
    return len(_x.machine("nl.program_ndim").grid)


def device_print(prefix: str, tensor: Any) -> None:
    """Print a tensor's values immediately (simulation)."""
    _b1.device_print(prefix, tensor)


# ---- convenience wrappers (NKI 0.3.0+; each allocates and returns a new tensor) and operator tokens -----------------

# NKI 0.x signatures: ``op(x, y, dtype=None)``, ``op(x, dtype=None)``, ``reduce(x, axis, dtype=None, keepdims=False)``;
# the functions keep their Beta-1 token attributes (``op=nl.add`` still names the ALU operation)
_BINARY = (
    "add subtract multiply divide maximum minimum power fmod mod "
    "logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor left_shift right_shift"
).split()
_COMPARE = "equal not_equal less less_equal greater greater_equal".split()
_UNARY = (
    "abs square exp log sqrt rsqrt reciprocal sin cos tan arctan tanh ceil floor trunc negative sign "
    "relu sigmoid silu silu_dx gelu gelu_dx gelu_apprx_sigmoid gelu_apprx_tanh mish softplus erf erf_dx "
    "invert logical_not"
).split()
_REDUCE = "sum max min mean prod".split()
_AS_IS = "matmul".split()


def _binary(fn: Callable[..., Any], compare: builtins.bool) -> Callable[..., Any]:
    @functools.wraps(fn)
    def op(x: Any, y: Any, dtype: Any = None) -> Tensor:
        _views.refuse_indirect(f"nl.{fn.__name__}", x, y)
        if dtype is None and compare:  # NKI 0.3.0: comparisons give 1/0 in the input dtype
            dtype = x.dtype if isinstance(x, Tensor) else (y.dtype if isinstance(y, Tensor) else None)
        return fn(x, y, dtype=dtype)

    return op


def _unary(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def op(x: Any, dtype: Any = None) -> Tensor:
        _views.refuse_indirect(f"nl.{fn.__name__}", x)
        return fn(x, dtype=dtype)

    return op


def _reduction(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def op(x: Any, axis: Any, dtype: Any = None, keepdims: builtins.bool = False) -> Tensor:
        _views.refuse_indirect(f"nl.{fn.__name__}", x)
        return fn(x, axis, dtype=dtype, keepdims=keepdims)

    return op


for _name in _BINARY + _COMPARE:
    globals()[_name] = _binary(getattr(_b1, _name), _name in _COMPARE)
for _name in _UNARY:
    globals()[_name] = _unary(getattr(_b1, _name))
for _name in _REDUCE:
    globals()[_name] = _reduction(getattr(_b1, _name))
for _name in _AS_IS:
    globals()[_name] = getattr(_b1, _name)
del _name


# NKI 0.x signatures of the remaining wrappers (``dtype`` may be passed by position, [B2 §3.7])


def load_transpose2d(src: Tensor, dtype: Any = None) -> Tensor:
    """A new SBUF tile holding the 2-D transpose of HBM ``src`` (cast to ``dtype``)."""
    return _b1.load_transpose2d(src, dtype=dtype)


def softmax(x: Tensor, axis: Any = -1, dtype: Any = None) -> Tensor:
    """Softmax over trailing free axes (``axis=-1``: the last)."""
    if isinstance(axis, (int, np.integer)) and axis < 0:
        axis = len(x.shape) + int(axis)
    return _b1.softmax(x, axis, dtype=dtype)


def rms_norm(
    x: Tensor,
    w: Tensor,
    axis: Any,
    n: Any,
    epsilon: float = 1e-6,
    dtype: Any = None,
    compute_dtype: Any = None,
) -> Tensor:
    """``x * rsqrt(sum(x**2) / n + epsilon) * w`` over trailing free axes."""
    return _b1.rms_norm(x, w, axis, n, epsilon, dtype=dtype, compute_dtype=compute_dtype)


def var(x: Tensor, axis: Any, dtype: Any = None, keepdims: builtins.bool = True) -> Tensor:
    """Population variance over free axes; the result always keeps the reduced dims (NKI 0.x)."""
    return _b1.var(x, axis, dtype=dtype)


def all(x: Tensor, axis: Any, dtype: Any = None) -> Tensor:
    """Whether every element along ``axis`` is nonzero (bool unless ``dtype``)."""
    return _b1.all(x, axis) if dtype is None else _b1.all(x, axis, dtype=dtype)


def where(condition: Tensor, x: Any, y: Any, dtype: Any = None) -> Tensor:
    """``x`` where ``condition`` is nonzero, else ``y``."""
    return _b1.where(condition, x, y, dtype=dtype)


def dropout(x: Tensor, rate: Any, dtype: Any = None) -> Tensor:
    """Each element kept or zeroed with probability ``rate``."""
    return _b1.dropout(x, rate, dtype=dtype)


def gather_flattened(data: Tensor, indices: Tensor, axis: int = 0, dtype: Any = None) -> Tensor:
    """``np.take_along_axis`` on the flattened free dims of each partition (``axis`` 0, the only documented)."""
    if axis != 0:
        raise UnsupportedError(
            f"nl.gather_flattened: axis={axis!r} is not simulated (only the default 0)", rule="unsupported"
        )
    return _b1.gather_flattened(data, indices, dtype=dtype)


def load(src: Tensor, dtype: Any = None) -> Tensor:
    """A new SBUF tile holding HBM ``src`` (cast to ``dtype``)."""
    return _b1.load(src, dtype=dtype)


def store(dst: Tensor, value: Any) -> None:
    """Write SBUF ``value`` into HBM ``dst`` (a PSUM value is not supported)."""
    if isinstance(value, Tensor) and value.st.buffer == "psum":
        raise KernelArgumentError(
            "nl.store: the value cannot be in PSUM; copy it to SBUF first", rule="bad-argument"
        )
    _b1.store(dst, value)


@functools.wraps(_b1.copy)
def copy(x: Tensor, dtype: Any = None) -> Tensor:
    """A new SBUF tile with ``x``'s values (cast to ``dtype``)."""
    return _b1.copy(x, dtype=dtype)


def transpose(x: Tensor, dtype: Any = None) -> Tensor:
    """2-D partition/free transpose into a new tile."""
    return _b1.transpose(x, dtype=dtype)


def broadcast_to(x: Tensor, shape: Any, dtype: Any = None) -> Tensor:
    """``x`` broadcast to ``shape`` (same rank) as a new tile."""
    v = _b1.broadcast_to(x, shape=shape)
    return _b1.copy(v, dtype=dtype) if dtype is not None else v


def expand_dims(x: Tensor, axis: Any) -> Tensor:
    return _b1.expand_dims(x, axis)


def _token(name: str) -> Any:
    class _Token:
        """An operator token NKI 0.x passes as a value (``op=nl.bypass``)."""

        __name__ = name
        _nki_alu = name

        def __repr__(self) -> str:
            return f"nl.{name}"

    return _Token()


bypass = _token("bypass")
prelu = _token("prelu")
average = _token("average")


# NKI 0.4.0 (trn3): the signed operand with the larger / smaller magnitude, ties -> y; callable wrappers
# that are also ALU operator tokens (``op=nl.abs_max``)
abs_max = _binary(_isa_nl.language(_isa_nl.ABS_MAX), False)
abs_min = _binary(_isa_nl.language(_isa_nl.ABS_MIN), False)


def _direct_operands_only(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` refusing indirect views (``tensor.indirect``) among its arguments: only the ``nki.isa``
    instructions listed in :data:`devkit.nki.beta2.views.INDIRECT_OPS` take them."""

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _views.refuse_indirect(f"nl.{fn.__name__}", *args, *kwargs.values())
        return fn(*args, **kwargs)

    return checked


for _name in (
    "matmul load_transpose2d softmax rms_norm var all where dropout gather_flattened load store copy transpose "
    "broadcast_to expand_dims abs_max abs_min"
).split():
    globals()[_name] = _direct_operands_only(globals()[_name])
del _name
