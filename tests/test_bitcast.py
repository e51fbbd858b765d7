"""``lax.bitcast_convert_type`` / ``pj.ops.bitcast``: a GM reinterpretation between dtypes of one width,
bit exact in eager calls, the jitted replay, the XLA backend and pto-isa's simulator."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from ptojax.ascend import crosscheck as xc
from vendor_tools import needed, tools  # noqa: F401 - tools: autouse fixture

X = np.concatenate([np.linspace(-3, 3, 64 * 64 - 4, dtype=np.float32), [0.0, -0.0, np.inf, 1e-40]]).reshape(64, 64)


def _inv_sqrt(x):
    bits = lax.bitcast_convert_type(jnp.abs(x) + 1.0, jnp.int32)
    return lax.bitcast_convert_type(jnp.int32(0x5F3759DF) - (bits >> 1), jnp.float32)


CASES = {
    "f32 -> i32, shifted": (lambda x: lax.bitcast_convert_type(x, jnp.int32) >> 3, X),
    "the fast inverse square root": (_inv_sqrt, X),
    "the sign bit": (lambda x: (lax.bitcast_convert_type(x, jnp.int32) < 0).astype(jnp.float32), X),
    "f16 -> bf16": (lambda x: lax.bitcast_convert_type(x * 2, jnp.bfloat16).astype(jnp.float32), X.astype(np.float16)),
    "an input's bits": (lambda x: lax.bitcast_convert_type(x, jnp.int32), X),
    "bits updated in place": (lambda x: lax.bitcast_convert_type(x * 1.0, jnp.int32).at[0].set(7), X),
    "i32 -> f32": (lambda x: lax.bitcast_convert_type((x * 100).astype(jnp.int32) | 0x3F800000, jnp.float32), X),
    "pj.ops.bitcast": (lambda x: pj.ops.bitcast(x + 1.0, jnp.int32), X),
    "jnp.frexp": (lambda x: jnp.frexp(x * 3.0), np.where(X == 1e-40, 1.5, X).astype(np.float32)),   # (eager keeps
    "jnp.ldexp": (lambda x: jnp.ldexp(x, 3), np.where(X == 1e-40, 1.5, X).astype(np.float32)),     # subnormals)
}


@pytest.mark.parametrize("name", CASES)
def test_bitcast_is_bit_exact_everywhere(name):
    fn, x = CASES[name]
    want = jax.tree.leaves(jax.jit(fn)(x))
    for got in (pj.kernel(fn)(x), jax.jit(pj.kernel(fn))(x), pj.kernel(fn, backend="xla")(x),
                jax.tree.map(lambda y: y[1], jax.vmap(pj.kernel(fn))(np.stack([x, x])))):
        for g, w in zip(jax.tree.leaves(got), want):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8), err_msg=name)
    results = xc.crosscheck(pj.kernel(fn).lower(x).compile().code)
    assert all(r.status in ("exact", "skipped") for r in results), [(r.name, r.status) for r in results]


def test_a_bitcast_to_another_width_is_refused_naming_the_widths():
    with pytest.raises(pj.PtoDtypeError, match="float32 to int8: .* one width only"):
        pj.kernel(lambda x: lax.bitcast_convert_type(x, jnp.int8))(X)
    with pytest.raises(pj.PtoDtypeError, match="bitcast"):
        pj.ops.bitcast(jnp.ones(3, jnp.float32), jnp.bool_)


def test_a_polymorphic_kernel_names_its_bitcast_step():
    kernel = pj.kernel(lambda x: lax.bitcast_convert_type(x * 2, jnp.int32), polymorphic_shapes=("m, 64",))
    with pytest.raises(pj.PtoUnsupportedError, match=r"a pto.bitcast step \(a step on the host\)"):
        kernel(np.ones((40, 64), np.float32))
