"""Re-exports the library's own ``topk_reduce`` kernel from where @d2ad3a5 ships it (``experimental/collectives``)."""

from nkilib_src.nkilib.experimental.collectives.topk_reduce import topk_reduce

__all__ = ["topk_reduce"]
