"""Every command shown in the documentation is exercised.

* Blocks marked ``<!-- test: run -->`` are run (in a scratch directory per page, after writing the page's
  ``<!-- test: file NAME -->`` blocks), in page order; ``slow`` blocks only with ``-m slow``.
* Blocks marked ``<!-- test: args -->`` are checked for argument validity: every ``devkit`` command parses
  with the real parser (``devkit.cli.build_parser()``), and names a registered kernel where it takes one.
* Blocks marked ``<!-- test: readme -->`` must repeat the README's commands verbatim (CI runs those).
* Every ``devkit`` command in any page's shell blocks (colleagues' pages and the generated command-line
  reference included) is checked for argument validity too.
* Every shell block of the pages written for the docs (``OWNED_PAGES``) carries a marker.

The marker syntax is documented in ``_docs_blocks.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _docs_blocks import (
    DOCS,
    OWNED_PAGES,
    ROOT,
    SHELL_LANGS,
    Block,
    Marker,
    pages,
    parse_page,
    readme_commands,
)

BIN = Path(sys.executable).parent


def _all_blocks() -> list[Block]:
    out = []
    for name in pages():
        out += parse_page(name)
    return out


def _generated_cli_blocks() -> list[Block]:
    spec = importlib.util.spec_from_file_location("_docs_hooks", DOCS / "_gen" / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return [
        b
        for b in parse_page("cli.md", hooks.generate((DOCS / "cli.md").read_text()))
        if b.lang in SHELL_LANGS
    ]


# ---- argument validity ------------------------------------------------------------------------------

#: The runnable example project of docs/your-kernel.md; its declared names are valid in the docs too.
EXAMPLE_PROJECT = ROOT / "docs" / "examples" / "your-kernel"


@functools.lru_cache(maxsize=1)
def _declared_names() -> list[str]:
    from devkit import project
    from devkit.kernels import registry
    from devkit.workflow import catalog

    return registry.names() + [s.name for s in catalog.project_specs(project.find(EXAMPLE_PROJECT))]


@functools.lru_cache(maxsize=1)
def _parser():
    from devkit.cli import build_parser

    return build_parser()


def check_devkit_command(argv: list[str]) -> None:
    """Parse ``devkit ARGV`` with the real parser; raise AssertionError with argparse's message if invalid."""
    assert argv, "empty devkit command"
    if argv[0] == "simulate":
        assert len(argv) >= 2, "devkit simulate needs SCRIPT or -m MODULE"
        if argv[1] == "-m":
            assert len(argv) >= 3, "devkit simulate -m needs a module"
        return
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            ns = _parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise AssertionError(f"devkit {shlex.join(argv)}: {err.getvalue().strip()}") from None
        return  # --help
    kernel = getattr(ns, "kernel", None)
    if ns.command in ("tune", "promote", "validate", "sweep") and kernel:
        known = _declared_names()
        if ":" in kernel:  # FILE.py:KERNEL: a file of the repository or of the example project
            path, _, func = kernel.rpartition(":")
            files = [f for f in (ROOT / path, EXAMPLE_PROJECT / path) if f.is_file()]
            assert files, f"devkit {ns.command}: no file {path} in the repository or the example project"
            assert func in known, f"devkit {ns.command}: {path} declares no kernel {func}"
        else:
            assert kernel in known, f"devkit {ns.command}: unknown kernel {kernel!r} ({known})"
    if ns.command == "cost":
        path, _, func = ns.kernel.rpartition(":")
        file = ROOT / path
        if file.is_file():  # files of the repository must exist and define the kernel
            assert f"def {func}(" in file.read_text(), f"{path} has no kernel {func}"


def _devkit_argv(command: str) -> list[str] | None:
    words = shlex.split(command, comments=True)
    # a leading environment assignment or `python -m devkit` are fine too
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]
    if words[:3] == ["python", "-m", "devkit"]:
        return words[3:]
    if words and words[0] == "devkit":
        return words[1:]
    return None


def _devkit_commands() -> list[tuple[str, str]]:
    out = []
    for b in _all_blocks() + _generated_cli_blocks():
        if b.lang not in SHELL_LANGS:
            continue
        for cmd in b.commands():
            for part in cmd.split("&&"):
                if _devkit_argv(part) is not None:
                    out.append((f"{b.where}: {part.strip()}", part))
    return out


_DEVKIT = _devkit_commands()


@pytest.mark.parametrize(
    "where,command", _DEVKIT, ids=[w.replace("[", "(").replace("]", ")") for w, _ in _DEVKIT]
)
def test_devkit_command_is_valid(where: str, command: str) -> None:
    argv = _devkit_argv(command)
    assert argv is not None
    check_devkit_command(argv)


def _inline_devkit_spans() -> list[tuple[str, str]]:
    out = []
    for name in pages():
        for m in re.finditer(r"`(devkit [^`]+)`", (DOCS / name).read_text(encoding="utf-8")):
            out.append((f"docs/{name}: {m.group(1)}", m.group(1)))
    return out


_INLINE = _inline_devkit_spans()


