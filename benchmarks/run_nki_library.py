"""Run aws-neuron/nki-library @d2ad3a5's own test harness in simulation mode on the devkit (issue 12).

Usage (from the repository root)::

    python benchmarks/run_nki_library.py --setup            # venv + extracted corpus + shims, once
    python benchmarks/run_nki_library.py cumsum rmsnorm      # run these families, print the table
    python benchmarks/run_nki_library.py --all               # every family, one after the other
    python benchmarks/run_nki_library.py mlp -k "fast and bf16"   # a subset (-k is passed to pytest)
    python benchmarks/run_nki_library.py --library-fixes mlp qkv  # with the library's own bugs fixed (opt-in)

What it does:

1. ``--setup``: extracts ``../shared/corpora/nki-library-d2ad3a5.tar.gz`` under ``--workdir``; creates a
   separate venv (``--venv``) with the suite's test extras -- ``torch==2.13.0`` (the CPU wheel; a plain ``torch``
   would pull a multi-GB CUDA build), numpy, ml_dtypes, pandas, pytest and plugins, boto3, fabric2,
   aws-embedded-metrics, allpairspy -- and this repository installed editable; copies the environment shims of
   ``benchmarks/nki_library_env/`` (modules the public repository imports but does not contain) into the
   extracted tree.
2. Per family (a folder of ``test/integration/nkilib``): runs ``python -m devkit simulate -m pytest <folder>
   --test-mode simulation`` in that venv (with this checkout's ``devkit`` first on ``PYTHONPATH``, so a venv
   made for another checkout can be reused) under ``/usr/bin/time -v`` with an address-space cap (``--mem-kb``,
   ``ulimit -v``), one family at a time (the machine is shared), and reads the pytest JUnit XML.
3. Prints passed / failed / errors / skipped per family, wall time and peak RSS, and the distinct failure
   messages (first line), so each failure can be attributed; ``--json`` writes the same as JSON.

``--library-fixes`` (opt-in) first applies the fixes of ``nki_library_env/library_fixes.toml`` -- bugs of
nki-library @d2ad3a5 itself that stop some of its tests before they reach any simulator -- to the extracted
working copy (never to the archive); without it, any fix an earlier run applied there is reverted first, so a
plain run always runs the library as published.  The table and ``--json`` name the fixes in force.

Large shapes are skipped by the harness itself unless ``NKILIB_SIMULATION_RUN_ALL=1`` (``--run-all``).
A benchmark/reproduction script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import nki_library_fixes

REPO = Path(__file__).resolve().parents[1]
SHIMS = REPO / "benchmarks" / "nki_library_env"
CORPUS_NAME = "nki-library-d2ad3a5"
USER = os.environ.get("USER", "user")

#: The test extras of nki-library's pyproject ("test"), minus linters/debuggers, pinned where it matters.
EXTRAS = [
    "torch==2.13.0",
    "numpy",
    "ml_dtypes",
    "pandas",
    "pytest",
    "pytest-xdist",
    "pytest-metadata",
    "pytest-html",
    "pytest-cov",
    "filelock",
    "plotext",
    "allpairspy",
    "boto3",
    "botocore",
    "aws-embedded-metrics",
    "fabric2",
    "scipy",  # not in the test extras, but src/nkilib_src/nkilib/core/topk imports scipy.linalg
]

#: Families: a short name -> folder under test/integration/nkilib.
FAMILIES = {
    "attention": "core/attention",
    "cumsum": "core/cumsum",
    "embeddings": "core/embeddings",
    "max": "core/max",
    "mlp": "core/mlp",
    "moe_cte": "core/moe/moe_cte",
    "moe_tkg": "core/moe/moe_tkg",
    "moe_block": "core/moe_block",
    "output_projection": "core/output_projection",
    "qkv": "core/qkv",
    "rmsnorm": "core/rmsnorm",
    "router_topk": "core/router_topk",
    "subkernels": "core/subkernels",
    "topk": "core/topk",
    "core_utils": "core/utils",
    "utils": "utils",  # the harness's own helpers (comparators, generators, goldens): an import check, no tests
    "exp_benchmark": "experimental/benchmark",
    "exp_collectives": "experimental/collectives",
    "exp_conv": "experimental/conv",
    "exp_dynamic_shapes": "experimental/dynamic_shapes",
    "exp_loss": "experimental/loss",
    "exp_moe": "experimental/moe",
    "exp_mxfp_subkernels": "experimental/mxfp_subkernels",
    "exp_subkernels": "experimental/subkernels",
    "exp_transformer": "experimental/transformer",
}


def find_archive() -> Path:
    """The corpus tarball: ``shared/corpora`` next to the repository (or next to the worktree folder)."""
    for base in (REPO.parent, REPO.parent.parent):
        p = base / "shared" / "corpora" / f"{CORPUS_NAME}.tar.gz"
        if p.exists():
            return p
    raise SystemExit(f"corpus archive {CORPUS_NAME}.tar.gz not found next to {REPO}")


def setup(workdir: Path, venv: Path) -> Path:
    """Extract the corpus, install the shims, build the venv; returns the corpus root."""
    root = workdir / CORPUS_NAME
    if not root.exists():
        workdir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(find_archive()) as tar:
            tar.extractall(workdir, filter="data")
    scripts = root / "test" / "utils" / "scripts"
    scripts.mkdir(exist_ok=True)
    shutil.copy(SHIMS / "perf_analysis_private.py", root / "test" / "utils" / "perf_analysis_private.py")
    shutil.copy(SHIMS / "test_utils_scripts" / "__init__.py", scripts / "__init__.py")
    shutil.copy(SHIMS / "test_utils_scripts" / "remote_lock_scripts.py", scripts / "remote_lock_scripts.py")
    # test_topk_reduce.py imports the kernel from experimental/subkernels; the repository ships it in collectives
    shutil.copytree(
        SHIMS / "experimental_subkernels",
        root / "src" / "nkilib_src" / "nkilib" / "experimental" / "subkernels",
        dirs_exist_ok=True,
    )
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", *EXTRAS, "-e", str(REPO)], check=True)
    return root


def _time_v(stderr: str) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) from ``/usr/bin/time -v`` output."""
    wall = 0.0
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", stderr)
    if m:
        for part in m.group(1).split(":"):
            wall = wall * 60 + float(part)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    return wall, int(m.group(1)) if m else 0


