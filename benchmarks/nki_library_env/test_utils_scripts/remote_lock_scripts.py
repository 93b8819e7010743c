"""Stand-in for nki-library's unpublished ``test/utils/scripts/remote_lock_scripts.py``.

It locks NeuronCores on remote test hosts; simulation mode never uses it.  The names below are the ones the
public harness imports, with the attributes it reads (``exit_code``, ``from_exit_code``, ``to_json``).
"""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass


class LockStatus(enum.Enum):
    """Outcome of a remote lock helper, with the process exit code that reports it."""

    ALLOCATED = 0
    DRAINED = 10
    UNDRAINED = 11
    FLOCK_TIMEOUT = 12
    ERROR = 1

    @property
    def exit_code(self) -> int:
        return self.value

    @classmethod
    def from_exit_code(cls, code: int) -> LockStatus:
        return next((s for s in cls if s.value == code), cls.ERROR)


@dataclass
class LockResult:
    status: LockStatus
    max_lock_expiry: int = 0

    def to_json(self) -> str:
        d = asdict(self)
        d["status"] = self.status.name
        return json.dumps(d)
