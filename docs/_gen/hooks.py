"""MkDocs hook: the generated parts of the documentation.

Pages ask for generated content with a marker on a line of its own::

    <!-- gen:NAME [ARG] -->

and :func:`on_page_markdown` replaces the marker with the Markdown that :data:`GENERATORS` ``[NAME]``
returns.  Everything generated is read from the code and data files the kit itself uses, so the
documentation cannot drift from them:

========================  ========================================================================
``gen:cli``               the command-line reference, from ``devkit.cli.build_parser()``
``gen:target-summary``    the machine model: every entry of ``devkit/targets/*.toml``, per target
``gen:target-sources``    the same entries with their sources, one tab per target
``gen:params``            the calibrated parameters of ``devkit/cost/params.toml``
``gen:anchors``           the published measurements (``[[anchors]]`` of ``params.toml``)
``gen:validation``        predicted vs measured: ``docs/_gen/validation.json`` (written by
                          ``docs/_gen/validation.py``) against the anchors
========================  ========================================================================

The module is importable on its own (``simulator_tests/test_docs_*.py`` use :func:`generate`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:  # a fresh clone without `pip install -e .` still finds devkit
    sys.path.insert(0, str(ROOT))

MARKER = re.compile(r"^<!-- gen:([a-z0-9-]+)(?: ([^>]*?))? -->[ \t]*$", re.MULTILINE)
VALIDATION_FILE = HERE / "validation.json"


# ---- command-line reference ------------------------------------------------------------------------


def _escape_cell(text: str) -> str:
    return _md_text(text).replace("|", "\\|").replace("\n", " ")


_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)


def _md_text(text: str) -> str:
    """Help text shown as Markdown: keep `code` spans, but never let ``<name>`` or ``*`` become markup."""
    out, pos = [], 0
    for m in _CODE_SPAN.finditer(text):
        out.append(text[pos : m.start()].replace("<", "&lt;").replace("*", "\\*"))
        out.append(m.group(0))
        pos = m.end()
    out.append(text[pos:].replace("<", "&lt;").replace("*", "\\*"))
    return "".join(out)


_MD_SPECIAL = str.maketrans({"*": "\\*", "_": "\\_", "|": "\\|", "<": "&lt;", "`": "\\`", "\n": " "})


def _prose(text: str) -> str:
    """Free text from a data file, shown literally in Markdown (no emphasis, no tags, no cell breaks)."""
    return text.translate(_MD_SPECIAL)


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    metavar = action.metavar or (action.dest.upper() if action.nargs != 0 else None)
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    out = []
    for flag in action.option_strings:
        out.append(f"`{flag} {metavar}`" if action.nargs != 0 and metavar else f"`{flag}`")
    return ", ".join(out)


def _help_text(action: argparse.Action) -> str:
    text = (action.help or "").strip()
    if "%(" in text:
        params = dict(vars(action), prog="devkit")
        for k, v in list(params.items()):
            if isinstance(v, list):
                params[k] = ", ".join(map(str, v))
        try:
            text = text % params
        except (KeyError, TypeError, ValueError):
            pass
    if action.choices and "{" not in text and not isinstance(action, argparse._SubParsersAction):
        text += (" " if text else "") + "(one of " + ", ".join(f"`{c}`" for c in action.choices) + ")"
    return _escape_cell(text)


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction)):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        rows.append(f"| {_flags(action)} | {_help_text(action)} |")
    if not rows:
        return []
    return ["| argument | meaning |", "|---|---|", *rows, ""]


def _epilog(text: str | None) -> list[str]:
    """An argparse epilog: ``examples:`` blocks become bash code blocks, the rest stays prose."""
    if not text:
        return []
    out: list[str] = []
    block: list[str] = []

    def close() -> None:
        if block:
            out.extend(["```bash", *block, "```", ""])
            block.clear()

    in_examples = False
    for line in text.strip("\n").splitlines():
        if line.strip().lower().rstrip(":") == "examples":
            close()
            in_examples = True
            out.append("**Examples**")
            out.append("")
            continue
        if in_examples and line.startswith("  ") and line.strip():
            block.append(line[2:].rstrip())
            continue
        close()
        in_examples = False
        if line.strip():
            out.append(_md_text(line.strip()))
        else:
            out.append("")
    close()
    return [*out, ""]


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, sub, helps.get(name, "")))
    return out


def _describe(description: str | None) -> list[str]:
    if not description:
        return []
    lines = description.strip("\n").splitlines()
    # argparse descriptions here are module docstrings: keep their paragraphs, drop hard indents
    return [_md_text(ln.strip()) for ln in lines] + [""]


def _usage(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        usage = parser.format_usage().strip()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return usage


def _command(name: str, parser: argparse.ArgumentParser, summary: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{name}`", ""]
    if summary:
        out += [f"*{_md_text(summary.strip())}*", ""]
    if name == "devkit simulate":
        from devkit.commands import simulate

        out += ["```text", simulate.USAGE, "```", ""]
        out += _describe(simulate.__doc__)
        out += [
            "Everything after `SCRIPT` (or `-m MODULE`) is passed to the script untouched; the exit "
            "status is the script's.",
            "",
        ]
        return out
    out += ["```text", _usage(parser), "```", ""]
    out += _describe(parser.description)
    out += _options_table(parser)
    out += _epilog(parser.epilog)
    for sub_name, sub, sub_summary in _subparsers(parser):
        out += _command(f"{name} {sub_name}", sub, sub_summary, level + 1)
    return out


def gen_cli(_: str | None = None) -> str:
    from devkit.cli import build_parser

    parser = build_parser()
    out = ["```text", _usage(parser), "```", ""]
    out += _options_table(parser)
    subs = _subparsers(parser)
    out += ["| command | what it does |", "|---|---|"]
    out += [f"| [`devkit {n}`](#devkit-{n}) | {_escape_cell(s)} |" for n, _, s in subs]
    out.append("")
    for name, sub, summary in subs:
        out += _command(f"devkit {name}", sub, summary, 2)
    return "\n".join(out)


# ---- cost model: targets, parameters, anchors, validation ---------------------------------------------


def _load_toml(path: Path) -> dict[str, Any]:
    from devkit.targets import toml_io

    return toml_io.loads(path.read_text())


def _targets() -> dict[str, dict[str, Any]]:
    from devkit.targets import TARGET_DIR, TARGETS

    return {name: _load_toml(Path(TARGET_DIR) / f"{name}.toml") for name in TARGETS}


def _order(names: list[str]) -> list[str]:
    pref = ["trn1", "inf2", "trn2"]
    return [n for n in pref if n in names] + sorted(n for n in names if n not in pref)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    return str(value)


def _entries(data: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for section, table in data.items():
        if not isinstance(table, dict):
            continue
        for key, entry in table.items():
            if isinstance(entry, dict) and "value" in entry:
                out.append((section, key, entry))
    return out


def gen_target_summary(_: str | None = None) -> str:
    targets = _targets()
    names = _order(list(targets))
    first = targets[names[0]]
    rows = [
        "| entry | " + " | ".join(names) + " | unit | kind |",
        "|---|" + "---:|" * len(names) + "---|---|",
    ]
    for section, key, entry in _entries(first):
        vals = []
        kinds = set()
        for n in names:
            e = targets[n].get(section, {}).get(key)
            vals.append(_fmt(e["value"]) if e else "–")
            if e:
                kinds.add(e["kind"])
        rows.append(
            f"| `{section}.{key}` | "
            + " | ".join(vals)
            + f" | {entry['unit']} | {', '.join(sorted(kinds))} |"
        )
    return "\n".join(rows) + "\n"


def gen_target_sources(_: str | None = None) -> str:
    targets = _targets()
    out = []
    for n in _order(list(targets)):
        data = targets[n]
        out.append(f'=== "{n}"')
        out.append("")
        out.append(f"    {data.get('description', n)} (`devkit/targets/{n}.toml`)")
        out.append("")
        out.append("    | entry | value | kind | source |")
        out.append("    |---|---:|---|---|")
        for section, key, e in _entries(data):
            out.append(
                f"    | `{section}.{key}` | {_fmt(e['value'])} {e['unit']} | {e['kind']} | "
                f"{_prose(e['source'])} |"
            )
        out.append("")
    return "\n".join(out)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", ")")) and not text.endswith("e.g.)") else text + "."


def _params() -> dict[str, Any]:
    from devkit.cost.params import PARAMS_PATH

    return _load_toml(Path(PARAMS_PATH))


def gen_params(_: str | None = None) -> str:
    data = _params()
    overrides = data.get("targets", {})
    rows = [
        "| parameter | value | per-target | fitted from | method | bounds |",
        "|---|---:|---|---|---|---|",
    ]
    details = []
    for name, spec in data["params"].items():
        per = [f"{t}: {_fmt(ov[name]['value'])}" for t, ov in sorted(overrides.items()) if name in ov]
        fitted = ", ".join(f"`{f}`" for f in spec.get("fitted_from", [])) or "—"
        lo, hi = spec.get("bounds", ["", ""])
        rows.append(
            f"| [`{name}`](#param-{name.replace('_', '-')}) | {_fmt(spec['value'])} {spec['unit']} | "
            f"{'; '.join(per) or '—'} | {fitted} | {spec.get('method', '')} ({spec.get('fit_date', '')}) | "
            f"{_fmt(lo)} … {_fmt(hi)} |"
        )
        details.append(
            f"`{name}` = {_fmt(spec['value'])} {spec['unit']} {{ #param-{name.replace('_', '-')} }}"
        )
        details.append(f":   {_prose(_sentence(spec['description']))}")
        details.append("")
        details.append(f"    *Source:* {_prose(_sentence(spec['source']))}")
        for t, ov in sorted(overrides.items()):
            if name in ov:
                details.append("")
                value = f"{_fmt(ov[name]['value'])} {spec['unit']}"
                details.append(f"    *{t}:* {value}: {_prose(_sentence(ov[name]['source']))}")
        details.append("")
    return "\n".join(rows) + "\n\n" + "\n".join(details)


def gen_anchors(_: str | None = None) -> str:
    data = _params()
    rows = ["| id | target | measured | what | source |", "|---|---|---:|---|---|"]
    for a in data.get("anchors", []):
        metric = {
            "latency_us": "latency",
            "dma_engine_us": "DMA engine busy",
            "initiation_interval_us": "initiation interval",
        }.get(a["metric"], a["metric"])
        val = a["measured_us"]
        shown = f"{val / 1000:g} ms" if val >= 1000 else (f"{val * 1000:g} ns" if val < 1 else f"{val:g} us")
        rows.append(
            f"| `{a['id']}` | {a['target']} | {shown} | {metric} of {_prose(a['kernel'])}, "
            f"{_prose(a['shape'])} {a['dtype']} | {_prose(a['source'])} |"
        )
    return "\n".join(rows) + "\n"


def load_validation() -> dict[str, Any]:
    return json.loads(VALIDATION_FILE.read_text())


def validation_rows() -> list[dict[str, Any]]:
    """Predicted (validation.json) joined with measured (params.toml anchors) per kernel."""
    val = load_validation()
    anchors = {(a["kernel"], a["target"]): a for a in _params().get("anchors", [])}
    rows = []
    for r in val["rows"]:
        a = anchors.get((r["kernel"], val["target"]))
        measured = a["measured_us"] if a else None
        rows.append(
            {
                **r,
                "measured_us": measured,
                "error": (r["predicted_us"] / measured - 1.0) if measured else None,
                "anchor": a["id"] if a else None,
            }
        )
    return rows


def gen_validation(_: str | None = None) -> str:
    val = load_validation()
    rows = [
        "| kernel | measured | predicted | error | bound by | TensorE utilisation |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for r in validation_rows():
        m = f"{r['measured_us'] / 1000:.2f} ms" if r["measured_us"] else "—"
        e = f"{r['error']:+.1%}" if r["error"] is not None else "—"
        rows.append(
            f"| `{r['kernel']}` | {m} | {r['predicted_us'] / 1000:.2f} ms | {e} | {r['bound_by']} | "
            f"{r['tensor_utilization']:.0%} |"
        )
    total = sum(r["wall_s"] for r in val["rows"])
    instrs = ", ".join(f"{r['instructions']:,}" for r in val["rows"])
    note = (
        f"\n*Target {val['target']}, arguments {', '.join('`' + a + '`' for a in val['args'])}. Predicted by "
        f"devkit {val['devkit_version']} at commit `{val['git_commit']}` on {val['date']} "
        f"({instrs} instructions; {total:.0f} s of cost-only simulation in all), stored in "
        f"`docs/_gen/validation.json` by `docs/_gen/validation.py`. Measured: the `[[anchors]]` of "
        f"`devkit/cost/params.toml` (above).*\n"
    )
    return "\n".join(rows) + "\n" + note


GENERATORS = {
    "cli": gen_cli,
    "target-summary": gen_target_summary,
    "target-sources": gen_target_sources,
    "params": gen_params,
    "anchors": gen_anchors,
    "validation": gen_validation,
}


def generate(markdown: str) -> str:
    """Replace every ``<!-- gen:NAME [ARG] -->`` marker in ``markdown`` with its generated Markdown."""

    def sub(m: re.Match[str]) -> str:
        name, arg = m.group(1), m.group(2)
        if name not in GENERATORS:
            raise KeyError(f"unknown docs generator gen:{name} (known: {', '.join(sorted(GENERATORS))})")
        return GENERATORS[name](arg).rstrip("\n")

    return MARKER.sub(sub, markdown)


# ---- mkdocs hooks ------------------------------------------------------------------------------------


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return generate(markdown)


_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):(<code>|`)")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    # docstrings use Sphinx roles (:func:`x`); render them as plain code in the API reference
    return _ROLE.sub(r"\1", html)
