"""matmul against an independent float64 / int64 NumPy golden: 2-D, broadcast batch dims, transposed
operands, bias, out_dtype, eager == jit, vmap == loop, and the error messages."""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import (BF16, F16, F32, I8, I32, TOL, assert_close, assert_eager_matches_jit,
                     assert_vmap_matches_loop, rand)

matmul = pj.ops.matmul


def _wide(x):
    x = np.asarray(x)
    return x.astype(np.int64) if x.dtype in (I8, I32) else x.astype(np.float64)


def golden(a, b, *, transpose_a=False, transpose_b=False, bias=None, out_dtype=None):
    """float64 (int64) product of the operands as given, plus bias, rounded once to ``out_dtype``."""
    a, b = _wide(a), _wide(b)
    if transpose_a:
        a = np.swapaxes(a, -1, -2)
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    c = np.matmul(a, b)
    if bias is not None:
        c = c + _wide(bias)
    return c.astype(out_dtype)


def f32_acc_atol(a, b, k):
    """Absolute tolerance for a float32-accumulated dot of length ``k`` vs the float64 golden.

    Loosened beyond helpers.TOL on purpose: with cancellation a result can be tiny while each of the
    k float32 additions commits up to 2**-24 of the running magnitude, so the error is bounded by
    k * 2**-24 * sum|a_i * b_i| rather than by a relative tolerance on the (small) result.
    """
    mag = np.matmul(np.abs(_wide(a)), np.abs(_wide(b)))
    return float(k * 2.0 ** -24 * np.max(mag))


