"""Replays as one native call (ptojax/mpmd/fused.py) and, under jax.jit, as native entries XLA calls
itself (ptojax/_xlacall.py): host code's bits, the host callback where an entry cannot run."""
import importlib
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import F16, rand, same_bits
from ptojax import _xlacall
from ptojax.ascend import hostcode
from ptojax.execute import execute
from kernels import KERNELS, seed_kernel

kernel_module = importlib.import_module("ptojax.kernel")
pytestmark = pytest.mark.skipif(not _xlacall.available(), reason="native entries need x86-64 and Numba")

_AFTER = 2      # hostcode.NATIVE_AFTER in these tests


def _host_only(fn, args):
    """The kernel's outputs on host code alone (never promoted)."""
    code = pj.kernel(fn).compiled_for(*args)._code()
    return execute(code.lowering, *args, compiled=code)[0]


def _seed_args(seed):
    return rand((64, 64), F16, seed), rand((64, 64), F16, seed + 1), rand((64, 32), F16, seed + 2)


@pytest.fixture
def counted(monkeypatch):
    """NATIVE_AFTER = _AFTER, and a list that gets one item per host run of a kernel."""
    monkeypatch.setattr(hostcode, "NATIVE_AFTER", _AFTER)
    runs = []
    run_flat = kernel_module.Compiled._run_flat

    def counting(self, *args, **kwargs):
        runs.append(self.name)
        return run_flat(self, *args, **kwargs)

    monkeypatch.setattr(kernel_module.Compiled, "_run_flat", counting)
    return runs


def test_a_replay_becomes_one_native_call_with_host_codes_bits(counted):
    kernel = pj.kernel(seed_kernel)
    for call in range(_AFTER + 4):
        args = _seed_args(10 * call)
        same_bits(kernel(*args), _host_only(seed_kernel, args))
    (kept,) = kernel.compiled_for(*args).plans.values()
    assert kept.fused is not None and kept.replays == _AFTER      # replays past that are the fused call


def test_jitted_kernel_runs_as_a_native_entry_after_its_callbacks(counted):
    jitted = jax.jit(pj.kernel(seed_kernel))
    for call in range(_AFTER + 6):
        args = _seed_args(7 * call)
        same_bits(jitted(*args), _host_only(seed_kernel, args))
    callbacks = counted.count("seed_kernel")
    assert callbacks == _AFTER + 1, counted                         # then the entry, with no callback
    entry = _xlacall._entries[max(_xlacall._entries)]
    assert "_ieee_enter" in entry.source and "_try_lock" in entry.source


_SLOW_TO_COMPILE = {"matmul-fp16-out", "matmul-batched", "fori-loop", "mlp-block", "layout"}   # 9-30 s each


def _jitted_keeps_host_codes_bits(kernel, args):
    want = _host_only(kernel, args)
    jitted = jax.jit(pj.kernel(kernel))
    for _ in range(_AFTER + 3):
        same_bits(jitted(*args), want)


@pytest.mark.parametrize("name,kernel,args", [k for k in KERNELS if k[0] not in _SLOW_TO_COMPILE],
                         ids=[k[0] for k in KERNELS if k[0] not in _SLOW_TO_COMPILE])
def test_jitted_test_kernels_keep_host_codes_bits(counted, name, kernel, args):
    """Every kernel, jitted, past the calls that make an entry where one can be made."""
    _jitted_keeps_host_codes_bits(kernel, args)


@pytest.mark.slow
@pytest.mark.parametrize("name,kernel,args", [k for k in KERNELS if k[0] in _SLOW_TO_COMPILE],
                         ids=[k[0] for k in KERNELS if k[0] in _SLOW_TO_COMPILE])
def test_jitted_test_kernels_slow_to_compile_keep_host_codes_bits(counted, name, kernel, args):
    _jitted_keeps_host_codes_bits(kernel, args)


def _subnormal_products(x, y):
    with pj.tile(vec=(8, 64)):
        return x * y


