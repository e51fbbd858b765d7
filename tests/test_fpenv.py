"""Subnormal floats under jax.jit: XLA:CPU flushes them to zero while it runs; the text engine keeps
them, as pto-isa's CPU simulator does (IEEE arithmetic: g++ without fast-math), in eager calls and in
the host callback of a jitted kernel whose schedule data steers (a scalar input here); the jitted
replay, XLA code, runs in XLA's float modes."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax import tile
from ptojax._fpenv import flushing, ieee_call


def _scaled_sum(x, y):
    with tile(vec=(8, 128)):
        return jnp.sum(x * y, axis=-1, keepdims=True) + x


def _looped_sum(x, y, n):
    """``_scaled_sum`` as a loop of ``n`` (one) trips: the host reads the trip count, so jax.jit keeps the
    host callback."""
    with tile(vec=(8, 128)):
        return jax.lax.fori_loop(0, n, lambda i, c: jnp.sum(x * y, axis=-1, keepdims=True) + c, x)


_ONE = np.int32(1)


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


def test_xla_flushes_in_a_callback_and_ieee_call_runs_without():
    seen = {}

    def fails():
        raise ZeroDivisionError("from the IEEE thread")

    def host(x):
        seen["callback"] = flushing()
        seen["inside"] = ieee_call(flushing)
        with pytest.raises(ZeroDivisionError, match="from the IEEE thread"):
            ieee_call(fails)
        seen["after"] = flushing()
        return x

    f = jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct((1,), jnp.float32), x))
    jax.block_until_ready(f(jnp.ones(1, jnp.float32)))
    assert seen == {"callback": True, "inside": False, "after": True}
    assert ieee_call(flushing) is False                    # on an IEEE thread: called here


def test_flushing_everywhere_warns(monkeypatch):
    from ptojax import _fpenv

    monkeypatch.setattr(_fpenv._STARTER, "ieee", False)
    seen = {}

    def host(x):
        with pytest.warns(RuntimeWarning, match="flushes subnormals to zero and so did the thread that imported"):
            seen["inside"] = ieee_call(flushing)
        return x

    f = jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct((1,), jnp.float32), x))
    jax.block_until_ready(f(jnp.ones(1, jnp.float32)))
    assert seen == {"inside": True}


@pytest.mark.parametrize("executor", ["simulated", "threads"])
def test_the_host_callback_under_jit_keeps_subnormals_as_the_eager_call_does(executor):
    x, y = _subnormal_inputs()
    kernel = pj.kernel(_looped_sum, executor=executor)
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


def test_interpret_runs_the_interpreter_under_jit_too():
    """``pj.kernel(..., interpret=True)``, the debugging switch: jax.jit lowers the kernel to the host
    callback instead of the replay, and gives the eager call's bits (subnormals kept)."""
    x, y = _subnormal_inputs()
    kernel = pj.kernel(_scaled_sum, interpret=True)
    assert "callback" in jax.jit(kernel).lower(x, y).as_text()
    jitted = np.asarray(jax.jit(kernel)(x, y))
    np.testing.assert_array_equal(jitted.view(np.uint32), np.asarray(kernel(x, y)).view(np.uint32))
    np.testing.assert_array_equal(jitted, _ieee_reference(x, y))


def test_walks_and_tapes_under_jit_keep_subnormals():
    """Under jax.jit's host callback, the grid points walk the text together and a second call replays
    the kept plan (its tapes): both keep subnormals, bit for bit the eager call, and the row sums
    (``trowsum``'s fold, run on NumPy) are IEEE's."""
    x, y = _subnormal_inputs(rows=256)
    kernel = pj.kernel(_looped_sum)
    eager = np.asarray(kernel(x, y, _ONE))
    jitted = jax.jit(kernel)
    first, again = np.asarray(jitted(x, y, _ONE)), np.asarray(jitted(x, y, _ONE))
    assert np.count_nonzero(eager) > eager.size // 2
    np.testing.assert_array_equal(eager, _ieee_reference(x, y))
    for got in (first, again):
        np.testing.assert_array_equal(got.view(np.uint32), eager.view(np.uint32))


@pytest.mark.parametrize("op,shape,dtype", [("trowsum", (3, 8, 16), np.float32), ("trowsum", (3, 8, 1000), np.float32),
                                            ("tcolsum", (3, 200, 16), np.float32), ("trowsum", (3, 8, 100), np.float16),
                                            ("tcolsum", (3, 70, 16), np.float16), ("tcolsum", (3, 9, 40), np.int16)])
