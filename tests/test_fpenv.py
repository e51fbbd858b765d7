"""Subnormal floats under jax.jit: XLA:CPU flushes them to zero while it runs; the simulator keeps them
in eager calls and in the host callback of a jitted kernel whose schedule data steers (a scalar
input here); the jitted replay, XLA code, runs in XLA's float modes."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax import tile
from ptojax._fpenv import flushing, ieee
from ptojax.ascend import program


def _scaled_sum(x, y):
    with tile(vec=(8, 128)):
        return jnp.sum(x * y, axis=-1, keepdims=True) + x


def _scaled_sum_by(x, y, s):
    """``_scaled_sum`` times a scalar input: the host reads the scalar, so jax.jit keeps the host callback."""
    with tile(vec=(8, 128)):
        return (jnp.sum(x * y, axis=-1, keepdims=True) + x) * s


_ONE = np.float32(1)


def _subnormal_inputs(rows=64):
    rng = np.random.default_rng(0)
    x = (rng.uniform(-1, 1, (rows, 256)) * 1e-38).astype(np.float32)      # subnormal or near it
    y = rng.uniform(0.01, 1, (rows, 256)).astype(np.float32)              # products below 1.2e-38: subnormal
    return x, y


def _ieee_reference(x, y):
    """NumPy on this (main, IEEE) thread, in the kernel's order: the products, each 128-column tile's row
    sums left to right (as ``trowsum`` adds), the tiles' sums added, plus x."""
    assert not flushing()
    p = x * y
    tiles = [np.cumsum(p[:, c:c + 128], axis=-1, dtype=np.float32)[:, -1:] for c in range(0, p.shape[1], 128)]
    total = tiles[0]
    for t in tiles[1:]:
        total = total + t
    return total + x


def test_xla_flushes_in_a_callback_and_ieee_turns_it_off_and_back():
    seen = {}

    def host(x):
        seen["callback"] = flushing()
        with ieee():
            seen["inside"] = flushing()
        seen["after"] = flushing()
        return x

    f = jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct((1,), jnp.float32), x))
    jax.block_until_ready(f(jnp.ones(1, jnp.float32)))
    assert seen == {"callback": True, "inside": False, "after": True}


def test_a_platform_without_the_switch_warns(monkeypatch):
    from ptojax import _fpenv

    monkeypatch.setattr(_fpenv, "_libm", lambda: None)
    seen = {}

    def host(x):
        with pytest.warns(RuntimeWarning, match="flushes subnormals to zero and ptojax cannot turn that off"):
            with ieee():
                seen["inside"] = flushing()
        return x

    f = jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct((1,), jnp.float32), x))
    jax.block_until_ready(f(jnp.ones(1, jnp.float32)))
    assert seen == {"inside": True}


@pytest.mark.parametrize("executor", ["simulated", "threads"])
def test_the_host_callback_under_jit_keeps_subnormals_as_the_eager_call_does(executor):
    x, y = _subnormal_inputs()
    kernel = pj.kernel(_scaled_sum_by, executor=executor)
    assert "callback" in jax.jit(kernel).lower(x, y, _ONE).as_text()
    eager = np.asarray(kernel(x, y, _ONE))
    jitted = np.asarray(jax.jit(kernel)(x, y, _ONE))
    assert np.count_nonzero(eager) > eager.size // 2                       # subnormals survived
    np.testing.assert_array_equal(jitted.view(np.uint32), eager.view(np.uint32))
    np.testing.assert_array_equal(eager, _ieee_reference(x, y))


def test_the_jitted_replay_runs_in_xlas_float_modes():
    """No callback: XLA:CPU treats the subnormal operands as zeros (and would flush subnormal results),
    where the eager call keeps them."""
    x, y = _subnormal_inputs()
    kernel = pj.kernel(_scaled_sum)
    assert "callback" not in jax.jit(kernel).lower(x, y).as_text()
    eager = np.asarray(kernel(x, y))
    jitted = np.asarray(jax.jit(kernel)(x, y))
    np.testing.assert_array_equal(eager, _ieee_reference(x, y))
    assert np.count_nonzero(eager) > eager.size // 2
    np.testing.assert_array_equal(jitted, np.asarray(jax.jit(_scaled_sum)(x, y)))
    assert not np.any(jitted)                                              # every value was subnormal


def test_batch_threads_started_under_jit_keep_subnormals(monkeypatch):
    """Lanes shared by pool threads that a jitted call starts (threads inherit the float modes)."""
    monkeypatch.setattr(program, "_THREADS", 3)
    monkeypatch.setattr(program, "_BYTES_PER_THREAD", 1)
    monkeypatch.setattr(program, "_LANES_MIN", 1)
    monkeypatch.setattr(program, "_LANE_CODE_MIN", 1)
    monkeypatch.setattr(program, "_LANE_CODE_BYTES", 1 << 40)
    program._pool.cache_clear()
    try:
        x, y = _subnormal_inputs(rows=256)
        kernel = pj.kernel(_scaled_sum_by)
        jitted = np.asarray(jax.jit(kernel)(x, y, _ONE))
        eager = np.asarray(kernel(x, y, _ONE))
    finally:
        program._pool.cache_clear()
    assert np.count_nonzero(eager) > eager.size // 2
    np.testing.assert_array_equal(jitted.view(np.uint32), eager.view(np.uint32))
