"""``jax.vmap`` over the *index* of a kernel that reads or writes one window or row with a scalar index
(``lax.dynamic_slice``, ``x[i]``, ``lax.dynamic_update_slice``, ``x.at[i].set / add``): JAX writes a
gather / scatter with one start vector per batch entry (``ptojax/lowering/gathers.py``).

Expected values are plain ``jax.vmap`` of the same function (XLA's clamping of window starts, its
out-of-range rules), eagerly and under ``jax.jit``: data movement, compared bit for bit.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import F16, F32, I32, rand

STARTS = np.array([3, 0, -2, 40, 12], np.int32)     # in range, negative (wraps once, as lax), past the end


def _check(fn, args, in_axes):
    """``jax.vmap`` of ``pj.kernel(fn)``, eager and jitted, equals ``jax.vmap(fn)`` bit for bit."""
    want = np.asarray(jax.vmap(fn, in_axes)(*args))
    batched = jax.vmap(pj.kernel(fn), in_axes)
    for got in (batched(*args), jax.jit(batched)(*args)):
        np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("dtype", [F32, F16, I32])
@pytest.mark.parametrize("axis,size", [(0, 4), (1, 8)])
def test_dynamic_slice_with_a_batched_start(axis, size, dtype):
    """One window per batch entry of a shared table; starts clamp into [0, n - size]."""
    def window(x, i):
        return jax.lax.dynamic_slice_in_dim(x, i, size, axis=axis) * 2

    _check(window, (rand((16, 64), dtype), STARTS), (None, 0))


def test_dynamic_slice_with_a_batched_start_and_table():
    """Table and start both batched: each batch entry's window of its own table."""
    def window(x, i):
        return jax.lax.dynamic_slice_in_dim(x, i, 4, axis=1)

    _check(window, (rand((5, 8, 32), F32), STARTS), (0, 0))


def test_dynamic_slice_with_two_batched_starts():
    """A window dynamic along both axes: a gather of rows, then one of columns per batch entry."""
    def window(x, i, j):
        return jax.lax.dynamic_slice(x, (i, j), (4, 8))

    _check(window, (rand((16, 64), F16), STARTS, STARTS[::-1] * 4), (None, 0, 0))


@pytest.mark.parametrize("dtype", [F32, I32])
def test_row_with_a_batched_index(dtype):
    """``x[i]`` with ``i`` batched (lax's one-row window); negative indices count from the end."""
    _check(lambda x, i: jnp.asarray(x)[i], (rand((16, 64), dtype), np.array([3, -2, 15, 0], np.int32)), (None, 0))


@pytest.mark.parametrize("dtype", [F32, F16, I32])
@pytest.mark.parametrize("in_axes", [(None, 0, 0), (0, 0, 0), (None, None, 0)])
def test_dynamic_update_slice_with_a_batched_start(in_axes, dtype):
    """A window written per batch entry, into a shared table (vmap broadcasts it: a batched result), the
    entry's own table, or the same update at each start; starts clamp as lax clamps them."""
    def put(x, u, i):
        return jax.lax.dynamic_update_slice_in_dim(x, u, i, axis=0)

    x = rand((16, 64) if in_axes[0] is None else (5, 16, 64), dtype, seed=1)
    u = rand((4, 64) if in_axes[1] is None else (5, 4, 64), dtype, seed=2)
    _check(put, (x, u, STARTS), in_axes)


def test_dynamic_update_slice_with_a_batched_start_on_an_inner_axis():
    """A window of columns, its start batched: the table's rows folded into the scattered rows."""
    def put(x, u, i):
        return jax.lax.dynamic_update_slice_in_dim(x, u, i, axis=1)

    _check(put, (rand((4, 8, 32), F32), rand((5, 4, 3, 32), F32, seed=1), STARTS), (None, 0, 0))


def test_dynamic_update_slice_dynamic_along_two_axes():
    """A window dynamic along two axes (it had no translation: at most one), alone and vmapped."""
    def put(x, u, i, j):
        return jax.lax.dynamic_update_slice(x, u, (i, j))

    x, u = rand((16, 64), F32), rand((5, 4, 8), F32, seed=1)
    got = pj.kernel(put)(x, u[0], STARTS[2], np.int32(60))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(put(x, u[0], STARTS[2], np.int32(60))))
    _check(put, (x, u, STARTS, STARTS[::-1] * 4), (None, 0, 0, 0))


@pytest.mark.parametrize("op", ["set", "add"])
def test_at_set_and_add_with_a_batched_index(op):
    """``x.at[i]`` / ``x.at[:, i]`` with ``i`` batched; an index out of range writes nothing."""
    def rows(x, u, i):
        return getattr(jnp.asarray(x).at[i], op)(u)

    def columns(x, u, i):
        return getattr(jnp.asarray(x).at[:, i], op)(u)

    idx = np.array([1, 20, -3, 15, 4], np.int32)
    _check(rows, (rand((16, 64), F32), rand((5, 64), F32, seed=1), idx), (None, 0, 0))
    _check(columns, (rand((4, 16, 32), F32), rand((5, 4, 32), F32, seed=1), idx), (None, 0, 0))


def test_vmap_inside_the_kernel():
    """The same forms written by a ``jax.vmap`` inside the kernel (nested: two batch dims)."""
    def fn(x, i, u):
        rows = jax.vmap(jax.vmap(lambda i: jax.lax.dynamic_slice_in_dim(x, i, 4, axis=0)))(i)
        put = jax.vmap(lambda u, i: jax.lax.dynamic_update_slice_in_dim(x, u, i, axis=1))(u, i[0])
        return rows, put

    x, i, u = rand((16, 64), F32), STARTS.reshape(1, 5) + np.arange(2, dtype=np.int32)[:, None], rand((5, 16, 8), F32)
    want = fn(x, i, u)
    jax.tree.map(lambda g, w: np.testing.assert_array_equal(np.asarray(g), np.asarray(w)), pj.kernel(fn)(x, i, u), want)


def test_a_point_scatter_with_a_batched_index_translates():
    """``x.at[i, j].set`` (several axes indexed) under ``jax.vmap`` of its indices: the batch axis is
    indexed by an iota beside them, one ``x[b, i, j]`` scatter."""
    def put(x, u, i, j):
        return x.at[i, j].set(u)

    args = rand((16, 64), F32), rand((3,), F32), STARTS[:3], STARTS[:3]
    want = jax.jit(jax.vmap(put, (None, 0, 0, 0)))(*args)
    np.testing.assert_array_equal(np.asarray(jax.vmap(pj.kernel(put), (None, 0, 0, 0))(*args)), np.asarray(want))
