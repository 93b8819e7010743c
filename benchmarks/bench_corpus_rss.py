"""Benchmark: peak resident memory and time of each nki-samples test file under the simulator (issue 13).

Runs ``devkit simulate -m pytest FILE --simulation-only`` for every ``test/unit/test_*.py`` of an
nki-samples checkout, each in a fresh process, and prints the file, the pytest outcome line, the peak
resident set size of that process (``ru_maxrss`` from ``os.wait4``, MiB) and its wall time.  The peak
includes the test file's own NumPy reference computations, which for the largest flash-attention cases
dominate.  The only environment shim is a ``sitecustomize.py`` providing ``builtins.warnings`` (a bug
in the 0898a77 ``test_double_row_matmul.py``; see ``../shared/corpora/README.md``).

Usage::

    python benchmarks/bench_corpus_rss.py [--corpus DIR] [--mem-limit-mb 6000] [--timeout 1800]
                                          [-k EXPR] [--files test/unit/test_x.py ...] [--json]

``--corpus`` is the root of an extracted nki-samples checkout (with ``src/`` and ``test/``); by default
``../shared/corpora/nki-samples-0898a77.tar.gz`` next to the repository is extracted into a temporary
directory.  ``--extra-path`` adds PYTHONPATH entries (two test files import
scipy for their references).  ``--mem-limit-mb`` caps each child's address space (the machines are shared); a child that
hits it fails with a MemoryError and is reported as such.  Exits 1 if any file failed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TARBALL = REPO.parent / "shared" / "corpora" / "nki-samples-0898a77.tar.gz"


def extract(tarball: Path, into: Path) -> Path:
    """Extract ``tarball`` under ``into`` and return the checkout root (the directory holding ``test/``)."""
    with tarfile.open(tarball) as tf:
        tf.extractall(into, filter="data")
    for cand in [into, *sorted(p for p in into.rglob("*") if p.is_dir())]:
        if (cand / "test" / "unit").is_dir() and (cand / "src").is_dir():
            return cand
    raise SystemExit(f"{tarball}: no checkout with test/unit and src/ inside")


def write_shim(into: Path) -> Path:
    """A ``sitecustomize.py`` that supplies ``builtins.warnings`` (the documented environment shim)."""
    shim = into / "shim"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "sitecustomize.py").write_text(
        "import builtins\nimport warnings\n\nbuiltins.warnings = warnings\n"
    )
    (shim / "_rss_phases.py").write_text(PHASE_PLUGIN)  # used only with --per-test
    return shim


#: pytest plugin for --per-test: samples this process's RSS every 20 ms and reports, per test, the peak
#: while the simulator runs (``neuronxcc.nki.simulate_kernel``, what nki-samples tests call) and the peak
#: outside it (the test's own NumPy reference), and the RSS left after teardown (growth = memory kept)
PHASE_PLUGIN = """
import gc, sys, threading, time
_state = {"phase": "test", "peak": {}}
def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
def _sample():
    while True:
        r, p = _rss(), _state["phase"]
        if r > _state["peak"].get(p, 0.0):
            _state["peak"][p] = r
        time.sleep(0.02)
def pytest_configure(config):
    import neuronxcc.nki as nki
    run = nki.simulate_kernel
    def simulate_kernel(*a, **k):
        _state["phase"] = "simulator"
        try:
            return run(*a, **k)
        finally:
            _state["phase"] = "test"
    nki.simulate_kernel = simulate_kernel
    threading.Thread(target=_sample, daemon=True).start()
def pytest_runtest_logreport(report):
    if report.when == "teardown":
        gc.collect()
        pk, _state["peak"] = _state["peak"], {}
        sys.stderr.write(
            f"PER-TEST {report.nodeid.split('::')[-1]}: peak in simulator {pk.get('simulator', 0):.0f} MiB, "
            f"peak outside {pk.get('test', 0):.0f} MiB, after teardown {_rss():.0f} MiB\\n"
        )
