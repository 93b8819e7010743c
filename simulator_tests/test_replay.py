"""Loop replay in cost-only runs gives the same schedule as executing every iteration."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import pytest
from _kernel_checks import assert_same_instructions

import devkit
from devkit.kernels import registry
from devkit.kernels.tutorial import tiled_matmul
from devkit.nki.runner import run_kernel
from devkit.sim.options import SimOptions
from devkit.trace import Trace

NO_REPLAY = SimOptions(numerics=False, replay_loops=False)


@nki.jit
def ragged_rows(x):
    """The last iteration is masked: replay executes it for real."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(cols)[None, :]
    for t in nl.affine_range((rows + 127) // 128):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < rows))
        nl.store(out[t * 128 + i_p, i_f], value=nl.exp(tile), mask=(t * 128 + i_p < rows))
    return out


@nki.jit
def carried(x):
    """A sequential loop carrying a value through an outer SBUF tile."""
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), dtype=nl.float32)
    for t in nl.sequential_range(x.shape[0] // 128):
        acc[...] = nl.add(acc, nl.load(x[t * 128 : (t + 1) * 128, :]))
    nl.store(out, value=acc)
    return out


def _trace(kernel, *args, options=None):
    tr = Trace()
    run_kernel(kernel.func, args, {}, options=options or SimOptions(numerics=False), sink=tr)
    return tr


@pytest.mark.parametrize(
    "kernel,args",
    [
        (tiled_matmul, (nt.tensor[[1024, 512], nl.bfloat16], nt.tensor[[1024, 2048], nl.bfloat16])),
        (ragged_rows, (nt.tensor[[1000, 256], nl.float32],)),
        (carried, (nt.tensor[[2048, 512], nl.float32],)),
    ],
)
def test_replayed_trace_has_the_same_instructions_and_memory(kernel, args):
    # (dependencies through reused addresses may name a different earlier tile: the allocator's ring
    # position differs, which the schedule equality below shows is immaterial)
    full = _trace(kernel, *args, options=NO_REPLAY)
    fast = _trace(kernel, *args)
    assert_same_instructions(full, fast)
    assert fast.stats.sbuf_peak_bytes_per_partition == full.stats.sbuf_peak_bytes_per_partition
    assert fast.stats.psum_peak_bytes_per_partition == full.stats.psum_peak_bytes_per_partition


@pytest.mark.parametrize(
    "kernel,args",
    [
        (tiled_matmul, (nt.tensor[[1024, 512], nl.bfloat16], nt.tensor[[1024, 2048], nl.bfloat16])),
        (ragged_rows, (nt.tensor[[1000, 256], nl.float32],)),
    ],
)
def test_replayed_estimate_matches_full_execution(kernel, args):
    full = devkit.estimate(kernel, *args, options=NO_REPLAY)
    fast = devkit.estimate(kernel, *args)
    assert fast.instructions == full.instructions
    assert fast.latency_us == pytest.approx(full.latency_us, rel=1e-9)
    assert fast.hbm_read_bytes == full.hbm_read_bytes and fast.hbm_write_bytes == full.hbm_write_bytes


@pytest.mark.parametrize("name", registry.names("beta1"))  # Beta-2 loops are never replayed
def test_project_kernels_estimate_the_same_with_replay(name):
    spec = registry.get(name)
    specs = spec.arg_specs(spec.default_shape, "bfloat16")
    full = devkit.estimate(spec.kernel_object(), *specs, options=NO_REPLAY)
    fast = devkit.estimate(spec.kernel_object(), *specs)
    assert fast.instructions == full.instructions
    assert fast.latency_us == pytest.approx(full.latency_us, rel=1e-6)
    assert fast.sbuf_peak_bytes == full.sbuf_peak_bytes


def test_numerics_runs_never_replay():
    import numpy as np

    x = np.ones((2048, 512), dtype=np.float32)
    out = devkit.simulate(carried, x)
    np.testing.assert_array_equal(out, 16.0)  # every one of the 16 iterations ran


def test_replay_reaches_the_machine_only_through_its_protocol():
    """devkit.sim.replay uses the machine through the members of its ReplayHost protocol, never a
    private attribute (it used to write the machine's instruction counter), and the machine has every
    member of the protocol (issue 15: simulator collaborators depend on protocols, not on Machine)."""
    import ast
    import inspect

    from devkit.nki.runner import geometry
    from devkit.sim import replay
    from devkit.sim.machine import Machine
    from devkit.trace import NullSink

    host = replay.ReplayHost
    members = set(host.__annotations__) | {n for n in vars(host) if not n.startswith("_")}
    used = {
        node.attr
        for node in ast.walk(ast.parse(inspect.getsource(replay)))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "m"
    }
    assert {"take_instr_ids", "commit_instr", "replays"} <= used
    assert used <= members, used - members
    m = Machine(SimOptions(numerics=False), geometry("trn1"), NullSink())
    assert all(hasattr(m, name) for name in members)
    first = m.take_instr_ids(3)
    assert m.take_instr_ids(1) == first + 3