def _message_class(msg: str) -> str:
    """A failure message with numbers, temp paths and shapes blanked, so equal causes group together."""
    msg = re.sub(r"/tmp/\S+", "<path>", msg)
    msg = re.sub(r"\(\d+(, \d+)*,?\)", "(<shape>)", msg)
    msg = re.sub(r"\d+(\.\d+)?", "N", msg)
    return msg[:200]


def _junit(path: Path) -> dict:
    """Counts and failure messages from a pytest JUnit XML file."""
    out = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "messages": Counter()}
    if not path.exists():
        return out
    for case in ET.parse(path).getroot().iter("testcase"):
        kids = {child.tag: child for child in case}
        if "failure" in kids or "error" in kids:
            node = kids.get("failure", kids.get("error"))
            out["failed" if "failure" in kids else "errors"] += 1
            first = (node.get("message") or node.text or "").strip().splitlines()
            out["messages"][_message_class(first[0]) if first else "?"] += 1
        elif "skipped" in kids:
            out["skipped"] += 1
        else:
            out["passed"] += 1
    return out


def _progress(stdout: str) -> dict:
    """Counts from pytest's ``-q`` progress characters (a run stopped by the timeout writes no JUnit XML)."""
    out = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "messages": Counter()}
    for line in stdout.splitlines():
        m = re.fullmatch(r"([.FEsxX]+)(\s+\[\s*\d+%\])?", line.strip())
        if m:
            c = Counter(m.group(1))
            out["passed"] += c["."] + c["X"]
            out["failed"] += c["F"]
            out["errors"] += c["E"]
            out["skipped"] += c["s"] + c["x"]
    out["messages"]["(timed out: counts of the tests finished before the timeout)"] = 1
    return out


