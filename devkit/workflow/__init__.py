"""The workflow: the main job, the block tuner, promotion to hardware tests, the end-to-end estimate,
LLM configurations, reports, the hardware stage (:mod:`devkit.workflow.hw`) and SVD compression
(:mod:`devkit.workflow.svd`).

Everything here builds on the simulator (:mod:`devkit.sim`), the cost model (:mod:`devkit.cost`) and the
kernels; nothing below this package imports it.
"""
