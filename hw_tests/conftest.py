"""Hardware tests: options, skip rule and fixtures from :func:`devkit.hw.conftest_hooks` (``pytest --help``
lists the options; ``hw_tests/README.md`` says what they do), bound to the project this directory belongs to:
the nearest ``[tool.devkit]`` pyproject.toml above it, else the directory holding this one.  Written by
``devkit promote`` (from ``devkit/templates/hw_conftest.py``) next to the tests it generates; not overwritten.
"""

from __future__ import annotations

from pathlib import Path

from devkit import hw

globals().update(hw.conftest_hooks(hw.find_project(Path(__file__).resolve().parent.parent)))