def check(out, expected, out_dtype, a, b, k):
    """Integers exact; floats at helpers.TOL, with the float32-accumulation atol for fp32 results
    (fp16/bf16 results: one rounding ulp dwarfs the fp32 accumulation error, TOL suffices)."""
    assert out.dtype == np.dtype(out_dtype), (out.dtype, out_dtype)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    if np.dtype(out_dtype) in (I8, I32):
        np.testing.assert_array_equal(np.asarray(out), expected)
        return
    rtol, atol = TOL[np.dtype(out_dtype)]
    if np.dtype(out_dtype) == F32:
        atol = max(atol, f32_acc_atol(a, b, k))
    assert_close(out, expected, out_dtype, rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------ float32 2-D grid
MKN = [(1, 1, 1), (1, 7, 1), (3, 5, 7), (13, 1, 11), (17, 31, 2), (5, 64, 3)]


@pytest.mark.parametrize("m,k,n", MKN, ids=lambda v: str(v))
def test_matmul_2d_float32(m, k, n):
    a, b = rand((m, k), F32, seed=1), rand((k, n), F32, seed=2)
    out = assert_eager_matches_jit(lambda x, y: matmul(x, y), a, b)
    check(out, golden(a, b, out_dtype=F32), F32, a, b, k)


# -------------------------------------------------------------------------------- dtypes / out_dtype
DTYPE_CASES = [(I8, None, I32), (I8, I32, I32), (F16, None, F32), (F16, F32, F32), (F16, F16, F16),
               (BF16, None, F32), (BF16, BF16, BF16), (BF16, "float32", F32), (F32, None, F32),
               (F32, F32, F32)]


@pytest.mark.parametrize("dtype,out_dtype,expect", DTYPE_CASES,
                         ids=[f"{d.name}->{o if o is None or isinstance(o, str) else o.name}"
                              for d, o, _ in DTYPE_CASES])
@pytest.mark.parametrize("m,k,n", [(3, 5, 7), (2, 64, 13)], ids=lambda v: str(v))
def test_matmul_dtypes(dtype, out_dtype, expect, m, k, n):
    a, b = rand((m, k), dtype, seed=3), rand((k, n), dtype, seed=4)
    out = assert_eager_matches_jit(lambda x, y: matmul(x, y, out_dtype=out_dtype), a, b)
    # int8 * int8 accumulates in int32: exact (|sum| <= 64 * 128**2 fits int32).
    # fp16/bf16/fp32 accumulate in fp32 and round once to out_dtype; golden is float64 rounded once.
    check(out, golden(a, b, out_dtype=expect), expect, a, b, k)


def test_matmul_int8_extremes_exact():
    a = np.full((2, 64), -128, np.int8)
    b = np.full((64, 3), -128, np.int8)
    b[:, 1] = 127
    out = matmul(a, b)
    assert out.dtype == I32
    np.testing.assert_array_equal(np.asarray(out), np.array([[1 << 20, -128 * 127 * 64, 1 << 20]] * 2, np.int32))


def test_matmul_fp16_accumulates_in_fp32():
    # 2048 + 1 + 1 + ... : a running fp16 sum would stay at 2048; fp32 accumulation gives 2048 + 100.
    a = np.ones((1, 101), F16)
    b = np.ones((101, 1), F16)
    b[0, 0] = 2048
    np.testing.assert_array_equal(np.asarray(matmul(a, b, out_dtype=F16), np.float64), [[2148.0]])
    np.testing.assert_array_equal(np.asarray(matmul(a, b), np.float64), [[2148.0]])


# ----------------------------------------------------------------------------- batches and transposes
BATCH_CASES = [((2, 1, 3, 5), (3, 5, 4)), ((3, 5), (2, 5, 7)), ((4, 3, 5), (5, 2)), ((1, 2, 7, 1), (3, 1, 1, 6)),
               ((2, 3, 4, 5), (2, 3, 5, 1))]


@pytest.mark.parametrize("sa,sb", BATCH_CASES, ids=lambda v: str(v))
def test_matmul_batched_broadcast(sa, sb):
    a, b = rand(sa, F32, seed=5), rand(sb, F32, seed=6)
    out = assert_eager_matches_jit(lambda x, y: matmul(x, y), a, b)
    check(out, golden(a, b, out_dtype=F32), F32, a, b, sa[-1])


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", [F32, I8, BF16], ids=lambda d: d.name)
def test_matmul_transposes(ta, tb, dtype):
    m, k, n = 3, 7, 5
    a = rand((2, 1) + ((k, m) if ta else (m, k)), dtype, seed=7)
    b = rand((3,) + ((n, k) if tb else (k, n)), dtype, seed=8)
    out = assert_eager_matches_jit(lambda x, y: matmul(x, y, transpose_a=ta, transpose_b=tb), a, b)
    acc = I32 if dtype == I8 else F32
    assert out.shape == (2, 3, m, n)
    at = np.swapaxes(a, -1, -2) if ta else a
    bt = np.swapaxes(b, -1, -2) if tb else b
    check(out, golden(a, b, transpose_a=ta, transpose_b=tb, out_dtype=acc), acc, at, bt, k)


BIAS_CASES = [(F32, None, (7,)), (F32, None, (3, 7)), (F32, None, (1, 7)), (F32, None, (2, 1, 7)),
              (I8, None, (7,)), (I8, None, (2, 3, 1)), (F16, F16, (3, 7)), (BF16, BF16, (1, 7)),
              (F16, F32, (7,))]


@pytest.mark.parametrize("dtype,out_dtype,bias_shape", BIAS_CASES, ids=lambda v: str(v))
def test_matmul_bias(dtype, out_dtype, bias_shape):
    a, b = rand((2, 3, 5), dtype, seed=9), rand((5, 7), dtype, seed=10)
    acc = I32 if dtype == I8 else F32
    bias = rand(bias_shape, acc, seed=11)
    out = assert_eager_matches_jit(lambda x, y, c: matmul(x, y, bias=c, out_dtype=out_dtype), a, b, bias)
    expect = out_dtype or acc
    # The bias is added in the accumulator, before the single rounding to out_dtype.
    check(out, golden(a, b, bias=bias, out_dtype=expect), expect, a, b, 5)


def test_matmul_bias_added_before_rounding():
    # fp16 out: 2048 (product) + 1 (bias) + 1 (bias) can't be formed if the bias were added after
    # rounding; added in fp32 the accumulator holds 2049.0 + 1.0 = 2050 exactly.
    a = np.array([[2048.0]], F16)
    b = np.array([[1.0]], F16)
    bias = np.array([2.0], F32)
    np.testing.assert_array_equal(np.asarray(matmul(a, b, bias=bias, out_dtype=F16), np.float64), [[2050.0]])
    bias = np.array([0.75], F32)  # 2048.75 rounds to 2048 in fp16 (ulp 2)
    np.testing.assert_array_equal(np.asarray(matmul(a, b, bias=bias, out_dtype=F16), np.float64), [[2048.0]])


# ----------------------------------------------------------------------------------- signed zeros
def _pto_isa_tmatmul(a, b, bias=None):
    """pto-isa's CPU TMATMUL (include/pto/cpu/TMatmul.hpp, TMatmulNzZn) for float32 accumulators:
    ``mul_acc = 0; for k: mul_acc = std::fma(a, b, mul_acc)``, then ``+ bias`` (TMATMUL_BIAS_IMPL)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.float32)
    a, b = np.broadcast_to(a, out.shape[:-2] + a.shape[-2:]), np.broadcast_to(b, out.shape[:-2] + b.shape[-2:])
    for idx in np.ndindex(out.shape):
        *batch, i, j = idx
        acc = np.float32(0.0)
        for k in range(a.shape[-1]):       # a product of two float32s is exact in float64: one rounding
            acc = np.float32(a[(*batch, i, k)] * b[(*batch, k, j)] + np.float64(acc))
        out[idx] = acc if bias is None else acc + np.float32(np.broadcast_to(bias, out.shape)[idx])
    return out


NEG_ZERO_CASES = [((31, 13, 1), (31, 1, 1), None), ((4, 1), (1, 3), None), ((4, 1), (1, 3), (3,)),
                  ((2, 64), (64, 16), None), ((16, 64), (64, 16), (16,))]


@pytest.mark.parametrize("dtype", [F32, F16], ids=lambda d: d.name)
@pytest.mark.parametrize("sa,sb,bias_shape", NEG_ZERO_CASES, ids=lambda v: str(v))
def test_matmul_of_negative_zeros_is_positive_zero_on_both_backends(sa, sb, bias_shape, dtype):
    """The cube's accumulator starts at +0.0 (pto-isa's TMATMUL: ``mul_acc = 0`` then fma), so
    products that are all -0.0 (and a -0.0 bias) sum to +0.0, for K = 1 as for a K chain of tmatmul
    and tmatmul_acc (cube k = 32 < K = 64): sim and XLA give its bits (tests/regressions/
    fuzz_matmul_negative_zero.py: XLA's K = 1 dot is a multiply, -0.0, and 1 / it was -inf)."""
    a, b = np.full(sa, -0.0, dtype), np.full(sb, 1.5625, dtype)
    args = (a, b) if bias_shape is None else (a, b, np.full(bias_shape, -0.0, F32))
    want = _pto_isa_tmatmul(*args)
    assert not np.signbit(want).any()

    def fn(a, b, *bias):
        with pj.tile(cube=(16, 32, 16)):
            return matmul(a, b, bias=bias[0] if bias else None)

    for backend in ("sim", "xla"):
        got = np.asarray(pj.kernel(fn, backend=backend)(*args))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=backend)
    np.testing.assert_array_equal(np.asarray(jax.jit(fn)(*args)).view(np.uint32), want.view(np.uint32))


