"""``devkit e2e``: end-to-end latency estimate, dense vs SVD-compressed MLPs.

The main CLI calls :func:`register` with its ``add_subparsers()`` object; the parser it adds stores the
handler as ``args.func`` (``func(args) -> int`` exit code: 0 ok, 2 bad input).  :func:`main` runs the
command stand-alone (``python -m devkit.commands.e2e --model Llama-3.2-1B``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from devkit.commands import add_command, add_executor_arguments, add_jobs_argument, stdout_console
from devkit.commands._errors import UsageError, bad_value
from devkit.commands._progress import Heartbeat
from devkit.tables import table
from devkit.workflow import e2e, llm

#: Compression ratios of the ``--all`` table (the SVF README's per-model table uses these two).
ALL_RATIOS = (0.1, 0.2)
#: Sequences x positions above which the estimate is announced as large (its kernel traces grow with it).
LARGE_TOKENS = 16384
#: Compression ratio when ``--model`` is given without ``--compression``.
DEFAULT_RATIO = 0.2

_EXAMPLES = f"""examples:
  devkit e2e --model Llama-3.2-1B --compression 0.2
  devkit e2e --model Qwen3-4B --compression 0.1 --context 128 --generate 128 --json
  devkit e2e --all
  devkit e2e --model Llama-3.2-1B --baseline    # also: the dense MLP as the paper's stack measured it

