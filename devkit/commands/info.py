"""``devkit info``: versions, what ``neuronxcc.nki`` and ``nki`` bind to, the Neuron SDK release and the NKI
generations it compiles, Neuron devices and the cost-model targets."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from devkit.commands import stdout_console

_PACKAGES = ("numpy", "ml_dtypes", "jinja2", "rich", "matplotlib", "hypothesis", "pytest", "neuronx-cc")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "info", help="versions, NKI backend binding, Neuron devices and targets", description=__doc__
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.set_defaults(func=run)


def _version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def binding() -> dict[str, str]:
    """What ``import neuronxcc.nki`` (Beta 1) and ``import nki`` (Beta 2) give in this process now, and what the
    project's kernels get."""
    from devkit import compat

    now = compat.backend()
    real = compat.real_sdk_available() or (now == "neuron-sdk")
    if now == "simulator":
        kernels = "simulator (already mapped in this process)"
    elif real:
        kernels = "neuron-sdk (the real SDK is installed; the simulator only when requested)"
    else:
        kernels = "simulator (importing devkit.kernels maps it: no real SDK to bind to)"
    return {"neuronxcc.nki": now, "nki": compat.backend_beta2(), "kernels": kernels}


def collect() -> dict[str, Any]:
    """Everything ``devkit info`` reports, as plain data."""
    from devkit import __version__
    from devkit.targets import TARGETS, load_target
    from devkit.workflow.hw import host as hw_host

    req = hw_host.check_requirements()
    targets = {}
    for name in TARGETS:
        t = load_target(name)
        targets[name] = {
            "description": t.description,
            "tensor_peak_tflops_bf16": t.tensor.peak_tflops_bf16,
            "hbm_gb_per_s": t.hbm.bw_bytes_per_ns,
            "sbuf_mib": t.sbuf.partitions * t.sbuf.bytes_per_partition / 2**20,
            "dma_engines": t.dma.engines,
        }
    return {
        "devkit": __version__,
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in _PACKAGES},
        "backend": binding(),
        "neuron_devices": list(req.devices),
        "neuron_sdk": req.to_dict(),
        "hardware_ready": req.ok,
        "hardware_missing": req.missing,
        "instance_type": hw_host.instance_type(),
        "targets": targets,
    }


def run(args: argparse.Namespace) -> int:
    data = collect()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    from devkit.tables import table

    out = stdout_console(120)
    head = table("devkit info", ("<item", "<value"), show_header=False)
    head.add_row("devkit", data["devkit"])
    head.add_row("python", data["python"])
    head.add_row("platform", data["platform"])
    for name, ver in data["packages"].items():
        note = ver or "not installed"
        if (
            name == "neuronx-cc"
            and ver
            and data["backend"]["neuronxcc.nki"] != "neuron-sdk"
            and not data["hardware_ready"]
            and ver.startswith("1.0")
        ):
            note += " (the public-index placeholder: no compiler inside)"
        head.add_row(name, note)
    head.add_row("neuronxcc.nki binds to", data["backend"]["neuronxcc.nki"])
    head.add_row("nki binds to", data["backend"]["nki"])
    head.add_row("kernels package gets", data["backend"]["kernels"])
    head.add_row("Neuron SDK (hardware stage)", data["neuron_sdk"]["summary"])
    head.add_row("Neuron devices", ", ".join(data["neuron_devices"]) or "none")
    head.add_row("instance type", data["instance_type"])
    ready = "yes" if data["hardware_ready"] else "no: " + "; ".join(data["hardware_missing"])
    head.add_row("hardware stage ready", ready)
    out.print(head)
    rows = [
        (name, t["description"], f"{t['tensor_peak_tflops_bf16']:g}", f"{t['hbm_gb_per_s']:g}",
         f"{t['sbuf_mib']:g}", str(t["dma_engines"]))
        for name, t in data["targets"].items()
    ]  # fmt: skip
    out.print(
        table(
            "cost-model targets (one NeuronCore each)",
            ("<target", "<description", "bf16 TFLOP/s", "HBM GB/s", "SBUF MiB", "DMA engines"),
            rows,
        )
    )
    return 0
