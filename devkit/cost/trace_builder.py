"""Build :class:`devkit.trace.Instr` records by hand: for tests, benchmarks and what-if studies.

Each method appends one instruction with the next consecutive id and returns that id, so
dependencies read naturally::

    b = TraceBuilder()
    ld = b.dma(partitions=128, bytes_per_partition=1024)
    mm = b.matmul(deps=[ld])
    b.schedule("trn1")          # -> CostReport

Sizes: ``elems`` are elements per partition, ``bytes_per_partition`` bytes per partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from devkit.dtype_names import itemsize
from devkit.trace import DMA, GPSIMD, HBM, PSUM, SBUF, SCALAR, TENSOR, VECTOR, Access, Instr, MemoryStats

if TYPE_CHECKING:
    from devkit.cost.params import Params
    from devkit.cost.report import CostReport
    from devkit.targets import Target


def access(buffer: str, dtype: str, partitions: int, elems: int, run_bytes: int | None = None) -> Access:
    """An operand of ``partitions`` x ``elems`` elements; contiguous per partition unless ``run_bytes``."""
    size = itemsize(dtype)
    nbytes = partitions * elems * size
    return Access(
        buffer=buffer,
        dtype=dtype,
        partitions=partitions,
        elems=elems,
        bytes=nbytes,
        run_bytes=elems * size if run_bytes is None else run_bytes,
    )


class TraceBuilder:
    """An in-memory trace under construction (``instrs`` in program order)."""

    def __init__(self, filename: str = "handmade.py") -> None:
        self.filename = filename
        self.instrs: list[Instr] = []

    def __iter__(self) -> Iterator[Instr]:
        return iter(self.instrs)

    def __len__(self) -> int:
        return len(self.instrs)

    def add(
        self,
        engine: str,
        opcode: str,
        ins: Iterable[Access] = (),
        outs: Iterable[Access] = (),
        *,
        flops: int = 0,
        deps: Iterable[int] = (),
        line: int = 0,
        **attrs: object,
    ) -> int:
        """Append any instruction; extra keywords become ``attrs``."""
        instr = Instr(
            id=len(self.instrs),
            engine=engine,
            opcode=opcode,
            ins=tuple(ins),
            outs=tuple(outs),
            flops=flops,
            deps=tuple(deps),
            filename=self.filename,
            lineno=line,
            attrs=dict(attrs) if attrs else None,
        )
        self.instrs.append(instr)
        return instr.id

    def matmul(
        self,
        m: int = 128,
        n: int = 512,
        k: int = 128,
        dtype: str = "bfloat16",
        *,
        deps: Iterable[int] = (),
        line: int = 0,
        accumulate: bool = False,
        **attrs: object,
    ) -> int:
        """``nc_matmul``: stationary [k, m] and moving [k, n] in SBUF -> PSUM [m, n] fp32."""
        return self.add(
            TENSOR,
            "nc_matmul",
            (access(SBUF, dtype, k, m), access(SBUF, dtype, k, n)),
            (access(PSUM, "float32", m, n),),
            flops=2 * m * n * k,
            deps=deps,
            line=line,
            stationary_free=m,
            moving_free=n,
            contract=k,
            accumulate=accumulate,
            **attrs,
        )

    def dma(
        self,
        src: str = HBM,
        dst: str = SBUF,
        partitions: int = 128,
        bytes_per_partition: int = 1024,
        *,
        dtype: str = "bfloat16",
        run_bytes: int | None = None,
        deps: Iterable[int] = (),
        line: int = 0,
        opcode: str = "dma_copy",
        **attrs: object,
    ) -> int:
        """A transfer of ``partitions`` rows of ``bytes_per_partition``; ``run_bytes`` sets the HBM run."""
        elems = bytes_per_partition // itemsize(dtype)
        run = bytes_per_partition if run_bytes is None else run_bytes
        src_acc = access(src, dtype, partitions, elems, run if src == HBM else None)
        dst_acc = access(dst, dtype, partitions, elems, run if dst == HBM else None)
        return self.add(DMA, opcode, (src_acc,), (dst_acc,), deps=deps, line=line, **attrs)

    def compute(
        self,
        engine: str,
        opcode: str,
        elems: int = 512,
        partitions: int = 128,
        *,
        inputs: int = 1,
        dtype: str = "float32",
        in_buffer: str = SBUF,
        out_buffer: str = SBUF,
        deps: Iterable[int] = (),
        line: int = 0,
        **attrs: object,
    ) -> int:
        """A Vector/Scalar/GpSimd instruction streaming ``inputs`` operands of ``elems`` per partition."""
        ins = [access(in_buffer, dtype, partitions, elems) for _ in range(inputs)]
        return self.add(
            engine,
            opcode,
            ins,
            (access(out_buffer, dtype, partitions, elems),),
            deps=deps,
            line=line,
            **attrs,
        )

    def vector(self, opcode: str = "tensor_copy", elems: int = 512, **kw: object) -> int:
        """A VectorE instruction (see :meth:`compute`)."""
        return self.compute(VECTOR, opcode, elems, **kw)  # type: ignore[arg-type]

    def scalar(self, opcode: str = "activation", elems: int = 512, **kw: object) -> int:
        """A ScalarE instruction (see :meth:`compute`)."""
        return self.compute(SCALAR, opcode, elems, **kw)  # type: ignore[arg-type]

    def gpsimd(self, opcode: str = "iota", elems: int = 512, **kw: object) -> int:
        """A GpSimd instruction (see :meth:`compute`)."""
        return self.compute(GPSIMD, opcode, elems, **kw)  # type: ignore[arg-type]

    def schedule(
        self, target: str | Target = "trn1", params: Params | None = None, stats: MemoryStats | None = None
    ) -> CostReport:
        """Schedule the trace and return its :class:`devkit.cost.report.CostReport`."""
        from devkit.cost.scheduler import schedule

        return schedule(self.instrs, target, stats=stats, params=params, kernel_name=self.filename)
