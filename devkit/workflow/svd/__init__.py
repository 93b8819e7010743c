"""SVD compression of MLP weights, one module per concept.

* :mod:`~devkit.workflow.svd.factor` - the rank rule, truncated and whitened SVD, error metrics;
* :mod:`~devkit.workflow.svd.checkpoint` - safetensors checkpoints and calibration activations (input);
* :mod:`~devkit.workflow.svd.compress` - the pipeline that writes compressed checkpoints and the summary.
"""
