"""Stand-in for ``nkilib_src.nkilib.experimental.subkernels`` (environment shim, not simulator code).

nki-library @d2ad3a5's ``test/integration/nkilib/experimental/subkernels/test_topk_reduce.py`` imports
``topk_reduce`` from this package, but the repository ships the kernel under ``experimental/collectives``.
"""
