"""Never-written data: where it may flow, and where observing it is an ``uninitialized-read`` error.

Memory a kernel allocates without values (``nl.ndarray``) holds garbage until it is written; the simulator
tracks, per element, whether it was ever written (``Storage.uninit``, numerics runs only).  Real kernels move
buffers of which they wrote only a part and use only that part afterwards; AWS's hardware-tested
nki-library @d2ad3a5 does it (``router_topk`` sends a buffer whose last row one program never wrote to its
peer, which ignores that row; ``find_nonzero_indices`` transposes a tile of which every 16th column was
written and then reads only the rows those columns became).  So the rule is where the garbage is
*consumed*, not where it is moved:

* A **data movement between on-chip buffers** -- a tile copy (``tensor_copy``, ``nl.copy``, assignment),
  a transpose (``nc_transpose`` on the TensorE or VectorE, a TensorE ``is_transpose`` matmul,
  ``dma_transpose``), a DMA copy from SBUF to SBUF, the partition shuffle, ``local_gather`` (the elements its
  indices select), an LNC-2 ``sendrecv`` -- gives each destination element the written-state of the source
  element it receives, instead of raising.
* A **computation** on never-written elements by an instruction with a dataflow rule
  (:mod:`devkit.sim.dataflow`: element-wise, reductions, matmul, activation, selections...) is legal too:
  the results the rule names become never-written, and the storage remembers the computation that first
  consumed never-written data on the way (:class:`Taint`, ``Storage.taint``).  AWS's hardware-tested
  ``attention_tkg`` computes on dead lanes this way.
* An **observation** is the error: never-written data leaving through DMA traffic with HBM (an output, HBM
  scratch; a never-written HBM element may not be loaded either), used as an index, offset or register, read
  by an instruction without a dataflow rule (or a register holding such rows read by one), or moved when the
  movement reads **nothing but** never-written elements (nothing there was ever written, so it cannot be the
  unused part of a partly written buffer).  For computed garbage the error blames the taint's computation
  (``.lineno``) and names the observing line.

The decisions and their evidence are in ``docs/errors.md`` (``uninitialized-read``).
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np

from devkit.errors import UninitializedReadError, user_location
from devkit.sim.storage import Storage
from devkit.sim.tensor import TOLERATING, Tensor, unwritten_source


class Taint:
    """Where never-written data was first computed on, on its way into a storage (``Storage.taint``).

    ``origin`` is that computation's kernel line ``(file, line)``, the line an error about the results blames;
    ``source`` names the never-written data it read (tensor, allocation line, the movement that carried it)."""

    __slots__ = ("origin", "source")

    def __init__(self, origin: tuple[str, int], source: str) -> None:
        self.origin = origin
        self.source = source

    def observed(self, what: str, detail: str, how: str = "") -> UninitializedReadError:
        """The error for ``what`` (results of this computation) being observed at the current kernel line:
        stored to HBM, used as an index or register, or read by an instruction that cannot carry never-written
        data (``how`` says which, when known).  Blamed on :attr:`origin`."""
        fn, ln = user_location()
        use = how or "is used (an index, a register, or an instruction that cannot carry never-written data)"
        return UninitializedReadError(
            f"{what} hold results computed at line {self.origin[1]} from {self.source}, {detail}; the result "
            f"{use} at {fn}:{ln} -- never-written data was first consumed at line {self.origin[1]}: initialise it "
            "(nl.zeros / memset) or write it before computing on it, or keep the results out of stores, indices "
            "and registers",
            filename=self.origin[0],
            lineno=self.origin[1],
        )


def taint_of(src: Storage, loc: tuple[str, int]) -> Taint:
    """The taint of results an instruction at ``loc`` computes from never-written elements of ``src``: the
    one ``src`` already carries (an earlier computation was the first to consume them), else a new one."""
    return src.taint if src.taint is not None else Taint(loc, unwritten_source(src))


class tolerating:
    """``with tolerating():`` reads of never-written elements are legal (an instruction with a dataflow rule
    computes; its rule gives the results the never-written state)."""

    def __enter__(self) -> None:
        TOLERATING[0] += 1

    def __exit__(self, *exc: object) -> None:
        TOLERATING[0] -= 1


def moved(src: Tensor, mask: np.ndarray | None = None, *, to_chip: bool = True) -> np.ndarray | None:
    """The never-written positions (a boolean array of ``src``'s view shape) that a data movement reading
    the elements of ``src`` selected by ``mask`` carries to its destination, or ``None``.

    ``to_chip``: the destination is on chip (SBUF/PSUM).  Raises :class:`UninitializedReadError` when the
    movement may not carry never-written data (``src`` or the destination in HBM) and some element is
    never-written, or when every element it reads is.  After this check the caller reads the values with
    ``check_init=False``."""
    st = src.st
    if st.uninit is None:
        return None
    g = src.unwritten(mask)
    if g is None:
        return None
    to_hbm = not (to_chip and st.on_chip)
    if to_hbm or int(np.count_nonzero(g)) == src.selected(mask):
        if st.taint is not None:  # computed garbage observed: blamed on its computation
            pos = tuple(int(i[0]) for i in np.nonzero(g))
            raise st.taint.observed(
                f"{int(np.count_nonzero(g))} element(s) of {st.describe()}",
                f"first at view position {list(pos)}",
                "reaches HBM" if to_hbm else "is moved with nothing written alongside",
            )
        src.check_written(mask)  # raises, naming the first never-written element
    return g


def _landing(dst: Tensor, g: np.ndarray | None) -> np.ndarray | None:
    """``g`` (``dst``'s view shape, its size, or broadcastable to it) as a mask of ``dst``'s view shape, or None
    when no position is set."""
    if g is None:
        return None
    g = g.reshape(dst.shape) if g.size == dst.size else np.broadcast_to(g, dst.shape)
    return g if g.any() else None


def _reaches_hbm(taint: Taint, what: str, g: np.ndarray, dst: Tensor) -> NoReturn:
    """Raise: the positions ``g`` of HBM tensor ``dst`` receive data computed from never-written data (``what``:
    whose elements), an error blamed on ``taint``'s computation."""
    pos = tuple(int(i[0]) for i in np.nonzero(g))
    raise taint.observed(
        f"{int(np.count_nonzero(g))} element(s) {what}",
        f"first at destination position {list(pos)}",
        f"reaches HBM ({dst.st.describe()})",
    )


def carry(dst: Tensor, g: np.ndarray | None, src: Tensor | None = None, *, moved_in: bool = True) -> None:
    """After a data movement wrote ``dst``: its positions where ``g`` is true (``g`` of ``dst``'s view shape,
    or of its size) received never-written data.  On chip they become never-written again; into HBM that is
    an error (``src``, when given, is named in the message).  ``moved_in``: the data came from this movement
    (recorded for the error message of a later consumer), not left over from before."""
    g = _landing(dst, g)
    if g is None:
        return
    st = dst.st
    if not st.on_chip:
        if src is not None and src.st.taint is not None:
            _reaches_hbm(src.st.taint, f"of {src.st.describe()}", g, dst)
        pos = tuple(int(i[0]) for i in np.nonzero(g))
        what = f" of {src.st.describe()}" if src is not None else ""
        raise UninitializedReadError(
            f"writing {int(np.count_nonzero(g))} element(s){what} that were never written into {st.describe()}, "
            f"first at destination position {list(pos)}; never-written data may move between on-chip buffers "
            "but not into HBM -- write those elements first, or store only the written part"
        )
    stale = st.uninit is None  # everything was written since any earlier garbage: its origin is stale
    dst.mark_unwritten(g)
    if src is not None and src.st.taint is not None:
        st.taint = src.st.taint  # computed garbage moved on: errors keep blaming its computation
    else:
        if stale:
            st.taint = None
        if moved_in:
            st.garbage_from = user_location()


def computed(dst: Tensor, g: np.ndarray | None, taint: Taint) -> None:
    """After an instruction wrote ``dst`` with results computed from never-written data: its positions where
    ``g`` is true (``dst``'s view shape, or its size) hold such results and become never-written; into HBM that
    is an error blamed on ``taint``'s computation."""
    g = _landing(dst, g)
    if g is None:
        return
    st = dst.st
    if not st.on_chip:
        _reaches_hbm(taint, f"written into {st.describe()}", g, dst)
    dst.mark_unwritten(g)
    st.taint = taint


def result_of(t: Tensor) -> np.ndarray | None:
    """The never-written positions of an instruction's result ``t`` (a movement's temporary), or ``None``
    -- what a retargeting write carries on to the instruction's real destination."""
    return t.unwritten() if t.st.uninit is not None else None