@pytest.mark.parametrize(
    "where,span", _INLINE, ids=[w.replace("[", "(").replace("]", ")") for w, _ in _INLINE]
)
def test_inline_devkit_mentions_name_real_commands_and_options(where: str, span: str) -> None:
    """Inline mentions such as `devkit cost --json` name an existing command and options of it."""
    words = span.split()[1:]
    parser = _parser()
    path = ["devkit"]
    for w in words:
        subs = {}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                subs = action.choices
        if w in subs:
            parser = subs[w]
            path.append(w)
            continue
        if w.startswith("--"):
            flag = w.split("=", 1)[0]
            known = {f for a in parser._actions for f in a.option_strings}
            assert flag in known or path[-1] == "simulate", f"{' '.join(path)} has no option {flag}"
        elif w.isupper() or not subs:
            continue  # a placeholder (COMMAND, SCRIPT, KERNEL) or a positional value
        else:
            raise AssertionError(f"{' '.join(path)} has no subcommand {w!r}")


def test_docs_show_devkit_commands() -> None:
    assert len(_DEVKIT) >= 40, "the command extraction found suspiciously few devkit commands"


# ---- markers ------------------------------------------------------------------------------------------


def test_owned_pages_mark_every_shell_block() -> None:
    unmarked = [
        b.where
        for name in OWNED_PAGES
        for b in parse_page(name)
        if b.lang in SHELL_LANGS and b.marker is None
    ]
    assert not unmarked, f"shell blocks without a <!-- test: ... --> marker: {unmarked}"


def test_markers_are_known() -> None:
    bad = []
    for b in _all_blocks():
        m = b.marker
        if m is None:
            continue
        if m.kind not in ("run", "args", "readme", "file"):
            bad.append(f"{b.where}: unknown marker kind {m.kind!r}")
        if m.kind in ("run", "args", "readme") and b.lang not in SHELL_LANGS:
            bad.append(f"{b.where}: {m.kind} marker on a {b.lang or 'plain'} block")
        if m.kind == "file" and "title=" in b.attrs and f'"{m.arg}"' not in b.attrs:
            bad.append(f"{b.where}: file {m.arg} but the block's title is {b.attrs}")
        unknown = set(m.options) - {"in", "exit", "expect"}
        unknown |= m.flags - {"slow"}
        if unknown:
            bad.append(f"{b.where}: unknown marker options {sorted(unknown)}")
    assert not bad, "\n".join(bad)


def test_readme_blocks_repeat_the_readme() -> None:
    readme = readme_commands()
    missing = [
        f"{b.where}: {c}"
        for b in _all_blocks()
        if b.marker and b.marker.kind == "readme"
        for c in b.commands()
        if c.strip() not in readme
    ]
    assert not missing, "commands that differ from README.md:\n" + "\n".join(missing)


def test_args_blocks_hold_only_checkable_commands() -> None:
    readme = readme_commands()
    bad = []
    for b in _all_blocks():
        if b.marker and b.marker.kind == "args":
            for c in b.commands():
                if _devkit_argv(c) is None and c.strip() not in readme:
                    bad.append(f"{b.where}: {c}")
    assert not bad, "args blocks may hold devkit commands and README commands only:\n" + "\n".join(bad)


# ---- running ------------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        {
            "COLUMNS": "120",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _run_block(b: Block, workdir: Path) -> None:
    m = b.marker
    assert m is not None
    cwd = ROOT if m.options.get("in") == "repo" else workdir
    expected_exit = int(m.options.get("exit", "0"))
    commands = b.commands()
    assert commands, f"{b.where}: no commands"
    output = []
    for n, cmd in enumerate(commands):
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd],
            cwd=cwd,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=900,
            stdin=subprocess.DEVNULL,
        )
        out = proc.stdout + proc.stderr
        output.append(f"$ {cmd}\n{out}")
        want = expected_exit if n == len(commands) - 1 else 0
        assert proc.returncode == want, (
            f"{b.where}: `{cmd}` exited {proc.returncode}, expected {want}\n{out[-4000:]}"
        )
    if "expect" in m.options:
        text = "\n".join(output)
        assert m.options["expect"] in text, (
            f"{b.where}: {m.options['expect']!r} not in the output:\n{text[-4000:]}"
        )


def _runnable(page: str) -> list[Block]:
    return [b for b in parse_page(page) if b.marker and b.marker.kind in ("run", "file")]


_PAGES = [p for p in pages() if any(b.marker.kind == "run" for b in _runnable(p))]
_SLOW_PAGES = [p for p in _PAGES if any("slow" in b.marker.flags for b in _runnable(p))]


def _run_page(page: str, tmp_path: Path, include_slow: bool) -> None:
    ran = 0
    for b in _runnable(page):
        m: Marker = b.marker  # type: ignore[assignment]
        if m.kind == "file":
            target = tmp_path / m.arg
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(b.text, encoding="utf-8")
            continue
        if "slow" in m.flags and not include_slow:
            continue
        _run_block(b, tmp_path)
        ran += 1
    assert ran or not include_slow


@pytest.mark.parametrize("page", _PAGES)
def test_page_commands_run(page: str, tmp_path: Path) -> None:
    _run_page(page, tmp_path, include_slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("page", _SLOW_PAGES)
def test_page_commands_run_with_slow_blocks(page: str, tmp_path: Path) -> None:
    _run_page(page, tmp_path, include_slow=True)


def test_every_shell_block_of_owned_pages_is_exercised() -> None:
    """run, args or readme: nothing shown on the owned pages goes untested."""
    for name in OWNED_PAGES:
        for b in parse_page(name):
            if b.lang in SHELL_LANGS:
                assert b.marker is not None and b.marker.kind in ("run", "args", "readme"), b.where
