"""devkit.jsondict.pick: the JSON-ready dict of named attributes, in the order named."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from devkit.jsondict import pick


def test_pick_keeps_the_named_order_and_reads_properties() -> None:
    class Ratio:
        a, b = 2.0, 3.0

        @property
        def ratio(self) -> float:
            return self.b / self.a

    assert list(pick(Ratio(), "ratio b a").items()) == [("ratio", 1.5), ("b", 3.0), ("a", 2.0)]


def test_pick_of_a_missing_name_raises() -> None:
    with pytest.raises(AttributeError, match="nope"):
        pick(SimpleNamespace(a=1), "a nope")
