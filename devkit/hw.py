"""The hardware stage: what a run needs, the SDK backend, the results store, measured vs predicted.

* :func:`check_requirements` says whether this machine can run ``hw_tests/``: a Neuron device
  (``/dev/neuron*``) and the real Neuron compiler (``neuronxcc.nki`` importable and *not* the devkit
  simulator).  :meth:`Requirements.reason` is the one sentence every skipped test shows.
* :func:`load_sdk` returns the real ``neuronxcc.nki`` module and refuses the simulator: hardware
  tests never fall back to simulation.
* :class:`FakeNki` mimics the SDK's ``baremetal`` / ``benchmark`` interfaces (including
  ``benchmark_result.nc_latency.get_latency_percentile(p)``) so the glue is tested without a device.
  Its records say ``"backend": "fake"`` and it refuses to write into the project's own store.
* :class:`ResultsStore` is the append-only store under ``results/``: one JSON object per line, one
  file per kernel (``results/<kernel>.jsonl``), each record appended with one ``O_APPEND`` write and
  fsynced, so an interrupted run loses nothing already recorded.
* :func:`compare` summarises the store per kernel, shape, dtype and target (measured P50 against the
  cost model's prediction).

Record schema 1 (units: microseconds)::

    {"schema": 1, "id": "<uuid>", "kind": "latency" | "numerics", "kernel": "xuv_fused",
     "shape": {"S": 1024, ...}, "dtype": "bfloat16", "blocks": {...}, "target": "trn1",
     "instance_type": "trn1.2xlarge", "sdk_version": "2.21.0", "git_commit": "abc123[+dirty]",
     "devkit_version": "0.1.0", "backend": "neuron-sdk" | "fake", "timestamp": "<ISO 8601 UTC>",
     "host": "...", "warmup": 5, "iters": 20,
     "measured_us": {"p0": ..., "p1": ..., "p10": ..., "p25": ..., "p50": ..., "p90": ..., "p99": ...,
                     "p100": ...},                          # latency records
     "predicted_us": 1234.5 | null, "slack": 0.25,          # latency records
     "passed": true, "max_error": ..., "tolerance": ...}    # numerics records (max|out-ref|/max|ref|)
"""

from __future__ import annotations

import datetime
import glob
import importlib
import json
import math
import os
import socket
import statistics
import subprocess
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit import atomic

SCHEMA = 1
#: Percentiles ``nki.benchmark`` reports (``get_latency_percentile`` accepts exactly these).
PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)
DEVICE_GLOB = "/dev/neuron*"
#: The results store of the checkout this devkit was installed from (editable installs).
RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"


def project_dir(name: str) -> Path:
    """``./name`` when the current directory has it (a project checkout), else the devkit checkout's."""
    local = Path.cwd() / name
    return local if local.is_dir() else RESULTS_DIR.parent / name


#: Instance-family prefixes -> cost-model target.
_FAMILIES = (("trn1", "trn1"), ("trn2", "trn2"), ("inf2", "inf2"))
_INSTALL_HINT = (
    "install it from AWS's Neuron repository: pip install --extra-index-url "
    'https://pip.repos.neuron.amazonaws.com "neuronx-cc==2.*"'
)


class HardwareUnavailable(RuntimeError):
    """A hardware run was asked for but this machine cannot do it (the message says what is missing)."""


class StoreError(ValueError):
    """A results-store file or record is malformed."""


# --- requirements --------------------------------------------------------------------------------


def find_devices(pattern: str = DEVICE_GLOB) -> tuple[str, ...]:
    """Neuron device nodes present on this machine."""
    return tuple(sorted(glob.glob(pattern)))