models: {", ".join(llm.MODELS)}
defaults follow the paper's runs: batch {e2e.DEFAULT_BATCH}, {e2e.DEFAULT_CONTEXT} prompt tokens, \
{e2e.DEFAULT_GENERATE} new tokens (64 in total), bf16, trn1.
"""


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``e2e`` command to an argparse subparsers object."""
    parser = add_command(
        subparsers,
        "e2e",
        "estimate end-to-end LLM latency, dense vs SVD-compressed MLPs",
        "Estimate prefill + decode latency of one generation with dense MLPs and with SVD-compressed "
        "MLPs (NeuronMM ranks) on one NeuronCore. The compression ratio is the fraction of MLP "
        "parameters removed.",
        _EXAMPLES,
        func=run,
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--model", help="model name (case-insensitive; HF repo ids accepted)")
    which.add_argument(
        "--all", action="store_true", help=f"table over all six models at compression {ALL_RATIOS}"
    )
    parser.add_argument(
        "--compression",
        type=float,
        default=None,
        help="fraction of MLP parameters removed, 0 <= R < 1 (default 0.2; --all: 0.1 and 0.2)",
    )
    parser.add_argument("--batch", type=int, default=e2e.DEFAULT_BATCH, help="sequences (default 1)")
    parser.add_argument(
        "--context", type=int, default=e2e.DEFAULT_CONTEXT, help="prompt tokens per sequence (default 32)"
    )
    parser.add_argument(
        "--generate", type=int, default=e2e.DEFAULT_GENERATE, help="new tokens per sequence (default 32)"
    )
    parser.add_argument("--target", default="trn1", choices=sorted(e2e.TARGETS), help="default trn1")
    parser.add_argument("--dtype", default="bfloat16", help="weight/activation dtype (default bfloat16)")
    parser.add_argument(
        "--provider",
        default=e2e.DEFAULT_PROVIDER,
        help=f"MLP cost provider ({', '.join(e2e.PROVIDERS)}; default {e2e.DEFAULT_PROVIDER}: the project's "
        "NKI kernels through the cost model)",
    )
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="also show the dense run as the measured NeuronMM stack runs its dense MLP (an efficiency "
        "calibrated from the NeuronMM README's Llama-3.2-1B trn1 numbers; see docs/e2e.md)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write .devkit-cache/")
    add_jobs_argument(parser, " for the (model, compression) estimates", in_process=True)
    add_executor_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Handler of ``devkit e2e``; returns the exit code."""
    if not args.model and not args.all:
        raise UsageError(f"pass --model NAME or --all (models: {', '.join(llm.MODELS)})")
    if args.compression is not None:
        ratios: tuple[float, ...] = (args.compression,)
    else:
        ratios = ALL_RATIOS if args.all else (DEFAULT_RATIO,)
    models = list(llm.MODELS) if args.all else [args.model]
    try:
        for m in models:
            config = llm.get_config(m)
            if args.context + args.generate > config.max_context:
                raise bad_value(
                    "--context",
                    str(args.context),
                    f"at most {config.max_context - args.generate:,} prompt tokens: {config.name} holds "
                    f"{config.max_context:,} positions and --generate asks for {args.generate:,} more",
                )
        e2e.get_provider(args.provider)  # an unknown provider is named before any work
        tokens = args.batch * (args.context + args.generate)
        big = f"{tokens:,} tokens per model" if tokens > LARGE_TOKENS else None
        items = [
            {"model": m, "ratio": r, "batch": args.batch, "context": args.context, "generate": args.generate,
             "target": args.target, "dtype": args.dtype, "provider": args.provider, "cache": not args.no_cache,
             "baseline": args.baseline}
            for m in models
            for r in ratios
        ]  # fmt: skip
        results = _estimate_all(args, items, big)
    except KeyError as exc:  # unknown model: the message lists the valid ones
        raise UsageError(str(exc.args[0])) from None
    except ValueError as exc:  # a bad --dtype, --provider, --target ...: the message names it
        raise UsageError(str(exc)) from None
    if args.json:
        payload: Any = [r.to_dict() for r in results] if args.all else results[0].to_dict()
        print(json.dumps(payload, indent=2))
        return 0
    out = stdout_console(120)
    if args.all:
        out.print(results_table(results))
    else:
        out.print(detail_table(results[0]))
    return 0


def _estimate_all(
    args: argparse.Namespace, items: list[dict[str, Any]], big: str | None
) -> list[e2e.E2EResult]:
    """Every (model, compression) estimate: in this process by default, else on the executor named by
    ``--jobs`` / ``--executor`` (each cell one job; the same results either way)."""
    from devkit.commands._jobs import executor_from_args, job_progress
    from devkit.workflow import executor
    from devkit.workflow.executor.local import LocalExecutor

    if args.jobs is None and args.executor == "local":
        args.jobs = 1
    ex = executor_from_args(args)
    try:
        if isinstance(ex, LocalExecutor) and ex.jobs == 1:
            with Heartbeat("devkit e2e", announce=big):  # in this process: the heartbeat samples the work
                return executor.run_jobs(e2e.estimate_job, items, jobs=ex)
        with job_progress("devkit e2e", len(items), Console(stderr=True)) as tick:
            return executor.run_jobs(e2e.estimate_job, items, jobs=ex, on_done=tick)
    finally:
        ex.close()


def results_table(results: Sequence[e2e.E2EResult]) -> Table:
    """One row per (model, compression)."""
    first = results[0]
    with_baseline = first.baseline is not None
    out = table(
        f"End-to-end estimate on {first.target} ({first.provider}): batch {first.batch}, "
        f"{first.context} prompt + {first.generate} new tokens, {first.dtype}",
        ("<model", "ratio", "rank", "dense ms", "SVD ms", "speedup", "MLP share", "ms/token d→s")
        + (("stack ms d→s", "stack speedup") if with_baseline else ()),
    )
    for r in results:
        extra = (
            [f"{r.baseline['dense_ms']:.2f}→{r.baseline['svd_ms']:.2f}", f"{r.baseline['speedup']:.3f}x"]
            if r.baseline
            else []
        )
        out.add_row(
            r.model,
            f"{r.compression:g}",
            str(r.ranks.gate),
            f"{r.dense_ms:.2f}",
            f"{r.svd_ms:.2f}",
            f"{r.speedup:.3f}x",
            f"{r.mlp_share:.1%}",
            f"{r.decode_dense_ms_per_token:.2f}→{r.decode_svd_ms_per_token:.2f}",
            *extra,
        )
    if with_baseline:
        eff = first.baseline["efficiency"]
        out.caption = (
            "stack: as the NeuronMM stack ran (README, Llama-3.2-1B trn1): dense MLP at "
            f"{eff['prefill_dense_mlp']:.0%}/{eff['decode_dense_mlp']:.0%} and the rest at "
            f"{eff['prefill_rest']:.0%}/{eff['decode_rest']:.0%} (prefill/decode) of this estimate (docs/e2e.md)"
        )
    return out


def detail_table(r: e2e.E2EResult) -> Table:
    """Prefill/decode/total rows for one estimate."""
    out = table(
        f"{r.model} at compression {r.compression:g} (rank {r.ranks.gate}/{r.ranks.up}/{r.ranks.down}) "
        f"on {r.target} ({r.provider}): batch {r.batch}, {r.context} prompt + {r.generate} new tokens",
        ("<phase", "dense ms", "SVD ms", "speedup"),
    )
    rows = (
        ("prefill", r.prefill_dense_ms, r.prefill_svd_ms),
        (f"decode ({r.decode_steps} steps)", r.decode_dense_ms, r.decode_svd_ms),
        ("decode per token", r.decode_dense_ms_per_token, r.decode_svd_ms_per_token),
        ("MLP (all)", r.mlp_dense_ms, r.mlp_svd_ms),
        ("total", r.dense_ms, r.svd_ms),
    )
    for name, dense, svd in rows:
        speedup = f"{dense / svd:.3f}x" if svd > 0 else "-"
        out.add_row(name, f"{dense:.3f}", f"{svd:.3f}", speedup)
    out.caption = f"MLP share of dense time: {r.mlp_share:.1%}"
    if r.baseline is not None:
        b, eff = r.baseline, r.baseline["efficiency"]
        for name, dense, svd in (
            ("stack: prefill", b["prefill"]["dense_ms"], b["prefill"]["svd_ms"]),
            ("stack: decode per token", b["decode"]["dense_ms_per_token"], b["decode"]["svd_ms_per_token"]),
            ("stack: total", b["dense_ms"], b["svd_ms"]),
        ):
            out.add_row(name, f"{dense:.3f}", f"{svd:.3f}", f"{dense / svd:.3f}x")
        out.caption += (
            "; stack: as the NeuronMM stack ran (README, Llama-3.2-1B trn1): dense MLP at "
            f"{eff['prefill_dense_mlp']:.0%}/{eff['decode_dense_mlp']:.0%} and the rest at "
            f"{eff['prefill_rest']:.0%}/{eff['decode_rest']:.0%} (prefill/decode) of this estimate (docs/e2e.md)"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``e2e ...`` stand-alone, through the error path of devkit.cli.main; returns the exit code."""
    from devkit.cli import main as cli_main

    return cli_main(["e2e", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