"""


def run_one(
    root: Path,
    test_file: str,
    shim: Path,
    mem_limit_mb: int,
    timeout: float,
    k: str | None,
    extra_path: list[str] = (),  # type: ignore[assignment]
    per_test: bool = False,
) -> dict[str, object]:
    """Run one test file in a fresh process; return its outcome, peak RSS (MiB) and wall time (s)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), str(shim), str(REPO), *extra_path])
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    cmd = [sys.executable, "-m", "devkit", "simulate", "-m", "pytest", test_file, "--simulation-only", "-q"]
    cmd += ["-p", "no:cacheprovider"]
    if k:
        cmd += ["-k", k]
    if per_test:
        cmd += ["-p", "_rss_phases"]

    def limit() -> None:
        if mem_limit_mb > 0:
            n = mem_limit_mb << 20
            resource.setrlimit(resource.RLIMIT_AS, (n, n))

    out_path = Path(tempfile.mkstemp(prefix="bench_corpus_", suffix=".log")[1])
    with out_path.open("w") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=limit
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = out_path.read_text(errors="replace")
    out_path.unlink()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    summary = next((ln for ln in reversed(lines) if " in " in ln and ("passed" in ln or "failed" in ln)), "")
    if not summary:
        summary = lines[-1] if lines else "(no output)"
    if "MemoryError" in text:
        summary += " [MemoryError]"
    per = [ln.split("PER-TEST ", 1)[1] for ln in lines if "PER-TEST " in ln]
    return {
        "per_test": per,
        "file": test_file,
        "exit": proc.returncode,
        "summary": summary.strip("= "),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "wall_s": round(wall, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, help="root of an extracted nki-samples checkout")
    ap.add_argument("--tarball", type=Path, default=DEFAULT_TARBALL, help="archive to extract if no --corpus")
    ap.add_argument(
        "--files", nargs="*", help="test files relative to the checkout (default: test/unit/test_*.py)"
    )
    ap.add_argument("-k", dest="k", help="pytest -k expression passed to every file")
    ap.add_argument("--mem-limit-mb", type=int, default=6000, help="address-space cap per child (0: none)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per file before it is killed")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument(
        "--per-test",
        action="store_true",
        help="also print, per test, the peak RSS inside the simulator and outside it (the test's reference)",
    )
    ap.add_argument(
        "--extra-path", action="append", default=[], help="more PYTHONPATH entries (e.g. a dir with scipy)"
    )
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench_corpus_rss_"))
    try:
        if args.corpus is not None:
            root = args.corpus.resolve()
        else:
            if not args.tarball.exists():
                print(f"no corpus: {args.tarball} does not exist (pass --corpus)", file=sys.stderr)
                return 2
            root = extract(args.tarball, tmp / "corpus")
        shim = write_shim(tmp)
        files = args.files or sorted(
            str(p.relative_to(root)) for p in (root / "test" / "unit").glob("test_*.py")
        )
        rows = []
        t0 = time.perf_counter()
        for f in files:
            row = run_one(
                root, f, shim, args.mem_limit_mb, args.timeout, args.k, args.extra_path, args.per_test
            )
            rows.append(row)
            if not args.json:
                for line in row["per_test"]:  # type: ignore[attr-defined]
                    print(f"    {line}", flush=True)
                print(
                    f"{row['file']:<48} {row['peak_rss_mib']:>9.1f} MiB {row['wall_s']:>8.1f} s  {row['summary']}",
                    flush=True,
                )
        total = time.perf_counter() - t0
        worst = max(rows, key=lambda r: r["peak_rss_mib"]) if rows else None
        if args.json:
            print(json.dumps({"files": rows, "total_wall_s": round(total, 1)}, indent=2))
        elif worst is not None:
            print(f"{'total':<48} {worst['peak_rss_mib']:>9.1f} MiB {total:>8.1f} s  (peak: {worst['file']})")
        return 0 if all(r["exit"] == 0 for r in rows) else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
