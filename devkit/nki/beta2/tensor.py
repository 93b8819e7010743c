"""``nki.tensor``: the tensor type kernels hold (``NkiTensor``).

The simulator's :class:`devkit.sim.tensor.Tensor` is the NKI 0.x tensor: a view (shape, strides, offset)
of a storage (shape, dtype, buffer).  See :mod:`devkit.nki.beta2.views` for ``strides``/``offset`` and
access patterns ``.ap(...)``.
"""

from __future__ import annotations

from devkit.sim.tensor import Tensor

NkiTensor = Tensor
tensor = Tensor

__all__ = ["NkiTensor", "tensor"]
