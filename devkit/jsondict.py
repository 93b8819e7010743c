"""JSON-ready dicts of result objects: the keys named once, as data.

A result's ``to_dict()`` is mostly ``{"name": self.name, ...}`` over its fields and derived figures;
:func:`pick` builds that part from the list of names, in the order given, so the contract keys are
written once instead of twice per entry.  Keys that differ from the attribute or nest are added by
the caller around it.
"""

from __future__ import annotations

from typing import Any


def pick(obj: Any, names: str) -> dict[str, Any]:
    """``{name: obj.name}`` for each whitespace-separated name of ``names`` (fields and properties alike).

    >>> from types import SimpleNamespace
    >>> pick(SimpleNamespace(a=1, b=2), "b a")
    {'b': 2, 'a': 1}
    """
    return {name: getattr(obj, name) for name in names.split()}
