"""The calibration report: the cost model against published hardware latencies of unmodified kernels.

``devkit calibrate --report docs/calibration.md --samples <nki-samples-0898a77 dir or .tar.gz>`` writes it.
The points are listed in ``devkit/cost/qor_points.toml``: the AWS matmul-tutorial latencies (the
``mmt_*`` anchors of ``params.toml``, kernels in :mod:`devkit.kernels.tutorial`) and the QoR thresholds of
the nki-samples 0898a77 unit tests, which run unmodified through ``devkit simulate -m pytest`` with
:mod:`devkit.workflow.qor_plugin` recording each modelled latency.  A threshold's margin (when the parameter
carries one) is divided out; the result is read as an upper bound near the measurement.

Leave-one-family-out (LOFO): a parameter derived from a family's points (``fitted_from`` in ``params.toml``)
is replaced, for that family's points, by the value the remaining families give (``[[lofo]]`` of
``qor_points.toml``), so a parameter that only helps one family shows up.

Units: latencies in us.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devkit.cost.params import ParamSet, load_params
from devkit.targets import Target, load_target, toml_io

#: The published points, kept as data next to the parameters they check.
QOR_PATH = Path(__file__).resolve().parents[1] / "cost" / "qor_points.toml"
#: The tutorial anchors' shape: bf16 lhsT[K, M] @ rhs[K, N] on trn1.
TUTORIAL_SHAPE = {"K": 8192, "M": 4096, "N": 8192}
#: Target-file sections whose numbers the engine and DMA cost rules read (listed in the report).
COST_SECTIONS = ("clock", "tensor", "vector", "scalar", "gpsimd", "pipeline", "dma", "hbm")


class QorError(ValueError):
    """A bad ``qor_points.toml`` or a samples location that is not an nki-samples 0898a77 checkout."""


@dataclass(frozen=True)
class Family:
    """One nki-samples unit-test file and the margin its latency parameters carry."""

    name: str
    test_file: str
    margin: float
    source: str


@dataclass(frozen=True)
class Lofo:
    """Value of ``param`` used for ``family``'s points when that family is left out."""

    family: str
    param: str
    value: float
    source: str


@dataclass(frozen=True)
class Ranking:
    """Point ids in their measured order, slowest first (a documented optimisation sequence)."""

    name: str
    slower_to_faster: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Pairing:
    """Two families of the same configurations, ``faster`` measured faster than ``slower`` on each."""

    faster: str
    slower: str
    source: str


@dataclass(frozen=True)
class QorSpec:
    """The contents of ``qor_points.toml``."""

    select: str
    within: float
    source: str
    families: tuple[Family, ...]
    lofo: tuple[Lofo, ...]
    rankings: tuple[Ranking, ...]
    pairings: tuple[Pairing, ...]

    def lofo_for(self, family: str) -> dict[str, float]:
        """Parameter overrides that leave ``family`` out."""
        return {entry.param: entry.value for entry in self.lofo if entry.family == family}


@dataclass(frozen=True)
class Point:
    """One published latency and the model's estimate of it (us)."""

    id: str
    family: str
    measured_us: float
    modelled_us: float
    lofo_us: float
    bound_by: str

    @property
    def ratio(self) -> float:
        """Modelled / measured."""
        return self.modelled_us / self.measured_us

    @property
    def lofo_ratio(self) -> float:
        """Modelled with the family left out / measured."""
        return self.lofo_us / self.measured_us


