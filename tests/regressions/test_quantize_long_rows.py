"""pj.ops.quantize over rows whose float32 copies overfill the UB (hidden sizes of 12 288 / 16 384):
refused with advice no vec tile could follow; now its reference's ops, bit for bit its golden."""
import jax
import ml_dtypes
import numpy as np
import pytest

import ptojax as pj


@pytest.mark.parametrize("n", [12288, 16384])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
def test_quantize_of_a_long_row(dtype, n):
    x = np.random.default_rng(0).normal(size=(2, n)).astype(dtype)
    wide = x.astype(np.float32)
    amax = np.abs(wide).max(-1, keepdims=True)
    want_q = np.clip(np.rint(wide * (np.float32(127) / amax)), -128, 127).astype(np.int8)
    fn = pj.kernel(lambda v: pj.ops.quantize(v, -1))
    for run in (fn, jax.jit(fn)):
        q, s = run(x)
        np.testing.assert_array_equal(np.asarray(q), want_q)
        np.testing.assert_array_equal(np.asarray(s), amax / np.float32(127))