def _sdk_probe() -> tuple[bool, str]:
    """(real SDK importable, explanation).  Never imports the SDK: only looks for it on ``sys.path``."""
    from importlib.machinery import PathFinder

    from devkit import compat

    try:  # PathFinder looks at the installed packages, not at what sys.modules maps the name to
        root = PathFinder.find_spec("neuronxcc")
    except (ImportError, ValueError):
        root = None
    if root is None:
        return (
            False,
            f"the real Neuron compiler neuronx-cc is not installed (no module neuronxcc; {_INSTALL_HINT})",
        )
    locations = list(root.submodule_search_locations or [])
    if PathFinder.find_spec("nki", locations) is None:
        return False, (
            "the installed neuronxcc has no nki package (the public index only holds an empty "
            f"placeholder named neuronx-cc; {_INSTALL_HINT})"
        )
    if compat.is_installed():
        return False, (
            "neuronx-cc is installed but neuronxcc.nki is mapped onto the devkit simulator in this "
            "process (run hw_tests on their own, e.g. `pytest hw_tests`, never together with "
            "simulator_tests)"
        )
    return True, "neuronxcc.nki (real Neuron SDK)"


def sdk_version() -> str | None:
    """Version of the installed ``neuronx-cc`` distribution, if any."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("neuronx-cc")
    except PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Requirements:
    """What the hardware stage needs and what this machine has."""

    devices: tuple[str, ...]
    sdk_ok: bool
    sdk_detail: str

    @property
    def ok(self) -> bool:
        return bool(self.devices) and self.sdk_ok

    @property
    def missing(self) -> list[str]:
        """One phrase per missing piece (empty when everything is there)."""
        out = []
        if not self.devices:
            out.append(f"no Neuron device ({DEVICE_GLOB} not found: this is not a Trainium/Inferentia host)")
        if not self.sdk_ok:
            out.append(self.sdk_detail)
        return out

    def reason(self) -> str:
        """The single sentence shown for every skipped hardware test."""
        if self.ok:
            return "Neuron device and real neuronx-cc present"
        return "hardware tests need a Neuron device and the real neuronx-cc: " + "; ".join(self.missing)


def check_requirements() -> Requirements:
    """Look for a Neuron device and the real compiler (cheap; imports nothing from the SDK)."""
    ok, detail = _sdk_probe()
    return Requirements(devices=find_devices(), sdk_ok=ok, sdk_detail=detail)


def load_sdk() -> Any:
    """The real ``neuronxcc.nki`` module; :class:`HardwareUnavailable` if it is absent or simulated."""
    req = check_requirements()
    if not req.sdk_ok:
        raise HardwareUnavailable(req.sdk_detail)
    nki = importlib.import_module("neuronxcc.nki")
    if getattr(nki, "__devkit_simulator__", False):  # belt and braces: never time the simulator
        raise HardwareUnavailable(
            "neuronxcc.nki resolved to the devkit simulator; refusing to run hardware tests on it"
        )
    return nki


# --- host context ---------------------------------------------------------------------------------


def instance_type() -> str:
    """EC2 instance type (``DEVKIT_INSTANCE_TYPE`` overrides; else the DMI product name; else 'unknown')."""
    env = os.environ.get("DEVKIT_INSTANCE_TYPE", "").strip()
    if env:
        return env
    try:
        name = Path("/sys/devices/virtual/dmi/id/product_name").read_text(encoding="utf-8").strip()
    except OSError:
        name = ""
    return name or "unknown"


def target_for_instance(instance: str) -> str | None:
    """Cost-model target of an instance type (``trn1.32xlarge`` -> ``trn1``), None when unknown."""
    lowered = instance.lower()
    for prefix, target in _FAMILIES:
        if lowered.startswith(prefix):
            return target
    return None


def git_commit(repo: str | Path | None = None) -> str:
    """``HEAD`` of the repository holding ``repo`` (default: this checkout), ``+dirty`` when modified."""
    cwd = str(repo or Path(__file__).resolve().parent.parent)
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


@dataclass(frozen=True)
class HostContext:
    """Facts stamped on every record of one hardware run."""

    backend: str
    target: str | None
    instance_type: str
    sdk_version: str | None
    git_commit: str
    host: str
    devkit_version: str

    @classmethod
    def detect(cls, backend: str, target: str | None = None) -> HostContext:
        """Read the host; ``target`` overrides the one implied by the instance type."""
        from devkit import __version__

        inst = instance_type()
        return cls(
            backend=backend,
            target=target or target_for_instance(inst),
            instance_type=inst,
            sdk_version=sdk_version(),
            git_commit=git_commit(),
            host=socket.gethostname(),
            devkit_version=__version__,
        )


# --- records and the store -------------------------------------------------------------------------


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def latency_percentiles(benchmark_result: Any) -> dict[str, float]:
    """``{"p0": .., "p50": .., "p99": ..}`` in us from an SDK ``benchmark_result``."""
    lat = benchmark_result.nc_latency
    return {f"p{p}": float(lat.get_latency_percentile(p)) for p in PERCENTILES}


def make_record(
    ctx: HostContext,
    *,
    kind: str,
    kernel: str,
    shape: Mapping[str, int],
    dtype: str,
    blocks: Mapping[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A store record with the context stamped on (``fields`` add the kind-specific figures)."""
    if kind not in ("latency", "numerics"):
        raise StoreError(f"record kind must be 'latency' or 'numerics', got {kind!r}")
    return {
        "schema": SCHEMA,
        "id": uuid.uuid4().hex,
        "kind": kind,
        "kernel": kernel,
        "shape": dict(shape),
        "dtype": dtype,
        "blocks": dict(blocks or {}),
        "target": ctx.target,
        "instance_type": ctx.instance_type,
        "sdk_version": ctx.sdk_version,
        "git_commit": ctx.git_commit,
        "devkit_version": ctx.devkit_version,
        "backend": ctx.backend,
        "host": ctx.host,
        "timestamp": _now(),
        **fields,
    }