def load_spec(path: Path = QOR_PATH) -> QorSpec:
    """Parse ``qor_points.toml``; raises :class:`QorError` naming what is wrong."""
    data = toml_io.load_file(Path(path), QorError)
    try:
        families = tuple(
            Family(f["name"], f["test_file"], float(f["margin"]), f["source"]) for f in data["families"]
        )
        lofo = tuple(
            Lofo(e["family"], e["param"], float(e["value"]), e["source"]) for e in data.get("lofo", [])
        )
        rankings = tuple(
            Ranking(r["name"], tuple(r["slower_to_faster"]), r["source"]) for r in data.get("rankings", [])
        )
        pairings = tuple(Pairing(p["faster"], p["slower"], p["source"]) for p in data.get("pairings", []))
        spec = QorSpec(
            data["select"], float(data["within"]), data["source"], families, lofo, rankings, pairings
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise QorError(f"{path}: malformed entry ({type(exc).__name__}: {exc})") from None
    known = load_params().specs
    for entry in spec.lofo:
        if entry.param not in known:
            raise QorError(f"{path}: [[lofo]] names unknown parameter {entry.param!r}")
    if any(f.margin <= 0 for f in families):
        raise QorError(f"{path}: a family margin must be positive")
    return spec


@contextlib.contextmanager
def override_params(overrides: Mapping[str, float]) -> Iterator[None]:
    """Within the block, every :class:`devkit.cost.instr_cost.CostModel` built without explicit params uses
    the bundled values with ``overrides`` applied (names of :class:`devkit.cost.params.Params`)."""
    import devkit.cost.instr_cost as instr_cost

    base = instr_cost.default_params
    if overrides:
        instr_cost.default_params = lambda target: base(target).replace(**overrides)
    try:
        yield
    finally:
        instr_cost.default_params = base


def tutorial_reports(overrides: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Anchor id -> :class:`devkit.cost.report.CostReport` of the tutorial step at :data:`TUTORIAL_SHAPE`
    on trn1."""
    import devkit
    from devkit import compat

    compat.install()
    import neuronxcc.nki.language as nl
    import neuronxcc.nki.typing as nt

    from devkit.kernels.tutorial import TUTORIAL_STEPS

    k, m, n = TUTORIAL_SHAPE["K"], TUTORIAL_SHAPE["M"], TUTORIAL_SHAPE["N"]
    specs = (nt.tensor[[k, m], nl.bfloat16], nt.tensor[[k, n], nl.bfloat16])
    with override_params(overrides or {}):
        return {aid: devkit.estimate(kernel, *specs, target="trn1") for aid, kernel in TUTORIAL_STEPS.items()}


def tutorial_latencies_us(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Anchor id -> modelled latency (us) of the tutorial steps at :data:`TUTORIAL_SHAPE` on trn1."""
    return {aid: report.latency_us for aid, report in tutorial_reports(overrides).items()}


def _tutorial_points(overrides: Mapping[str, float]) -> dict[str, tuple[float, float, str]]:
    measured = {a.id: a.measured_us for a in load_params().anchors}
    return {aid: (measured[aid], r.latency_us, r.bound_by) for aid, r in tutorial_reports(overrides).items()}


@contextlib.contextmanager
def samples_checkout(location: str | Path) -> Iterator[Path]:
    """The nki-samples checkout at ``location`` (a directory, or a ``.tar.gz`` extracted to a temporary one)."""
    path = Path(location)
    if path.is_dir():
        root = path
        if not (root / "test" / "unit").is_dir():
            inner = [p for p in root.iterdir() if (p / "test" / "unit").is_dir()]
            if len(inner) != 1:
                raise QorError(
                    f"{location}: no test/unit directory (expected an nki-samples 0898a77 checkout)"
                )
            root = inner[0]
        yield root
        return
    if not path.is_file() or not tarfile.is_tarfile(path):
        raise QorError(f"{location}: neither a directory nor a tar archive of nki-samples 0898a77")
    with tempfile.TemporaryDirectory(prefix="devkit-qor-") as tmp:
        with tarfile.open(path) as tf:
            tf.extractall(tmp, filter="data")
        with samples_checkout(tmp) as root:
            yield root


def _run_samples(root: Path, overrides: Mapping[str, float], select: str) -> list[dict[str, Any]]:
    """Run the selected nki-samples unit tests under the simulator; the plugin's records."""
    with tempfile.TemporaryDirectory(prefix="devkit-qor-run-") as tmp:
        shim = Path(tmp) / "scipy"
        shim.mkdir()
        (shim / "__init__.py").write_text("")
        # environment shim: the SD attention tests import scipy.special.softmax for their numerics checks
        (shim / "special.py").write_text("def softmax(*a, **k):\n    raise NotImplementedError\n")
        out = Path(tmp) / "qor.jsonl"
        kit_root = Path(__file__).resolve().parents[2]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(kit_root), str(root / "src"), tmp])
        env["DEVKIT_QOR_OUT"], env["DEVKIT_QOR_PARAMS"] = str(out), json.dumps(dict(overrides))
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        for var in ("DEVKIT_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION"):
            env.pop(var, None)
        cmd = [sys.executable, "-m", "devkit", "simulate", "-m", "pytest", "-q", "test/unit", "-k", select]
        cmd += ["-p", "devkit.workflow.qor_plugin", "-p", "no:cacheprovider"]
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
        if not out.exists():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise QorError(f"the nki-samples tests recorded no benchmark (exit {done.returncode}):\n{tail}")
        return [json.loads(line) for line in out.read_text().splitlines()]


