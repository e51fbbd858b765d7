"""GM buffers across block-level loops and branches, eagerly and under ``jax.jit``, exactly as ``jax.jit``.

- A write inside a ``fori_loop`` / ``cond`` body (``x.at[i].set``, ``dynamic_update_slice``) updates its
  carry in place only when nothing reads the old value later: not the enclosing kernel after the loop,
  not the loop's other carries or fixed operands (read again by the next iteration).
- A donated cache updated in a loop is still written in place, with no copy task.
- Literal loop and branch values (the ``fori_loop`` counter's ``0``, a carry's ``0.0``, a branch's
  ``2.0``) reach block programs with their avals' dtypes (int32, float32), not NumPy's int64 / float64.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ptojax as pj

X = np.arange(16, dtype=np.float32).reshape(4, 4)
NEW = -np.ones((4, 4), np.float32)
W = np.eye(4, dtype=np.float32) * 3


def loop_then_read(x, new):
    y = x * 2.0
    c = lax.fori_loop(0, 2, lambda i, c: c.at[i].set(new[i]), y)
    return c, y


def branch_then_read(x, new, p):
    y = x * 2.0
    c = lax.cond(p, lambda c: lax.dynamic_update_slice(c, new[:1], (0, 0)), lambda c: c, y)
    return c, y


def loop_then_matmul(x, new, w):
    y = x * 2.0
    c = lax.fori_loop(0, 2, lambda i, c: c.at[i].set(new[i]), y)
    return c, y @ w


def shared_carries(x, new):
    y = x * 2.0
    a, b = lax.fori_loop(0, 2, lambda i, s: (s[0].at[i].set(new[i]), s[1]), (y, y))
    return a, b


def fixed_and_carry(x):
    y = x * 2.0                 # the carry's start and a value every iteration reads
    return lax.fori_loop(0, 2, lambda i, c: c.at[i + 1].set(y[i]), y)


def nested_then_matmul(x, new, w):
    y = x * 2.0
    c = lax.fori_loop(0, 2, lambda i, c: lax.cond(i > 0, lambda c: c.at[i].set(new[i]), lambda c: c, c), y)
    return c, y @ w


CASES = [
    ("fori_loop", loop_then_read, (X, NEW)),
    ("cond", branch_then_read, (X, NEW, np.bool_(True))),
    ("matmul_after_loop", loop_then_matmul, (X, NEW, W)),
    ("shared_carries", shared_carries, (X, NEW)),
    ("fixed_and_carry", fixed_and_carry, (X,)),
    ("cond_in_loop", nested_then_matmul, (X, NEW, W)),
]

XI = np.arange(8 * 32, dtype=np.int32).reshape(8, 32)
XF = np.ones((8, 32), np.float32)

LITERALS = [
    ("int32_plus_counter", lambda x: lax.fori_loop(0, 3, lambda i, c: c + i, x), XI),
    ("float_carry_from_0.0", lambda x: lax.fori_loop(0, 3, lambda i, c: c + jnp.sum(x), 0.0), XF),
    ("branch_returns_2.0", lambda x: x * lax.cond(x[0, 0] > 0, lambda: 2.0, lambda: 3.0), XF),
]


def _exact(got, want):
    got, want = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("name,fn,args", CASES, ids=[c[0] for c in CASES])
def test_a_write_in_a_body_leaves_values_read_later_intact(name, fn, args, mode):
    kernel = pj.kernel(fn)
    got = kernel(*args) if mode == "eager" else jax.jit(kernel)(*args)
    _exact(got, jax.jit(fn)(*args))


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("name,fn,arg", LITERALS, ids=[c[0] for c in LITERALS])
def test_literal_loop_and_branch_values_keep_their_dtypes(name, fn, arg, mode):
    kernel = pj.kernel(fn)
    got = kernel(arg) if mode == "eager" else jax.jit(kernel)(arg)
    _exact(got, jax.jit(fn)(arg))


def _scatter_loop(cache, rows, slots):
    """A KV-cache update: rows written one per iteration at ``slots``; the cache is the donated argument."""
    return lax.fori_loop(0, rows.shape[0], lambda i, c: lax.dynamic_update_slice(c, rows[i][None], (slots[i], 0)),
                         cache)


def _scatter_loop_and_read(cache, rows, slots):
    return _scatter_loop(cache, rows, slots), jnp.sum(cache, axis=1)


def test_a_donated_cache_updated_in_a_loop_is_written_in_place():
    cache = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    rows = -np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    slots = np.array([3, 9, 0, 15], np.int32)
    want = np.asarray(jax.jit(_scatter_loop)(cache, rows, slots))
    donated = pj.kernel(_scatter_loop, donate_argnums=0).lower(cache, rows, slots).compile()
    buffer = cache.copy()
    out, trace = donated.run(buffer, rows, slots)
    np.testing.assert_array_equal(out, want)
    assert "copy" not in {r.name for r in trace.records}
    np.testing.assert_array_equal(buffer, want)          # the donated array holds the result
    # The old cache read after the loop: the loop starts from a copy, the donated array keeps its value.
    want = jax.jit(_scatter_loop_and_read)(cache, rows, slots)
    read = pj.kernel(_scatter_loop_and_read, donate_argnums=0).lower(cache, rows, slots).compile()
    buffer = cache.copy()
    out, trace = read.run(buffer, rows, slots)
    _exact(out, want)
    assert "copy" in {r.name for r in trace.records}
    np.testing.assert_array_equal(buffer, cache)
