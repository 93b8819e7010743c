"""Never-written data: where it may flow, and where observing it is an ``uninitialized-read`` error.

Memory a kernel allocates without values (``nl.ndarray``) holds garbage until it is written; the simulator
tracks, per element, whether it was ever written (``Storage.uninit``, numerics runs only).  Real kernels move
buffers of which they wrote only a part and use only that part afterwards; AWS's hardware-tested
nki-library @d2ad3a5 does it (``router_topk`` sends a buffer whose last row one program never wrote to its
peer, which ignores that row; ``find_nonzero_indices`` transposes a tile of which every 16th column was
written and then reads only the rows those columns became).  So the rule is where the garbage is
*consumed*, not where it is moved:

* A **data movement onto the chip** -- a tile copy (``tensor_copy``, ``nl.copy``, assignment),
  a transpose (``nc_transpose`` on the TensorE or VectorE, a TensorE ``is_transpose`` matmul,
  ``dma_transpose``), a DMA copy from SBUF to SBUF, the partition shuffle, ``local_gather`` (the elements its
  indices select), an LNC-2 ``sendrecv``, and (NKI 0.x) a load from HBM the kernel allocated (``nl.hbm`` /
  ``private_hbm`` scratch, an output not yet written; nki-library's ``moe_cte`` loads flags from scratch it wrote
  all but the last of) -- gives each destination element the written-state of the source element it receives, instead of
  raising.
* A **computation** on never-written elements by an instruction with a dataflow rule
  (:mod:`devkit.sim.dataflow`: element-wise, reductions, matmul, activation, selections...) is legal too:
  the results the rule names become never-written, and the storage remembers the computation that first
  consumed never-written data on the way (:class:`Taint`, ``Storage.taint``).  AWS's hardware-tested
  ``attention_tkg`` computes on dead lanes this way.
* An **observation** is the error: never-written data written to HBM (an output, HBM scratch; in NKI 0.x
  kernels only when it is still in an output when the kernel ends, :func:`passes_through_hbm`), used as an
  index, offset or register, read
  by an instruction without a dataflow rule (or a register holding such rows read by one), or moved when the
  movement reads **nothing but** never-written elements (nothing there was ever written, so it cannot be the
  unused part of a partly written buffer).  For computed garbage the error blames the taint's computation
  (``.lineno``) and names the observing line.

The decisions and their evidence are in ``docs/errors.md`` (``uninitialized-read``).
"""

from __future__ import annotations

