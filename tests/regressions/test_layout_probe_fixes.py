"""Findings of a probe of layout and indexing ops, each against plain JAX, eagerly and under ``jax.jit``:

- a flip, gather or scatter of a table whose rows end in unit dims ((6, 1000, 1)) raised the replay's
  internal ``Serial`` under ``jax.jit`` (a per-point condition inside a serial loop), and with more
  indices was refused for UB capacity: the rows moved 32 bytes a value ((128, 1) rows, (33, 68, 2)
  float16 rows) — now moved as one dim;
- a strided slice of a bool array whose extent the step does not divide was refused (its padding was
  the int 0, not ``False``);
- under ``jax.jit`` a NaN moved by a select, a transpose, a broadcast or a gather, or passed on by an
  instruction, lost its sign and payload (the replay's guard against fused products made it ``jnp.nan``;
  it now only sets the quiet bit);
- an eager ``jnp.tile`` / ``broadcast_to`` of bfloat16 flushed subnormals (the broadcast ran in XLA:CPU):
  a broadcast of one dtype now moves the bits in NumPy.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


def _same(fn, *args):
    want = np.asarray(fn(*args))
    for got in (pj.kernel(fn)(*args), jax.jit(pj.kernel(fn))(*args)):
        got = np.asarray(got)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}"))


_TABLE = np.arange(6000, dtype=np.float32).reshape(6, 1000, 1)


@pytest.mark.parametrize("fn,x", [
    (lambda x: jnp.flip(x, 0), _TABLE),
    (lambda x: x[::-1] * 2, _TABLE),
    (lambda x: x[np.zeros(6, np.int32)], _TABLE),
    (lambda x: jnp.asarray(x).at[np.array([0, 0, 2, 0, 1, 0, 0])].add(1.0), np.ones((4, 1000, 1), np.float32)),
    (lambda x: jnp.flip(x, 0), np.arange(64 * 128, dtype=np.float32).reshape(64, 128, 1)),
    (lambda x: x[np.zeros(7, np.int32)], np.arange(1000, dtype=np.int32).reshape(1, 1000, 1)),
    (lambda x: jnp.flip(x, 0), (np.arange(33 * 256) % 100).astype(np.float16).reshape(33, 16, 16, 1)),
    (lambda x: jnp.pad(x, ((3, 3), (0, 0), (0, 0), (0, 0)), mode="wrap"),
     np.arange(127 * 127, dtype=np.int32).reshape(127, 127, 1, 1)),
    (lambda x: jnp.asarray(x).at[np.array([1, 3, 1])].set(2.0), np.ones((5, 33, 68, 2), np.float16)),
], ids=["flip", "reversed", "gather", "scatter-add", "flip-128", "gather-int32", "flip-f16", "pad-wrap",
        "set-f16-pairs"])
def test_rows_ending_in_small_dims_move_whole(fn, x):
    _same(fn, x)


@pytest.mark.parametrize("fn,shape", [(lambda x: x[::2], (17,)), (lambda x: x[:, ::2], (4, 33)),
                                      (lambda x: x[::3], (17, 5)), (lambda x: x[::-3], (33,)),
                                      (lambda x: jax.lax.slice(x, (0, 0), (17, 5), (2, 1)), (17, 5))])
def test_strided_bool_slices(fn, shape):
    _same(fn, np.random.default_rng(0).random(shape) > 0.5)


_NANS = np.array([[0xFFC00000, 0x7FC00001, 0x3F800000, 0xFF800001] * 8], np.uint32).view(np.float32)


@pytest.mark.parametrize("fn,x", [
    (lambda x: jnp.where(x > 0, 0.0, x), _NANS),
    (lambda x: jnp.take(x, np.array([0, 1, 2, 3]), axis=1), _NANS),
    (lambda x: jnp.triu(jnp.broadcast_to(x, (32, 32))), _NANS),
    (lambda x: jnp.where(x > 0, 0.0, x).astype(x.dtype), _NANS.astype(np.float16)),
    (lambda x: jnp.broadcast_to(x, (16, 32)).T, _NANS.astype(np.float16)),
    (lambda x: jnp.tile(x, (2, 1)), _NANS.astype(np.float16)),
    (lambda x: jnp.where(x > 0, -jnp.sqrt(-x), x * 2), _NANS),        # a NaN made, negated, passed on
], ids=["where", "take", "triu", "where-f16", "transpose-f16", "tile-f16", "made-and-passed-on"])
def test_moved_nans_keep_their_bits_under_jit(fn, x):
    _same(fn, x)


def test_an_eager_broadcast_keeps_bf16_subnormals():
    x = jnp.asarray(np.full((1, 16), 0x8001, np.uint16)).view(jnp.bfloat16)     # -9.2e-41, a bf16 subnormal
    for fn in (lambda a: jnp.tile(a, (3, 1)), lambda a: jnp.broadcast_to(a, (4, 16)),
               lambda a: jnp.broadcast_to(a.T, (16, 5))):
        assert (np.asarray(pj.kernel(fn)(x)).view(np.uint16) == 0x8001).all()
