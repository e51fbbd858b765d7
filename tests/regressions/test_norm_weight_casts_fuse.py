"""A norm's weight cast to float32 between its ops (inline, or by ``pj.ops.rms_norm`` / ``layer_norm`` in
half precision, which cast every operand up first) no longer ends its fused program: the cast, which
reads no result of the norm, is emitted before the norm's row group (a depth merge) or before its row
loop (rows past a tile: 4 096 columns). Before, the f32 copy of x went through GM: 2 or 3 block calls and
2-3x the makespan of the f32 norm."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import rand

S = jax.ShapeDtypeStruct


def _rms_inline(x, g):              # the weight's cast traced between the norm's ops
    with jax.named_scope("RMS"):
        xf = x.astype(jnp.float32)
        v = jnp.mean(xf * xf, axis=-1, keepdims=True)
        return (xf * jax.lax.rsqrt(v + 1e-6) * g.astype(jnp.float32)).astype(x.dtype)


def _rms_np(x, g):
    xf = np.asarray(x, np.float64)
    return xf / np.sqrt(np.mean(xf * xf, -1, keepdims=True) + 1e-6) * np.asarray(g, np.float64)


def _ln_np(x, g, b, eps=1e-5):
    xf = np.asarray(x, np.float64)
    mu = xf.mean(-1, keepdims=True)
    return (xf - mu) / np.sqrt(((xf - mu) ** 2).mean(-1, keepdims=True) + eps) * np.asarray(g, np.float64) \
        + np.asarray(b, np.float64)


def _calls(compiled):
    return [line.split("block_call[")[1].split("<")[0] for line in compiled.lowering.as_text("block").splitlines()
            if "= block_call[" in line]


def test_an_inline_weight_cast_joins_the_norm():
    x, g = rand((256, 1024), np.float16), rand((1024,), np.float16, 1)
    compiled = pj.kernel(_rms_inline).lower(x, g).compile()
    assert _calls(compiled) == ["cast", "cast+mul+sum+div+add+rsqrt+mul+mul+cast"]
    np.testing.assert_allclose(np.asarray(compiled(x, g), np.float64), _rms_np(x, g), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_half_norms_of_long_rows_are_one_row_loop(dtype):
    """4 096 columns: the norms loop over column tiles; the weights' casts went between the loop's
    members and parted it (rms 520 µs in 3 calls against 177 µs in f32 at 2048 x 4096)."""
    shapes = S((2048, 4096), dtype), S((4096,), dtype)
    half = pj.kernel(lambda x, g: pj.ops.rms_norm(x, g)).lower(*shapes).compile()
    full = pj.kernel(lambda x, g: pj.ops.rms_norm(x, g)).lower(S((2048, 4096), jnp.float32),
                                                               S((4096,), jnp.float32)).compile()
    assert _calls(half) == ["cast", "cast+mul+sum+div+add+rsqrt+mul+mul+cast"]
    assert half.profile(compute=False).makespan_us < 1.1 * full.profile(compute=False).makespan_us
    ln = pj.kernel(lambda x, g, b: pj.ops.layer_norm(x, g, b)).lower(*shapes, shapes[1]).compile()
    assert sorted(_calls(ln))[-1].startswith("cast+sum+div+sub") and len(_calls(ln)) == 3
    x, g, b = rand((48, 4096), dtype), rand((4096,), dtype, 1), rand((4096,), dtype, 2)
    tol = 2e-2 if dtype == jnp.bfloat16 else 4e-3
    np.testing.assert_allclose(np.asarray(pj.kernel(lambda x, g: pj.ops.rms_norm(x, g))(x, g), np.float64),
                               _rms_np(x, g), rtol=tol, atol=tol)
    np.testing.assert_allclose(np.asarray(pj.kernel(lambda x, g, b: pj.ops.layer_norm(x, g, b))(x, g, b), np.float64),
                               _ln_np(x, g, b), rtol=tol, atol=tol)


def _moved_twice(x, g, h):          # a reshape of a value moved before the group, read by a later member
    with jax.named_scope("L"):
        xf = x.astype(jnp.float32)
        g32 = g.astype(jnp.float32)
        y = xf * g32
        hr = h.astype(jnp.float32).reshape(-1)
        g2 = g32 + hr
        return y * hr.reshape(1, -1), g2


def _moved_side_by_side(x, b, t):   # two casts moved before the group; a later op joins the first, reads the second
    with pj.tile(vec=(8, 128)), jax.named_scope("L"):
        xf = x.astype(jnp.float32)
        a = b.astype(jnp.float32)
        y = xf * a
        c = t.astype(jnp.float32)
        return y * c, a * c


@pytest.mark.parametrize("fn, shapes", [(_moved_twice, [(32, 64), (64,), (1, 64)]),
                                        (_moved_side_by_side, [(16, 512), (1, 512), (1, 1)])])
def test_ops_moved_before_a_group_keep_their_order(fn, shapes):
    args = [rand(s, np.float16, i) for i, s in enumerate(shapes)]
    for got, want in zip(pj.kernel(fn)(*args), jax.jit(fn)(*args)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
