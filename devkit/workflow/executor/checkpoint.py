"""Results recorded as they arrive, so a rerun after the driver died skips the finished jobs.

A :class:`Checkpoint` is one append-only JSON-lines file per job list under the project's cache
(``.devkit-cache/jobs/<name>-<digest>.jsonl``): one line per finished job, ``{"i": position,
"result": ...}``, each appended with a single fsynced ``O_APPEND`` write (:func:`devkit.atomic.append_line`),
so a driver killed mid-sweep leaves every result it had received readable.  The digest covers the job
function, every item and the sources the results depend on (the devkit package and any ``FILE.py``
named in the items), so a rerun of a *different* job list, or after the code changed, starts afresh.
The file is removed once every job has a result: a checkpoint resumes an interrupted run, it is not a
cache (a finished sweep or tuning run always computes again).

Results must be JSON data; tuples survive the round trip (stored as ``{"tuple": [...]}``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devkit import atomic

_FILE_REF = re.compile(r"^(.+\.py):[A-Za-z_]\w*$")


def _encode(value: Any) -> Any:
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"dict": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"checkpointed results must be JSON data, not {type(value).__name__}")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if "tuple" in value:
            return tuple(_decode(v) for v in value["tuple"])
        return {_decode(k): _decode(v) for k, v in value["dict"]}
    return value


def _walk_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_walk_strings(k), *_walk_strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _walk_strings(v)]
    return []


def sources_digest(items: Sequence[Any]) -> str:
    """Hash of the devkit package's sources, the project's kernel files and every ``FILE.py`` the items
    name (what the results of a job list depend on besides the items themselves)."""
    from devkit import project

    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[2]  # the devkit package
    files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".toml", ".json") and p.is_file())
    try:
        files += sorted(project.find().kernel_files)
    except Exception:  # a broken project file is reported by the command itself, not here
        pass
    for s in sorted({s for item in items for s in _walk_strings(item)}):
        m = _FILE_REF.match(s)
        if m and os.path.isfile(m.group(1)):
            files.append(Path(m.group(1)).resolve())
    for f in files:
        digest.update(str(f).encode())
        try:
            digest.update(f.read_bytes())
        except OSError:
            digest.update(b"<missing>")
    return digest.hexdigest()


class Checkpoint:
    """The finished jobs of one job list (see the module docstring).

    ``path`` is the JSON-lines file; :meth:`for_jobs` derives it from the job list.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.resumed = 0  # jobs :meth:`load` found finished

    @classmethod
    def for_jobs(
        cls, name: str, fn_ref: str, items: Sequence[Any], directory: str | Path | None = None
    ) -> Checkpoint:
        """The checkpoint of running ``fn_ref`` over ``items`` (under the project's cache by default)."""
        if directory is None:
            from devkit import project

            directory = project.state_path("cache") / "jobs"
        key = json.dumps([fn_ref, [_encode(_jsonable(i)) for i in items], sources_digest(items)])
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        return cls(Path(directory) / f"{name}-{digest}.jsonl")

    def load(self) -> dict[int, Any]:
        """Finished results by position (an unreadable line -- a write cut short -- is skipped)."""
        out: dict[int, Any] = {}
        if not self.path.is_file():
            return out
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                out[int(row["i"])] = _decode(row["result"])
            except (ValueError, KeyError, TypeError):
                continue
        self.resumed = len(out)
        return out

    def record(self, i: int, result: Any) -> None:
        """Append the result of job ``i`` (one fsynced line)."""
        line = json.dumps({"i": i, "result": _encode(result)}, separators=(",", ":"), allow_nan=True)
        atomic.append_line(self.path, line)

    def finish(self) -> None:
        """Every job has a result: remove the file (a later run computes afresh)."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def _jsonable(item: Any) -> Any:
    """Items as JSON data for the digest (objects that are not data by their ``repr``)."""
    if isinstance(item, (str, int, float, bool)) or item is None:
        return item
    if isinstance(item, (list, tuple)):
        return type(item)(_jsonable(v) for v in item)
    if isinstance(item, dict):
        return {str(k): _jsonable(v) for k, v in item.items()}
    return repr(item)
