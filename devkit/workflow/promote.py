"""Promotion: turn a kernel that passed simulation into a hardware test (a case file and a tiny module).

:func:`build_cases` pins the blocks of each (shape, dtype) to the kernel's current defaults and asks
the trace-based cost model for the latency on each requested target; :func:`case_file` adds the
promotion's provenance; :func:`write_tests` writes the data as ``hw_tests/cases/<kernel>.json``
(:mod:`devkit.workflow.hw.cases`) and the module ``hw_tests/test_<kernel>.py`` that loads it
(:func:`render_module`, from ``templates/hw_test.py.j2``), each atomically; :func:`promote` does it all.
The generated module is plain pytest: it imports only :mod:`devkit.hw` at collection time, so on a machine
without the hardware it is collected and skipped without ever binding ``neuronxcc.nki`` to anything.
"""

from __future__ import annotations

import datetime
import json
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit import atomic
from devkit.workflow.hw import cases as hw_cases
from devkit.workflow.hw import harness as hw_harness
from devkit.workflow.hw import host as hw_host
from devkit.workflow.hw import store as hw_store

DEFAULT_SLACK = 0.25
DEFAULT_WARMUP = 5
DEFAULT_ITERS = 20

#: Shapes promoted by default on top of the registry's validation shape: the paper's microbenchmark
#: (S = 1K and 4K), the AWS tutorial's matmul (whose published latencies anchor the cost model) and
#: one Llama-3.2-1B MLP prefill.
_PAPER = ({"S": 1024, "H": 8192, "r": 4096, "N": 16384}, {"S": 4096, "H": 8192, "r": 4096, "N": 16384})
EXTRA_SHAPES: dict[str, tuple[dict[str, int], ...]] = {
    "xuv_fused": _PAPER,
    "xuv_fused_t": _PAPER,
    "xuv_sequential": _PAPER,
    "xtuv_fused": _PAPER,
    "matmul_optimized": ({"K": 8192, "M": 4096, "N": 8192}, {"K": 8192, "M": 1024, "N": 16384}),
    "matmul_blocked": ({"K": 8192, "M": 4096, "N": 8192},),
    "matmul_hoisted": ({"K": 8192, "M": 4096, "N": 8192},),
    "matmul_tiled": ({"K": 8192, "M": 4096, "N": 8192},),
    "svd_mlp": ({"S": 1024, "H": 2048, "I": 8192, "r": 1280},),
    "dense_mlp": ({"S": 1024, "H": 2048, "I": 8192},),
}


class PromoteError(ValueError):
    """Bad promotion input (unknown kernel, shape, dtype or target; infeasible blocks)."""


@dataclass(frozen=True)
class Promoted:
    """What :func:`promote` wrote."""

    path: Path
    cases: list[hw_harness.Case]
    failures: list[str]
    warnings: list[str] = field(default_factory=list)
    cases_path: Path | None = None


def default_shapes(spec: Any) -> list[dict[str, int]]:
    """The validation shape plus the kernel's :data:`EXTRA_SHAPES`."""
    shapes = [dict(spec.default_shape), *(dict(s) for s in EXTRA_SHAPES.get(spec.name, ()))]
    out: list[dict[str, int]] = []
    for s in shapes:
        if s not in out:
            out.append(s)
    return out


def build_cases(
    kernel: str,
    shapes: Sequence[Mapping[str, int]],
    dtypes: Sequence[str],
    targets: Sequence[str],
    *,
    slack: float = DEFAULT_SLACK,
    jobs: int = 1,
    registry: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[hw_harness.Case], list[str]]:
    """Cases with pinned blocks and predictions; also the predictions that failed (as messages)."""
    from devkit.workflow.tune import run_trace_jobs

    spec = _spec(kernel, registry)
    kernel = _ref(kernel, spec, registry)
    if not 0 < slack < 10:
        raise PromoteError(f"slack must be a positive fraction, got {slack}")
    for d in dtypes:
        if d not in spec.dtypes:
            raise PromoteError(f"{kernel} supports dtypes {', '.join(spec.dtypes)}, not {d!r}")
    from devkit.targets import TARGETS

    for t in targets:
        if t not in TARGETS:
            raise PromoteError(f"unknown target {t!r}; choose from {', '.join(TARGETS)}")
    pending: list[tuple[dict[str, int], str, dict[str, int]]] = []
    for shape in shapes:
        shp = spec._shape(shape)
        for dtype in dtypes:
            blocks = spec.default_blocks(shp, dtype, targets[0])
            for t in targets:
                feas = spec.feasible(shp, blocks, dtype, t)
                if not feas.ok:
                    raise PromoteError(
                        f"{kernel} [{hw_store.shape_key(shp)}] {dtype}: blocks {blocks} do not fit "
                        f"{t}: {feas.reason}"
                    )
            pending.append((shp, dtype, blocks))
    from devkit.workflow import catalog

    job_ref = kernel if registry is not None else catalog.ref_of(spec)
    jobs_args = [
        ((i, t), job_ref, shp, dtype, t, blocks)
        for i, (shp, dtype, blocks) in enumerate(pending)
        for t in targets
    ]
    traced = run_trace_jobs(jobs_args, jobs, progress)
    cases, failures = [], []
    for i, (shp, dtype, blocks) in enumerate(pending):
        predicted = {}
        for t in targets:
            us, err = traced[(i, t)]
            if us is None:
                failures.append(f"{kernel} [{hw_store.shape_key(shp)}] {dtype} on {t}: {err}")
            else:
                predicted[t] = round(us, 3)
        cases.append(
            hw_harness.Case(
                kernel=kernel, shape=shp, dtype=dtype, blocks=blocks, predicted_us=predicted, slack=slack
            )
        )
    return cases, failures