# --------------------------------------------------------------------------------------------- vmap
def _vmap_golden(args, in_axes, **kw):
    size = next(np.shape(x)[d] for x, d in zip(args, in_axes) if d is not None)
    names = ["a", "b", "bias"]
    outs = []
    for i in range(size):
        sl = {n: (x if d is None else np.take(x, i, axis=d)) for n, x, d in zip(names, args, in_axes)}
        outs.append(golden(sl["a"], sl["b"], bias=sl.get("bias"), **kw))
    return np.stack(outs)


VMAP_CASES = [
    ("a batched, b unbatched", (4, 3, 5), (5, 2), None, (0, None)),
    ("a unbatched, b batched", (3, 5), (5, 4, 2), None, (None, 1)),
    ("both batched, different axes", (3, 5, 4), (4, 5, 2), None, (2, 0)),
    ("both batched, a last", (1, 3, 5, 4), (4, 3, 5, 6), None, (-1, 0)),
    ("batched bias with batched a", (4, 3, 5), (5, 2), (2, 4), (0, None, 1)),
    ("batched bias only", (3, 5), (5, 2), (4, 3, 2), (None, None, 0)),
    ("all batched", (3, 5, 4), (4, 5, 2), (2, 4), (2, 0, -1)),
]


@pytest.mark.parametrize("dtype", [F32, I8], ids=lambda d: d.name)
@pytest.mark.parametrize("name,sa,sb,sbias,in_axes", VMAP_CASES, ids=[c[0] for c in VMAP_CASES])
def test_matmul_vmap(name, sa, sb, sbias, in_axes, dtype):
    acc = I32 if dtype == I8 else F32
    args = [rand(sa, dtype, seed=12), rand(sb, dtype, seed=13)]
    if sbias is not None:
        args.append(rand(sbias, acc, seed=14))
        fn = lambda a, b, c: matmul(a, b, bias=c)  # noqa: E731
    else:
        fn = lambda a, b: matmul(a, b)  # noqa: E731
    # 1e-5: the vmapped and looped products may sum K=5 terms in a different float32 order.
    out = assert_vmap_matches_loop(fn, tuple(args), in_axes, rtol=1e-5, atol=1e-5)
    expected = _vmap_golden(args, in_axes, out_dtype=acc)
    big = float(np.abs(_wide(args[0])).max() * np.abs(_wide(args[1])).max())
    check(out, expected, acc, np.full((1, 5), big), np.ones((5, 1)), 5)  # magnitude bound for the atol


