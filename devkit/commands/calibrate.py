"""``devkit calibrate``: refit the cost model's calibrated parameters to measured latencies.

Sources: ``--from results/`` (the hardware results store written by hw_tests), or one file: store
records or measurement records in the format of :mod:`devkit.cost.calibrate` (``kernel``, ``target``,
``measured_us`` and ``args``), ``nki.benchmark`` percentile records or a neuron-profile summary
(``total_time``; give the call with ``--kernel``/``--arg``/``--target``), see
:mod:`devkit.workflow.hw.imports`.  Each measured call is traced once (cost-only)
and rescheduled for every trial parameter set; the fit minimises the mean squared log error per target
(:func:`devkit.cost.calibrate.fit`).  Nothing is written without ``--write``, which stores the fitted
values as per-target overrides in the parameter file (default: the bundled ``params.toml``), with the
measurement ids they came from.

``--report FILE --samples DIR|TGZ`` writes the calibration report instead (``docs/calibration.md``): every
parameter with its source or fitted value, the target's hardware numbers with their sources, and the per-point
and leave-one-family-out errors on the published latencies of
:mod:`devkit.workflow.calibration_report` (the AWS matmul tutorial and the nki-samples 0898a77 QoR
thresholds, run unmodified).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from devkit.commands import add_call_arguments, stdout_console
from devkit.commands._errors import UsageError, bad_value
from devkit.commands._outputs import check_file
from devkit.workflow.hw import predict as hw_predict
from devkit.workflow.hw import store as hw_store

#: One line in ``devkit --help``.
SUMMARY = "refit the cost model's parameters to hardware measurements"

EXAMPLES = """examples:
  devkit calibrate --from results/                 # dry run: show the fit per target
  devkit calibrate --from results/ --write         # store the fitted values in params.toml
  devkit calibrate measurements.jsonl --params dma_fixed_latency_ns,dma_queue_busy_ns
  devkit calibrate bench.jsonl --percentile 99     # nki.benchmark percentile records
  devkit calibrate profile_summary.json --kernel devkit/kernels/tutorial.py:tiled_matmul \
      --arg 'bfloat16[8192,4096]' --arg 'bfloat16[8192,8192]' --target trn1
  devkit calibrate --report docs/calibration.md --samples nki-samples-0898a77.tar.gz
"""


def arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``devkit calibrate``."""
    p.add_argument(
        "measurements",
        nargs="?",
        metavar="MEASUREMENTS",
        help="a JSON-lines file (store records or measurement records) or a store directory",
    )
    p.add_argument("--from", dest="store", metavar="DIR", help="results store directory (e.g. results/)")
    p.add_argument("--target", default=None, help="fit only this target (default: every target measured)")
    p.add_argument(
        "--params", default=None, metavar="NAME,...", help="parameters to fit (default: all; at most 8)"
    )
    p.add_argument(
        "--params-file",
        default=None,
        metavar="PATH",
        help="parameter file to read and (with --write) update (default: the bundled params.toml)",
    )
    p.add_argument("--write", action="store_true", help="write the fitted values as per-target overrides")
    p.add_argument("--include-fake", action="store_true", help="also use records of the fake backend (tests)")
    p.add_argument("--max-evaluations", type=int, default=400, metavar="N", help="Nelder-Mead budget (400)")
    p.add_argument("--json", action="store_true", help="print the fits as JSON")
    p.add_argument(
        "--percentile",
        type=int,
        default=50,
        metavar="P",
        help="percentile of nki.benchmark records to fit (0,1,10,25,50,90,99,100; default 50)",
    )
    p.add_argument(
        "--kernel",
        default=None,
        metavar="FILE.py:KERNEL",
        help="the profiled call of a neuron-profile summary (a FILE.py:KERNEL or registry name)",
    )
    add_call_arguments(p, "arguments of the profiled call, in order (with --kernel)")
    p.add_argument(
        "--report",
        default=None,
        metavar="FILE.md",
        help="write the calibration report (published latencies vs the model) here; needs --samples",
    )
    p.add_argument(
        "--samples",
        default=None,
        metavar="DIR|TGZ",
        help="nki-samples 0898a77 checkout or its .tar.gz (the report's QoR points)",
    )


