"""Numerics of the microscaling (MX) formats: packing, unpacking, quantisation and MX scales.

An MX tensor is a tile of packed x4 elements (:data:`devkit.dtypes.PACKED_X4`) plus a tile of 8-bit
scales.  One scale covers a group of 8 partitions x 4 packed values (32 values); its value ``s`` (a
``float8_e8m0fnu`` / ``uint8`` exponent) multiplies the group by ``2 ** (s - 127)``.  Sources:
``reference/nki_beta2.md`` §5.4 (``quantize_mx``, ``nc_matmul_mx``) and [MX] there.

Scale layout in SBUF: for a data tile of at most 32 partitions the scales sit in ``P // 8`` rows; for
more, the scales of quadrant ``q`` (32 partitions) sit in rows ``32*q .. 32*q + 3``.
"""

from __future__ import annotations

import numpy as np

from devkit import dtypes as dt

#: Largest exponent (unbiased) of a normal value of each MX element type.
EMAX = {"float8_e5m2": 15, "float8_e4m3fn": 8, "float4_e2m1fn": 2}
#: Largest finite magnitude of each MX element type.
FMAX = {"float8_e5m2": 57344.0, "float8_e4m3fn": 448.0, "float4_e2m1fn": 6.0}
GROUP_PARTITIONS = 8
GROUP_VALUES = 4


def unpack(bits: np.ndarray, packed: object) -> np.ndarray:
    """Container bits ``[P, F]`` of an x4 type -> float32 values ``[P, F, 4]``."""
    b = np.ascontiguousarray(bits).view(np.uint8).reshape((*bits.shape, -1))
    el = packed.element  # type: ignore[attr-defined]
    if dt.name_of(packed) == "float4_e2m1fn_x4":
        nib = np.stack([b & 0xF, b >> 4], axis=-1).reshape((*bits.shape, 4))
        return nib.astype(np.uint8).view(el).astype(np.float32)
    return b.view(el).astype(np.float32)


def pack(values: np.ndarray, packed: object) -> np.ndarray:
    """float32 values ``[P, F, 4]`` (already representable) -> container bits ``[P, F]``."""
    el = packed.element  # type: ignore[attr-defined]
    q = np.ascontiguousarray(values.astype(el)).view(np.uint8)
    if dt.name_of(packed) == "float4_e2m1fn_x4":
        n = q.reshape((*values.shape[:-1], 2, 2)) & 0xF
        by = (n[..., 0] | (n[..., 1] << 4)).astype(np.uint8)
        return np.ascontiguousarray(by).view(np.uint16).reshape(values.shape[:-1])
    return q.view(np.uint32).reshape(values.shape[:-1])


def scale_rows(partitions: int) -> np.ndarray:
    """SBUF row of the scale of each 8-partition group of a data tile with ``partitions`` partitions."""
    groups = np.arange(partitions // GROUP_PARTITIONS)
    if partitions <= 32:
        return groups
    return (groups // 4) * 32 + groups % 4


def scale_factors(scales: np.ndarray, partitions: int) -> np.ndarray:
    """Per data partition, per packed element: ``2 ** (s - 127)`` (shape ``[P, F]``)."""
    rows = scale_rows(partitions)
    s = scales[rows].astype(np.float64)  # [P // 8, F]
    return np.repeat(np.exp2(s - 127.0), GROUP_PARTITIONS, axis=0)


def dequantize(bits: np.ndarray, packed: object, scales: np.ndarray) -> np.ndarray:
    """MX tile -> float64 values ``[P, F, 4]``."""
    v = unpack(bits, packed).astype(np.float64)
    return v * scale_factors(scales, bits.shape[0])[:, :, None]


def quantize(values: np.ndarray, packed: object) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``[P, 4F]`` -> (container bits ``[P, F]``, scales ``[P // 8, F]`` as uint8).

    The scale of a group is ``2 ** (floor(log2(amax)) - (EMAX - 1))`` (the NKI 0.5.0 rule in the reference:
    the group maximum lands in ``[2**(EMAX-1), 2**EMAX)``, inside the element range); an all-zero group
    gets exponent 0 (factor 2**-127).  Values are rounded to nearest even and saturate.
    """
    p, f4 = values.shape
    f = f4 // GROUP_VALUES
    elname = dt.name_of(packed.element)  # type: ignore[attr-defined]
    v = values.astype(np.float32).reshape(p // GROUP_PARTITIONS, GROUP_PARTITIONS, f, GROUP_VALUES)
    amax = np.abs(v).max(axis=(1, 3))  # [P // 8, F]
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(amax > 0, amax, 1.0)))
    biased = np.where(amax > 0, e - (EMAX[elname] - 1) + 127, 0)
    biased = np.clip(biased, 0, 254).astype(np.uint8)
    factor = np.exp2(biased.astype(np.float64) - 127.0)[:, None, :, None]
    q = np.clip(v / factor, -FMAX[elname], FMAX[elname])
    q = q.reshape(p, f, GROUP_VALUES)
    return pack(q, packed), biased
