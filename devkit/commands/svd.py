"""``devkit svd``: SVD compression of checkpoints (subcommand ``compress``).

The main CLI calls :func:`register` with its ``add_subparsers()`` object; the parser it adds stores the
handler as ``args.func`` (``func(args) -> int`` exit code: 0 ok, 2 bad input).  :func:`main` runs the
command stand-alone (``python -m devkit.commands.svd compress ...``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from devkit.commands import stdout_console
from devkit.commands._errors import UsageError, bad_value, missing_subcommand
from devkit.commands._outputs import check_dir, check_file
from devkit.commands._progress import Heartbeat, count_bar
from devkit.tables import table
from devkit.workflow.svd import compress
from devkit.workflow.svd.factor import SvdInputError

_EXAMPLES = """examples:
  devkit svd compress model.safetensors model-svd.safetensors --ratio 0.2
  devkit svd compress ckpt/ out-dir/ --ratio 0.1 --calib acts.npy --whiten --dtype bfloat16
"""


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``svd`` command (with subcommand ``compress``) to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "svd",
        help="SVD-compress the MLP projections of a safetensors checkpoint",
        description="SVD compression tools (NeuronMM-style block-aligned ranks).",
    )
    parser.set_defaults(func=lambda args: missing_subcommand(parser))
    sub = parser.add_subparsers(dest="svd_command", metavar="SUBCOMMAND")
    comp = sub.add_parser(
        "compress",
        help="factor gate/up/down_proj weights into U (in, r) and V (r, out)",
        description=(
            "Replace every <prefix>.mlp.{gate,up,down}_proj.weight by <prefix>.mlp.<proj>.svd_u [in, r] "
            "and .svd_v [r, out] (W = weight.T ≈ svd_u @ svd_v); copy all other tensors. "
            "The compression ratio is the fraction of parameters removed."
        ),
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    comp.add_argument("input", help="a .safetensors file, a model.safetensors.index.json, or a directory")
    comp.add_argument(
        "output", help="OUT.safetensors (one file) or a directory (one shard per input shard + index)"
    )
    comp.add_argument(
        "--ratio",
        type=float,
        required=True,
        help="compression ratio: fraction of parameters removed, 0 <= R < 1",
    )
    comp.add_argument(
        "--calib",
        metavar="ACTS",
        help="calibration activations: .npy (n, hidden) MLP inputs, or .npz keyed per layer/projection",
    )
    comp.add_argument(
        "--whiten", action="store_true", help="SVD-LLM truncation-aware whitening (needs --calib)"
    )
    comp.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16", "float16"],
        help="storage dtype of the factors (auto: the weight's own dtype)",
    )
    comp.add_argument(
        "--compute-dtype",
        default="float64",
        choices=["float64", "float32"],
        help="dtype of the SVD itself (Cholesky is always float64)",
    )
    comp.add_argument("--block", type=int, default=128, help="rank alignment (default 128)")
    comp.add_argument("--quiet", action="store_true", help="no progress bar and no table")
    comp.set_defaults(func=run_compress)
    return parser


def run_compress(args: argparse.Namespace) -> int:
    """Handler of ``devkit svd compress``; returns the exit code."""
    err = Console(stderr=True)
    out = stdout_console(120)
    try:
        if args.whiten and not args.calib:
            raise SvdInputError("--whiten needs --calib ACTS.npy (or .npz)")
        if not Path(args.input).exists():
            raise SvdInputError(
                f"checkpoint {args.input} does not exist (give a .safetensors file or directory)"
            )
        if args.calib and not Path(args.calib).is_file():
            raise bad_value("--calib", args.calib, "an existing .npy or .npz file")
        if str(args.output).endswith(".safetensors"):
            check_file(args.output, "OUTPUT", what="safetensors file")
        else:
            check_dir(args.output, "OUTPUT")
        state = {"text": "reading the checkpoint"}
        with (
            contextlib.nullcontext()
            if args.quiet
            else Heartbeat("devkit svd compress", status=lambda: state["text"], terminal=False),
            count_bar("[bold]SVD[/]", err, description=True, disable=args.quiet, transient=False) as bar,
        ):
            task = bar.add_task("", total=None)

            def progress(done: int, total: int, name: str) -> None:
                bar.update(task, completed=done, total=total, description=name)
                state["text"] = f"{done}/{total} tensors, at {name}"

            summary = compress.compress_checkpoint(
                args.input,
                args.output,
                compression=args.ratio,
                calibration=args.calib,
                whiten=args.whiten,
                dtype=args.dtype,
                compute_dtype=args.compute_dtype,
                block=args.block,
                progress=progress,
            )
    except OSError as exc:  # a checkpoint that cannot be read: the message names the file
        raise UsageError(str(exc)) from None
    if not args.quiet:
        out.print(summary_table(summary))
    totals = summary.to_dict()["totals"]
    out.print(
        f"MLP parameters {totals['mlp_params_before']:,} -> {totals['mlp_params_after']:,} "
        f"({totals['mlp_saving']:.1%} removed); model {totals['params_before']:,} -> "
        f"{totals['params_after']:,}. Summary: {compress.summary_path_for(args.output)}",
        highlight=False,
    )
    return 0


def summary_table(summary: compress.CompressionSummary) -> Table:
    """A rich table with one row per compressed projection."""
    rows = [
        (layer.name, f"{layer.in_features}x{layer.out_features}", str(layer.rank), f"{layer.saving:.1%}",
         f"{layer.weight_error:.4f}",
         "-" if layer.activation_error is None else f"{layer.activation_error:.4f}",
         "yes" if layer.whitened else "no")
        for layer in summary.layers
    ]  # fmt: skip
    return table(
        f"SVD compression at ratio {summary.compression:g} (block {summary.block})",
        ("<tensor", "in x out", "rank", "saving", "weight err", "act err", "^whitened"),
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``svd ...`` stand-alone, through the error path of devkit.cli.main; returns the exit code."""
    from devkit.cli import main as cli_main

    return cli_main(["svd", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
