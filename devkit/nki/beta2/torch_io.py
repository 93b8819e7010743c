"""Torch tensors in and out of ``nki.simulate`` (``reference/nki_beta2.md`` §2: "returns a callable taking NumPy
arrays or torch tensors, returning the same kind").

torch is never imported here unless an argument already is a torch tensor (so torch stays optional).  Inputs
become NumPy arrays that share the tensor's memory where torch allows it (CPU, contiguous); dtypes NumPy lacks
(``bfloat16``, the FP8 types) travel as their ml_dtypes equivalents through a same-size integer view.  After the
run, every torch input is refreshed from its array (the simulator updates written inputs in place), and the
results come back as torch tensors on the device of the first torch input.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from devkit import packed_numpy as _packed_numpy

#: torch dtype name -> (same-size integer torch dtype name, ml_dtypes type) for dtypes NumPy has no type for.
_VIA_BITS = {
    "bfloat16": ("int16", ml_dtypes.bfloat16),
    "float8_e4m3fn": ("uint8", ml_dtypes.float8_e4m3fn),
    "float8_e5m2": ("uint8", ml_dtypes.float8_e5m2),
}


def is_torch(x: Any) -> bool:
    """True for a torch tensor (judged by its type's module, without importing torch)."""
    return type(x).__module__.split(".")[0] == "torch" and hasattr(x, "detach")


def _torch_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def to_numpy(t: Any) -> np.ndarray:
    """A torch tensor as a NumPy array (sharing memory for contiguous CPU tensors)."""
    import torch

    x = t.detach()
    if x.device.type != "cpu" or not x.is_contiguous():
        x = x.to("cpu").contiguous()
    via = _VIA_BITS.get(_torch_name(x.dtype))
    if via is not None:
        return x.view(getattr(torch, via[0])).numpy().view(via[1])
    return x.numpy()


def to_torch(a: Any, device: Any) -> Any:
    """A NumPy array (or scalar) as a torch tensor on ``device``."""
    import torch

    arr = np.ascontiguousarray(a)
    if _packed_numpy.is_packed_array(arr):  # torch has no packed MX x4 type: their container bits
        arr = _packed_numpy.to_bits(arr)
    for name, (int_name, ml) in _VIA_BITS.items():
        if arr.dtype == np.dtype(ml):
            return torch.from_numpy(arr.view(np.dtype(int_name))).view(getattr(torch, name)).to(device)
    return torch.from_numpy(arr).to(device)


class TorchCall:
    """Converts one call's torch arguments to NumPy and its results back (``None`` when no torch is involved)."""

    def __init__(self, args: tuple, kwargs: dict) -> None:
        self.pairs: list[tuple[Any, np.ndarray]] = []
        self.device: Any = None
        self.args = tuple(self._in(a) for a in args)
        self.kwargs = {k: self._in(v) for k, v in kwargs.items()}

    @property
    def active(self) -> bool:
        return bool(self.pairs)

    def _in(self, a: Any) -> Any:
        if not is_torch(a):
            return a
        arr = to_numpy(a)
        self.pairs.append((a, arr))
        if self.device is None:
            self.device = a.device
        return arr

    def finish(self, outputs: Any) -> Any:
        """Refresh the torch inputs from their arrays; outputs (array, tuple or list of them) as torch."""
        import torch

        with torch.no_grad():
            for t, arr in self.pairs:
                back = to_torch(arr, t.device)
                if back.data_ptr() != t.data_ptr():
                    t.copy_(back)
        return self._out(outputs)

    def _out(self, x: Any) -> Any:
        if isinstance(x, np.ndarray):
            return to_torch(x, self.device)
        if isinstance(x, (tuple, list)):
            return type(x)(self._out(v) for v in x)
        return x