from typing import Any, NoReturn

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

    def observed(
        self, what: str, detail: str, how: str = "", at: tuple[str, int] | None = None
    ) -> UninitializedReadError:
        """The error for ``what`` (results of this computation) being observed at the current kernel line (or
        ``at``): stored to HBM, used as an index or register, or read by an instruction that cannot carry
        never-written data (``how`` says which, when known).  Blamed on :attr:`origin`."""
        fn, ln = at if at is not None else user_location()
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

    ``to_chip``: the destination is on chip (SBUF/PSUM).  The source may be on chip or, in NKI 0.x kernels, in
    HBM (a load from kernel-allocated HBM -- an output not yet written, ``nl.hbm``/``private_hbm`` scratch --
    carries its never-written elements like an on-chip move; kernel inputs are always written).  Raises
    :class:`UninitializedReadError` when some element is never-written and the destination is in HBM or the
    source is (Beta-1 kernels; :func:`passes_through_hbm`), or when every element the movement reads is.  After
    this check the caller reads the values with ``check_init=False``."""
    st = src.st
    if st.uninit is None:
        return None
    g = src.unwritten(mask)
    if g is None:
        return None
    through = passes_through_hbm(st)
    to_hbm = not to_chip and not through
    from_hbm = not st.on_chip and not through  # Beta 1: loading never-written HBM stays an error at the load
    if to_hbm or from_hbm or int(np.count_nonzero(g)) == src.selected(mask):
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
    if not st.on_chip and passes_through_hbm(st):
        taint = src.st.taint if src is not None else None
        _stored(dst, g, taint, f" in {src.st.describe()}" if src is not None else "")
    elif not st.on_chip:
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
            st.garbage_from = (*user_location(), _from_hbm(src))


def _from_hbm(src: Tensor | None) -> str:
    """How a message names the HBM tensor a load carried never-written data from ("" for an on-chip source)."""
    if src is None or src.st.on_chip:
        return ""
    fn, ln = src.st.origin
    return f" from {src.st.describe()} (allocated at {fn}:{ln})"


def computed(dst: Tensor, g: np.ndarray | None, taint: Taint) -> None:
    """After an instruction wrote ``dst`` with results computed from never-written data: its positions where
    ``g`` is true (``dst``'s view shape, or its size) hold such results and become never-written; into HBM that
    is an error blamed on ``taint``'s computation."""
    g = _landing(dst, g)
    if g is None:
        return
    st = dst.st
    if not st.on_chip:
        if not passes_through_hbm(st):
            _reaches_hbm(taint, f"written into {st.describe()}", g, dst)
        _stored(dst, g, taint, "")
    dst.mark_unwritten(g)
    st.taint = taint


# ---- NKI 0.x: never-written data passes through HBM ------------------------------------------------------------


def passes_through_hbm(st: Storage) -> bool:
    """Whether never-written data may be written into HBM in this run (NKI 0.x kernels): it is observed only if
    an output of the kernel still holds it when the kernel ends (:func:`check_outputs`), or when it is loaded
    back and then observed.  nki-library @d2ad3a5's ``test_mlp_proj_mxfp4.py:195-201`` copies a whole partly
    written tile into its output and then overwrites the never-written rows with zeros.  Beta-1 runs keep the
    error at the write."""
    m = st.machine() if st.machine is not None else None
    return m is not None and m.nki_beta2


class GarbageWrite:
    """One write of never-written data into HBM: the view written (``view``) and its positions that received such
    data (``g``, the view's shape: no larger than the write), the kernel line (``at``), the computation that produced
    the data (``taint``, or None for data that was only moved), where it came from (``source``, for the message) and
    the LNC program that wrote it (``program``, ``Machine.program_ids``)."""

    __slots__ = ("at", "g", "program", "source", "taint", "view")

    def __init__(
        self,
        view: Tensor,
        g: np.ndarray,
        at: tuple[str, int],
        taint: Taint | None,
        source: str,
        program: object,
    ) -> None:
        self.view = view
        self.g = g
        self.at = at
        self.taint = taint
        self.source = source
        self.program = program

    def positions(self) -> np.ndarray:
        """The storage elements it wrote never-written data to (storage-shaped; built on demand)."""
        return self.view.storage_positions(self.g)


class StoredGarbage:
    """The never-written data written into one HBM storage: per LNC program, every storage element such a write
    reached (``by_program``, one mask per program however many writes), the writes in order (``writes``), and per
    program the first write of *another* program over them (``crossed``: kernel line, that program, the elements)."""

    __slots__ = ("by_program", "crossed", "st", "writes")

    def __init__(self, st: Storage) -> None:
        self.st = st
        self.by_program: dict[object, np.ndarray] = {}
        self.writes: list[GarbageWrite] = []
        self.crossed: dict[object, tuple[tuple[str, int], object, np.ndarray]] = {}


def note_overwrites(m: Any, outs: list[Tensor], loc: tuple[str, int]) -> None:
    """An instruction of the current program writes ``outs``: note which stored never-written data another
    program's write covers (which write lands last is not defined then; :func:`check_outputs`)."""
    for t in outs:
        rec = m.stored_garbage.get(t.st.id)
        if rec is None:
            continue
        covered = None
        for prog, mask in rec.by_program.items():
            if prog == m.program_ids or prog in rec.crossed:
                continue
            if covered is None:
                covered = t.storage_positions(np.ones(t.shape, dtype=bool))
            hit = mask & covered
            if hit.any():
                rec.crossed[prog] = (loc, m.program_ids, hit)


def _stored(dst: Tensor, g: np.ndarray, taint: Taint | None, source: str) -> None:
    """Record that the positions ``g`` of HBM view ``dst`` received never-written data at the current line."""
    st = dst.st
    m = st.machine() if st.machine is not None else None
    if m is None:
        return
    rec = m.stored_garbage.get(st.id)
    if rec is None:
        rec = m.stored_garbage[st.id] = StoredGarbage(st)
    prog = m.program_ids
    write = GarbageWrite(dst, np.array(g, dtype=bool), user_location(), taint, source, prog)
    rec.writes.append(write)
    mask = rec.by_program.get(prog)
    if mask is None:
        rec.by_program[prog] = write.positions()
    else:
        mask |= write.positions()


def check_outputs(m: Any) -> None:
    """At the end of an NKI 0.x kernel: raise when a tensor the host sees (``shared_hbm``, or a kernel argument)
    still holds never-written data that a movement or computation wrote there, or another program's write covered
    it (the first such write is blamed: the computation that produced the data, else the writing line).  Scratch in
    ``nl.hbm``/``private_hbm`` is not seen by the host; elements overwritten since hold written data."""
    for rec in m.stored_garbage.values():
        st: Storage = rec.st
        if not (st.buffer == "shared_hbm" or st.is_input):
            continue
        for w in rec.writes:
            pos_w = w.positions()
            left = pos_w & st.uninit if st.uninit is not None else None
            crossed = rec.crossed.get(w.program)
            if left is not None and left.any():
                why = "still there when the kernel ends"
            elif crossed is not None and (pos_w & crossed[2]).any():
                (cfn, cln), other, hit = crossed
                left = pos_w & hit
                why = (
                    f"overwritten by program {list(other)} at {cfn}:{cln}, a write of another program whose order "
                    "against this one is not defined"
                )
            else:
                continue
            n = int(np.count_nonzero(left))
            pos = [int(i[0]) for i in np.nonzero(left)]
            fn, ln = w.at
            if w.taint is not None:
                raise w.taint.observed(
                    f"{n} element(s)",
                    f"first at position {list(pos)} of {st.describe()}, {why}",
                    "reaches HBM",
                    w.at,
                )
            raise UninitializedReadError(
                f"{n} element(s) of {st.describe()} written at line {ln} from never-written data{w.source}, first "
                f"at position {pos}, {why} (the tensor is an output): never-written data may pass through HBM "
                "but must not reach an output -- write those elements first, or store only the written part",
                filename=fn,
                lineno=ln,
            )


def result_of(t: Tensor) -> np.ndarray | None:
    """The never-written positions of an instruction's result ``t`` (a movement's temporary), or ``None``
    -- what a retargeting write carries on to the instruction's real destination."""
    return t.unwritten() if t.st.uninit is not None else None
