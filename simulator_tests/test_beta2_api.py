"""Issue 12, NKI Beta 2 (``import nki``): module mapping, entry points and core semantics.

Kernels here are written like NKI 0.x code from AWS's docs (dst-passing ``nisa.*``, ``nl.ndarray``,
``nl.affine_range`` as a plain range) and compared with NumPy.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import devkit
from devkit import compat
from devkit.errors import HardwareUnavailableError, KernelArgumentError, UnsupportedError

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(7)


# ---- imports ------------------------------------------------------------------------------------------------

BETA2_MODULES = (
    "nki",
    "nki.language",
    "nki.language.dtypes",
    "nki.isa",
    "nki.isa.constants",
    "nki.typing",
    "nki.compiler",
    "nki.tensor",
    "nki.collectives",
    "nki.builtin",
)


@pytest.mark.parametrize("name", BETA2_MODULES)
def test_beta2_modules_import_under_both_roots(name):
    mod = importlib.import_module(name)
    twin = importlib.import_module("nki_cpu_simulator." + name)
    assert mod is twin
    assert getattr(sys.modules["nki"], "__devkit_simulator__", False)


def test_enums_are_one_object_ordered_and_comparable_with_ints():
    from nki.isa.constants import nc_version

    assert (
        nisa.nc_version is nc_version
        and nisa.oob_mode is importlib.import_module("nki.isa.constants").oob_mode
    )
    assert nc_version.gen4 > nc_version.gen3 >= 3 and nc_version.gen2.name == "gen2"
    assert nisa.dge_mode.none == 3 and nisa.dge_mode.unknown == 0  # NKI 0.x numbering, not Beta 1's


def test_devkit_info_reports_the_beta2_binding():
    from devkit.commands.info import binding

    assert binding()["nki"] == "simulator"  # mapped by the project's pytest plugin


def test_beta1_and_beta2_in_one_process():
    import neuronxcc.nki as nki1
    import neuronxcc.nki.language as nl1

    @nki1.jit
    def beta1(a):
        out = nl1.ndarray(a.shape, dtype=a.dtype, buffer=nl1.shared_hbm)
        nl1.store(out, nl1.multiply(nl1.load(a), 2.0))
        return out

    @nki.jit
    def beta2(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(t, a)
        u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(u, t, nl.multiply, 3.0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, u)
        return out

    a = RNG.random((128, 64), dtype=np.float32)
    np.testing.assert_array_equal(devkit.simulate(beta1, a), a * 2)
    np.testing.assert_array_equal(nki.simulate(beta2)(a), a * 3)


def test_real_nki_package_is_not_shadowed_without_opt_in(tmp_path):
    """A real ``nki`` on the path keeps binding unless the simulator was installed explicitly."""
    (tmp_path / "nki").mkdir()
    (tmp_path / "nki" / "__init__.py").write_text("REAL = True\n")
    code = (
        "import devkit, devkit.compat as c, nki; assert getattr(nki, 'REAL', False); "
        "assert c.backend_beta2() == 'nki'; h = c.install(); import nki as n2; "
        "assert n2.__devkit_simulator__; h.uninstall(); import nki as n3; assert n3.REAL; print('ok')"
    )
    env = {"PYTHONPATH": f"{tmp_path}:{compat.__file__.rsplit('/devkit/', 1)[0]}", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_collectives_raise_not_simulated():
    import nki.collectives as cc

    @nki.jit
    def k(a):
        cc.all_reduce(a)
        return a

    with pytest.raises(UnsupportedError) as e:
        nki.simulate(k)(np.zeros((4, 4), np.float32))
    assert e.value.rule == "not-simulated"


@pytest.mark.parametrize("name", ["baremetal", "benchmark", "profile", "simulate_kernel"])
def test_removed_entry_points_name_the_kits_estimator(name):
    with pytest.raises(UnsupportedError) as e:
        getattr(nki, name)(lambda a: a)
    assert e.value.rule == "not-available"
    assert "devkit.estimate" in str(e.value) and "devkit cost" in str(e.value)


# ---- entry points ---------------------------------------------------------------------------------------------


@nki.jit(mode="trace", debug_kernel=True, show_compiler_tb=True, experimental_flags="x")
def add_one(a):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_jit_called_with_extra_kwargs_and_simulate():
    a = RNG.random((32, 16), dtype=np.float32)
    np.testing.assert_array_equal(nki.simulate(add_one)(a), a + 1)
    np.testing.assert_array_equal(nki.simulate(add_one.func)(a), a + 1)  # plain functions are wrapped


def test_direct_call_needs_nki_simulator(monkeypatch):
    a = RNG.random((8, 8), dtype=np.float32)
    monkeypatch.delenv("NKI_SIMULATOR", raising=False)
    with pytest.raises(HardwareUnavailableError):
        add_one(a)
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    np.testing.assert_array_equal(add_one(a), a + 1)


@nki.jit
def write_input_in_place(a):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, a)
    nisa.tensor_scalar(t, t, nl.multiply, 2.0)
    nisa.dma_copy(a, t)


def test_written_inputs_are_updated_in_place():
    a = RNG.random((16, 8), dtype=np.float32)
    want = a * 2
    assert nki.simulate(write_input_in_place)(a) is None
    np.testing.assert_array_equal(a, want)
    b = RNG.random((16, 8), dtype=np.float32)
    want = b * 2
    nki.cpu_simulate(write_input_in_place)[1](a=b)
    np.testing.assert_array_equal(b, want)


@nki.jit
def lnc_halves(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    n = nl.num_programs()
    pid = nl.program_id(0)
    rows = a.shape[0] // n
    t = nl.ndarray((rows, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, a[pid * rows : (pid + 1) * rows, :])
    nisa.tensor_scalar(t, t, nl.add, float(10 * (pid + 1) + nl.program_ndim()))
    nisa.dma_copy(out[pid * rows : (pid + 1) * rows, :], t)
    return out


def test_lnc_launches_share_shared_hbm():
    a = np.zeros((64, 8), np.float32)
    one = nki.simulate(lnc_halves)(a)
    np.testing.assert_array_equal(one, np.full((64, 8), 10.0, np.float32))  # program_ndim() == 0
    two = nki.simulate(lnc_halves[2])(a)
    np.testing.assert_array_equal(two[:32], 11.0)
    np.testing.assert_array_equal(two[32:], 21.0)
    three = nki.cpu_simulate(lnc_halves)[2](a=a)
    np.testing.assert_array_equal(three, two)
    with pytest.raises(KernelArgumentError):
        lnc_halves[3]


@nki.jit
def report_version(a):
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(t, int(nisa.get_nc_version()))
    nisa.dma_copy(out, t)
    return out


@pytest.mark.parametrize(
    ("var", "value", "want"),
    [
        ("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1", 2),
        ("NEURON_PLATFORM_TARGET_OVERRIDE", "gen3", 3),
        ("NKI_NC_VERSION", "gen4", 4),
        ("NKI_NC_VERSION", "gen2", 2),
        (None, None, 4),
    ],
)
def test_target_from_environment(monkeypatch, var, value, want):
    for v in ("NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION", "DEVKIT_TARGET"):
        monkeypatch.delenv(v, raising=False)
    if var:
        monkeypatch.setenv(var, value)
    assert int(nki.simulate(report_version)(np.zeros(1, np.float32))[0, 0]) == want
    assert nisa.get_nc_version() == want


def test_bad_target_name_is_reported(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen9")
    with pytest.raises(KernelArgumentError) as e:
        nki.simulate(report_version)(np.zeros(1, np.float32))
    assert e.value.rule == "bad-target" and "gen9" in str(e.value)


# ---- semantics ---------------------------------------------------------------------------------------------------


@nki.jit
def views(a):
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    row = s[3]  # on-chip: an int on the partition dim keeps a size-1 partition dim
    hrow = a[3]  # HBM: an int removes the dim
    col = s[:, 5]
    info = (s.shape, s.strides, s.offset, row.shape, hrow.shape, col.shape, s[nl.ds(8, 4), 2:6].offset)
    out = nl.ndarray((4, 4), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, s[nl.ds(8, 4), 2:6])
    return out, info


def test_tensor_views_follow_nki_0x_indexing():
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    out, info = nki.simulate(views)(a)
    assert info == ((128, 64), (64, 1), 0, (1, 64), (64,), (128, 1), 8 * 64 + 2)
    np.testing.assert_array_equal(out, a[8:12, 2:6])


@nki.jit
def ap_views(a):
    s = nl.ndarray((32, 16), dtype=a.dtype, buffer=nl.sbuf)
    # transposed read of an HBM [16, 32] tensor through an access pattern (a strided gather)
    nisa.dma_copy(s, a.ap(pattern=[[1, 32], [32, 16]], offset=0))
    t = nl.ndarray((32, 8), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(t, s.ap(pattern=[[16, 32], [2, 8]], offset=1))  # odd columns
    b = nl.ndarray((32, 3, 8), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(b, t.ap(pattern=[[8, 32], [0, 3], [1, 8]]))  # a step of 0 repeats (broadcast)
    out = nl.ndarray((32, 24), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, b)
    return out


def test_access_patterns_address_the_flattened_storage():
    a = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    got = nki.simulate(ap_views)(a)
    want = np.repeat(a.T[:, 1::2][:, None, :], 3, axis=1).reshape(32, 24)
    np.testing.assert_array_equal(got, want)


@nki.jit
def psum_accumulation(a, b, mode):
    at = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    bt = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(at, a)
    nisa.dma_copy(bt, b)
    acc = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    if mode == "implicit":
        for _ in nl.affine_range(3):  # loop-carried PSUM accumulation: legal, affine_range is range
            nisa.nc_matmul(acc, at, bt)
    elif mode == "sub-slice":
        nisa.nc_matmul(acc[:, 0:8], at, bt[:, 0:8])  # overwrites the left half
        nisa.nc_matmul(acc, at, bt)  # adds on the left half, overwrites the right half
    else:
        nisa.nc_matmul(acc, at, bt)
        nisa.nc_matmul(acc, at, bt, accumulate=False)  # overwrite even though written
        nisa.nc_matmul(acc, at, bt, accumulate=True)
    res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(res, acc)
    out = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(out, res)
    return out


@pytest.mark.parametrize(
    ("mode", "left", "right"), [("implicit", 3, 3), ("sub-slice", 2, 1), ("explicit", 2, 2)]
)
def test_psum_accumulation_is_tracked_per_element(mode, left, right):
    a = RNG.integers(-3, 4, (32, 16)).astype(np.float32)
    b = RNG.integers(-3, 4, (32, 16)).astype(np.float32)
    got = nki.simulate(psum_accumulation)(a, b, mode)
    p = a.T @ b
    np.testing.assert_array_equal(got[:, :8], left * p[:, :8])
    np.testing.assert_array_equal(got[:, 8:], right * p[:, 8:])


@nki.jit
def cast_on_write(a):
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(t, a)
    u = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_copy(u, t)  # dst dtype decides the result dtype
    v = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.activation(v, nl.exp, t)
    o1 = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    o2 = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nisa.dma_copy(o1, u)
    nisa.dma_copy(o2, v)
    return o1, o2


def test_output_dtype_is_dst_dtype():
    a = np.array([[0.5, 1.5, 2.5, -0.5], [3e9, -3e9, 1.49, 2.51]], dtype=np.float32)
    i, e = nki.simulate(cast_on_write)(a)
    assert i.dtype == np.int32 and e.dtype == BF16
    np.testing.assert_array_equal(i, [[0, 2, 2, 0], [2147483647, -2147483648, 1, 3]])  # RNE + saturate
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(e, np.exp(a).astype(BF16))


@nki.jit
def iota_kernel(a):
    t = nl.ndarray((8, 2, 3), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(t, [[3, 2], [1, 3]], offset=5, channel_multiplier=100)
    out = nl.ndarray((8, 6), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(out, t)
    return out


def test_iota_pattern_offset_and_channel_multiplier():
    got = nki.simulate(iota_kernel)(np.zeros(1, np.float32))
    want = 5 + 100 * np.arange(8)[:, None] + np.arange(6)[None, :]
    np.testing.assert_array_equal(got, want)


# ---- cost model --------------------------------------------------------------------------------------------------


def test_devkit_cost_on_a_beta2_kernel_file(capsys):
    """The CLI loads a kernel file written with ``import nki`` (the tutorial matmul's one Beta-2 copy)."""
    import json

    from devkit import cli
    from devkit.kernels.beta2 import tutorial

    path = tutorial.__file__
    code = cli.main(
        [
            "cost",
            f"{path}:tiled_matmul",
            "--arg",
            "bfloat16[512,256]",
            "--arg",
            "bfloat16[512,1024]",
            "--target",
            "trn2",
            "--json",
        ]
    )
    assert code == 0
    rep = json.loads(capsys.readouterr().out)
    m_t, n_t, k_t = 2, 2, 4
    assert rep["target"] == "trn2"
    assert rep["instructions_by_engine"]["tensor"] == m_t * n_t * k_t
    assert rep["instructions_by_engine"]["dma"] == 2 * m_t * n_t * k_t + m_t * n_t
    assert rep["flops"] == 2 * 512 * 256 * 1024
    assert rep["hbm_write_bytes"] == 256 * 1024 * 2
    assert rep["latency_us"] > 0 and 0 < rep["tensor_utilization"] <= 1


def test_devkit_estimate_and_simulate_accept_beta2_kernels():
    import nki.typing as nt

    rep = devkit.estimate(add_one, nt.tensor[[128, 512], nl.float32], target="trn2").to_dict()
    assert rep["instructions_by_engine"]["dma"] == 2 and rep["instructions_by_engine"]["vector"] == 1
    a = RNG.random((4, 4), dtype=np.float32)
    np.testing.assert_array_equal(devkit.simulate(add_one, a), a + 1)
    two = devkit.simulate(lnc_halves[2], np.zeros((8, 2), np.float32))
    np.testing.assert_array_equal(two[4:], 21.0)


SCRIPT = """
import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl
import nki_cpu_simulator.nki.isa as sim_isa
import neuronxcc.nki as nki1

assert sim_isa is nisa and nki1.__devkit_simulator__


@nki.jit
def double(a):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, a)
    nisa.tensor_tensor(t, t, t, nl.add)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, t)
    return out


a = np.arange(12, dtype=np.float32).reshape(3, 4)
print(int(nki.simulate(double)(a).sum()))
raise SystemExit(7)
"""


def test_devkit_simulate_maps_nki_in_a_fresh_process(tmp_path):
    script = tmp_path / "beta2_script.py"
    script.write_text(SCRIPT)
    root = compat.__file__.rsplit("/devkit/", 1)[0]
    r = subprocess.run(
        [sys.executable, "-m", "devkit", "simulate", str(script)],
        env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 7, r.stderr
    assert r.stdout.strip() == str(2 * sum(range(12)))


# ---- dynamic access patterns ------------------------------------------------------------------------------------


@nki.jit
def pick_targets(logits, targets):
    b, v = logits.shape
    t_sb = nl.ndarray((b, 1), dtype=targets.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t_sb, targets)
    picked = nl.ndarray((b, 1), dtype=logits.dtype, buffer=nl.sbuf)
    for i in range(b):
        nisa.dma_copy(
            dst=picked[i : i + 1, :],
            src=logits.ap(
                pattern=[[v, 1], [1, 1]],
                offset=i * v,
                scalar_offset=t_sb.ap(pattern=[[1, 1], [1, 1]], offset=i),
                indirect_dim=1,
            ),
        )
    out = nl.ndarray((b, 1), dtype=logits.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, picked)
    return out


def test_scalar_offset_reads_a_runtime_column():
    logits = RNG.standard_normal((6, 40)).astype(np.float32)
    targets = RNG.integers(0, 40, (6, 1)).astype(np.int32)
    got = nki.simulate(pick_targets)(logits, targets)
    np.testing.assert_array_equal(got[:, 0], logits[np.arange(6), targets[:, 0]])


@nki.jit
def gather_rows(table, idx, skip):
    p = idx.shape[0]
    d = table.shape[1]
    i_sb = nl.ndarray((p, 1), dtype=idx.dtype, buffer=nl.sbuf)
    nisa.dma_copy(i_sb, idx)
    g = nl.ndarray((p, d), dtype=table.dtype, buffer=nl.sbuf)
    nisa.memset(g, -7.0)
    mode = nisa.oob_mode.skip if skip else nisa.oob_mode.error
    src = table.ap(pattern=[[d, p], [1, d]], offset=0, vector_offset=i_sb)
    nisa.dma_copy(dst=g, src=src, oob_mode=mode)  # <- oob
    out = nl.ndarray((p, d), dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, g)
    return out


def test_vector_offset_gathers_rows_and_oob_mode_decides_out_of_range_rows():
    from _nki_support import line_of

    from devkit.errors import BoundsError

    table = RNG.standard_normal((50, 8)).astype(np.float32)
    idx = RNG.integers(0, 50, (16, 1)).astype(np.int32)
    np.testing.assert_array_equal(nki.simulate(gather_rows)(table, idx, False), table[idx[:, 0]])
    idx[5, 0] = 77  # past the end of the table
    got = nki.simulate(gather_rows)(table, idx, True)
    want = table[np.minimum(idx[:, 0], 49)]
    want[5] = -7.0  # skipped: dst keeps its value
    np.testing.assert_array_equal(got, want)
    with pytest.raises(BoundsError) as e:
        nki.simulate(gather_rows)(table, idx, False)
    assert e.value.lineno == line_of(gather_rows, "# <- oob")


# ---- LNC-2 programs exchanging data ---------------------------------------------------------------------------


@nki.jit
def swap_halves(a, skip_on_1=False):
    pid = nl.program_id(0)
    rows = a.shape[0] // 2
    mine = nl.ndarray((rows, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(mine, a[pid * rows : (pid + 1) * rows, :])
    theirs = nl.ndarray((rows, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    if not (skip_on_1 and pid == 1):
        peer = 1 - pid
        nisa.sendrecv(mine, theirs, send_to_rank=peer, recv_from_rank=peer, pipe_id=0)  # <- wait
    else:
        nisa.memset(theirs, 0.0)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out[pid * rows : (pid + 1) * rows, :], theirs)
    nisa.core_barrier(out, (0, 1))  # <- barrier
    check = nl.ndarray((rows, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(check, out[(1 - pid) * rows : (2 - pid) * rows, :])  # written by the other program
    nisa.tensor_tensor(check, check, mine, nl.subtract)
    nisa.dma_copy(out[(1 - pid) * rows : (2 - pid) * rows, :], check)  # zero if the barrier held
    nisa.core_barrier(out, (0, 1))
    return out


def test_sendrecv_and_core_barrier_under_lnc2():
    from _nki_support import line_of

    from devkit.nki.beta2.lnc import DeadlockError

    a = RNG.standard_normal((16, 8)).astype(np.float32)
    got = nki.simulate(swap_halves[2])(a)
    np.testing.assert_array_equal(got, np.zeros_like(a))
    with pytest.raises(DeadlockError) as e:
        nki.simulate(swap_halves[2])(a, True)
    # program 0 waits in sendrecv; program 1 skipped it and waits at the barrier: neither can proceed
    assert e.value.rule == "lnc-deadlock" and e.value.lineno == line_of(swap_halves, "# <- barrier")
    assert f"program 0 waits for a sendrecv from program 1 on pipe 0 at {e.value.filename}:" in str(e.value)
    assert str(line_of(swap_halves, "# <- wait")) in str(e.value)


@nki.jit
def wide_psum(a, b, banks=2):
    at, bt = (
        nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf),
        nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf),
    )
    nisa.dma_copy(at, a)
    nisa.dma_copy(bt, b)
    acc = nl.ndarray((a.shape[1], 512 * banks), dtype=nl.float32, buffer=nl.psum)  # <- alloc
    for j in range(banks):
        nisa.nc_matmul(acc[:, j * 512 : (j + 1) * 512], at, bt[:, j * 512 : (j + 1) * 512])
    res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(res, acc)
    out = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(out, res)
    return out


def test_psum_tensors_may_span_several_banks():
    from _nki_support import line_of

    from devkit.errors import CapacityError

    a = RNG.integers(-2, 3, (64, 32)).astype(np.float32)
    b = RNG.integers(-2, 3, (64, 1024)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(wide_psum)(a, b), a.T @ b)
    big = RNG.integers(-2, 3, (64, 512 * 9)).astype(np.float32)
    with pytest.raises(CapacityError) as e:
        nki.simulate(wide_psum)(a, big, 9)
    assert e.value.rule == "psum-tile-size" and e.value.lineno == line_of(wide_psum, "# <- alloc")


# ---- virtual registers and dynamic loops ---------------------------------------------------------------------------


@nki.jit
def dynamic_loops(a, n):
    t, p, f = a.shape
    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(n_sb, n)
    reg = nisa.register_alloc()
    nisa.register_load(reg, n_sb)
    acc = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(acc, 0.0)
    tile = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.dynamic_range(reg):  # the first n tiles
        nisa.dma_copy(tile, a[i])
        nisa.tensor_tensor(acc, acc, tile, nl.add)
    left = nisa.register_alloc(n_sb)
    while left:  # n more times: add 1
        nisa.tensor_scalar(acc, acc, nl.add, 1.0)
        nisa.tensor_scalar(n_sb, n_sb, nl.subtract, 1)
        nisa.register_load(left, n_sb)
    last = nisa.register_alloc(t - 1)
    nisa.register_store(n_sb, last)  # n_sb = t - 1, then read that tile through a register offset
    row = nisa.register_alloc(n_sb)
    nisa.dma_copy(tile, a.ap(pattern=[[f, p], [1, f]], offset=0, scalar_offset=row, indirect_dim=0))
    nisa.tensor_tensor(acc, acc, tile, nl.add)
    out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(out, acc)
    return out


@pytest.mark.parametrize("n", [0, 2, 3])
def test_virtual_registers_drive_dynamic_loops(n):
    a = RNG.integers(-4, 5, (4, 8, 16)).astype(np.float32)
    got = nki.simulate(dynamic_loops)(a, np.array([[n]], dtype=np.int32))
    np.testing.assert_array_equal(got, a[:n].sum(axis=0) + n + a[3])


# ---- NKI 0.5 view methods -------------------------------------------------------------------------------------


@nki.jit
def view_methods(a):
    # a: HBM [4, 6, 8]
    s = nl.ndarray((6, 4, 8), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a.permute((1, 0, 2)))  # HBM permute: any order
    info = (
        a.get_pattern(),
        a.is_contiguous(),
        a.permute((1, 0, 2)).is_contiguous(),
        s.slice(2, 1, 7, 2).shape,
        a.select(0, 2).shape,
        s.reshape_dim(2, (2, 4)).shape,
        s.flatten_dims(1, 2).shape,
        s.slice(1, 0, 1).squeeze_dim(1).shape,
        s.expand_dim(1).shape,
    )
    outs = []
    for v in (
        s.slice(2, 1, 7, 2),
        s.select(1, 3),
        s.reshape_dim(2, (2, 4)).permute((0, 2, 1, 3)),
        s.slice(1, 2, 3).broadcast(1, 3),
        s.flatten_dims(1, 2),
    ):
        t = nl.ndarray(v.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(t, v)
        o = nl.ndarray(v.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(o, t)
        outs.append(o)
    return tuple(outs), info


def test_nki_05_view_methods():
    a = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)
    (sl, se, rp, bc, fl), info = nki.simulate(view_methods)(a)
    s = a.transpose(1, 0, 2)
    assert info == (
        [[48, 4], [8, 6], [1, 8]],
        True,
        False,
        (6, 4, 3),
        (6, 8),
        (6, 4, 2, 4),
        (6, 32),
        (6, 8),
        (6, 1, 4, 8),
    )
    np.testing.assert_array_equal(sl, s[:, :, 1:7:2])
    np.testing.assert_array_equal(se, s[:, 3, :])
    np.testing.assert_array_equal(rp, s.reshape(6, 4, 2, 4).transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(bc, np.repeat(s[:, 2:3, :], 3, axis=1))
    np.testing.assert_array_equal(fl, s.reshape(6, 32))


@nki.jit
def partition_permute(a):
    s = nl.ndarray((8, 4), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    return s.permute((1, 0))


@nki.jit
def flatten_permuted(a):
    s = nl.ndarray((8, 2, 4), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    return s.permute((0, 2, 1)).flatten_dims(1, 2)


def test_on_chip_view_methods_keep_the_partition_dim_and_contiguity():
    with pytest.raises(KernelArgumentError) as e:
        nki.simulate(partition_permute)(np.zeros((8, 4), np.float32))
    assert "partition" in str(e.value)
    with pytest.raises(KernelArgumentError) as e:
        nki.simulate(flatten_permuted)(np.zeros((8, 2, 4), np.float32))
    assert e.value.rule == "reshape" and "not contiguous" in str(e.value)


@nki.jit
def reinterpret(a):
    v = a.reinterpret_cast(nl.uint8)
    t = nl.ndarray(v.shape, dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(t, v)
    o = nl.ndarray(v.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
    nisa.dma_copy(o, t)
    w = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(w, a.reinterpret_cast(nl.float32))
    o2 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(o2, w)
    return o, o2


def test_reinterpret_cast_scales_the_last_dim():
    a = RNG.integers(0, 2**31, (4, 6)).astype(np.uint32)
    bytes_, floats = nki.simulate(reinterpret)(a)
    np.testing.assert_array_equal(bytes_, a.view(np.uint8))
    np.testing.assert_array_equal(floats.view(np.uint32), a)


# ---- nl.* convenience wrappers (NKI 0.3.0+) ------------------------------------------------------------------


@nki.jit
def wrappers(a, b):
    x, y = nl.load(a), nl.load(b)
    gt = nl.greater(x, y)  # 1/0 in the input dtype
    total = nl.sum(nl.add(x, y, nl.float32), 1, keepdims=True)
    e = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(e, nl.exp, x)  # the wrappers are still operator tokens
    out = [nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm) for t in (gt, total, e)]
    for o, t in zip(out, (gt, total, e)):
        nl.store(o, t)
    return tuple(out)


def test_nl_wrappers_take_positional_dtype_and_compare_in_the_input_dtype():
    a = RNG.standard_normal((8, 16)).astype(np.float32)
    b = RNG.standard_normal((8, 16)).astype(np.float32)
    gt, total, e = nki.simulate(wrappers)(a, b)
    assert gt.dtype == np.float32
    np.testing.assert_array_equal(gt, (a > b).astype(np.float32))
    np.testing.assert_allclose(total[:, 0], (a + b).sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(e, np.exp(a), rtol=1e-6)


@nki.jit
def transpose_with_identity(a):
    n = a.shape[0]
    s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    ident = nl.shared_identity_matrix(n, dtype=a.dtype)
    acc = nl.ndarray((a.shape[1], n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, s, ident)  # a.T @ I
    swap = nl.ndarray((n, n), dtype=a.dtype, buffer=nl.sbuf)  # rows 2i, 2i+1 of I, de-interleaved
    nisa.tensor_copy(swap.reshape((n, 2, n // 2)), ident.ap(pattern=[[n, n], [1, 2], [2, n // 2]]))
    r = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(r, acc)
    o1 = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(o1, r)
    o2 = nl.ndarray((n, n), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(o2, swap)
    return o1, o2


def test_shared_identity_matrix_is_an_sbuf_operand():
    a = RNG.standard_normal((8, 5)).astype(np.float32)
    t, swap = nki.simulate(transpose_with_identity)(a)
    np.testing.assert_array_equal(t, a.T)
    eye = np.eye(8, dtype=np.float32)
    np.testing.assert_array_equal(swap, np.concatenate([eye[:, 0::2], eye[:, 1::2]], axis=1))


def test_cost_model_tracks_reshaped_and_reinterpreted_aliases():
    """Dependencies through a ``.reshape`` / ``.ap(dtype=)`` alias are tracked in the original's layout."""
    import nki.typing as nt

    from devkit.sim.machine import enclosing_box

    # rows 1..2 of a (4, 8) view are elements 8..23 of a (2, 16) layout: row 0 from column 8, all of row 1
    assert enclosing_box((4, 8), 4, ((1, 3), (0, 8)), (2, 16), 4) == ((0, 2), (0, 16))
    assert enclosing_box((4, 8), 4, ((2, 3), (0, 8)), (2, 16), 4) == ((1, 2), (0, 8))
    assert enclosing_box((4, 8), 4, ((2, 3), (0, 4)), (2, 16), 4) == ((1, 2), (0, 4))
    assert enclosing_box((2, 4), 4, ((1, 2), (0, 4)), (2, 16), 1) == ((1, 2), (0, 16))  # uint32 view of bytes
    rep = devkit.estimate(transpose_with_identity, nt.tensor[[8, 5], nl.float32], target="trn2").to_dict()
    assert rep["instructions_by_engine"] == {"tensor": 1, "vector": 2, "scalar": 0, "gpsimd": 0, "dma": 3}


@nki.jit
def wide_matmul(a, b):
    at, bt = (
        nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf),
        nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf),
    )
    nisa.dma_copy(at, a)
    nisa.dma_copy(bt, b)
    acc = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, at, bt)  # <- wide
    nisa.nc_matmul(acc, at, bt)  # accumulates
    r = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(r, acc)
    out = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(out, r)
    return out


def test_neuroncore_v4_matmul_takes_wide_moving_tensors(monkeypatch):
    from _nki_support import line_of

    from devkit.errors import TileShapeError

    a = RNG.integers(-2, 3, (32, 16)).astype(np.float32)
    b = RNG.integers(-2, 3, (32, 1536)).astype(np.float32)
    monkeypatch.setenv("NKI_NC_VERSION", "gen4")
    np.testing.assert_array_equal(nki.simulate(wide_matmul)(a, b), 2 * (a.T @ b))
    monkeypatch.setenv("NKI_NC_VERSION", "gen3")  # 512 columns at most before NeuronCore-v4
    with pytest.raises(TileShapeError) as e:
        nki.simulate(wide_matmul)(a, b)
    assert e.value.rule == "matmul-moving-size" and e.value.lineno == line_of(wide_matmul, "# <- wide")


# ---- nl.shared_constant from a .npy file (nki-library rotational top-k) ---------------------------------------


@nki.jit
def constant_from(src):
    c = nl.shared_constant(src)
    t = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=c)
    out = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_shared_constant_reads_npy_paths(tmp_path):
    want = RNG.standard_normal((16, 8)).astype(np.float32)
    path = tmp_path / "c.npy"
    np.save(path, want)
    np.testing.assert_array_equal(nki.simulate(constant_from)(str(path)), want)
    np.testing.assert_array_equal(nki.simulate(constant_from)(path), want)
    with pytest.raises(KernelArgumentError, match=r"missing\.npy"):
        nki.simulate(constant_from)(str(tmp_path / "missing.npy"))


@nki.jit
def exchange_twice(a, extra_send_by=None):
    """Two sendrecvs on pipe 0 in a row (nki-library router_topk); optionally one program sends a third time."""
    pid = nl.program_id(0)
    peer = 1 - pid
    mine = nl.ndarray((8, 16), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[pid * 8 : (pid + 1) * 8, :])
    first = nl.ndarray((8, 16), dtype=a.dtype, buffer=nl.sbuf)
    second = nl.ndarray((8, 16), dtype=a.dtype, buffer=nl.sbuf)
    nisa.sendrecv(mine, first, send_to_rank=peer, recv_from_rank=peer, pipe_id=0)
    nisa.tensor_scalar(dst=mine, data=mine, op0=nl.multiply, operand0=2.0)
    nisa.sendrecv(mine, second, send_to_rank=peer, recv_from_rank=peer, pipe_id=0)
    if extra_send_by == pid:
        nisa.sendrecv(mine, second, send_to_rank=peer, recv_from_rank=peer, pipe_id=0)  # <- wait
    out = nl.ndarray((16, 16), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.tensor_tensor(dst=first, data1=first, data2=second, op=nl.add)
    nisa.dma_copy(dst=out[pid * 8 : (pid + 1) * 8, :], src=first)
    return out


def test_a_second_send_on_a_pipe_waits_for_the_first_to_be_received():
    from devkit.nki.beta2.lnc import DeadlockError

    a = RNG.standard_normal((16, 16)).astype(np.float32)
    got = nki.simulate(exchange_twice[2])(a)
    want = 3 * np.concatenate([a[8:], a[:8]])  # each program gets the peer's rows, once and doubled
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(DeadlockError) as e:  # program 1 sends a third time; program 0 never receives it
        nki.simulate(exchange_twice[2])(a, 1)
    assert "program 1 of an LNC-2 launch waits for a sendrecv from program 0 on pipe 0" in str(e.value)
    lines, first = inspect.getsourcelines(exchange_twice.func)
    assert e.value.lineno == first + next(i for i, ln in enumerate(lines) if "# <- wait" in ln)


# ---- `if tile:` is a presence test in NKI 0.x (nki-library mlp_tkg_constants.py) ----------------------------------


@nki.jit
def copy_if_given(a, scale=None):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    s = None
    if scale is not None:
        s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.memset(s, float(scale))
    if s:  # an SBUF tile: true when given, as in hardware-tested NKI 0.x code
        nisa.tensor_tensor(dst=t, data1=t, data2=s, op=nl.multiply)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_sbuf_tile_truthiness_tests_presence():
    a = RNG.standard_normal((128, 8)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(copy_if_given)(a), a)
    np.testing.assert_array_equal(nki.simulate(copy_if_given)(a, 3.0), a * np.float32(3.0))


# ---- nl.NKIObject subclasses without __init__ are built from their fields (nki-library moe_cte) -------------------


class _Dims(nl.NKIObject):
    rows: int
    cols: int
    scale: float = 1.0


def test_nkiobject_fields_make_the_constructor():
    d = _Dims(rows=4, cols=8)
    assert (d.rows, d.cols, d.scale) == (4, 8, 1.0)
    d = _Dims(2, 3, 0.5)
    assert (d.rows, d.cols, d.scale) == (2, 3, 0.5)
    d = _Dims(rows=1)  # a field not given stays unset until the object's code sets it
    assert d.rows == 1 and not hasattr(d, "cols") and d.scale == 1.0
    with pytest.raises(TypeError, match="unexpected keyword argument 'depth'"):
        _Dims(rows=1, cols=2, depth=3)
