"""Shared test setup: one BLAS thread per process (the machines have 2 cores), deterministic hypothesis."""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "devkit",
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("DEVKIT_HYPOTHESIS_PROFILE", "devkit"))
