"""``neuronxcc.nki.typing`` (``nt``): tensor annotations and shape/dtype placeholders.

``nt.tensor[[8192, 4096], nl.bfloat16]`` is a placeholder argument: a kernel given placeholders runs
cost-only (shapes, control flow and bookkeeping, no values).  ``nt.tensor[128, 512]`` (a shape
without a dtype) is an annotation and only documents the shape.
"""

from __future__ import annotations

from typing import Any

from devkit.nki.runner import TensorSpec
from devkit.sim.tensor import Tensor


class _ShapeAnnotation:
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def __repr__(self) -> str:
        return f"tensor{list(self.shape)}"


class _TensorMeta(type):
    def __getitem__(cls, item: Any) -> Any:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], (list, tuple)):
            return TensorSpec(item[0], item[1])
        shape = item if isinstance(item, tuple) else (item,)
        return _ShapeAnnotation(tuple(int(s) for s in shape))

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor)


class tensor(metaclass=_TensorMeta):
    """Annotation for kernel tensors; ``tensor[[shape], dtype]`` makes a placeholder argument."""


class mutable_tensor(metaclass=_TensorMeta):
    """Annotation marking a kernel input the kernel may write (it must be returned)."""

    _nki_mutable = True


def scalar(value: Any) -> Any:
    """``nt.scalar``: a runtime scalar; in the simulator the value itself."""
    if isinstance(value, Tensor):
        from devkit.errors import UnsupportedError

        raise UnsupportedError(
            "nt.scalar on a tensor (dynamic control flow) is not supported by the simulator"
        )
    return value
