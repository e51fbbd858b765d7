"""Regression: fp16 / bf16 composites and quantize inside a kernel compute as their references do.

``pj.ops.softmax`` / ``rms_norm`` / ``layer_norm`` of a bf16 or f16 tile ran every instruction in the
tile's dtype, where the reference (and docs/ops.md) computes in float32 and rounds once: a bf16
(13, 257) layer norm came out up to 15 316 ulp off, softmax 15, rms_norm 2; selection now widens them
to float32 (``in_f32``). ``pj.ops.quantize`` took a row's max |x| past a NaN (a finite scale) and its
saturating ``tcvt`` clamped a NaN product to 127 (a NaN or inf element quantized to 127); now a row
with a NaN has scale NaN and q 0, an inf element q 0, as the reference.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import ulps

COMPOSITES = {
    "softmax": lambda x, g, b: pj.ops.softmax(x),
    "rms_norm": lambda x, g, b: pj.ops.rms_norm(x, g),
    "layer_norm": lambda x, g, b: pj.ops.layer_norm(x, g, b),
}


@pytest.mark.parametrize("shape", [(13, 257), (7, 33), (2, 3, 40), (13, 1), (2, 4096)])
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("op", COMPOSITES)
def test_composites_compute_in_float32_and_round_once(op, dtype, shape):
    """Within 1 ulp of the reference (float32 inside, one rounding), eager and under ``jax.jit``; the
    (2, 4096) rows take the reference's ops (past a tile row), which were right already."""
    rng = np.random.default_rng(6)
    x = jnp.asarray(rng.standard_normal(shape) * 3, dtype)
    g, b = (jnp.asarray(rng.standard_normal(shape[-1]), dtype) for _ in range(2))
    fn = COMPOSITES[op]
    want = np.asarray(jax.jit(fn)(x, g, b))
    for where, kernel in (("eager", pj.kernel(fn)), ("jit", jax.jit(pj.kernel(fn)))):
        far = ulps(np.asarray(kernel(x, g, b)), want)
        assert far.max() <= 1, f"{op} {where}: {int(far.max())} ulp at {np.unravel_index(far.argmax(), shape)}"


def _special_rows(shape, dtype):
    """Normal values with a NaN, a NaN first, +inf, -inf, a NaN and an inf, rows of -0.0 and 0, the
    dtype's largest values: one kind per row of the ``(rows, cols)`` view."""
    x = (np.random.default_rng(22).standard_normal(shape) * 3).astype(np.float32)
    rows = x.reshape(-1, shape[-1])
    rows[0, 3] = np.nan
    rows[1, 0] = np.nan
    rows[2, 5] = np.inf
    rows[3, 1] = -np.inf
    rows[4, 2:4] = np.nan, np.inf
    rows[5] = -0.0
    rows[6] = 0.0
    big = float(jnp.finfo(dtype).max)
    rows[7, :3] = big, -big, big / 3
    return jnp.asarray(x, dtype)


def _quantize(x, scale_dtype):
    """The op's reference in NumPy float32 (XLA under ``jax.jit`` divides by 127 as a product with 1 / 127,
    an ulp off at times), NaN cast to 0."""
    x = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        amax = np.abs(x).max(-1, keepdims=True)
        mult = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, np.float32(1)), np.float32(0))
        q = np.clip(np.rint(x * mult), -128, 127)
        return np.where(np.isnan(q), 0, q).astype(np.int8), (amax / np.float32(127)).astype(scale_dtype)


@pytest.mark.parametrize("shape", [(9, 16), (13, 257), (2, 6, 40)])
@pytest.mark.parametrize("dtype,scale_dtype", [(jnp.float32, jnp.float32), (jnp.bfloat16, jnp.float32),
                                               (jnp.bfloat16, jnp.float16), (jnp.float16, jnp.float32)])
def test_quantize_keeps_nan_and_inf_as_the_reference(shape, dtype, scale_dtype):
    """Bit for bit: q as ``jax.jit`` of the op's reference, q and the scale as its NumPy form."""
    x = _special_rows(shape, dtype)
    fn = lambda x: pj.ops.quantize(x, scale_dtype=scale_dtype)          # noqa: E731
    q_want, s_want = _quantize(x, scale_dtype)
    np.testing.assert_array_equal(np.asarray(jax.jit(fn)(x)[0]), q_want)
    assert np.isnan(s_want.reshape(-1)[[0, 1, 4]].astype(np.float32)).all()
    for where, kernel in (("eager", pj.kernel(fn)), ("jit", jax.jit(pj.kernel(fn)))):
        q, s = (np.asarray(v) for v in kernel(x))
        np.testing.assert_array_equal(q, q_want, err_msg=f"q ({where})")
        assert s.dtype == s_want.dtype, where
        got, want = s.astype(np.float32), s_want.astype(np.float32)      # (exact: their bits compared)
        nan = np.isnan(want)
        assert (np.isnan(got) == nan).all(), f"scale ({where}): NaN rows"
        np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan], f"scale ({where})")