def run(args: argparse.Namespace) -> int:
    if args.report is not None or args.samples is not None:
        return run_report(args)
    from devkit.cost.calibrate import MeasurementError
    from devkit.cost.params import PARAMS_PATH, Params, ParamsError, load_params_file

    err = Console(stderr=True)
    out = stdout_console(130)

    def warn(text: str) -> None:
        err.print(f"[yellow]warning:[/] {escape(text)}", highlight=False, soft_wrap=True)

    try:
        if args.max_evaluations < 1:
            raise bad_value("--max-evaluations", str(args.max_evaluations), "a positive budget, e.g. 400")
        if bool(args.measurements) == bool(args.store):
            raise hw_predict.CalibrationInputError("give MEASUREMENTS or --from DIR (one of them)")
        names = (
            tuple(n.strip() for n in args.params.split(",") if n.strip()) if args.params else Params.names()
        )
        unknown = sorted(set(names) - set(Params.names()))
        if unknown or not 1 <= len(names) <= 8:
            raise hw_predict.CalibrationInputError(
                f"--params: fit 1 to 8 of {', '.join(Params.names())} (unknown: {unknown})"
            )
        profile_call = {
            "kernel": args.kernel,
            "target": args.target,
            "args": {f"arg{i}": a for i, a in enumerate(args.arg)},
        }
        ms = hw_predict.gather(
            args.store or args.measurements,
            args.include_fake,
            warn,
            percentile=args.percentile,
            profile_call=profile_call,
        )
        if not ms:
            hint = "" if args.include_fake else " (records of the fake backend are left out; --include-fake)"
            raise hw_predict.CalibrationInputError(
                f"no latency measurements in {args.store or args.measurements}{hint}"
            )
        targets = sorted({m.target for m in ms})
        if args.target:
            if args.target not in targets:
                raise hw_predict.CalibrationInputError(
                    f"no measurements for target {args.target!r} (have {', '.join(targets)})"
                )
            targets = [args.target]
        params_path = Path(args.params_file) if args.params_file else PARAMS_PATH
        if args.params_file and not params_path.is_file():
            raise bad_value("--params-file", args.params_file, "an existing parameter file (TOML)")
        before_set = load_params_file(params_path)
        if args.write:
            check_file(params_path, "--params-file", what="parameter file")
    except (hw_predict.CalibrationInputError, ParamsError, MeasurementError) as exc:
        raise UsageError(str(exc)) from None
    payload = []
    for target in targets:
        group = [m for m in ms if m.target == target]
        if len(group) < len(names):
            warn(
                f"{target}: {len(group)} measurement(s) for {len(names)} parameters: "
                "the fit is underdetermined"
            )
        try:
            entry = hw_predict.fit_target(
                group,
                target,
                names,
                before=before_set.for_target(target),
                params_path=params_path,
                write=args.write,
                max_evaluations=args.max_evaluations,
                status=err.status,
            )
        except (hw_store.StoreError, MeasurementError, ParamsError, KeyError) as exc:
            raise UsageError(f"{target}: {exc}") from None
        payload.append(entry)
        if not args.json:
            out.print(fit_tables(entry))
    if args.json:
        print(json.dumps(payload, indent=2))
    elif args.write:
        out.print(f"wrote the fitted values to {escape(str(params_path))}", highlight=False)
    else:
        out.print("dry run: pass --write to store the fitted values", highlight=False)
    return 0


def fit_tables(entry: dict[str, Any]) -> Any:
    from rich.console import Group

    from devkit.tables import table

    params = table(
        f"{entry['target']}: fitted parameters (log-error loss {entry['loss_before']:.4g} -> "
        f"{entry['loss_after']:.4g}, {entry['evaluations']} evaluations)",
        ("<parameter", "before", "after"),
        [(name, f"{v['before']:.4g}", f"{v['after']:.4g}") for name, v in entry["params"].items()],
    )
    meas = table(
        f"{entry['target']}: measured vs predicted (us)",
        ("<measurement", "measured", "before", "ratio", "after", "ratio "),
        [
            (m["id"], f"{m['measured_us']:,.1f}", f"{m['predicted_before_us']:,.1f}",
             f"{m['predicted_before_us'] / m['measured_us']:.2f}", f"{m['predicted_after_us']:,.1f}",
             f"{m['predicted_after_us'] / m['measured_us']:.2f}")
            for m in entry["measurements"]
        ],
    )  # fmt: skip
    return Group(params, meas)


def run_report(args: argparse.Namespace) -> int:
    """``--report``: model every published point, write the markdown report, print its summary."""
    from devkit.workflow import calibration_report as qor

    err = Console(stderr=True)
    if args.report is None:
        raise bad_value("--samples", args.samples, "used with --report FILE.md")
    if args.samples is None:
        raise UsageError("--report needs --samples DIR|TGZ (the nki-samples 0898a77 checkout or its .tar.gz)")
    if args.measurements or args.store or args.write:
        raise UsageError("--report does not fit parameters: drop MEASUREMENTS/--from/--write")
    samples = Path(args.samples)
    if not samples.exists():
        raise bad_value("--samples", args.samples, "an existing nki-samples 0898a77 directory or .tar.gz")
    report_path = Path(args.report)
    check_file(report_path, "--report", what="report file")
    try:
        spec = qor.load_spec()
        points = qor.collect(samples, spec, progress=lambda text: err.print(f"calibrate: {escape(text)}"))
    except qor.QorError as exc:
        raise UsageError(str(exc)) from None
    text = qor.render_report(points, spec)
    from devkit import atomic

    atomic.write_text(report_path, text)
    summary = text.split("## Summary", 1)[1].strip()
    stdout_console(130).print(escape(summary), highlight=False)
    print(f"wrote {report_path}")
    return 0