def _environment() -> Any:
    import jinja2

    from devkit.workflow.report import TEMPLATE_DIR

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_module(name: str, generation: str) -> str:
    """The source of ``hw_tests/test_<name>.py``: a docstring and one call of
    :func:`devkit.hw.promoted_tests_from` on ``cases/<name>.json`` (``generation``: the kernel's NKI API).
    It holds no data, so re-promoting leaves it unchanged."""
    relative = f"{hw_cases.CASES_DIR}/{name}.json"
    title = (
        f"Hardware tests of ``{name}``, an NKI {hw_host.generation_label(generation)} kernel, on the cases "
        f"in ``{relative}``."
    )
    return (
        _environment()
        .get_template("hw_test.py.j2")
        .render(
            title_lines=textwrap.wrap(title, 100, break_on_hyphens=False, break_long_words=False),
            case_file_literal=json.dumps(relative),
        )
    )


def case_file(
    kernel: str,
    cases: Sequence[hw_harness.Case],
    *,
    description: str,
    command: str,
    warmup: int = DEFAULT_WARMUP,
    iters: int = DEFAULT_ITERS,
    seed: int = 0,
    generation: str = "beta1",
    git_commit: str | None = None,
) -> hw_cases.CaseFile:
    """The case file of ``kernel`` with this promotion's provenance (command, devkit version, git commit,
    UTC date); ``git_commit`` default: this checkout's now (pass the one read before a batch of promotions
    wrote anything, or the files written first make the later ones ``+dirty``)."""
    from devkit import __version__

    if warmup < 0 or iters < 1:
        raise PromoteError("warmup must be >= 0 and iters >= 1")
    provenance = {
        "command": command,
        "devkit_version": __version__,
        "git_commit": git_commit or hw_host.git_commit(),
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    return hw_cases.CaseFile(kernel, generation, description, tuple(cases), warmup, iters, seed, provenance)


def write_tests(directory: str | Path, name: str, data: hw_cases.CaseFile) -> tuple[Path, Path]:
    """Write ``directory/cases/<name>.json`` and ``directory/test_<name>.py`` (each atomically, the data
    first); returns both paths (module, case file)."""
    directory = Path(directory)
    text = hw_cases.dumps(data)
    try:  # what the tests will read must load
        hw_cases.parse(json.loads(text), str(hw_cases.case_path(directory, name)))
    except hw_cases.CaseFileError as exc:
        raise PromoteError(str(exc)) from None
    cases_path = atomic.write_text(hw_cases.case_path(directory, name), text)
    module = atomic.write_text(directory / f"test_{name}.py", render_module(name, data.generation))
    return module, cases_path


def promote(
    kernel: str,
    shapes: Sequence[Mapping[str, int]] | None = None,
    dtypes: Sequence[str] = ("bfloat16",),
    targets: Sequence[str] = ("trn1",),
    *,
    out_dir: str | Path | None = None,
    slack: float = DEFAULT_SLACK,
    warmup: int = DEFAULT_WARMUP,
    iters: int = DEFAULT_ITERS,
    jobs: int = 1,
    command: str | None = None,
    registry: Any = None,
    progress: Callable[[int, int], None] | None = None,
    git_commit: str | None = None,
) -> Promoted:
    """Build the cases and write ``out_dir/cases/<kernel>.json`` and ``out_dir/test_<kernel>.py``."""
    spec = _spec(kernel, registry)
    kernel = _ref(kernel, spec, registry)
    shapes = list(shapes) if shapes else default_shapes(spec)
    cases, failures = build_cases(
        kernel, shapes, dtypes, targets, slack=slack, jobs=jobs, registry=registry, progress=progress
    )
    data = case_file(
        kernel,
        cases,
        description=spec.description,
        command=command or f"devkit promote {kernel}",
        warmup=warmup,
        iters=iters,
        generation=getattr(spec, "generation", "beta1"),
        git_commit=git_commit,
    )
    target_dir = Path(out_dir) if out_dir is not None else default_out_dir()
    ensure_conftest(target_dir)
    stale = stale_conftest(target_dir)
    path, cases_path = write_tests(target_dir, spec.name, data)
    return Promoted(path, cases, failures, [stale] if stale else [], cases_path)


#: ``--generation`` choices: the host SDK's generations (every generation without an SDK here), both, or one.
GENERATION_CHOICES = ("host", "all", "beta1", "beta2")


def host_generations(sdk: hw_host.Sdk | None = None) -> tuple[tuple[str, ...], str]:
    """(generations the host's SDK compiles, why): all of them when no real SDK is installed here (each
    test is then skipped, with its reason, on hosts that cannot run it)."""
    sdk = hw_host.probe_sdk() if sdk is None else sdk  # installed packages, whatever this process mapped
    if not sdk.generations:
        return tuple(hw_host.GENERATION_MODULES), "no Neuron SDK here: tests of every generation"
    return sdk.generations, hw_host.sdk_summary(sdk)


def select_generations(
    specs: Sequence[Any], choice: str = "host", sdk: hw_host.Sdk | None = None
) -> tuple[list[Any], list[str]]:
    """The specs to promote under ``--generation choice`` and a note per spec left out (why).

    ``host``: the generations the host's SDK compiles (:func:`host_generations`); ``all``: every spec;
    ``beta1`` / ``beta2``: that generation only.
    """
    if choice not in GENERATION_CHOICES:
        raise PromoteError(f"--generation {choice!r}: choose one of {', '.join(GENERATION_CHOICES)}")
    if choice == "all":
        return list(specs), []
    if choice == "host":
        wanted, why = host_generations(sdk)
    else:
        wanted, why = (choice,), f"--generation {choice}"
    kept = [s for s in specs if getattr(s, "generation", "beta1") in wanted]
    notes = [
        f"{s.name} ({hw_host.generation_label(getattr(s, 'generation', 'beta1'))}) left out: {why}"
        for s in specs
        if s not in kept
    ]
    return kept, notes


def family_of(spec: Any, candidates: Sequence[Any]) -> list[Any]:
    """``spec`` and the other generations' versions of it (same ``family``) among ``candidates``."""
    family = getattr(spec, "family", "") or spec.name
    out, seen = [spec], {id(spec)}
    for c in candidates:
        if id(c) not in seen and (getattr(c, "family", "") or c.name) == family:
            out.append(c)
            seen.add(id(c))
    return out


def default_out_dir() -> Path:
    """The project's hardware-test directory (``[tool.devkit] hw_tests``, see :mod:`devkit.project`)."""
    from devkit import project

    return project.state_path("hw_tests")


#: The conftest.py every promoted test directory needs (skip with one reason, results store, fixtures).
CONFTEST_TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "hw_conftest.py"


def ensure_conftest(directory: Path) -> Path | None:
    """Write ``directory/conftest.py`` from the packaged template unless one exists (returns it if written)."""
    path = Path(directory) / "conftest.py"
    if path.exists():
        return None
    return atomic.write_text(path, CONFTEST_TEMPLATE.read_text(encoding="utf-8"))


#: Fixtures the generated tests use that a conftest.py from before generation-marked tests lacks.
_CONFTEST_NEEDS = ("def device(", "def latency_options(", "nki_generation")
#: A conftest that installs the kit's current hooks and fixtures (the template's) says this.
_CONFTEST_CURRENT = "conftest_hooks("


def stale_conftest(directory: Path) -> str | None:
    """Why ``directory/conftest.py`` cannot serve the tests :func:`render` writes (None when it can): one
    kept from an earlier devkit lacks the ``device`` / ``latency_options`` fixtures and the generation skip
    (one that installs :func:`devkit.hw.conftest_hooks`, or that defines them itself, can)."""
    path = Path(directory) / "conftest.py"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    missing = [n.removeprefix("def ").rstrip("(") for n in _CONFTEST_NEEDS if n not in text]
    if not missing or _CONFTEST_CURRENT in text:
        return None
    return (
        f"{path} predates the generated tests (no {', '.join(missing)}): the tests will error; delete it and "
        f"promote again to get the current one, or merge {CONFTEST_TEMPLATE} into it"
    )


def _spec(kernel: str, registry: Any) -> Any:
    from devkit.workflow import catalog

    try:
        return registry.get(kernel) if registry is not None else catalog.get(kernel)
    except (KeyError, catalog.KernelRefError) as exc:
        raise PromoteError(str(exc.args[0])) from None


def _ref(kernel: str, spec: Any, registry: Any) -> str:
    """How the generated test names the kernel: a declared name, or FILE.py:KERNEL relative to the project
    root (the conftest resolves it from there)."""
    from devkit.workflow import catalog

    if registry is not None:
        return kernel
    ref = catalog.ref_of(spec)
    if catalog.is_file_ref(ref):
        path, name = ref.rsplit(":", 1)
        return f"{catalog.relative(path)}:{name}"
    return ref