_REQUIRED = ("schema", "kind", "kernel", "shape", "dtype", "target", "backend")


def validate_record(record: Any, where: str = "<record>") -> dict[str, Any]:
    """Check a record's required keys and types; returns it."""
    if not isinstance(record, dict):
        raise StoreError(f"{where}: expected a JSON object")
    missing = [k for k in _REQUIRED if k not in record]
    if missing:
        raise StoreError(f"{where}: missing keys {missing}")
    if record["schema"] != SCHEMA:
        raise StoreError(f"{where}: schema {record['schema']!r} is not {SCHEMA}")
    if not isinstance(record["shape"], dict):
        raise StoreError(f"{where}: 'shape' must be an object of named dimensions")
    if record["kind"] == "latency":
        measured = record.get("measured_us")
        if not isinstance(measured, dict) or not isinstance(measured.get("p50"), (int, float)):
            raise StoreError(f"{where}: latency record without measured_us.p50")
    return record


@dataclass
class ReadResult:
    """Records read from a store plus the lines that could not be read (an interrupted write leaves one)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)


class ResultsStore:
    """Append-only JSON-lines store, one file per kernel (``<root>/<kernel>.jsonl``)."""

    def __init__(self, root: str | Path = RESULTS_DIR) -> None:
        self.root = Path(root)

    def path_for(self, kernel: str) -> Path:
        if not kernel or any(c in kernel for c in "/\\") or kernel.startswith("."):
            raise StoreError(f"bad kernel name for the store: {kernel!r}")
        return self.root / f"{kernel}.jsonl"

    def append(self, record: Mapping[str, Any]) -> Path:
        """Validate and append one record (one write, fsynced)."""
        rec = validate_record(dict(record))
        line = json.dumps(rec, separators=(",", ":"), allow_nan=False)  # keeps the shape order
        return atomic.append_line(self.path_for(rec["kernel"]), line)

    def files(self) -> list[Path]:
        return sorted(self.root.glob("*.jsonl")) if self.root.is_dir() else []

    def read(self, kernel: str | None = None) -> ReadResult:
        """Every readable record (file order); damaged lines are reported, not raised."""
        out = ReadResult()
        paths = [self.path_for(kernel)] if kernel else self.files()
        for path in paths:
            if not path.exists():
                continue
            out_records, damaged = read_jsonl(path)
            out.records.extend(out_records)
            out.damaged.extend(damaged)
        return out


def read_jsonl(path: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, damaged-line descriptions) of one store file."""
    records, damaged = [], []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        try:
            records.append(validate_record(json.loads(text), where))
        except (json.JSONDecodeError, StoreError) as exc:
            damaged.append(f"{where}: {exc}")
    return records, damaged


# --- the fake SDK ----------------------------------------------------------------------------------


