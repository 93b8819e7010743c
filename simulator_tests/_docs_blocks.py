"""Code blocks of the documentation and the test markers that say how each one is exercised.

A Markdown page marks a fenced code block for the docs tests with an HTML comment (invisible on the
site) on the line before it, possibly separated by blank lines::

    <!-- test: file add_kernel.py -->      the block is written to add_kernel.py in the page's scratch dir
    <!-- test: run [OPTIONS] -->           every command of the bash block is run, in order
    <!-- test: args -->                    every command is checked for argument validity only
    <!-- test: readme -->                  every command must appear verbatim in README.md

``run`` options: ``in=repo`` (run in the repository root instead of the page's scratch directory; such
commands must not modify the repository), ``exit=N`` (expected exit status of the block's last command;
the others must succeed), ``expect=TEXT`` (must appear in the block's output), ``slow`` (only in the
slow test selection).

Used by ``test_docs_commands.py`` and ``test_docs_generated.py``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: Pages written for the docs issue: every shell block in them carries a test marker.
OWNED_PAGES = (
    "index.md",
    "getting-started.md",
    "simulator.md",
    "cost-model.md",
    "hardware.md",
    "cli.md",
    "api.md",
)
SHELL_LANGS = ("bash", "sh", "shell", "console")

_MARKER = re.compile(r"^\s*<!--\s*test:\s*(.*?)\s*-->\s*$")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)(.*)$")


@dataclass
class Marker:
    kind: str
    arg: str = ""
    options: dict[str, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)

    @classmethod
    def parse(cls, text: str) -> Marker:
        words = shlex.split(text)
        if not words:
            raise ValueError("empty test marker")
        kind, rest = words[0], words[1:]
        m = cls(kind)
        if kind == "file":
            if len(rest) != 1:
                raise ValueError(f"test: file needs exactly one file name, got {rest}")
            m.arg = rest[0]
            return m
        for w in rest:
            if "=" in w:
                k, v = w.split("=", 1)
                m.options[k] = v
            else:
                m.flags.add(w)
        return m


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    attrs: str
    text: str  # dedented content
    marker: Marker | None

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"

    def commands(self) -> list[str]:
        """Shell commands of the block (continuations joined; comments and console output dropped)."""
        out: list[str] = []
        pending = ""
        for raw in self.text.splitlines():
            line = raw.rstrip()
            if self.lang == "console":
                if not pending:
                    if not line.startswith("$ "):
                        continue  # output
                    line = line[2:]
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            out.append(pending + line)
            pending = ""
        if pending:
            out.append(pending)
        return out


def parse_page(name: str, text: str | None = None) -> list[Block]:
    """Every fenced code block of ``docs/NAME`` with its test marker (if any)."""
    if text is None:
        text = (DOCS / name).read_text(encoding="utf-8")
    lines = text.splitlines()
    blocks: list[Block] = []
    marker: Marker | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        mm = _MARKER.match(line)
        if mm:
            marker = Marker.parse(mm.group(1))
            i += 1
            continue
        fm = _FENCE.match(line)
        if fm:
            indent, fence, lang, attrs = fm.groups()
            body: list[str] = []
            j = i + 1
            while j < len(lines):
                close = lines[j].strip()
                if close.startswith(fence[0] * len(fence)) and set(close) == {fence[0]}:
                    break
                body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
                j += 1
            blocks.append(Block(name, i + 1, lang.lower(), attrs.strip(), "\n".join(body) + "\n", marker))
            marker = None
            i = j + 1
            continue
        if line.strip():
            marker = None  # a marker applies only to the block right after it
        i += 1
    return blocks


def pages() -> list[str]:
    return sorted(p.name for p in DOCS.glob("*.md"))


def readme_commands() -> set[str]:
    """Command lines of the README's bash blocks."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out: set[str] = set()
    for b in parse_page("README.md", text):
        if b.lang in SHELL_LANGS:
            out.update(c.strip() for c in b.commands())
    return out
