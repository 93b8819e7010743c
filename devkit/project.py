"""The user's project: where the kit keeps state (tuning table, hardware tests, results, caches, reports).

The project root is the nearest directory at or above the current directory whose ``pyproject.toml`` has a
``[tool.devkit]`` table; without one, the current directory.  Everything the kit writes goes under that
root, never into the installed package (whose defaults, e.g. the NeuronMM tuning table, are read-only).
``DEVKIT_PROJECT=DIR`` names the root explicitly.

``[tool.devkit]`` keys (all optional; paths relative to the root)::

    [tool.devkit]
    kernels = ["src/my_kernels.py"]      # files whose declarations ``devkit run`` and declared names use
    include_kit = true                   # devkit run also covers the kit's NeuronMM kernels
    tuning = "devkit-tuning.json"        # the project's tuning table (overrides the kit's defaults)
    hw_tests = "hw_tests"                # promoted hardware tests (and their conftest.py)
    results = "results"                  # hardware results store
    cache = ".devkit-cache"              # caches (e2e latencies, ...)
    reports = "devkit-report"            # devkit run's report
    sweeps = "devkit-sweeps"             # devkit sweep's table, CSV, JSON and plot
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "kernels": [],
    "include_kit": True,
    "tuning": "devkit-tuning.json",
    "hw_tests": "hw_tests",
    "results": "results",
    "cache": ".devkit-cache",
    "reports": "devkit-report",
    "sweeps": "devkit-sweeps",
}


class ProjectError(ValueError):
    """A malformed ``[tool.devkit]`` table (the message names the file and the key)."""


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProjectError(f"{path}: not a readable pyproject.toml: {exc}") from None


@dataclass(frozen=True)
class Project:
    """A project root and its ``[tool.devkit]`` settings (``configured``: the table exists)."""

    root: Path
    settings: dict[str, Any] = field(default_factory=lambda: dict(DEFAULTS))
    configured: bool = False

    def path(self, key: str) -> Path:
        """Absolute path of a state location (``"tuning"``, ``"hw_tests"``, ``"results"``, ...)."""
        return (self.root / str(self.settings[key])).resolve()

    @property
    def kernel_files(self) -> list[Path]:
        return [(self.root / f).resolve() for f in self.settings["kernels"]]


def _settings(pyproject: Path, table: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(table) - set(DEFAULTS))
    if unknown:
        raise ProjectError(
            f"{pyproject}: [tool.devkit] has unknown keys {unknown}; known: {', '.join(DEFAULTS)}"
        )
    out = dict(DEFAULTS)
    out.update(table)
    if not isinstance(out["kernels"], list) or not all(isinstance(k, str) for k in out["kernels"]):
        raise ProjectError(f"{pyproject}: [tool.devkit] kernels must be a list of file paths")
    if not isinstance(out["include_kit"], bool):
        raise ProjectError(f"{pyproject}: [tool.devkit] include_kit must be true or false")
    for key in DEFAULTS:
        if key not in ("kernels", "include_kit") and not isinstance(out[key], str):
            raise ProjectError(f"{pyproject}: [tool.devkit] {key} must be a path (string)")
    return out


def find(start: str | os.PathLike[str] | None = None) -> Project:
    """The project containing ``start`` (default: ``$DEVKIT_PROJECT`` or the current directory)."""
    explicit = os.environ.get("DEVKIT_PROJECT")
    here = Path(start if start is not None else (explicit or os.getcwd())).resolve()
    for d in (here, *here.parents):
        pyproject = d / "pyproject.toml"
        if pyproject.is_file():
            table = _load_toml(pyproject).get("tool", {}).get("devkit")
            if isinstance(table, dict):
                return Project(d, _settings(pyproject, table), configured=True)
        if explicit:
            break
    return Project(here)


def state_path(key: str) -> Path:
    """Absolute path of one state location of the current project (see :data:`DEFAULTS`)."""
    return find().path(key)