class _FakeLatency:
    def __init__(self, samples_us: Sequence[float]) -> None:
        self._samples = sorted(samples_us)

    def get_latency_percentile(self, p: int) -> float:
        if p not in PERCENTILES:
            raise ValueError(f"latency percentile must be one of {', '.join(map(str, PERCENTILES))}; got {p}")
        xs = self._samples
        rank = (len(xs) - 1) * p / 100.0
        lo, hi = math.floor(rank), math.ceil(rank)
        return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


class _FakeBenchmarkResult:
    def __init__(self, samples_us: Sequence[float]) -> None:
        self.nc_latency = _FakeLatency(samples_us)


class _FakeKernel:
    def __init__(self, fake: FakeNki, kernel: Any, mode: str, options: dict[str, Any]) -> None:
        self._fake, self._kernel, self._mode, self.options = fake, kernel, mode, options
        self.benchmark_result: _FakeBenchmarkResult | None = None

    def __getitem__(self, grid: Any) -> _FakeKernel:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._fake.calls.append((self._mode, getattr(self._kernel, "__name__", "kernel"), self.options))
        if self._mode == "benchmark":
            iters = int(self.options.get("iters", 100))
            if iters < 1:
                raise ValueError("benchmark iters must be >= 1")
            base = float(self._fake.latency_us(self._kernel, args, kwargs))
            # deterministic spread around the base latency (iteration i of n)
            spread = self._fake.spread
            samples = [base * (1.0 + spread * (2.0 * i / max(iters - 1, 1) - 1.0)) for i in range(iters)]
            self.benchmark_result = _FakeBenchmarkResult(samples)
            return None  # the SDK's benchmark outputs are undefined
        return self._fake.outputs(self._kernel, args, kwargs)


class FakeNki:
    """A test double of ``neuronxcc.nki``'s ``baremetal`` and ``benchmark`` (no device, no compiler).

    ``outputs(kernel, args, kwargs)`` produces what ``baremetal(kernel)(*args, **kwargs)`` returns;
    ``latency_us(kernel, args, kwargs)`` is the centre of the latencies ``benchmark`` reports (spread
    evenly by ``±spread`` over the iterations, so P50 is the centre).  ``calls`` logs every launch.
    """

    __devkit_fake__ = True

    def __init__(
        self,
        outputs: Callable[[Any, tuple, dict], Any],
        latency_us: Callable[[Any, tuple, dict], float],
        *,
        spread: float = 0.02,
    ) -> None:
        self.outputs = outputs
        self.latency_us = latency_us
        self.spread = spread
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def baremetal(self, kernel: Any = None, **options: Any) -> Any:
        if kernel is None:
            return lambda k: _FakeKernel(self, k, "baremetal", options)
        return _FakeKernel(self, kernel, "baremetal", options)

    def benchmark(self, kernel: Any = None, **options: Any) -> Any:
        options.setdefault("warmup", 10)
        options.setdefault("iters", 100)
        if kernel is None:
            return lambda k: _FakeKernel(self, k, "benchmark", options)
        return _FakeKernel(self, kernel, "benchmark", options)


# --- measured vs predicted -------------------------------------------------------------------------


def shape_key(shape: Mapping[str, Any]) -> str:
    """``{"S": 1024, "H": 8192}`` -> ``"S=1024,H=8192"`` (insertion order: the registry's)."""
    return ",".join(f"{k}={v}" for k, v in shape.items())


@dataclass(frozen=True)
class Comparison:
    """Measured against predicted for one kernel, shape, dtype, target and backend (us)."""

    kernel: str
    shape: str
    dtype: str
    target: str
    backend: str
    runs: int
    measured_p50_us: float
    measured_p99_us: float
    predicted_us: float | None
    numerics_passed: int
    numerics_failed: int
    last_run: str

    @property
    def ratio(self) -> float | None:
        """measured P50 / predicted (None without a prediction)."""
        if not self.predicted_us:
            return None
        return self.measured_p50_us / self.predicted_us

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "shape": self.shape,
            "dtype": self.dtype,
            "target": self.target,
            "backend": self.backend,
            "runs": self.runs,
            "measured_p50_us": self.measured_p50_us,
            "measured_p99_us": self.measured_p99_us,
            "predicted_us": self.predicted_us,
            "ratio": self.ratio,
            "numerics_passed": self.numerics_passed,
            "numerics_failed": self.numerics_failed,
            "last_run": self.last_run,
        }