def run_family(name: str, root: Path, venv: Path, args: argparse.Namespace) -> dict:
    """Run one family under the harness; counts, wall time, peak RSS."""
    folder = root / "test" / "integration" / "nkilib" / FAMILIES[name]
    xml = root / f"junit-{name}.xml"
    xml.unlink(missing_ok=True)
    cmd = [
        "/usr/bin/time", "-v", str(venv / "bin" / "python"), "-m", "devkit", "simulate", "-m", "pytest",
        str(folder.relative_to(root)), "--test-mode", "simulation", "-q", "-p", "nkilib_harness_fixes",
        "-p", "no:cacheprovider", f"--junitxml={xml}", "--tb=line", "--continue-on-collection-errors",
    ]  # fmt: skip
    if args.k:
        cmd += ["-k", args.k]
    if args.m:
        cmd += ["-m", args.m]
    if args.platform_target:
        cmd += ["--platform-target", args.platform_target]
    env = dict(os.environ)
    # this checkout's devkit first, whichever copy the venv has installed editable
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(SHIMS), str(root / "src")])
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    if args.run_all:
        env["NKILIB_SIMULATION_RUN_ALL"] = "1"
    if args.gc_between_tests:
        env["NKILIB_COLLECT_BETWEEN_TESTS"] = "1"
    shell = f"ulimit -v {args.mem_kb}; exec " + " ".join(f"'{c}'" for c in cmd)
    proc = subprocess.Popen(
        ["bash", "-c", shell],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so a timeout can stop the whole process group (time, python)
    )
    try:
        stdout, stderr = proc.communicate(timeout=args.timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        timed_out = True
    (root / f"log-{name}.txt").write_text(stdout + stderr)
    wall, rss = _time_v(stderr)
    res = _junit(xml) if not timed_out else _progress(stdout)
    res.update(family=name, wall_s=wall, peak_rss_mib=rss / 1024, timed_out=timed_out)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="*", help=f"families to run: {', '.join(FAMILIES)}")
    ap.add_argument("--all", action="store_true", help="run every family, one after the other")
    ap.add_argument("--setup", action="store_true", help="extract the corpus, install shims and the venv")
    ap.add_argument("--workdir", type=Path, default=Path(f"/tmp/corpora-{USER}-nkilib"))
    ap.add_argument("--venv", type=Path, default=Path(f"/tmp/venv-{USER}-nkilib"))
    ap.add_argument("-k", default="", help="pytest -k expression applied to every family")
    ap.add_argument("-m", default="", help="pytest -m marker expression (e.g. fast) applied to every family")
    ap.add_argument(
        "--platform-target",
        default="",
        help="the harness's --platform-target (trn2 unless given; trn3 runs MX tests)",
    )
    ap.add_argument("--mem-kb", type=int, default=8_000_000, help="ulimit -v per family run (KiB)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per family")
    ap.add_argument("--run-all", action="store_true", help="NKILIB_SIMULATION_RUN_ALL=1 (large shapes too)")
    ap.add_argument(
        "--gc-between-tests",
        action="store_true",
        help="NKILIB_COLLECT_BETWEEN_TESTS=1: after each test drop pytest's last-failure references and collect "
        "reference cycles (the harness leaves test arrays in cycles; see nki_library_env/nkilib_harness_fixes.py)",
    )
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument(
        "--library-fixes",
        action="store_true",
        help="apply the fixes to nki-library's own bugs listed in nki_library_env/library_fixes.toml "
        "(off by default: a plain run reverts them)",
    )
    args = ap.parse_args()

    root = args.workdir / CORPUS_NAME
    if args.setup or not root.exists() or not (args.venv / "bin" / "python").exists():
        root = setup(args.workdir, args.venv)
    names = list(FAMILIES) if args.all else args.families
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise SystemExit(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    fixes = nki_library_fixes.load()
    try:
        if args.library_fixes:
            changes = nki_library_fixes.apply(root, fixes)
        else:
            changes = nki_library_fixes.revert(root, fixes)
    except nki_library_fixes.LibraryFixError as err:
        raise SystemExit(f"--library-fixes: {err}") from None
    in_force = [f.name for f in fixes] if args.library_fixes else []
    for name, what in changes:
        if what != "already original":
            print(f"library fix {name}: {what}")
    print(f"library fixes in force: {', '.join(in_force) or 'none (nki-library as published)'}")
    results = []
    print(f"{'family':<22}{'pass':>6}{'fail':>6}{'error':>6}{'skip':>6}{'wall s':>9}{'RSS MiB':>9}")
    for name in names:
        r = run_family(name, root, args.venv, args)
        r["library_fixes"] = in_force
        results.append(r)
        flag = "  (timed out)" if r["timed_out"] else ""
        print(
            f"{name:<22}{r['passed']:>6}{r['failed']:>6}{r['errors']:>6}{r['skipped']:>6}"
            f"{r['wall_s']:>9.1f}{r['peak_rss_mib']:>9.0f}{flag}",
            flush=True,
        )
    for r in results:
        for msg, n in r["messages"].most_common():
            print(f"  {r['family']}: {n} x {msg}")
    if args.json:
        for r in results:
            r["messages"] = dict(r["messages"])
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
