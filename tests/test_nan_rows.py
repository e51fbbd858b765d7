"""A max / min reduction whose NaN the results absorb (a softmax's row max) skips the NaN pass
(``lowering/nan_rows.py``): the same bits as with the pass, on rows holding NaNs and infinities, and the
pass kept wherever a row's extremum could reach a result unabsorbed."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import same_bits
from ptojax.ascend import crosscheck as xc
from ptojax.lowering import tensor
from ptojax.lowering.pipeline import lower
from vendor_tools import tools

_FIXTURES = (tools,)                  # (the vendor tools, pinned)

EXTREMA = ("pto.amax", "pto.amin")


def rows_with_nans(shape, seed=0, dtype=np.float32):
    """Normal values with a NaN first, a NaN inside, a row of NaNs, a row of -inf, a +inf and a -inf."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    x[1, 0] = x[3, 5] = np.nan
    x[5] = np.nan
    x[6] = -np.inf
    x[7, 2], x[0, 3] = np.inf, -np.inf
    return x.astype(dtype)


def one_nan_inside(shape, seed=0):
    """Normal values and one NaN inside a row: the row max that skips NaN loses it (where a NaN first in
    a row or a row of NaNs keeps it)."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    x[3, 5] = np.nan
    return x


def marks(fn, *args):
    """Each float max / min reduction of ``fn``'s Tensor graph: whether it skips the NaN pass."""
    return [e.params.get("skip_nan", False) for e in lower(fn, *args).tensor.jaxpr.eqns if e.primitive.name in EXTREMA]


def with_the_pass(monkeypatch, fn, *args):
    """``fn``'s eager result with every reduction keeping its NaN pass."""
    with monkeypatch.context() as m:
        m.setattr(tensor, "mark_skip_nan", lambda closed: closed)
        return pj.kernel(lambda *a: fn(*a))(*args)


def masked(x):
    return jax.nn.softmax(jnp.where(x > 1.0, -jnp.inf, x), axis=-1)


ABSORBED = {
    "softmax": lambda x: jax.nn.softmax(x, axis=-1),
    "log_softmax": lambda x: jax.nn.log_softmax(x, axis=-1),
    "logsumexp": lambda x: jax.nn.logsumexp(x, axis=-1),
    "column softmax": lambda x: jax.nn.softmax(x, axis=0),
    "bf16 softmax": lambda x: jax.nn.softmax(x.astype(jnp.bfloat16), axis=-1),
    "masked softmax": masked,
    "softmax over two axes": lambda x: jax.nn.softmax(x.reshape(4, 4, 64), axis=(1, 2)),
    "two softmaxes": lambda x: jax.nn.softmax(x, -1) + jax.nn.softmax(x * 2.0, -1),
    "spread max": lambda x: (lambda m: jnp.exp(x - jnp.broadcast_to(m, x.shape))
                             / jnp.sum(jnp.exp(x - m), -1, keepdims=True))(jnp.max(x, -1, keepdims=True)),
    "min form": lambda x: (lambda e: e / jnp.sum(e, -1, keepdims=True))(jnp.exp(jnp.min(x, -1, keepdims=True) - x)),
}


@pytest.mark.usefixtures("tools")
@pytest.mark.parametrize("name", list(ABSORBED))
def test_an_absorbed_extremum_skips_the_pass_and_keeps_the_bits(name, monkeypatch):
    fn = ABSORBED[name]
    x = rows_with_nans((16, 64))
    assert all(marks(fn, x)), marks(fn, x)
    kernel = pj.kernel(fn)
    got = kernel(x)
    same_bits(got, with_the_pass(monkeypatch, fn, x))
    same_bits(jax.jit(kernel)(x), got)
    rows = np.asarray(jax.tree.leaves(got)[0], np.float32).reshape(16, -1) if name != "column softmax" else None
    if rows is not None and name not in ("softmax over two axes", "masked softmax"):
        assert np.isnan(rows[[1, 3, 5]]).all() and not np.isnan(rows[[2, 4]]).any()   # NaN rows whole, others none
    assert all(r.status in ("exact", "skipped") for r in xc.crosscheck(kernel.lower(x).compile().code))


def test_the_softmax_program_loses_its_nan_pass(monkeypatch):
    x = rows_with_nans((16, 64))
    count = lambda text: sum(line.count(" ins(") for line in text.splitlines())    # noqa: E731
    softmax = ABSORBED["softmax"]
    fewer = count(pj.kernel(softmax).lower(x).compile().code.pto())
    with monkeypatch.context() as m:
        m.setattr(tensor, "mark_skip_nan", lambda closed: closed)
        more = count(pj.kernel(lambda x: softmax(x)).lower(x).compile().code.pto())
    assert more - fewer >= 4        # the clamp, the multiply by 0, its row sum and the NaN select