def compare(records: Iterable[Mapping[str, Any]]) -> list[Comparison]:
    """Group latency records and summarise them: median of the runs' P50 and P99, latest prediction.

    Numerics records of the same group are counted (passed / failed).  Rows are sorted by kernel,
    dtype, target, backend and shape (numerically by the shape's values).
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    numerics: dict[tuple, list[bool]] = {}
    for r in records:
        key = (r["kernel"], shape_key(r["shape"]), r["dtype"], r.get("target") or "?", r["backend"])
        if r["kind"] == "latency":
            groups.setdefault(key, []).append(r)
        elif r["kind"] == "numerics":
            numerics.setdefault(key, []).append(bool(r.get("passed")))
    rows = []
    for key, runs in groups.items():
        runs = sorted(runs, key=lambda r: r.get("timestamp", ""))
        predicted = next((r.get("predicted_us") for r in reversed(runs) if r.get("predicted_us")), None)
        flags = numerics.get(key, [])
        rows.append(
            Comparison(
                kernel=key[0],
                shape=key[1],
                dtype=key[2],
                target=key[3],
                backend=key[4],
                runs=len(runs),
                measured_p50_us=statistics.median(r["measured_us"]["p50"] for r in runs),
                measured_p99_us=statistics.median(
                    r["measured_us"].get("p99", r["measured_us"]["p50"]) for r in runs
                ),
                predicted_us=float(predicted) if predicted else None,
                numerics_passed=sum(flags),
                numerics_failed=len(flags) - sum(flags),
                last_run=runs[-1].get("timestamp", ""),
            )
        )

    def order(c: Comparison) -> tuple:
        dims = tuple(int(v) if v.isdigit() else 0 for v in (p.split("=")[-1] for p in c.shape.split(",")))
        return (c.kernel, c.dtype, c.target, c.backend, dims, c.shape)

    return sorted(rows, key=order)


def comparison_table(rows: Sequence[Comparison], slack: float | None = None) -> Any:
    """A rich table of :func:`compare` rows (``slack`` marks rows outside ±slack of the prediction)."""
    from rich.table import Table

    table = Table(title="Hardware: measured vs predicted latency (us)")
    for col, justify in (
        ("kernel", "left"),
        ("shape", "left"),
        ("dtype", "left"),
        ("target", "left"),
        ("backend", "left"),
        ("runs", "right"),
        ("P50", "right"),
        ("P99", "right"),
        ("predicted", "right"),
        ("P50/pred", "right"),
        ("numerics", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for c in rows:
        ratio = c.ratio
        if ratio is None:
            ratio_text = "-"
        else:
            ratio_text = f"{ratio:.2f}x"
            if slack is not None and abs(ratio - 1.0) > slack:
                ratio_text = f"[red]{ratio_text}[/red]"
        checks = (
            f"{c.numerics_passed}/{c.numerics_passed + c.numerics_failed}"
            if (c.numerics_passed + c.numerics_failed)
            else "-"
        )
        table.add_row(
            c.kernel,
            c.shape,
            c.dtype,
            c.target,
            c.backend,
            str(c.runs),
            f"{c.measured_p50_us:,.1f}",
            f"{c.measured_p99_us:,.1f}",
            "-" if c.predicted_us is None else f"{c.predicted_us:,.1f}",
            ratio_text,
            checks,
        )
    return table


# --- promoted cases (used by the generated tests in hw_tests/) -------------------------------------


@dataclass(frozen=True)
class Case:
    """One promoted hardware case: a registry kernel on a named shape and dtype with pinned blocks.

    ``predicted_us`` maps a cost-model target to the latency predicted at promotion time (us);
    ``slack`` is the allowed relative deviation of the measured P50 from it.
    """

    kernel: str
    shape: Mapping[str, int]
    dtype: str
    blocks: Mapping[str, int] = field(default_factory=dict)
    predicted_us: Mapping[str, float] = field(default_factory=dict)
    slack: float = 0.25

    def test_id(self) -> str:
        """``S1024-H8192-r4096-N16384-bfloat16`` (pytest ids)."""
        return "-".join([*(f"{k}{v}" for k, v in self.shape.items()), self.dtype])


@dataclass(frozen=True)
class Prepared:
    """The kernel object and its inputs for one case."""

    kernel: Any
    inputs: tuple[Any, ...]


def prepare(registry: Any, case: Case, seed: int = 0) -> Prepared:
    """Kernel (as bound by the SDK that imported ``kernels``) and the registry's seeded inputs."""
    spec = registry.get(case.kernel)
    return Prepared(spec.kernel(), tuple(spec.make_inputs(dict(case.shape), case.dtype, seed)))


