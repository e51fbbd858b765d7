"""Regressions from a probe of hand-written ``pj.tiles`` bodies (their messages; the numbers were right).

* ``jax.grad`` through a ``pj.tiles.grid`` raised JAX's bare ``NotImplementedError`` for ``pto.tile_grid``.
* A window of a ``mat`` (L1) tile in a cube grid was called "vector work ... converts its acc tiles only".
* Errors of the body's translation and checks (``jnp.flip``'s index constant, ``lax.reduce_window``'s
  padded columns) and of instruction selection (``t[::2]``: "a window of a rank-3 tile") named internal
  steps only: each now names the user's call and line first.
"""
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

T = pj.tiles
W = T.window((32, 32))
X = np.random.default_rng(0).uniform(-1, 1, (32, 32)).astype(np.float32)
HERE = os.path.basename(__file__)


def _grid(op, out=(32, 32)):
    return lambda a: T.grid(lambda i, ins, outs: [T.store(outs[0], op(T.load(ins[0], i, W)), i, T.window(out))],
                            (1, 1), (a,), jax.ShapeDtypeStruct(out, np.float32))


def test_grad_through_a_hand_written_grid_is_refused_naming_it():
    hand = _grid(jnp.exp)
    with pytest.raises(pj.PtoUnsupportedError, match=r"pj.tiles.grid 'lambda' has no automatic derivative.*"
                                                     r"jax.custom_vjp"):
        jax.grad(lambda a: jnp.sum(hand(a)))(X)


def test_a_window_of_a_mat_tile_is_refused_as_such():
    a, b = np.ones((32, 64), np.float16), np.ones((32, 32), np.float16)

    def f(x, y):
        def body(i, ins, outs):
            left = T.mov(T.load(ins[0], i, T.window((32, 64)), "mat")[:, 32:], "left")
            right = T.mov(T.load(ins[1], i, W, "mat"), "right")
            return [T.store(outs[0], T.matmul(left, right), i, W)]
        return T.grid(body, (1, 1), (x, y), jax.ShapeDtypeStruct((32, 32), np.float32))
    with pytest.raises(pj.PtoUnsupportedError, match=r"pto.tview takes a window of a 'mat' tile .* load each window "
                                                     r"from GM into its own tile"):
        pj.kernel(f)(a, b)


@pytest.mark.parametrize("what, op, out, error", [
    ("jnp.flip", lambda t: jnp.flip(t, 1), (32, 32), pj.PtoUnsupportedError),
    ("lax.reduce_window", lambda t: jax.lax.reduce_window(t, 0.0, jax.lax.add, (2, 2), (1, 1), "SAME"), (32, 32),
     pj.PtoArgumentError),
    ("operator []", lambda t: t[::2], (16, 32), pj.PtoUnsupportedError),        # refused at selection
])
def test_errors_in_a_tile_body_name_the_users_call_and_line(what, op, out, error):
    with pytest.raises(error, match=rf"^{re.escape(what)} at \S*{HERE}:\d+ \(<lambda>\): "):
        pj.kernel(_grid(op, out))(X)