def test_native_entries_keep_subnormals_that_xla_flushes(counted):
    """XLA runs with flush-to-zero and denormals-are-zero on; the entry turns both off, as the host
    callback does: subnormal products, and subnormal operands."""
    x = np.full((16, 64), 3e-20, np.float32)
    y = np.full((16, 64), 2e-20, np.float32)
    y[0, :8] = [1.0, 0.5, -1e-19, 1e-25, 0.0, -0.0, 5e-21, 1e-18]
    x[1], y[1] = 1e-39, 3.0                             # a subnormal operand
    want = _host_only(_subnormal_products, (x, y))
    assert (np.abs(want) < np.finfo(np.float32).tiny).sum() > 64 and (want[1] != 0).all()
    jitted = jax.jit(pj.kernel(_subnormal_products))
    for _ in range(_AFTER + 3):
        same_bits(jitted(x, y), want)
    assert counted.count("_subnormal_products") == _AFTER + 1


def test_an_entry_in_use_gives_way_to_the_host_callback(counted):
    jitted = jax.jit(pj.kernel(seed_kernel))
    for _ in range(_AFTER + 2):
        jitted(*_seed_args(0))
    entry = _xlacall._entries[max(_xlacall._entries)]
    before = counted.count("seed_kernel")
    entry.lock[0] = 1                                   # as if another thread were running it
    try:
        args = _seed_args(3)
        same_bits(jitted(*args), _host_only(seed_kernel, args))
    finally:
        entry.lock[0] = 0
    assert counted.count("seed_kernel") == before + 1
    jitted(*args)
    assert counted.count("seed_kernel") == before + 1


def test_threads_share_a_jitted_kernel(counted):
    jitted = jax.jit(pj.kernel(seed_kernel))
    inputs = [_seed_args(5 * i) for i in range(6)]
    wants = [_host_only(seed_kernel, args) for args in inputs]
    errors = []

    def work(i):
        try:
            for _ in range(_AFTER + 6):
                same_bits(jitted(*inputs[i]), wants[i])
        except AssertionError as err:                   # noqa: PERF203
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_a_slot_without_an_entry_reports_that_it_did_not_run():
    x = jnp.ones((4, 8), jnp.float32)
    slot = _xlacall.new_slot()
    done, outs = jax.jit(lambda x: _xlacall.call(slot, x, avals=[jax.ShapeDtypeStruct((4, 8), jnp.float32)]))(x)
    assert int(done) == 0 and outs[0].shape == (4, 8)


def test_an_entry_reads_xla_arguments_fills_writes_results_and_reports_failure():
    """Entries on hand-made plans: the input is XLA's buffer, a fill with a non-finite value happens
    before the plan, the outputs are XLA's; a plan whose check fails reports that it did not run (and
    leaves its lock free for the next call)."""
    import numba

    @numba.njit
    def scale(points, views, x, out, flag):
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                out[i, j] = x[i, j] * points[0][0, 0] + views[0][j]
        return -1 if flag[0] == 0 else 0                   # flag: a failed check in the plan's first call

    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    points, views = (np.array([[3]], np.int64),), (np.linspace(0, 1, 8).astype(np.float32),)
    avals = [jax.ShapeDtypeStruct((4, 8), jnp.float32), jax.ShapeDtypeStruct((6,), jnp.float32)]
    for failing in (0, 1):
        flag = np.array([failing], np.int64)
        buffers = [("arg", 0, (4, 8), np.float32), ("ret", 0, (4, 8), np.float32), ("memory", flag, (1,), np.int64)]
        fills = [(1, np.float32(np.nan))]
        entry = _xlacall.Entry(_with_second_output(scale), points, views, buffers + [("ret", 1, (6,), np.float32)],
                               fills + [(3, np.float32(-np.inf))])
        slot = _xlacall.new_slot()
        _xlacall.install(slot, entry)
        run = jax.jit(lambda x, slot=slot: _xlacall.call(slot, x, avals=avals))
        for _ in range(2):
            done, (out, second) = run(x)
            assert int(done) == 1 - failing
            if not failing:
                np.testing.assert_array_equal(np.asarray(out), x * 3 + views[0])
                assert np.isneginf(np.asarray(second)).all()


def _with_second_output(plan):
    """``plan`` taking one more array, which it leaves as filled."""
    import numba

    @numba.njit
    def run(points, views, x, out, flag, second):
        return plan(points, views, x, out, flag)

    return run


def test_without_native_entries_jitted_kernels_use_the_host_callback(counted, monkeypatch):
    monkeypatch.setattr(_xlacall, "available", lambda: False)
    jitted = jax.jit(pj.kernel(seed_kernel))
    args = _seed_args(1)
    for _ in range(_AFTER + 3):
        same_bits(jitted(*args), _host_only(seed_kernel, args))
    assert counted.count("seed_kernel") == _AFTER + 3