def _sample_points(
    root: Path, spec: QorSpec, overrides: Mapping[str, float], select: str
) -> dict[str, tuple[float, float, str]]:
    by_file = {f.test_file: f for f in spec.families}
    points = {}
    for r in _run_samples(root, overrides, select):
        fam = by_file.get(r["test"].split("::")[0].split("/")[-1])
        if fam is None or r["threshold_us"] is None:
            continue
        pid = fam.name + r["test"][r["test"].index("[") :]
        points[pid] = (r["threshold_us"] / fam.margin, r["modelled_us"], r["bound_by"])
    return points


def collect(
    samples: str | Path, spec: QorSpec | None = None, progress: Callable[[str], None] | None = None
) -> list[Point]:
    """Every point of ``spec`` modelled with the bundled parameters and with its family left out."""
    spec = spec or load_spec()
    say = progress or (lambda text: None)
    family_of: dict[str, str] = {}
    with samples_checkout(samples) as root:
        say("matmul tutorial (4 kernels at 8192x4096x8192)")
        base = _tutorial_points({})
        family_of.update(dict.fromkeys(base, "mmt"))
        say(f"nki-samples 0898a77 test/unit ({len(spec.families)} files)")
        got = _sample_points(root, spec, {}, spec.select)
        family_of.update({pid: pid.split("[", 1)[0] for pid in got})
        base.update(got)
        lofo: dict[str, float] = {}
        for family in dict.fromkeys(entry.family for entry in spec.lofo):
            say(f"leave-one-family-out: {family}")
            overrides = spec.lofo_for(family)
            if family == "mmt":
                again = _tutorial_points(overrides)
            else:
                test = next(f.test_file for f in spec.families if f.name == family)
                again = _sample_points(root, spec, overrides, f"{spec.select} and {test.removesuffix('.py')}")
            lofo.update({pid: v[1] for pid, v in again.items() if family_of.get(pid) == family})
    expected = {f.name for f in spec.families} | {"mmt"}
    missing = expected - set(family_of.values())
    if missing:
        raise QorError(f"no points recorded for {', '.join(sorted(missing))} (is this nki-samples 0898a77?)")
    return [
        Point(pid, family_of[pid], measured, modelled, lofo.get(pid, modelled), bound)
        for pid, (measured, modelled, bound) in base.items()
    ]


def ranking_checks(points: list[Point], spec: QorSpec) -> list[tuple[str, bool]]:
    """(description, modelled order matches the measured one) per documented optimisation step."""
    by_id = {p.id: p for p in points}
    checks = []
    for r in spec.rankings:
        modelled = [by_id[pid].modelled_us for pid in r.slower_to_faster if pid in by_id]
        ok = len(modelled) == len(r.slower_to_faster) and modelled == sorted(modelled, reverse=True)
        checks.append((f"{r.name} (modelled; measured: {r.source})", ok))

    def config(pid: str) -> str:  # the point's parameters without its threshold
        return pid[pid.index("[") + 1 :].rsplit("-", 1)[0]

    for pair in spec.pairings:
        slower = {config(p.id): p for p in points if p.family == pair.slower}
        for fast in (p for p in points if p.family == pair.faster):
            slow = slower.get(config(fast.id))
            if slow is not None and fast.measured_us < slow.measured_us:
                ok = fast.modelled_us < slow.modelled_us
                checks.append(
                    (f"{pair.faster} faster than {pair.slower} [{config(fast.id)}] ({pair.source})", ok)
                )
    return checks


def _params_table(param_set: ParamSet) -> list[str]:
    lines = [
        "| parameter | value (default; per-target overrides) | unit | method | source |",
        "|---|---|---|---|---|",
    ]
    for name, spec in param_set.specs.items():
        overrides = "; ".join(
            f"{t} {ovs[name].value:g}" for t, ovs in param_set.overrides.items() if name in ovs
        )
        value = f"{spec.value:g}" + (f" ({overrides})" if overrides else "")
        fitted = f" from {', '.join(spec.fitted_from)}" if spec.fitted_from else ""
        lines.append(f"| `{name}` | {value} | {spec.unit} | {spec.method}{fitted} | {spec.source} |")
    return lines


