"""Cost of one DMA transfer: how many engines and descriptors it uses and how long each engine works.

Mechanisms, all from the documented hardware (reference/nki_api.md section 4.4):

* A transfer touching ``P`` partitions is split over ``min(engines, ceil(P / partitions_per_engine))``
  DMA engines (16 engines x 8 partitions for P = 128) [ARCH2, DMAOV], and never over more engines
  than it has descriptors.
* A descriptor moves one contiguous run: the shorter of the source and destination runs
  (``Access.run_bytes``, which follows the operand's strides and element size); on SBUF/PSUM a run
  never crosses a partition [ARCH2].  Each engine pays, per descriptor it handles,
  ``dma_descriptor_ns`` (the per-packet overhead of the DMABW saturation curve: the engine time of
  ``dma.descriptor_overhead_bytes`` at the engine bandwidth) plus its share of the bytes at
  ``dma.engine_bw_bytes_per_ns`` [DMABW].  A 2-byte-run copy therefore moves about 2 / (2 + 216)
  of peak, a 4 KiB-run copy 95 %.
* A transposing transfer (``attrs["transpose"]``, ``load_transpose2d``, ``dma_transpose``) is priced
  as the hardware executes it: when the DMA transpose path takes its element size
  (``dma.transpose_unit_itemsize``: 2 bytes on NC-v3/v4 [N2-ISA], any on NC-v2) its descriptors
  follow the contiguous side and it moves at ``dma_transpose_efficiency`` (HBM source: 0.9 on
  NC-v3 [ARCH3], 0.25 assumed on NC-v2 [PERF Opt #10]) or ``dma.transpose_sbuf_percent`` (SBUF
  source) of copy throughput; otherwise every element is its own descriptor [ARCH2: each
  non-contiguous run is a descriptor].  A plain copy whose strides leave 2-byte runs (a store into
  a transposed HBM view) is element-granular too, through ``Access.run_bytes``.
* Gathers and scatters (indirect DMAs) are priced by the runs their traced operands have: one
  descriptor per gathered row run.
* Each engine a transfer uses also works ``dma_transfer_engine_ns`` for the transfer itself
  (descriptor-ring fetch, the completion semaphore write every transfer issues [DMAOV]).
* The fixed per-transfer cost (``dma_fixed_latency_ns``, ``dma_queue_busy_ns``) and the HBM
  bandwidth cap are applied by the scheduler, not here: they depend on what else is in flight.

Units: bytes, ns.
"""

from __future__ import annotations

from dataclasses import dataclass

from devkit.cost.params import Params
from devkit.dtype_names import itemsize
from devkit.targets import Target
from devkit.trace import HBM, Access, Instr

#: DMA opcodes with a specific rule (every DMA opcode goes through the same mechanism).
DMA_OPCODES = frozenset(
    {
        "dma_copy",
        "load",
        "store",
        "load_transpose2d",
        "dma_transpose",
        "atomic_rmw",
        "load_indirect",
        "store_indirect",
        "spill_store",
        "spill_load",
    }
)
TRANSPOSE_OPCODES = frozenset({"load_transpose2d", "dma_transpose"})


@dataclass(frozen=True, slots=True)
class DmaTiming:
    """What one transfer asks of the DMA engines (before contention)."""

    engines: int
    """DMA engines the transfer is split over."""
    descriptors: int
    """Descriptors (contiguous runs) in the whole transfer."""
    engine_ns: float
    """Busy time of each engine used, in ns."""
    bytes_moved: int
    """Bytes moved (the larger of source and destination when the DMA casts)."""
    hbm_read_bytes: int
    hbm_write_bytes: int
    transpose: bool