KEPT = {
    "returned": lambda x: (lambda m: (jnp.exp(x - m) / jnp.sum(jnp.exp(x - m), -1, keepdims=True), m))(
        jnp.max(x, -1, keepdims=True)),
    "only subtracted": lambda x: x - jnp.max(x, -1, keepdims=True),
    "summed over another axis": lambda x: jnp.sum(jnp.exp(x - jnp.max(x, -1, keepdims=True)), 0),
    "through a maximum": lambda x: (lambda e: e / jnp.sum(e, -1, keepdims=True))(
        jnp.maximum(x - jnp.max(x, -1, keepdims=True), -5.0)),
    "unnormalised exp returned": lambda x: (lambda e: (e, jnp.sum(e, -1)))(jnp.exp(x - jnp.max(x, -1, keepdims=True))),
    "two maxima mixed": lambda x: (jnp.exp(x - jnp.max(x, -1, keepdims=True))
                                   / jnp.sum(jnp.exp(x - jnp.max(x, -1, keepdims=True) * 1.0), -1, keepdims=True)),
    "across rows": lambda x: (lambda e: e / jnp.sum(e, -1, keepdims=True))(jnp.exp(x - jnp.max(x, 0, keepdims=True))),
    "max of row maxima": lambda x: jnp.max(jnp.max(x, -1)),
    "min of row maxima": lambda x: jnp.min(jnp.max(x, -1)),
    "column max of x - row max": lambda x: jnp.max(x - jnp.max(x, -1, keepdims=True), 0),
}


@pytest.mark.parametrize("name", list(KEPT))
def test_an_extremum_that_could_reach_a_result_keeps_its_nan(name):
    fn = KEPT[name]
    for x in (rows_with_nans((16, 64)), one_nan_inside((16, 64))):
        assert not any(marks(fn, x))
        with jax.enable_x64(True):
            want = [np.asarray(a) for a in jax.tree.leaves(jax.jit(fn)(x.astype(np.float64)))]
        got = jax.tree.leaves(pj.kernel(fn)(x))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.isnan(np.asarray(g)), np.isnan(w))


def _random_program(rng):
    """A random graph around a row or column extremum: NaN-keeping and other elementwise ops, sums and
    divisions by them, extrema of its values, one or two outputs; softmax-like often enough to skip the
    pass in many."""
    axis, largest, keep = int(rng.integers(2)), bool(rng.integers(2)), bool(rng.random() < 0.8)
    steps = [tuple(rng.integers(0, 10, size=3)) for _ in range(int(rng.integers(3, 7)))]
    outputs = int(rng.integers(1, 3))

    def fn(x):
        m = (jnp.max if largest else jnp.min)(x, axis, keepdims=keep)
        pool = [x, m if keep else jnp.expand_dims(m, axis)]
        for op, i, j in steps:
            a, b = pool[-1 - i % len(pool)], pool[-1 - j % len(pool)]
            if op == 0:
                v = a - b
            elif op == 1:
                v = jnp.exp(a - pool[1]) if a.shape == x.shape else jnp.exp(x - pool[1])
            elif op == 2:
                v = jnp.sum(a, axis, keepdims=True) if a.shape == x.shape else a * 2.0
            elif op == 3:
                v = a / b
            elif op == 4:
                v = jnp.log(jnp.abs(a))
            elif op == 5:
                v = jnp.maximum(a, b)
            elif op == 6:
                v = a + jnp.sum(jnp.exp(x - pool[1]), axis, keepdims=True)
            elif op == 7:
                v = jnp.tanh(a) * b
            elif op == 8:
                v = jnp.max(a, keepdims=True)
            else:
                v = jnp.min(a, 1 - axis, keepdims=True) if a.shape == x.shape else -a
            pool.append(v)
        return tuple(pool[-1 - k] for k in range(outputs))
    return fn


def test_random_graphs_skip_the_pass_only_where_the_bits_stay(monkeypatch):
    rng = np.random.default_rng(20261207)
    skipped = 0
    for case in range(40):
        fn = _random_program(rng)
        x = rows_with_nans((8, 16), seed=1) if case % 2 else one_nan_inside((8, 16), seed=1)
        skipped += any(marks(fn, x))
        same_bits(pj.kernel(fn)(x), with_the_pass(monkeypatch, fn, x))
    assert skipped >= 8, skipped
