"""Benchmark: peak resident memory of nki-samples ``test_flash_attn_bwd.py``'s own NumPy reference, without
the simulator (issue 13: is the file's 2 GiB budget reachable at all?).

Each parametrisation of ``test_flash_attn_bwd_numerical`` runs the test file's ``cpu_attention_backward``
on inputs of the test's shapes in a fresh process (``neuronxcc``/``nki_samples`` names the module imports
for its kernel are stubbed: no simulator is imported) and prints the peak RSS (``ru_maxrss``, MiB) and CPU
time, or the allocation that failed under ``--mem-limit-mb``.

Usage::

    python benchmarks/flash_attn_bwd_reference_rss.py --corpus DIR [--mem-limit-mb 12000]

``--corpus`` is the root of an extracted nki-samples 0898a77 checkout.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

#: (bs, nheads, nheads_kv, seqlen, d) of test_flash_attn_bwd_numerical at 0898a77 (float32); each also runs
#: with sliding_window in (-1, 128) and sinks in (False, True), which change the peak little
CASES = ((1, 4, 4, 4096, 128), (1, 4, 1, 4096, 128), (1, 8, 2, 4096, 128), (1, 8, 2, 8192, 128))

_CHILD = r"""
import importlib.util, resource, sys, time, types
root, bs, nheads, nheads_kv, seqlen, d = sys.argv[1], *map(int, sys.argv[2:7])
for name in ("neuronxcc", "neuronxcc.nki", "neuronxcc.nki.language", "nki_samples", "nki_samples.reference",
             "nki_samples.reference.attention"):
    sys.modules[name] = types.ModuleType(name)
nki = sys.modules["neuronxcc.nki"]
nki.benchmark = lambda **k: (lambda f: f)
nki.baremetal = nki.simulate_kernel = None
sys.modules["neuronxcc.nki.language"].bfloat16 = "bfloat16"
sys.modules["nki_samples.reference.attention"].flash_attn_bwd = None
import numpy as np
spec = importlib.util.spec_from_file_location("reference", root + "/test/unit/test_flash_attn_bwd.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
rnd = lambda *s: ((np.random.random_sample(s) - 0.5) * 2).astype(np.float32)
q, dy = rnd(bs, nheads, d, seqlen), rnd(bs, nheads, d, seqlen)
k, v = rnd(bs, nheads_kv, d, seqlen), rnd(bs, nheads_kv, d, seqlen)
t0 = time.process_time()
try:
    mod.cpu_attention_backward(q, k, v, dy, use_causal_mask=True, sliding_window=-1, sinks=None)
    verdict = "ok"
except MemoryError as e:
    verdict = "MemoryError: " + str(e)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{peak:.0f}\t{time.process_time() - t0:.1f}\t{verdict}")
"""


def run_case(root: Path, case: tuple[int, ...], mem_limit_mb: int) -> str:
    def limit() -> None:
        if mem_limit_mb > 0:
            n = mem_limit_mb << 20
            resource.setrlimit(resource.RLIMIT_AS, (n, n))

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), *map(str, case)],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=limit,
    )
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if not line:
        return f"FAIL (exit {out.returncode}): {out.stderr.strip().splitlines()[-1] if out.stderr else ''}"
    peak, cpu, verdict = line.split("\t")
    return f"peak RSS {float(peak):>8.0f} MiB  cpu {float(cpu):>6.1f} s  {verdict}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--corpus", type=Path, required=True, help="root of an extracted nki-samples 0898a77 checkout"
    )
    ap.add_argument("--mem-limit-mb", type=int, default=12000, help="address-space cap per child (0: none)")
    args = ap.parse_args(argv)
    for case in CASES:
        bs, nheads, nheads_kv, seqlen, d = case
        label = f"bs={bs} nheads={nheads} nheads_kv={nheads_kv} seqlen={seqlen} d={d}"
        print(f"reference only {label:<48} {run_case(args.corpus, case, args.mem_limit_mb)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
