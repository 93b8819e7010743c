"""Stand-in for nki-library's unpublished ``test/utils/perf_analysis_private.py`` (hardware trace analysis).

Only hardware runs call it; in simulation mode the import must merely succeed.
"""


def analyze_trace(*args: object, **kwargs: object) -> None:
    """Hardware profile analysis is not part of the public repository."""
    raise NotImplementedError("perf_analysis_private.analyze_trace is not public (hardware runs only)")