def _target_table(target: Target) -> list[str]:
    lines = ["| number | value | unit | kind | source |", "|---|---|---|---|---|"]
    for key, entry in target.entries.items():
        if key.split(".", 1)[0] in COST_SECTIONS:
            lines.append(f"| `{key}` | {entry.value:g} | {entry.unit} | {entry.kind} | {entry.source} |")
    return lines


def render_report(
    points: list[Point], spec: QorSpec | None = None, param_set: ParamSet | None = None, target: str = "trn1"
) -> str:
    """The markdown report (deterministic: no dates, no paths)."""
    spec = spec or load_spec()
    param_set = param_set or load_params()
    within = spec.within
    n = len(points)
    ok = sum(abs(p.ratio - 1) <= within for p in points)
    ok_lofo = sum(abs(p.lofo_ratio - 1) <= within for p in points)
    geo = statistics.geometric_mean([p.ratio for p in points]) if points else float("nan")
    rows = [
        f"| {p.family} | `{p.id}` | {p.measured_us:,.1f} | {p.modelled_us:,.1f} | {p.ratio:.2f} | "
        f"{p.lofo_ratio:.2f} | {p.bound_by or '-'} |"
        for p in points
    ]
    families = sorted({p.family for p in points})
    per_family = []
    for fam in families:
        mine = [p for p in points if p.family == fam]
        good = sum(abs(p.ratio - 1) <= within for p in mine)
        gm = statistics.geometric_mean([p.ratio for p in mine])
        per_family.append(f"| {fam} | {len(mine)} | {good} | {gm:.2f} |")
    lofo_rows = [f"| {e.family} | `{e.param}` | {e.value:g} | {e.source} |" for e in spec.lofo]
    checks = ranking_checks(points, spec)
    text = [
        "# Cost model calibration report",
        "",
        "Generated by `devkit calibrate --report docs/calibration.md --samples <nki-samples-0898a77>` (the",
        "directory or the `.tar.gz` of the corpus). Do not edit by hand: `simulator_tests/test_calibration_report.py`",
        "checks it against the parameters and, with `-m slow`, against a fresh run.",
        "",
        "Measured = published latency: the AWS matmul tutorial (`mmt_*`, the anchors of",
        "`devkit/cost/params.toml`) and the nki-samples 0898a77 unit-test QoR thresholds with their baked-in",
        "margin divided out (upper bounds near the measurement; families and margins in",
        "`devkit/cost/qor_points.toml`). Ratio = modelled / measured. LOFO = leave-one-family-out: the point",
        "modelled with the parameters derived without its family. Bound by = the resource that bounds the",
        "modelled latency.",
        "",
        "## Parameters",
        "",
        "The only numbers of the model that are not hardware facts (`devkit/cost/params.toml`):",
        "",
        *_params_table(param_set),
        "",
        f"## Hardware numbers ({target})",
        "",
        f"The numbers the engine and DMA cost rules read (`devkit/targets/{target}.toml`; source keys are those of",
        "`reference/nki_api.md` section 0; per-instruction formulas in `devkit/cost/instr_cost.py`):",
        "",
        *_target_table(load_target(target)),
        "",
        "## Points",
        "",
        "| family | point | measured us | modelled us | ratio | LOFO ratio | bound by |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "## Per family",
        "",
        f"| family | points | within {within:.0%} | geometric mean ratio |",
        "|---|---|---|---|",
        *per_family,
        "",
        "## Leave-one-family-out values",
        "",
        "| family left out | parameter | value | source |",
        "|---|---|---|---|",
        *lofo_rows,
        "",
        "## Summary",
        "",
        f"- points within {within:.0%}: {ok} of {n} ({ok / n:.0%}); leave-one-family-out: {ok_lofo} of {n} "
        f"({ok_lofo / n:.0%})"
        if n
        else "- no points",
        f"- geometric mean of modelled / measured: {geo:.2f}",
        *(f"- {name}: {'yes' if good else 'NO'}" for name, good in checks),
    ]
    return "\n".join(text) + "\n"
