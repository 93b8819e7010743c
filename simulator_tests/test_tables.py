"""devkit.tables.table: column specs say the alignment ("<" text, "^" centred, else a figure)."""

from __future__ import annotations

from devkit.tables import table


def test_column_marks_set_the_alignment_and_are_not_shown() -> None:
    t = table("t", ("<name", "^flag", "value"), [("a", "yes", "1")], caption="c")
    assert [(c.header, c.justify) for c in t.columns] == [
        ("name", "left"),
        ("flag", "center"),
        ("value", "right"),
    ]
    assert t.row_count == 1 and t.caption == "c" and t.title == "t"


def test_options_reach_the_rich_table() -> None:
    assert table("t", ("<item",), show_header=False).show_header is False
