"""Windows and orderings inside kernels: ``lax.pad`` with interior padding (``lax.associative_scan``, the
gradients of ``cumprod`` / ``cummax`` / ``cummin`` / ``cumlogsumexp``), ``jnp.unstack`` (the gradient of
``jnp.stack``), ``lax.reduce_window`` (pooling), ``lax.lt_to`` / ``le_to`` / ``eq_to`` and
``jnp.searchsorted``; and the refusals of convolutions and of ``jax.random`` (``ptojax/lowering/windows.py``,
``tensor.py``).

Expected values are XLA's (``jax.jit`` of the same function); each kernel runs eagerly and under
``jax.jit``; integer and boolean results are exact.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax._src.lax.lax import eq_to_p, le_to_p, lt_to_p

import ptojax as pj
from helpers import F32, I32

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 16)).astype(F32)
XI = RNG.integers(-50, 50, size=(6, 10)).astype(I32)
IMG = RNG.normal(size=(2, 9, 12)).astype(F32)


def _check(fn, *args, rtol=1e-5, atol=1e-6):
    """``pj.kernel(fn)`` eagerly and under ``jax.jit`` against ``jax.jit(fn)``."""
    want = jax.jit(fn)(*args)
    kernel = pj.kernel(fn)
    for got in (kernel(*args), jax.jit(kernel)(*args)):
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
            if w.dtype.kind in "iub":
                np.testing.assert_array_equal(g, w)
            else:
                np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------------ padding
@pytest.mark.parametrize("fn, arg", [
    (lambda x: lax.pad(x, 0.0, ((0, 0, 0), (0, 1, 1))), X),                     # associative_scan's interleave
    (lambda x: lax.pad(x, -2.5, ((1, 2, 1), (-1, 3, 2))), X),                   # both axes, a negative edge
    (lambda x: lax.pad(x, 7, ((2, -3, 2), (0, 0, 0))), XI),                     # the cut reaches the fill
    (lambda x: lax.pad(x.reshape(2, 4, 16), 1.0, ((0, 0, 0), (1, 1, 3), (0, 0, 0))), X),
    (lambda x: lax.pad(x[:, :1], 1.0, ((0, 0, 1), (2, 1, 4))), X),              # one entry: no interior
    (lambda x: lax.pad(x.astype(jnp.int8), jnp.int8(-1), ((0, 0, 0), (1, 0, 1))), XI),
    (lambda x: lax.pad(x.astype(jnp.bfloat16), jnp.bfloat16(3), ((0, 1, 1), (0, 0, 0))), X),
], ids=["last-axis", "both-axes", "int32-cut", "middle-axis", "one-entry", "int8", "bfloat16"])
def test_interior_padding(fn, arg):
    _check(fn, arg)


def test_associative_scan_of_a_linear_recurrence():
    """A Mamba-style selective scan ``h_t = a_t h_{t-1} + b_t`` by ``lax.associative_scan`` (interior pads)."""
    a = np.exp(-RNG.uniform(0.01, 0.2, (16, 8, 4))).astype(F32)
    b = RNG.normal(size=(16, 8, 4)).astype(F32)

    def scan(a, b):
        return lax.associative_scan(lambda l, r: (r[0] * l[0], r[0] * l[1] + r[1]), (a, b), axis=0)[1]
    _check(scan, a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", [lambda x: lax.cumprod(x, 1), lambda x: lax.cummax(x, 1),
                                lambda x: lax.cummin(x, 0, reverse=True), lambda x: lax.cumlogsumexp(x, 1)],
                         ids=["cumprod", "cummax", "cummin-reverse", "cumlogsumexp"])
def test_gradients_of_cumulative_ops(op):
    x = RNG.uniform(0.5, 1.5, size=(4, 16)).astype(F32)
    _check(lambda x: jax.grad(lambda x: jnp.sum(jnp.sin(op(x))))(x), x, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------------ unstack
def test_unstack_and_the_gradient_of_stack():
    _check(lambda a: jnp.unstack(a, axis=1)[3] * 2.0 + jnp.unstack(a, axis=1)[0], X)
    _check(lambda a: jnp.unstack(a.reshape(2, 4, 16), axis=1), X)
    _check(lambda a: jnp.unstack(a, axis=0)[5], XI)
    _check(lambda a: jax.grad(lambda a: jnp.sum(jnp.stack([a, a * 2.0, jnp.sin(a)], axis=-1) ** 2))(a), X)


# ------------------------------------------------------------------------------------ reduce_window
@pytest.mark.parametrize("fn, arg", [
    (lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2), (1, 2, 2), "VALID") / 4.0, IMG),   # avg_pool
    (lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3), (1, 2, 2), "SAME"), IMG),     # overlapping
    (lambda x: lax.reduce_window(x, jnp.inf, lax.min, (1, 3, 3), (1, 1, 1), "SAME"), IMG),
    (lambda x: lax.reduce_window(x, 0, lax.add, (3, 2), (2, 1), ((1, 0), (0, 2))), XI),
    (lambda x: lax.reduce_window(x, jnp.iinfo(jnp.int32).min, lax.max, (2, 2), (2, 2), "VALID"), XI),
    (lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (2, 3), (1, 2), ((1, 1), (0, 1)), base_dilation=(2, 1),
                                 window_dilation=(1, 2)), X),
], ids=["avg-2x2", "max-3x3-s2-same", "min-3x3-s1-same", "sum-int32-padded", "max-int32", "max-dilated"])
def test_reduce_window(fn, arg):
    _check(fn, arg)


def test_the_gradient_of_average_pooling():
    """Its transpose pads the cotangent with interior padding, then sums windows of stride 1."""
    _check(lambda x: jax.grad(lambda x: jnp.sum(jnp.sin(
        lax.reduce_window(x, 0.0, lax.add, (1, 3, 3), (1, 2, 2), "SAME"))))(x), IMG)


def test_the_gradient_of_max_pooling_is_refused_with_a_rewrite_that_translates():
    """``select_and_scatter_add`` is refused; the max of the window's strided slices, the rewrite its
    message names, differentiates (strided slices transpose to interior pads) and matches it."""
    x = RNG.normal(size=(2, 9, 9)).astype(F32)

    def pool(x):                                   # 3x3 windows, stride 2, VALID: 4x4
        return jnp.max(jnp.stack([x[:, i:i + 7:2, j:j + 7:2] for i in range(3) for j in range(3)]), axis=0)

    def grad(f):
        return lambda x: jax.grad(lambda x: jnp.sum(jnp.sin(f(x))))(x)
    reduce_window = functools.partial(lax.reduce_window, init_value=-jnp.inf, computation=lax.max,
                                      window_dimensions=(1, 3, 3), window_strides=(1, 2, 2), padding="VALID")
    with pytest.raises(pj.PtoUnsupportedError, match=r"lax\.reduce_window at .*'select_and_scatter_add' \(the "
                                                     r"gradient of a max / min pool: windows \(1, 3, 3\), strides "
                                                     r"\(1, 2, 2\)\).*strided slices"):
        pj.kernel(grad(reduce_window))(x)
    _check(grad(pool), x)
    np.testing.assert_allclose(jax.jit(grad(pool))(x), jax.jit(grad(reduce_window))(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fn, arg, rtol", [
    (lambda x: lax.reduce_window(x * jnp.int8(3), jnp.int8(0), lax.add, (3, 3), (1, 1), "SAME"),
     (XI % 100).astype(np.int8), 0),                                            # wraps as XLA's
    (lambda x: lax.reduce_window(x.astype(jnp.float16), jnp.float16(0), lax.add, (1, 2, 2), (1, 2, 2), "VALID"),
     IMG, 2e-3),
    (lambda x: lax.reduce_window(x, 1.0, lax.add, (3, 3), (2, 2), "SAME"), X, 1e-5),
    (lambda x: lax.reduce_window(x, 0.5, lax.max, (3, 2), (1, 2), "SAME", base_dilation=(2, 1)), X, 1e-5),
    (lambda x: lax.reduce_window(x, x[0, 0], lax.min, (2, 2), (2, 2), "VALID"), X, 1e-5),
    (lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 20), (1, 1), "VALID"), X, 1e-5),
], ids=["int8-typed-zero", "float16-typed-zero", "add-from-one", "max-from-a-half-dilated", "min-from-a-value",
        "no-window-fits"])
def test_reduce_window_from_any_init_value(fn, arg, rtol):
    """A typed zero (which JAX does not take for the identity) or another init value: XLA combines it once
    with each window's reduction (edges and holes add nothing)."""
    _check(fn, arg, rtol=rtol, atol=rtol)


