"""``nki.typing``: ``tensor[shape]`` parameter annotations (NKI 0.3.0).

``nt.tensor[[8192, 4096], nl.bfloat16]`` (shape and dtype) is also a placeholder argument for
``devkit.estimate``: a kernel given placeholders runs cost-only.
"""

from __future__ import annotations

from devkit.nki.typing import mutable_tensor, scalar, tensor

__all__ = ["mutable_tensor", "scalar", "tensor"]