@dataclass(frozen=True)
class NumericsCheck:
    """Output against the registry reference: normalised max error ``max|out-ref|/max|ref|``."""

    passed: bool
    max_error: float
    tolerance: float
    message: str


def check_numerics(registry: Any, case: Case, inputs: Sequence[Any], output: Any) -> NumericsCheck:
    """Compare a kernel output with the registry's reference within its tolerance for the dtype."""
    import numpy as np

    spec = registry.get(case.kernel)
    tol = float(spec.tolerance(case.dtype))
    where = f"{case.kernel} [{shape_key(case.shape)}] {case.dtype}"
    out = np.asarray(output)
    ref = spec.reference(*inputs)
    if out.shape != ref.shape:
        return NumericsCheck(
            False, math.inf, tol, f"{where}: output shape {out.shape}, reference {ref.shape}"
        )
    if out.dtype != np.asarray(inputs[0]).dtype:
        return NumericsCheck(
            False,
            math.inf,
            tol,
            f"{where}: output dtype {out.dtype}, expected the input dtype {inputs[0].dtype}",
        )
    err = float(registry.max_error(out, ref))
    passed = err <= tol
    verdict = "within" if passed else "EXCEEDS"
    return NumericsCheck(passed, err, tol, f"{where}: max error {err:.3g} {verdict} the tolerance {tol:.3g}")


def numerics_record(ctx: HostContext, case: Case, check: NumericsCheck) -> dict[str, Any]:
    """Store record of one numerics run."""
    err = check.max_error if math.isfinite(check.max_error) else None
    return make_record(
        ctx,
        kind="numerics",
        kernel=case.kernel,
        shape=case.shape,
        dtype=case.dtype,
        blocks=case.blocks,
        passed=check.passed,
        max_error=err,
        tolerance=check.tolerance,
    )


def latency_record(
    ctx: HostContext,
    case: Case,
    measured: Mapping[str, float],
    predicted_us: float | None,
    slack: float,
    warmup: int,
    iters: int,
) -> dict[str, Any]:
    """Store record of one benchmark run."""
    return make_record(
        ctx,
        kind="latency",
        kernel=case.kernel,
        shape=case.shape,
        dtype=case.dtype,
        blocks=case.blocks,
        measured_us=dict(measured),
        predicted_us=predicted_us,
        slack=slack,
        warmup=warmup,
        iters=iters,
    )


def fake_nki(registry: Any, mode: str = "ok", target: str = "trn1") -> FakeNki:
    """A :class:`FakeNki` wired to the registry: ``ok`` returns the reference outputs and the modelled
    latency; ``wrong`` corrupts the outputs; ``slow`` reports 3x the modelled latency."""
    if mode not in ("ok", "wrong", "slow"):
        raise ValueError(f"fake mode must be 'ok', 'wrong' or 'slow', got {mode!r}")

    def spec_of(kernel: Any) -> Any:
        return registry.get(getattr(kernel, "__name__", str(kernel)))

    def outputs(kernel: Any, args: tuple, kwargs: dict) -> Any:
        ref = spec_of(kernel).reference(*args)
        if mode == "wrong":
            return (ref.astype("float32") + 1.0).astype(ref.dtype)
        return ref

    def latency_us(kernel: Any, args: tuple, kwargs: dict) -> float:
        import devkit
        from devkit.nki.runner import TensorSpec

        specs = [TensorSpec(a.shape, a.dtype) for a in args]
        us = float(devkit.estimate(kernel, *specs, target=target, **kwargs).latency_us)
        return us * 3.0 if mode == "slow" else us

    return FakeNki(outputs, latency_us)