def test_matmul_vmap_transposed_fp16_out():
    a = rand((3, 5, 4), F16, seed=15)  # mapped axis 1; each slice (3, 4) is used transposed (K=3, M=4)
    b = rand((2, 3), F16, seed=16)  # unbatched, transposed: (N=2, K=3)
    fn = lambda x, y: matmul(x, y, transpose_a=True, transpose_b=True, out_dtype=F16)  # noqa: E731
    out = assert_vmap_matches_loop(fn, (a, b), (1, None))
    expected = _vmap_golden((a, b), (1, None), transpose_a=True, transpose_b=True, out_dtype=F16)
    check(out, expected, F16, a, b, 3)


def test_matmul_nested_vmap():
    a = rand((2, 3, 4, 5), F32, seed=17)  # outer maps axis 0, inner maps axis 0 of the (3, 4, 5) slice
    b = rand((5, 6, 3), F32, seed=18)  # outer unbatched, inner maps its last axis
    fn = jax.vmap(jax.vmap(lambda x, y: matmul(x, y), in_axes=(0, -1)), in_axes=(0, None))
    out = fn(a, b)
    expected = np.stack([np.stack([golden(a[i][j], b[..., j], out_dtype=F32) for j in range(3)])
                         for i in range(2)])
    assert out.shape == (2, 3, 4, 6)
    check(out, expected, F32, a, np.moveaxis(b, -1, 0), 5)
    np.testing.assert_array_equal(np.asarray(jax.jit(fn)(a, b)), np.asarray(out))


# ------------------------------------------------------------------------------------------- errors
def _raises(cls, *fragments):
    pattern = "".join(f"(?=.*{re.escape(f)})" for f in ("pto.matmul",) + fragments)
    return pytest.raises(cls, match=re.compile(pattern, re.S))


def test_error_k_mismatch():
    with _raises(pj.PtoShapeError, "(3, 5)", "(4, 7)", "K=5", "K=4"):
        matmul(np.zeros((3, 5), F32), np.zeros((4, 7), F32))
    with _raises(pj.PtoShapeError, "(2, 3, 5)", "(5, 7)", "K=3", "transpose_a=True"):
        matmul(np.zeros((2, 3, 5), F32), np.zeros((5, 7), F32), transpose_a=True)


def test_error_batch_dims_do_not_broadcast():
    with _raises(pj.PtoShapeError, "(2,)", "(3,)"):
        matmul(np.zeros((2, 3, 5), F32), np.zeros((3, 5, 7), F32))


def test_error_rank_one():
    with _raises(pj.PtoShapeError, "(5,)", "rank"):
        matmul(np.zeros((5,), F32), np.zeros((5, 2), F32))


