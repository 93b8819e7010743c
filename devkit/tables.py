"""Rich tables from column specs: one home for "these columns, text on the left, figures on the right".

A column spec is the header, marked by its first character: ``"<name"`` is text (left-aligned),
``"^name"`` is centred, any other header is a figure (right-aligned).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.table import Table

#: Header marks and the alignment they stand for; an unmarked header is a figure.
_MARKS = {"<": "left", "^": "center"}


def table(
    title: str | None,
    columns: Iterable[str],
    rows: Iterable[Sequence[Any]] = (),
    *,
    caption: str | None = None,
    **options: Any,
) -> Table:
    """A :class:`rich.table.Table` titled ``title`` with ``columns`` (specs, see the module docstring) and
    ``rows`` (cells in column order); ``options`` go to ``Table`` (e.g. ``show_header=False``)."""
    out = Table(title=title, caption=caption, **options)
    for spec in columns:
        justify = _MARKS.get(spec[:1])
        out.add_column(spec[1:] if justify else spec, justify=justify or "right")  # type: ignore[arg-type]
    for row in rows:
        out.add_row(*row)
    return out