def test_reduce_window_by_another_computation_is_refused():
    with pytest.raises(pj.PtoUnsupportedError, match=r"lax\.reduce_window at .*by a computation other than lax\.add "
                                                     r"/ lax\.max / lax\.min.*strided slices"):
        pj.kernel(lambda x: lax.reduce_window(x, 1.0, lax.mul, (2, 2), (2, 2), "VALID"))(X)


# -------------------------------------------------------------------------------------- convolutions
@pytest.mark.parametrize("fn, args, call", [
    (lambda x, w: lax.conv_general_dilated(x[None], w[:, None, :], (1,), [(3, 0)], dimension_numbers=(
        "NWC", "WIO", "NWC"), feature_group_count=16)[0], (X, X[:4]), "lax.conv_general_dilated"),
    (lambda a, b: jnp.convolve(a, b), (X[:, 0], X[:3, 1]), "jnp.convolve"),
    (lambda a: lax.conv_general_dilated_patches(a[None, None], (3, 3), (1, 1), "SAME")[0], (X,),
     "lax.conv_general_dilated_patches"),
])
def test_convolutions_are_refused_with_the_rewrites_that_translate(fn, args, call):
    with pytest.raises(pj.PtoUnsupportedError) as info:
        pj.kernel(fn)(*args)
    message = str(info.value)
    assert message.startswith(f"{call} at {__file__}:")
    assert "feature_group_count" in message and "shifted slices times weights" in message
    assert "im2col" in message and "matmul" in message


