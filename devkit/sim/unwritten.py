"""Never-written data: where it may flow, and where reading it is an ``uninitialized-read`` error.

Memory a kernel allocates without values (``nl.ndarray``) holds garbage until it is written; the simulator
tracks, per element, whether it was ever written (``Storage.uninit``, numerics runs only).  Real kernels move
buffers of which they wrote only a part and use only that part afterwards; AWS's hardware-tested
nki-library @d2ad3a5 does it (``router_topk`` sends a buffer whose last row one program never wrote to its
peer, which ignores that row; ``find_nonzero_indices`` transposes a tile of which every 16th column was
written and then reads only the rows those columns became).  So the rule is where the garbage is
*consumed*, not where it is moved:

* A **data movement between on-chip buffers** -- a tile copy (``tensor_copy``, ``nl.copy``, assignment),
  a transpose (``nc_transpose`` on the TensorE or VectorE, a TensorE ``is_transpose`` matmul,
  ``dma_transpose``), a DMA copy from SBUF to SBUF, the partition shuffle, an LNC-2 ``sendrecv`` -- gives each
  destination element the written-state of the source element it receives, instead of raising.
* **Every other read** of a never-written element stays an error at the reading statement: arithmetic,
  activations, matmuls, reductions, selections, in-place updates, and DMA traffic with HBM (a never-written
  element may not leave the kernel through an output, nor be parked in or loaded from HBM scratch).
* A movement that reads **nothing but** never-written elements is an error too: nothing there was ever
  written, so it cannot be the unused part of a partly written buffer.

The decisions and their evidence are in ``docs/errors.md`` (``uninitialized-read``).
"""

from __future__ import annotations

import numpy as np

from devkit.errors import UninitializedReadError, user_location
from devkit.sim.tensor import Tensor


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
    if not (to_chip and st.on_chip) or int(np.count_nonzero(g)) == src.selected(mask):
        src.check_written(mask)  # raises, naming the first never-written element
    return g


def carry(dst: Tensor, g: np.ndarray | None, src: Tensor | None = None, *, moved_in: bool = True) -> None:
    """After a data movement wrote ``dst``: its positions where ``g`` is true (``g`` of ``dst``'s view shape,
    or of its size) received never-written data.  On chip they become never-written again; into HBM that is
    an error (``src``, when given, is named in the message).  ``moved_in``: the data came from this movement
    (recorded for the error message of a later consumer), not left over from before."""
    if g is None:
        return
    g = g.reshape(dst.shape) if g.size == dst.size else np.broadcast_to(g, dst.shape)
    if not g.any():
        return
    st = dst.st
    if not st.on_chip:
        pos = tuple(int(i[0]) for i in np.nonzero(g))
        what = f" of {src.st.describe()}" if src is not None else ""
        raise UninitializedReadError(
            f"writing {int(np.count_nonzero(g))} element(s){what} that were never written into {st.describe()}, "
            f"first at destination position {list(pos)}; never-written data may move between on-chip buffers "
            "but not into HBM -- write those elements first, or store only the written part"
        )
    dst.mark_unwritten(g)
    if moved_in:
        st.garbage_from = user_location()


def result_of(t: Tensor) -> np.ndarray | None:
    """The never-written positions of an instruction's result ``t`` (a movement's temporary), or ``None``
    -- what a retargeting write carries on to the instruction's real destination."""
    return t.unwritten() if t.st.uninit is not None else None
