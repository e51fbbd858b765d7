"""Half-precision row kernels under the default tiles: jnp's float32 casts and sums take the rows of the
float16/bfloat16 ops over the same shape, so a layer norm or softmax is one program, as in float32
(it was 4-5 programs and 2-3.5x the predicted time: each op's rows came from its own dtype)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import rand


def layer_norm(x, g):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


@pytest.mark.parametrize("fn", [layer_norm, softmax])
def test_half_precision_row_kernels_are_one_program_and_not_slower(fn):
    def compiled(dtype):
        args = [jax.ShapeDtypeStruct((2048, 1024), dtype)] + ([jax.ShapeDtypeStruct((1024,), dtype)]
                                                               if fn is layer_norm else [])
        return pj.kernel(fn).lower(*args).compile()

    f32 = compiled(jnp.float32)
    f32_us = f32.profile().makespan_us
    for dtype in (jnp.float16, jnp.bfloat16):
        c = compiled(dtype)
        assert len(c.lowering.programs) == len(f32.lowering.programs) == 1, [p.name for p in c.lowering.programs]
        assert c.profile().makespan_us <= 1.05 * f32_us


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
def test_half_precision_layer_norm_fused_matches_xla(dtype):
    x, g = rand((64, 1024), dtype, seed=1), rand((1024,), dtype, seed=2)
    got = np.asarray(pj.kernel(layer_norm)(x, g), np.float32)
    want = np.asarray(jax.jit(layer_norm)(x, g), np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    assert len(pj.kernel(layer_norm).lower(x, g).compile().lowering.programs) == 1
