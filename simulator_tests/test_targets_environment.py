"""Target selection from the environment (NEURON_PLATFORM_TARGET_OVERRIDE, NKI_NC_VERSION, DEVKIT_TARGET)."""

from __future__ import annotations

import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import pytest

import devkit
from devkit.kernels.tutorial import tiled_matmul
from devkit.targets import TargetError, from_environment


@pytest.mark.parametrize(
    ("value", "target"),
    [
        ("trn1", "trn1"),
        ("inf2", "inf2"),
        ("trn2", "trn2"),
        ("trn3", "trn3"),
        ("gen2", "trn1"),
        ("gen3", "trn2"),
        ("GEN4", "trn3"),
    ],
)
def test_sdk_override_names(value: str, target: str) -> None:
    assert from_environment({"NEURON_PLATFORM_TARGET_OVERRIDE": value}) == target
    assert from_environment({"NKI_NC_VERSION": value}) == target


def test_priority_and_default() -> None:
    assert from_environment({}) is None
    assert from_environment({}, default="trn1") == "trn1"
    assert from_environment({"NEURON_PLATFORM_TARGET_OVERRIDE": ""}, default="trn1") == "trn1"
    both = {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn2", "NKI_NC_VERSION": "gen4"}
    assert from_environment(both) == "trn2"
    assert from_environment({**both, "DEVKIT_TARGET": "inf2"}) == "inf2"


def test_unknown_value_names_the_variable() -> None:
    with pytest.raises(TargetError, match=r"NEURON_PLATFORM_TARGET_OVERRIDE='trn9'.*gen3"):
        from_environment({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn9"})
    with pytest.raises(TargetError, match="DEVKIT_TARGET='gen3'"):
        from_environment({"DEVKIT_TARGET": "gen3"})


def test_estimate_follows_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = nt.tensor[[256, 128], nl.bfloat16], nt.tensor[[256, 512], nl.bfloat16]
    monkeypatch.delenv("DEVKIT_TARGET", raising=False)
    monkeypatch.delenv("NKI_NC_VERSION", raising=False)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen3")
    assert devkit.estimate(tiled_matmul, a, b).target == "trn2"
    assert devkit.estimate(tiled_matmul, a, b, target="trn1").target == "trn1"
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE")
    assert devkit.estimate(tiled_matmul, a, b).target == "trn1"
