"""Shared by the NKI Beta-2 (``import nki``) test modules: the fault check every negative test makes
(exact class, rule, blamed kernel line) and the two DMA moves one-op kernels start and end with."""

from __future__ import annotations

from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl
import pytest
from _nki_support import assert_blames


def fails(kernel: Any, cls: type, rule: str, *args: Any) -> Any:
    """``nki.simulate(kernel)(*args)`` raises exactly ``cls`` with ``rule``, blamed on the kernel's
    ``# <- blame`` line; returns the error for further checks."""
    with pytest.raises(cls) as e:
        nki.simulate(kernel)(*args)
    assert type(e.value) is cls and e.value.rule == rule, e.value
    assert_blames(e, kernel)
    return e.value


def to_sbuf(x: Any) -> Any:
    """A new SBUF tile holding HBM tensor ``x`` (one DMA)."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def to_hbm(t: Any) -> Any:
    """A new shared-HBM tensor holding tile ``t`` (one DMA)."""
    o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t)
    return o
