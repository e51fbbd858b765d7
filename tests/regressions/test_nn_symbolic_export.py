"""Regression: ``pj.nn`` ops under ``backend="xla"`` did not export with a symbolic batch or sequence.

``jax.export`` of ``dense``, ``swiglu``, ``softmax_cross_entropy`` and ``flash_attention`` raised JAX's raw
``InconclusiveDimensionOperation``: their tile choices compared the symbolic size with ints
(``cube_tile``'s ``min(128, up16(m))``, the cross-entropy's ``min(n, 2048)`` and ``1.0 / n``,
``default_block``'s fit). A symbolic dim now takes the cube tile's cap, the widest mean tile, a traced
``1 / n``; ``flash_attention`` a 128-row default block for a symbolic sequence (zero K/V rows joined on
instead of a pad, a traced loop count, the causal mask's query rows an iota). A dim a tile is sized by
(the last axis) must be static: a ``PtoShapeError`` naming the op. Also: ``dense``'s shape error said
``b (8,)`` when ``b=None`` was passed."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

RNG = np.random.default_rng(0)
W = jnp.asarray(RNG.standard_normal((32, 16)).astype(np.float32))
W2 = jnp.asarray(RNG.standard_normal((32, 16)).astype(np.float32))
B = jnp.asarray(RNG.standard_normal(16).astype(np.float32))


def _attention(q, k, v):
    s = q.shape[-2]
    scores = q @ jnp.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return jax.nn.softmax(jnp.where(np.tril(np.ones((s, s), bool)), scores, -jnp.inf), -1) @ v


def _labels(n):
    return jnp.arange(n, dtype=jnp.int32) % 32


CASES = {   # name: (pj.nn function, plain-JAX reference, spec with "m", sizes to run)
    "dense": (lambda x: pj.nn.dense(x, W, B, "gelu", backend="xla"), lambda x: jax.nn.gelu(x @ W + B),
              ("m", 32), [(5, 32), (130, 32)]),
    "dense 3d, no bias": (lambda x: pj.nn.dense(x, W, None, "relu", backend="xla"), lambda x: jax.nn.relu(x @ W),
                          ("m", 3, 32), [(2, 3, 32)]),
    "swiglu": (lambda x: pj.nn.swiglu(x, W, W2, backend="xla"), lambda x: jax.nn.silu(x @ W) * (x @ W2),
               ("m", 32), [(5, 32), (200, 32)]),
    "softmax_cross_entropy": (
        lambda x: pj.nn.softmax_cross_entropy(x, _labels(x.shape[0]), backend="xla"),
        lambda x: jnp.mean(jax.nn.logsumexp(x, -1) - x[jnp.arange(x.shape[0]), _labels(x.shape[0])]),
        ("m", 32), [(5, 32), (70, 32)]),
    "flash_attention, symbolic seq": (lambda x: pj.nn.flash_attention(x, x * 0.5, x, backend="xla"),
                                      lambda x: _attention(x, x * 0.5, x), (2, "m", 32), [(2, 5, 32), (2, 300, 32)]),
    "flash_attention, symbolic batch": (lambda x: pj.nn.flash_attention(x, x * 0.5, x, backend="xla"),
                                        lambda x: _attention(x, x * 0.5, x), ("m", 2, 40, 32), [(3, 2, 40, 32)]),
}


def _spec(shape):
    m, = jax.export.symbolic_shape("m")
    return jax.ShapeDtypeStruct(tuple(m if d == "m" else d for d in shape), jnp.float32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_exports_with_a_symbolic_batch_or_sequence(name):
    fn, ref, shape, sizes = CASES[name]
    exported = jax.export.export(jax.jit(fn))(_spec(shape))
    grad = jax.export.export(jax.jit(jax.value_and_grad(lambda x: jnp.sum(fn(x) ** 2))))(_spec(shape))
    for size in sizes:
        x = np.random.default_rng(len(size)).standard_normal(size).astype(np.float32)
        np.testing.assert_allclose(np.asarray(exported.call(x)), np.asarray(ref(x)), rtol=1e-5, atol=2e-6)
        value, g = grad.call(x)
        want, g_want = jax.value_and_grad(lambda x: jnp.sum(ref(x) ** 2))(x)
        np.testing.assert_allclose(float(value), float(want), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(g), np.asarray(g_want), rtol=1e-4, atol=1e-5 * float(jnp.abs(g_want).max()))


@pytest.mark.parametrize("op, call", [
    ("softmax_cross_entropy", lambda x: pj.nn.softmax_cross_entropy(x, jnp.zeros(8, jnp.int32), backend="xla")),
    ("softmax", lambda x: pj.nn.softmax(x, backend="xla")),
    ("rms_norm", lambda x: pj.nn.rms_norm(x, None, backend="xla")),
])
def test_a_symbolic_last_dim_names_the_op(op, call):
    with pytest.raises(pj.errors.PtoShapeError, match=rf"pj.nn.{op}: .* has the symbolic dim m at axis 1"):
        jax.export.export(jax.jit(call))(_spec((8, "m")))


def test_dense_shape_error_says_b_none():
    with pytest.raises(pj.errors.PtoShapeError) as err:
        pj.nn.dense(jnp.ones((4, 32)), jnp.ones((31, 8)), None)
    assert "b None" in str(err.value) and "(8,)" not in str(err.value)
    with pytest.raises(pj.errors.PtoShapeError, match=r"b \(7,\)"):
        pj.nn.dense(jnp.ones((4, 32)), jnp.ones((32, 8)), jnp.ones(7))