# --- calibration from the store --------------------------------------------------------------------


def store_measurements(records: Iterable[Mapping[str, Any]], include_fake: bool = False) -> list[Any]:
    """Latency records -> :class:`devkit.cost.calibrate.Measurement` (one per kernel, shape, dtype, blocks
    and target: the median of the runs' P50).  Fake-backend records are left out unless asked for."""
    from devkit.cost.calibrate import Measurement

    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in records:
        if r["kind"] != "latency" or (r["backend"] == "fake" and not include_fake) or not r.get("target"):
            continue
        blocks = dict(r.get("blocks") or {})
        key = (r["kernel"], shape_key(r["shape"]), r["dtype"], shape_key(blocks), r["target"])
        groups.setdefault(key, []).append(r)
    out = []
    for (kernel, skey, dtype, bkey, target), runs in sorted(groups.items()):
        first = runs[0]
        mid = f"{kernel}[{skey}|{dtype}" + (f"|{bkey}" if bkey else "") + f"]@{target}"
        out.append(
            Measurement(
                kernel=kernel,
                target=target,
                measured_us=float(statistics.median(r["measured_us"]["p50"] for r in runs)),
                shape=skey,
                dtype=dtype,
                id=mid,
                args={"shape": dict(first["shape"]), "blocks": dict(first.get("blocks") or {})},
                source=f"results store: median P50 of {len(runs)} run(s) on "
                f"{first.get('instance_type', '?')}",
            )
        )
    return out


def trace_of(
    kernel: str, args: Mapping[str, Any], dtype: str | None, target: str, registry: Any = None
) -> Any:
    """Record the instruction trace of one measured call (cost-only) so it can be rescheduled cheaply.

    ``args`` is either ``{"shape": {...}, "blocks": {...}}`` for a registry kernel, or
    ``{arg name: "DTYPE[D0,D1,...]", ...}`` (in argument order) with ``kernel`` a registry name or
    ``FILE.py:FUNCTION``.
    """
    from devkit.nki.runner import TensorSpec, run_kernel
    from devkit.sim.options import SimOptions
    from devkit.trace import Trace

    blocks: dict[str, Any] = {}
    if "shape" in args:
        if registry is None:
            from kernels import registry
        spec = registry.get(kernel)
        obj = spec.kernel()
        specs = list(spec.arg_specs(dict(args["shape"]), dtype or "bfloat16"))
        blocks = dict(args.get("blocks") or {})
    else:
        from devkit.commands.cost import parse_arg_spec

        if ":" in kernel:
            from devkit.commands.cost import load_kernel

            obj = load_kernel(kernel)
        else:
            if registry is None:
                from kernels import registry
            obj = registry.get(kernel).kernel()
        specs = []
        for value in args.values():
            dt, dims = parse_arg_spec(str(value))
            specs.append(TensorSpec(dims, dt))
    func = getattr(obj, "func", obj)
    grid = getattr(obj, "grid", None)
    trace = Trace()
    run_kernel(
        func, tuple(specs), blocks, grid=grid, target=target, options=SimOptions(numerics=False), sink=trace
    )
    return trace


def trace_predictor(measurements: Sequence[Any], registry: Any = None) -> Callable[[Any], dict[str, float]]:
    """``predict(params) -> {measurement id: us}`` that reschedules traces recorded once per measurement."""
    from devkit.cost.scheduler import schedule

    traces = {}
    for m in measurements:
        if m.metric != "latency_us":
            raise StoreError(
                f"{m.id}: only latency_us measurements can be predicted from kernel traces (got {m.metric})"
            )
        if not m.args:
            raise StoreError(
                f"{m.id}: no 'args' to rebuild the call (need shape/blocks or DTYPE[dims] per argument)"
            )
        traces[m.id] = (m.target, trace_of(m.kernel, m.args, m.dtype, m.target, registry))

    def predict(params: Any) -> dict[str, float]:
        return {
            mid: schedule(tr.instrs, target, tr.stats, params).latency_us
            for mid, (target, tr) in traces.items()
        }

    return predict
