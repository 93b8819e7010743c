"""Benchmark: the ``contributed/`` kernels of nki-samples 0898a77 under the simulator (issue 13).

Each kernel runs at a representative shape: numerics against a NumPy reference written here where it fits
the time budget, and a cost-only estimate at the shape its own benchmark uses, with instructions per second.
Times are CPU time (``time.process_time``): the machines are shared, and other load shows in wall time only.

Usage::

    python benchmarks/bench_contributed.py --corpus DIR [NAME ...]

NAME is any of ``matmul maxpool bilinear trilinear conv cumsum rope transpose rmsnorm_quant`` (default:
all).  ``--corpus`` is the root of an extracted nki-samples 0898a77 checkout (its ``contributed/`` directory
is used).  Environment shims, not simulator changes: ``torch``/``torch_xla`` stubs (the files import them
for their own drivers only) and the Beta-2 spelling ``nki.language.constants`` that ``transpose.py``
(imported by ``conv.py``) uses, mapped to ``neuronxcc.nki.language.constants``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from devkit import compat

if not compat.is_installed():
    compat.install()

import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt

import devkit
from devkit.nki import language_constants


def _shims() -> None:
    stubs = (
        "torch",
        "torch.nn",
        "torch.nn.functional",
        "torch_xla",
        "torch_xla.core",
        "torch_xla.core.xla_model",
    )
    for name in stubs:
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["torch"].nn = sys.modules["torch.nn"]  # type: ignore[attr-defined]
    sys.modules["torch.nn"].functional = sys.modules["torch.nn.functional"]  # type: ignore[attr-defined]
    sys.modules["torch_xla.core"].xla_model = sys.modules["torch_xla.core.xla_model"]  # type: ignore[attr-defined]
    for name in ("nki", "nki.language"):
        if name not in sys.modules:
            mod = types.ModuleType(name)
            mod.__path__ = []  # type: ignore[attr-defined]
            sys.modules[name] = mod
    sys.modules.setdefault("nki.language.constants", language_constants)


def _load(base: Path, rel: str) -> Any:
    spec = importlib.util.spec_from_file_location("contributed_" + Path(rel).stem, base / rel)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def numerics(label: str, run: Callable[[], Any], want: np.ndarray, tol: float) -> None:
    """Run ``run`` and print its largest absolute error against ``want``."""
    t0 = time.process_time()
    try:
        got = np.asarray(run(), dtype=np.float32)
        err = float(np.max(np.abs(got - want)))
        verdict = "ok" if err <= tol else "MISMATCH"
        print(
            f"numerics  {label}: max abs err {err:.3g} ({verdict}) {time.process_time() - t0:.1f} s",
            flush=True,
        )
    except Exception as e:  # a report line per kernel, whatever it raises
        print(f"numerics  {label}: FAIL {type(e).__name__}: {str(e)[:300]}", flush=True)


def cost(label: str, run: Callable[[], Any]) -> None:
    """Run a cost-only estimate and print instructions per second and the modelled latency."""
    t0 = time.process_time()
    try:
        r = run()
        s = time.process_time() - t0
        print(
            f"cost-only {label}: {r.instructions:,} instructions in {s:.1f} s = {r.instructions / s:,.0f} instr/s, "
            f"modelled {r.latency_us:,.0f} us",
            flush=True,
        )
    except Exception as e:  # a report line per kernel, whatever it raises
        print(f"cost-only {label}: FAIL {type(e).__name__}: {str(e)[:300]}", flush=True)


def _up2(a: np.ndarray, axis: int) -> np.ndarray:
    """2x linear upsampling along ``axis`` with half-pixel centres (PyTorch ``align_corners=False``)."""
    n = a.shape[axis]
    src = np.maximum((np.arange(2 * n) + 0.5) / 2 - 0.5, 0)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    shape = [1] * a.ndim
    shape[axis] = 2 * n
    w = (src - lo).reshape(shape)
    return np.take(a, lo, axis=axis) * (1 - w) + np.take(a, hi, axis=axis) * w


def _depthwise_ref(img: np.ndarray, filt: np.ndarray) -> np.ndarray:
    w = img.shape[-1]
    padded = np.pad(img[:, :, 0, :], ((0, 0), (0, 0), (1, 1)))
    out = np.zeros(img.shape, np.float32)
    for j in range(filt.shape[-1]):
        out[:, :, 0, :] += padded[:, :, j : j + w] * filt[None, :, 0, 0, j][..., None]
    return out


def bench(base: Path, names: set[str]) -> None:
    rng = np.random.default_rng(0)
    f32, f16, bf16 = nl.float32, nl.float16, nl.bfloat16
    if "matmul" in names:
        mm = _load(base, "matmul.py")
        a = rng.random((1024, 4096)).astype(np.float16)
        b = rng.random((1024, 2048)).astype(np.float16)
        want = a.astype(np.float32).T @ b.astype(np.float32)
        numerics("matmul.py K=1024 M=4096 N=2048 fp16", lambda: devkit.simulate(mm.matmul, a, b), want, 0.5)
        spec = (nt.tensor[[8192, 4096], f16], nt.tensor[[8192, 8192], f16])
        cost("matmul.py K=8192 M=4096 N=8192 fp16", lambda: devkit.estimate(mm.matmul, *spec))
    if "maxpool" in names:
        mp = _load(base, "maxpooling.py")
        x = rng.random((448, 448)).astype(np.float32)
        want = sliding_window_view(x, (3, 3)).max(axis=(2, 3))
        numerics(
            "maxpooling.py 448x448 pool 3", lambda: devkit.simulate(mp.max_pooling_2d_stride_1, x, 3), want, 0
        )
        cost(
            "maxpooling.py 448x448 pool 3",
            lambda: devkit.estimate(mp.max_pooling_2d_stride_1, nt.tensor[[448, 448], f32], 3),
        )
    if "bilinear" in names:
        bi = _load(base, "interpolate_bilinear_fwd.py")
        x = rng.random((2, 64, 128, 128)).astype(np.float32)
        want = _up2(_up2(x, 2), 3)
        numerics(
            "bilinear 2x N=2 C=64 128x128",
            lambda: devkit.simulate(bi.interpolate_bilinear_2x_fwd, x),
            want,
            1e-4,
        )
        spec = nt.tensor[[128, 64, 128, 128], f32]
        cost("bilinear 2x N=128 C=64 128x128", lambda: devkit.estimate(bi.interpolate_bilinear_2x_fwd, spec))
    if "trilinear" in names:
        tri = _load(base, "interpolate_trilinear_fwd.py")
        x = rng.random((2, 64, 23, 23, 23)).astype(np.float32)
        want = _up2(_up2(_up2(x, 2), 3), 4)
        numerics(
            "trilinear 2x N=2 C=64 23^3",
            lambda: devkit.simulate(tri.interpolate_trilinear_2x_fwd, x),
            want,
            1e-4,
        )
        spec = nt.tensor[[2, 64, 23, 23, 23], f32]
        cost("trilinear 2x N=2 C=64 23^3", lambda: devkit.estimate(tri.interpolate_trilinear_2x_fwd, spec))
    if "conv" in names:
        conv = _load(base, "neuron-team-kernels/conv.py")
        img = rng.standard_normal((2, 256, 1, 512)).astype(np.float32)
        filt = rng.standard_normal((256, 1, 1, 3)).astype(np.float32)
        out = np.zeros(img.shape, np.float32)

        def run_conv() -> np.ndarray:
            devkit.simulate(conv.conv1d_depthwise_default, img, filt, out, padding=((0, 0), (1, 1)))
            return out

        numerics(
            "conv.py conv1d_depthwise_default N=2 C=256 W=512 k=3", run_conv, _depthwise_ref(img, filt), 1e-4
        )
        spec = (
            nt.tensor[[8, 512, 1, 2048], f32],
            nt.tensor[[512, 1, 1, 3], f32],
            nt.tensor[[8, 512, 1, 2048], f32],
        )
        cost(
            "conv.py conv1d_depthwise_default N=8 C=512 W=2048 k=3",
            lambda: devkit.estimate(conv.conv1d_depthwise_default, *spec, padding=((0, 0), (1, 1))),
        )
    if "cumsum" in names:
        cs = _load(base, "neuron-team-kernels/cumsum.py")
        x = rng.standard_normal((256, 1024)).astype(np.float32)
        y = np.zeros_like(x)

        def run_cumsum() -> np.ndarray:
            devkit.simulate(cs.cumsum, x, y, axis=-1)
            return y

        numerics("cumsum.py 256x1024 axis=-1", run_cumsum, np.cumsum(x, axis=-1), 1e-2)
    if "rope" in names:
        rp = _load(base, "neuron-team-kernels/RoPE.py")
        d, s = 128, 2048
        x = rng.standard_normal((d, s)).astype(np.float32)
        c = rng.standard_normal((d // 2, s)).astype(np.float32)
        sn = rng.standard_normal((d // 2, s)).astype(np.float32)
        y = np.zeros_like(x)
        want = np.concatenate([x[: d // 2] * c - x[d // 2 :] * sn, x[d // 2 :] * c + x[: d // 2] * sn])

        def run_rope() -> np.ndarray:
            devkit.simulate(rp.RoPE, x, c, sn, y)
            return y

        numerics("RoPE.py d=128 S=2048", run_rope, want, 1e-4)
    if "transpose" in names:
        tp = _load(base, "neuron-team-kernels/transpose.py")
        x = rng.standard_normal((4, 256, 384)).astype(np.float32)
        numerics(
            "transpose.py tiled_dve_transpose_10 4x256x384",
            lambda: devkit.simulate(tp.tiled_dve_transpose_10, x, permutation=(0, 2, 1)),
            x.transpose(0, 2, 1),
            0,
        )
    if "rmsnorm_quant" in names:
        rq = _load(base, "neuron-team-kernels/rmsnorm_quant.py")
        h = 1024
        hidden = rng.standard_normal((1, 256, h)).astype(np.float32)
        gamma = rng.standard_normal((1, h)).astype(np.float32)
        normed = hidden / np.sqrt((hidden * hidden).mean(-1, keepdims=True) + 1e-6) * gamma

        def dequantised() -> np.ndarray:
            out = np.asarray(devkit.simulate(rq.compatible_rmsnorm_quant, hidden, gamma, 0.0, "RMSNormQuant"))
            scale = np.ascontiguousarray(out[:, :, h:]).view(np.float32)  # 4 fp8 bytes = one fp32 scale
            return out[:, :, :h].astype(np.float32) * scale

        # fp8 e4m3 keeps 3 mantissa bits: a relative error up to 1/16 of each row's largest value
        numerics(
            "rmsnorm_quant.py RMSNormQuant B=1 S=256 H=1024 -> fp8",
            dequantised,
            normed,
            np.abs(normed).max() / 16,
        )
        spec = (nt.tensor[[1, 4096, 4096], bf16], nt.tensor[[1, 4096], bf16])
        cost(
            "rmsnorm_quant.py compatible_rmsnorm_quant B=1 S=4096 H=4096",
            lambda: devkit.estimate(rq.compatible_rmsnorm_quant, *spec, 0.0, "RMSNormQuant"),
        )


ALL = ("matmul", "maxpool", "bilinear", "trilinear", "conv", "cumsum", "rope", "transpose", "rmsnorm_quant")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--corpus", type=Path, required=True, help="root of an extracted nki-samples 0898a77 checkout"
    )
    ap.add_argument("names", nargs="*", help=f"kernels to run, of {', '.join(ALL)} (default: all)")
    args = ap.parse_args(argv)
    base = args.corpus / "contributed"
    sys.path.insert(0, str(base / "neuron-team-kernels"))
    _shims()
    warnings.simplefilter("ignore")
    bench(base, set(args.names or ALL))
    return 0


if __name__ == "__main__":
    sys.exit(main())
