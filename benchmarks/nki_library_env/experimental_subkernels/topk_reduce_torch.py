"""Re-exports the library's own ``topk_reduce`` torch reference from ``experimental/collectives``."""

from nkilib_src.nkilib.experimental.collectives.topk_reduce_torch import topk_reduce_torch_ref

__all__ = ["topk_reduce_torch_ref"]