def test_sums_on_numpy_equal_the_jnp_semantics_and_keep_subnormals(op, shape, dtype):
    """The engine's NumPy row and column sums (``ON_NUMPY``, all grid points at once): the jnp
    semantics' bits under XLA on normal values (signed zeros, all -0 rows too), and where the terms are
    subnormal the in-order IEEE sum the simulator adds, not XLA:CPU's zeros."""
    from ptojax.ascend.tile_semantics import ON_NUMPY, SEMANTICS

    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 100).astype(dtype)
    x[0] = 0
    if x.dtype.kind == "f":
        x[0, :2] = -0.0
    want = np.asarray(jax.jit(jax.vmap(SEMANTICS[op]))(x))
    got = ON_NUMPY[op](x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    if x.dtype != np.float32:
        return
    tiny = (rng.uniform(-1, 1, shape) * 1e-39).astype(np.float32)
    axis = 2 if op == "trowsum" else 1
    sums = ON_NUMPY[op](tiny)
    assert np.count_nonzero(sums) > sums.size // 2
    np.testing.assert_array_equal(sums, np.cumsum(tiny, axis=axis, dtype=np.float32).take([-1], axis=axis))
    assert np.count_nonzero(np.asarray(jax.jit(jax.vmap(SEMANTICS[op]))(tiny))) == 0     # XLA:CPU flushes


@pytest.mark.parametrize("name,x", [
    ("exp", np.linspace(-103.5, -86.0, 2048)),                                   # subnormal results
    ("log", np.concatenate([np.linspace(1e-45, 1.2e-38, 1024), np.linspace(0.5, 2.0, 1024)])),  # subnormal operands
    ("sqrt", np.linspace(0.0, 2e-38, 2048))])
def test_double_rounded_instructions_keep_subnormals(name, x):
    """The engine computes ``texp``/``tlog``/``tsqrt`` as the simulator does, in double rounded once
    (their NumPy forms): subnormal results and operands kept where XLA:CPU flushes them."""
    x = x.astype(np.float32)
    got = np.asarray(pj.kernel(getattr(jnp, name))(x))
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x.astype(np.float64)).astype(np.float32)
    tiny = np.finfo(np.float32).tiny
    subnormal = (want != 0) & (np.abs(want) < tiny) | (x != 0) & (np.abs(x) < tiny)
    assert subnormal.sum() > 100
    np.testing.assert_array_equal(got[subnormal].view(np.uint32), want[subnormal].view(np.uint32))


def _scan(row, better):
    """The simulator's scan ``if (better(x, best)) best = x`` over ``row``: (index, value)."""
    at = 0
    for i, v in enumerate(row):
        if better(v, row[at]):
            at = i
    return at, row[at]


def test_row_and_column_extrema_and_products_keep_subnormals_in_eager_calls():
    """Row/column max, min, argmax and products compare and multiply subnormals as IEEE numbers, as
    the simulator does (they ran on XLA:CPU, which took every subnormal for 0: a max of 1e-40 and
    2e-40 was 0 at index 0, a product of 1e-20, 1e-20, 1e20 was 0)."""
    x = np.array([[1e-40, 2e-40, -1e-42, 3e-39], [-3e-39, -1e-40, -2e-40, -1e-38],
                  [1e-20, 1e-20, 1e20, 1.0], [6e-39, 1.0, 1.0, 1.0]], np.float32)
    gt, lt = (lambda a, b: a > b), (lambda a, b: a < b)
    cases = {"max": (lambda v: jnp.max(v, axis=-1), lambda r: _scan(r, gt)[1], x),
             "argmax": (lambda v: jnp.argmax(v, axis=-1), lambda r: _scan(r, gt)[0], x),
             "min of columns": (lambda v: jnp.min(v, axis=0), lambda r: _scan(r, lt)[1], x.T),
             "argmin of columns": (lambda v: jnp.argmin(v, axis=0), lambda r: _scan(r, lt)[0], x.T)}
    for name, (fn, scan, rows) in cases.items():
        want = np.array([scan(list(r)) for r in rows])
        np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x)), want, err_msg=name)
    product = np.ones(4, np.float32)
    for c in range(4):
        product = product * x[:, c]                      # in order, each product rounded to float32
    np.testing.assert_array_equal(np.asarray(pj.kernel(lambda v: jnp.prod(v, axis=-1))(x)), product)
    assert product[2] > 0 and np.asarray(pj.kernel(lambda v: jnp.max(v, axis=-1))(x))[0] == 3e-39


def test_floor_and_ceil_of_subnormals_in_eager_calls():
    """Float-to-int conversions rounding down or up take a subnormal as the number it is (XLA:CPU took
    it for 0: ``floor(-1e-42)`` was 0 where the simulator gives -1), and ``jnp.floor`` / ``ceil`` of
    floats with them."""
    x = np.array([[-1e-42, 1e-40, -1e-40, 3e-39, 0.0, -0.0, 2.5, -2.5]], np.float32)
    for rounding, want in (("floor", np.floor(x)), ("ceil", np.ceil(x))):
        got = pj.kernel(lambda v: pj.ops.cast(v, jnp.int32, rounding=rounding))(x)
        np.testing.assert_array_equal(np.asarray(got), want.astype(np.int32), err_msg=rounding)
    np.testing.assert_array_equal(np.asarray(pj.kernel(jnp.floor)(x)), np.floor(x))
    np.testing.assert_array_equal(np.asarray(pj.kernel(jnp.ceil)(x)), np.ceil(x))