class DmaCostModel:
    """Per-transfer DMA costs for one target and parameter set."""

    def __init__(self, target: Target, params: Params) -> None:
        dma = target.dma
        self.engines = dma.engines
        self.partitions_per_engine = dma.partitions_per_engine
        self.bw = dma.engine_bw_bytes_per_ns
        self.transpose_bw = dma.engine_bw_bytes_per_ns * params.dma_transpose_efficiency
        self.transpose_sbuf_bw = dma.engine_bw_bytes_per_ns * dma.transpose_sbuf_percent / 100
        self.transpose_itemsize = dma.transpose_unit_itemsize
        self.descriptor_ns = params.dma_descriptor_ns
        self.transfer_ns = params.dma_transfer_engine_ns
        #: :meth:`raw` results of one-source/one-destination transfers by operand geometry (bounded).
        self.memo: dict[tuple, tuple[int, int, float, int, int, int, bool]] = {}

    def timing(self, instr: Instr) -> DmaTiming:
        """Engines, descriptors and per-engine busy time (ns) of one DMA instruction."""
        return DmaTiming(*self.raw(instr))

    def raw(self, instr: Instr) -> tuple[int, int, float, int, int, int, bool]:
        """:meth:`timing` as a plain tuple in :class:`DmaTiming` field order (scheduler hot path)."""
        ins, outs = instr.ins, instr.outs
        hbm_read = hbm_write = 0
        memo_key = None
        if len(ins) == 1 and len(outs) == 1:
            src, dst = ins[0], outs[0]
            attrs = instr.attrs
            # (the scheduler's hot path builds the same key inline: keep both in step)
            memo_key = (
                src.buffer,
                src.bytes,
                src.partitions,
                src.run_bytes,
                dst.buffer,
                dst.bytes,
                dst.partitions,
                dst.run_bytes,
                instr.opcode,
                attrs.get("transpose") if attrs else None,
                src.dtype,
            )
            hit = self.memo.get(memo_key)
            if hit is not None:
                return hit
            s_bytes, d_bytes = src.bytes, dst.bytes
            moved = s_bytes if s_bytes >= d_bytes else d_bytes
            s_parts, d_parts = src.partitions, dst.partitions
            partitions = s_parts if s_parts >= d_parts else d_parts
            r_src, r_dst = src.run_bytes, dst.run_bytes
            if src.buffer == HBM:
                hbm_read = s_bytes
            elif s_parts > 0 and s_bytes >= s_parts and s_bytes // s_parts < r_src:
                r_src = s_bytes // s_parts
            if dst.buffer == HBM:
                hbm_write = d_bytes
            elif d_parts > 0 and d_bytes >= d_parts and d_bytes // d_parts < r_dst:
                r_dst = d_bytes // d_parts
            # runs per side in that side's own bytes (a casting DMA moves as many elements on both
            # sides, so a 2-byte-run bf16 store from an fp32 tile is one descriptor per element)
            n_src = -(-s_bytes // r_src) if r_src > 0 else s_bytes
            n_dst = -(-d_bytes // r_dst) if r_dst > 0 else d_bytes
            n_short, n_long = (n_src, n_dst) if n_src >= n_dst else (n_dst, n_src)
        else:
            moved, partitions, short_run, long_run = 0, 1, 0, 0
            for group, is_out in ((ins, False), (outs, True)):
                for acc in group:
                    moved = max(moved, acc.bytes)
                    partitions = max(partitions, acc.partitions)
                    if acc.buffer == HBM:
                        run = acc.run_bytes
                        if is_out:
                            hbm_write += acc.bytes
                        else:
                            hbm_read += acc.bytes
                    else:
                        run = _onchip_run(acc)
                    short_run = run if short_run == 0 else min(short_run, run)
                    long_run = max(long_run, run)
            n_short = -(-moved // max(short_run, 1))
            n_long = -(-moved // max(long_run, 1))
        attrs = instr.attrs
        transpose = bool(attrs and attrs.get("transpose")) or instr.opcode in TRANSPOSE_OPCODES
        if moved <= 0:
            return (1, 0, 0.0, 0, hbm_read, hbm_write, transpose)
        bw = self.bw
        if transpose:
            src0 = ins[0] if ins else outs[0]
            item = itemsize(src0.dtype)
            if self.transpose_itemsize in (0, item):  # the transpose path: runs along the contiguous side
                descriptors = n_long
                bw = self.transpose_bw if src0.buffer == HBM else self.transpose_sbuf_bw
            else:  # no unit for this element size: one descriptor per element
                descriptors = -(-src0.bytes // item)
        else:
            descriptors = n_short
        if descriptors < 1:
            descriptors = 1
        engines = -(-partitions // self.partitions_per_engine)
        if engines > self.engines:
            engines = self.engines
        if engines > descriptors:
            engines = descriptors
        per_engine_desc = -(-descriptors // engines)
        engine_ns = self.transfer_ns + per_engine_desc * self.descriptor_ns + moved / engines / bw
        result = (engines, descriptors, engine_ns, moved, hbm_read, hbm_write, transpose)
        if memo_key is not None:
            if len(self.memo) >= 4096:
                self.memo.clear()
            self.memo[memo_key] = result
        return result


def _onchip_run(acc: Access) -> int:
    """Contiguous run of an SBUF/PSUM operand: never longer than one partition's bytes."""
    parts = acc.partitions
    if parts > 0 and acc.bytes >= parts:
        per_partition = acc.bytes // parts
        return acc.run_bytes if acc.run_bytes < per_partition else per_partition
    return acc.run_bytes
