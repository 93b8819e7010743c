"""docs/errors.md cannot drift: every example kernel in it is run and must raise the documented class
with the documented rule code, blame the line marked ``# <- error``, and give the documented message.
Every KernelError subclass and every rule code the simulator raises must have an example.

After changing a message on purpose, refresh the documented messages with::

    python simulator_tests/test_errors_doc.py --update

Each example in the document is a ``python`` block followed by ``<!-- expect: ClassName rule-code -->``
(or ``<!-- expect: SpillWarning -->`` / ``<!-- expect: PlacementNote -->`` for the warnings) and a
``text`` block holding the message.  The examples run after the block marked ``<!-- prelude -->``,
compiled under the file name ``errors.md`` with their real line numbers, so messages read
``errors.md:LINE: [rule] ...``.
"""

from __future__ import annotations

import linecache
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "errors.md"
FILENAME = "errors.md"
MARK = "# <- error"

#: warning categories documented with an example (a note, not an error)
WARNINGS = ("SpillWarning", "PlacementNote")

#: rule codes that appear in the source but that no public API can trigger today
UNREACHABLE = {"operand-in-sbuf": "no instruction requires a PSUM-only operand yet"}

_BLOCK = re.compile(
    r"```python\n(?P<code>(?:(?!```).)*?)```\n\n<!-- expect: (?P<cls>\w+)(?: (?P<rule>[a-z0-9-]+))? -->\n"
    r"```text\n(?P<msg>.*?)```",
    re.S,
)
_PRELUDE = re.compile(r"<!-- prelude -->\n```python\n(?P<code>.*?)```", re.S)


@dataclass
class Example:
    line: int  # first line of the code in the document
    code: str
    cls: str
    rule: str | None
    message: str
    msg_span: tuple[int, int]  # character span of the message text in the document

    @property
    def id(self) -> str:
        return f"{self.rule or self.cls}@{self.line}"


def examples(text: str) -> tuple[str, list[Example]]:
    pre = _PRELUDE.search(text)
    assert pre, "docs/errors.md has no <!-- prelude --> block"
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        out.append(
            Example(
                line, m.group("code"), m.group("cls"), m.group("rule"), m.group("msg").strip(), m.span("msg")
            )
        )
    return pre.group("code"), out


def _namespace(prelude: str) -> dict:
    from devkit import compat

    if not compat.is_installed():
        compat.install()
    ns: dict = {"__name__": "errors_md"}
    exec(compile(prelude, FILENAME, "exec"), ns)
    return ns


def run(prelude: str, ex: Example) -> tuple[BaseException | None, list[warnings.WarningMessage]]:
    """Run one example; return the exception it raised (if any) and the warnings it gave."""
    src = "\n" * (ex.line - 1) + ex.code
    linecache.cache[FILENAME] = (len(src), None, src.splitlines(True), FILENAME)
    ns = _namespace(prelude)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(compile(src, FILENAME, "exec"), ns)
        except Exception as e:
            return e, list(caught)
    return None, list(caught)


def normalise(msg: str) -> str:
    return re.sub(r"errors\.md:\d+", "errors.md:N", msg.strip())


def actual_message(prelude: str, ex: Example) -> str:
    err, caught = run(prelude, ex)
    if ex.cls in WARNINGS:
        notes = [w for w in caught if w.category.__name__ == ex.cls]
        return str(notes[0].message) if notes else f"<no {ex.cls}; raised {err!r}>"
    return str(err) if err is not None else "<no error>"


TEXT = DOC.read_text() if DOC.exists() else ""
PRELUDE, EXAMPLES = examples(TEXT) if TEXT else ("", [])


def test_the_document_has_examples():
    assert DOC.exists(), "docs/errors.md is missing"
    assert len(EXAMPLES) >= 40


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.id)
def test_example_raises_what_the_document_says(ex: Example):
    from devkit import errors

    err, caught = run(PRELUDE, ex)
    marked = [ex.line + i for i, text in enumerate(ex.code.splitlines()) if MARK in text]
    assert len(marked) == 1, f"the example at line {ex.line} must mark exactly one line with {MARK!r}"
    if ex.cls in WARNINGS:
        assert err is None, f"expected only a warning, got {err!r}"
        spills = [w for w in caught if issubclass(w.category, getattr(errors, ex.cls))]
        assert spills, f"no {ex.cls}"
        assert (spills[0].filename, spills[0].lineno) == (FILENAME, marked[0])
        got = str(spills[0].message)
    else:
        cls = getattr(errors, ex.cls)
        assert issubclass(cls, errors.KernelError)
        assert type(err) is cls, f"expected {ex.cls}, got {type(err).__name__}: {err}"
        assert err.rule == ex.rule, f"expected rule {ex.rule}, got {err.rule}"
        assert (err.filename, err.lineno) == (FILENAME, marked[0]), f"blamed {err.filename}:{err.lineno}"
        got = str(err)
    assert normalise(got) == normalise(ex.message), (
        "the documented message differs from the real one; if the change is intended run "
        "`python simulator_tests/test_errors_doc.py --update`"
    )


def _raised_rules() -> set[str]:
    rules: set[str] = set()
    pattern = re.compile(r'rule="([a-z0-9-]+)"(?:\s+if\s+.*?\s+else\s+"([a-z0-9-]+)")?')
    for path in (ROOT / "devkit").rglob("*.py"):
        for m in pattern.finditer(path.read_text()):
            rules.update(c for c in m.groups() if c)
    return rules


def test_every_error_class_and_rule_code_is_documented():
    from devkit import errors

    classes = {
        n
        for n, c in vars(errors).items()
        if isinstance(c, type) and issubclass(c, errors.KernelError) and c is not errors.KernelError
    }
    documented_classes = {ex.cls for ex in EXAMPLES}
    assert classes - documented_classes == set(), (
        "KernelError subclasses without an example in docs/errors.md"
    )
    documented_rules = {ex.rule for ex in EXAMPLES if ex.rule}
    missing = _raised_rules() - documented_rules - set(UNREACHABLE)
    assert missing == set(), "rule codes without an example in docs/errors.md"
    assert set(WARNINGS) <= documented_classes


def update() -> int:
    """Rewrite every documented message with the one the simulator gives today."""
    text = DOC.read_text()
    prelude, exs = examples(text)
    for ex in sorted(exs, key=lambda e: e.msg_span[0], reverse=True):
        msg = actual_message(prelude, ex)
        a, b = ex.msg_span
        text = text[:a] + msg + "\n" + text[b:]
    DOC.write_text(text)
    print(f"updated {len(exs)} messages in {DOC}")
    return 0


if __name__ == "__main__":
    if "--update" in sys.argv:
        sys.exit(update())
    sys.exit(pytest.main([__file__, "-q"]))