def test_the_suggested_depthwise_rewrite_matches_the_convolution():
    x, w = X, X[:4]

    def conv(x, w):
        return lax.conv_general_dilated(x[None], w[:, None, :], (1,), [(3, 0)],
                                        dimension_numbers=("NWC", "WIO", "NWC"), feature_group_count=16)[0]

    def slices(x, w):
        xp = jnp.pad(x, ((3, 0), (0, 0)))
        return sum(xp[j:j + x.shape[0]] * w[j] for j in range(4))
    np.testing.assert_allclose(pj.kernel(slices)(x, w), jax.jit(conv)(x, w), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------ ordering
SPECIAL = np.array([-np.inf, -3, -0.0, 0.0, 1e-30, 2, np.inf, np.nan, 5, -0.0], F32)


@pytest.mark.parametrize("prim", [lt_to_p, le_to_p, eq_to_p], ids=["lt_to", "le_to", "eq_to"])
@pytest.mark.parametrize("arg", [SPECIAL, SPECIAL.astype(np.float16), XI[0], XI[0].astype(np.int8), XI[0] > 0],
                         ids=["float32", "float16", "int32", "int8", "bool"])
def test_total_order_comparisons(prim, arg):
    """Every pair: -inf < ... < -0.0 < +0.0 < ... < inf < NaN for floats, plain compares otherwise."""
    _check(lambda a: prim.bind(a[:, None], a[None, :]), arg)


CU = np.array([0, 37, 100, 101, 300, 512], I32)
SORTED = np.array([-np.inf, -1, -0.0, 0.5, 0.5, 2, np.inf, np.nan], F32)
QUERIES = np.array([[-np.inf, -2, 0.0, -0.0, 0.5, 1, np.inf, np.nan], [3, 2, 2.5, -1, 0.7, 1e-9, -1e-9, 9]], F32)


@pytest.mark.parametrize("method", ["scan", "scan_unrolled", "compare_all", "sort"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(method, side):
    """Segment ids of packed sequences (int32 cu_seqlens), and floats with zeros, infinities and NaN
    (method='sort' sorted NaN in no useful order: [1, 2, 3, nan] put every query one past its place)."""
    _check(lambda cu: jnp.searchsorted(cu, jnp.arange(0, 520, 3, dtype=jnp.int32), side=side, method=method) - 1, CU)
    _check(lambda a, v: jnp.searchsorted(a, v, side=side, method=method), SORTED, QUERIES)


def test_searchsorted_over_batched_sorted_arrays():
    a = np.sort(RNG.normal(size=(3, 20)).astype(F32), axis=1)
    v = RNG.normal(size=(3, 5)).astype(F32)
    _check(jax.vmap(lambda a, v: jnp.searchsorted(a, v, method="compare_all")), a, v)
    with pytest.raises(pj.PtoUnsupportedError, match=r"jnp\.searchsorted at .*not \(3, 20\): "
                                                     r"pass method='compare_all'"):
        pj.kernel(jax.vmap(lambda a, v: jnp.searchsorted(a, v)))(a, v)


# --------------------------------------------------------------------------------------- jax.random
@pytest.mark.parametrize("fn, call", [
    (lambda x: jax.random.categorical(jax.random.key(0), x).astype(jnp.int32), "jax.random.key"),
    (lambda x: jax.random.categorical(jax.random.PRNGKey(0), x).astype(jnp.int32), "jax.random.PRNGKey"),
    (lambda x: x + jax.random.uniform(jax.random.key(1), x.shape), "jax.random.key"),
    (lambda x: x + jax.random.normal(jax.random.wrap_key_data(jnp.zeros(2, jnp.uint32)), x.shape),
     "jax.random.wrap_key_data"),
])
def test_random_numbers_drawn_in_a_kernel_are_refused(fn, call):
    with pytest.raises(pj.PtoUnsupportedError) as info:
        pj.kernel(fn)(X)
    message = str(info.value)
    assert message.startswith(f"{call} at {__file__}:") and "jax.random key" in message
    assert "pass them in as arguments" in message