def test_error_dtype_mismatch():
    with _raises(pj.PtoDtypeError, "float16", "float32", "[3, 5]", "[5, 7]"):
        matmul(np.zeros((3, 5), F16), np.zeros((5, 7), F32))


def test_error_int32_operands():
    with _raises(pj.PtoDtypeError, "int32", "(3, 5)"):
        matmul(np.zeros((3, 5), I32), np.zeros((5, 7), I32))


@pytest.mark.parametrize("dtype,out_dtype", [(I8, F32), (I8, I8), (F32, F16), (F16, BF16), (BF16, F16)],
                         ids=lambda d: np.dtype(d).name)
def test_error_bad_out_dtype(dtype, out_dtype):
    with _raises(pj.PtoDtypeError, f"out_dtype {np.dtype(out_dtype).name}", np.dtype(dtype).name):
        matmul(np.zeros((3, 5), dtype), np.zeros((5, 7), dtype), out_dtype=out_dtype)


def test_error_unsupported_out_dtype():
    with _raises(pj.PtoDtypeError, "float64"):
        matmul(np.zeros((3, 5), F32), np.zeros((5, 7), F32), out_dtype=np.float64)


@pytest.mark.parametrize("dtype,bias_dtype", [(F16, F16), (I8, I8), (F32, I32), (I8, F32)],
                         ids=lambda d: np.dtype(d).name)
def test_error_bias_dtype(dtype, bias_dtype):
    with _raises(pj.PtoDtypeError, "bias", np.dtype(bias_dtype).name):
        matmul(np.zeros((3, 5), dtype), np.zeros((5, 7), dtype), bias=np.zeros((7,), bias_dtype))


def test_error_bias_shape():
    with _raises(pj.PtoShapeError, "bias", "(3, 2)", "(3, 7)"):
        matmul(np.zeros((3, 5), F32), np.zeros((5, 7), F32), bias=np.zeros((3, 2), F32))
    with _raises(pj.PtoShapeError, "bias (2, 3, 7)", "(3, 7)"):  # bias may not add batch dims
        matmul(np.zeros((3, 5), F32), np.zeros((5, 7), F32), bias=np.zeros((2, 3, 7), F32))


def test_float32_matmuls_ask_for_full_precision():
    """The reference (what ``backend="xla"`` and XLA's lowering run) asks for HIGHEST precision: on a GPU
    the default is TF32, a relative error near 1e-3 on float32 products instead of float32's."""
    a = np.ones((16, 16), np.float32)
    text = jax.jit(lambda x, y: pj.ops.matmul(x, y)).lower(a, a).as_text()
    (dot,) = [line for line in text.splitlines() if "dot_general" in line]
    assert "precision = [HIGHEST, HIGHEST]" in dot


@pytest.mark.parametrize("a_dt, b_dt", [(F32, BF16), (F16, F32), (BF16, F16)])
def test_a_dot_of_two_float_dtypes_widens_both_exactly(a_dt, b_dt):
    """The backward of ``jnp.dot(x_bf16, w_bf16, preferred_element_type=f32)`` multiplies the f32
    cotangent by a bf16 operand: both are widened to fp32 (exact), the product is float64's rounded once."""
    a, b = rand((24, 40), a_dt, seed=1), rand((40, 16), b_dt, seed=2)
    fn = lambda a, b: jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=F32)  # noqa: E731
    got = np.asarray(pj.kernel(fn)(a, b))
    assert got.dtype == F32
    np.testing.assert_allclose(got, _wide(a) @ _wide(b), rtol=1e-5, atol=1e-5)

    def loss(x, w):
        return jnp.sum(jax.nn.relu(jnp.dot(x, w, preferred_element_type=F32)) ** 2)
    x, w = rand((16, 64), BF16, seed=3), rand((64, 32), BF16, seed=4)
    for g, r in zip(pj.kernel(jax.grad(loss, (0, 1)))(x, w), jax.jit(jax.grad(loss, (0, 1)))(x, w)):
        assert g.dtype == r.dtype == BF16
        np.testing.assert_allclose(np.asarray(g, F32), np.asarray(r, F32), rtol=1e-2, atol=1e-2)
