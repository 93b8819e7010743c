"""The generated and data-backed parts of the documentation agree with the code.

* the command-line reference documents every command, subcommand and option of ``build_parser()``;
* the cost-model tables show every entry of ``targets/*.toml`` and every parameter of ``params.toml``;
* the validation table's claims hold for the stored predictions (within 25 %, in the measured order);
* the checks table of ``docs/simulator.md`` lists exactly the rule codes the simulator raises;
* every page is in the nav, and every ``<!-- gen:... -->`` marker names a generator.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def hooks():
    spec = importlib.util.spec_from_file_location("_docs_hooks", DOCS / "_gen" / "hooks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _walk(parser: argparse.ArgumentParser, prefix: str):
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, f"{prefix} {name}")


def test_cli_reference_covers_every_command_and_option(hooks) -> None:
    from devkit.cli import build_parser

    text = hooks.gen_cli()
    for name, parser in _walk(build_parser(), "devkit"):
        if name == "devkit":
            continue
        assert f"`{name}`" in text, f"{name} missing from the CLI reference"
        if name == "devkit simulate":
            continue
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in text, f"{name} {flag} missing from the CLI reference"


def test_target_tables_show_every_entry(hooks) -> None:
    summary = hooks.gen_target_summary()
    sources = hooks.gen_target_sources()
    for name, data in hooks._targets().items():
        assert f'=== "{name}"' in sources
        for section, key, _entry in hooks._entries(data):
            assert f"`{section}.{key}`" in summary
            assert f"`{section}.{key}`" in sources


def test_parameter_table_shows_every_parameter(hooks) -> None:
    from devkit.cost.params import Params, load_params

    text = hooks.gen_params()
    for name in Params.names():
        assert f"`{name}`" in text
    for anchor in load_params().anchors:
        assert f"`{anchor.id}`" in hooks.gen_anchors()


def test_validation_claims_hold(hooks) -> None:
    """docs/cost-model.md says: all four within 25 %, in the right order."""
    rows = hooks.validation_rows()
    assert [r["kernel"] for r in rows] == [
        "nki_matmul_tiled_",
        "nki_matmul_hoist_load_",
        "nki_matmul_block_free_dimension_",
        "nki_matmul_fully_optimized_",
    ]
    for r in rows:
        assert r["measured_us"], f"no anchor for {r['kernel']}"
        assert abs(r["error"]) <= 0.25, r
    predicted = [r["predicted_us"] for r in rows]
    measured = [r["measured_us"] for r in rows]
    assert sorted(predicted, reverse=True) == predicted
    assert sorted(measured, reverse=True) == measured


def _code_rules() -> set[str]:
    codes: set[str] = set()
    pattern = re.compile(r'rule\s*=\s*"([^"]+)"(?:\s+if\s+.*?\s+else\s+"([^"]+)")?')
    for path in (ROOT / "devkit").rglob("*.py"):
        for m in pattern.finditer(path.read_text(encoding="utf-8")):
            codes.update(c for c in m.groups() if c)
    return codes - {"kernel-error", "capacity", "memory-placement"}  # umbrella codes of base classes


def test_simulator_checks_table_matches_the_code() -> None:
    text = (DOCS / "simulator.md").read_text(encoding="utf-8")
    section = text[text.index("## Checks and their sources") : text.index("### What is not checked")]
    documented = set(re.findall(r"^\| \[`([a-z0-9-]+)`\]\(errors\.md#", section, re.MULTILINE))
    code = _code_rules()
    assert not code - documented, (
        f"rules raised by the simulator but missing from docs/simulator.md: {sorted(code - documented)}"
    )
    assert not documented - code, (
        f"rules in docs/simulator.md that the simulator never raises: {sorted(documented - code)}"
    )


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        assert f" {page.name}" in nav, f"{page.name} is not in the mkdocs.yml nav"


def test_gen_markers_name_generators(hooks) -> None:
    for page in DOCS.glob("*.md"):
        for name, _arg in hooks.MARKER.findall(page.read_text(encoding="utf-8")):
            assert name in hooks.GENERATORS, f"{page.name}: unknown generator gen:{name}"
