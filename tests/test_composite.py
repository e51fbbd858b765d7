"""softmax, rms_norm, layer_norm, quantize, dequantize against independent float64 NumPy goldens."""
from __future__ import annotations

import numpy as np
import pytest

import ptojax as pj
from helpers import (BF16, F16, F32, FLOATS, I32, I8, assert_close, assert_eager_matches_jit, assert_quantized,
                     assert_vmap_matches_loop, np_quantize, np_softmax, rand, rotate_dtypes)

ops = pj.ops


def _f64(a):
    return np.asarray(a).astype(np.float64)


# ------------------------------------------------------------------------------------ NumPy goldens
def np_rms_norm(x, gamma, eps):
    x = _f64(x)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * _f64(gamma) if gamma is not None else y


def np_layer_norm(x, gamma, beta, eps):
    x = _f64(x)
    mean = x.mean(axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if gamma is not None:
        y = y * _f64(gamma)
    if beta is not None:
        y = y + _f64(beta)
    return y


# ------------------------------------------------------------------------------------------ softmax
SOFTMAX_CASES = [((1,), 0), ((7,), 0), ((3, 5), 0), ((1, 13), 1), ((4, 1, 6), 1), ((2, 3, 17), -1)]




@pytest.mark.parametrize("shape,axis,dtype", rotate_dtypes(SOFTMAX_CASES, FLOATS))
def test_softmax_golden(shape, axis, dtype):
    x = rand(shape, dtype, seed=1, low=-6, high=6)
    got = assert_eager_matches_jit(lambda a: ops.softmax(a, axis=axis), x)
    assert got.dtype == dtype and got.shape == shape
    assert_close(got, np_softmax(x, axis).astype(dtype), dtype)


def test_softmax_size1_axis_is_one():
    got = ops.softmax(rand((3, 1), F32), axis=1)
    np.testing.assert_array_equal(np.asarray(got), np.ones((3, 1), np.float32))


def test_softmax_large_values_stable():
    x = np.array([1000.0, 1000.0, -1000.0], np.float32)
    assert_close(ops.softmax(x), np.array([0.5, 0.5, 0.0], np.float32), F32)


@pytest.mark.parametrize("in_axis,axis", [(0, -1), (1, 0), (2, 1)])
def test_softmax_vmap(in_axis, axis):
    x = rand((3, 4, 5), F32, seed=2)
    assert_vmap_matches_loop(lambda a: ops.softmax(a, axis=axis), (x,), (in_axis,))


# ------------------------------------------------------------------------------------------ rms_norm
RMS_CASES = [
    # shape, gamma shape (None: no gamma), eps
    ((1,), (1,), 1e-6),
    ((7,), None, 1e-6),
    ((3, 5), (5,), 1e-6),
    ((1, 13), None, 0.5),        # a large eps must be visible in the result
    ((4, 1, 6), (6,), 1e-2),
    ((2, 3, 17), (3, 17), 0.0),  # gamma broadcast over leading axes
]


@pytest.mark.parametrize("shape,gshape,eps,dtype", rotate_dtypes(RMS_CASES, FLOATS))
def test_rms_norm_golden(shape, gshape, eps, dtype):
    x = rand(shape, dtype, seed=3)
    gamma = rand(gshape, dtype, seed=4) if gshape else None
    if gamma is None:
        got = assert_eager_matches_jit(lambda a: ops.rms_norm(a, eps=eps), x)
    else:
        got = assert_eager_matches_jit(lambda a, g: ops.rms_norm(a, g, eps=eps), x, gamma)
    assert got.dtype == dtype and got.shape == shape
    assert_close(got, np_rms_norm(x, gamma, eps).astype(dtype), dtype)


def test_rms_norm_eps_matters():
    x = np.full((1, 4), 0.1, np.float32)
    # rms = 0.1: with eps = 0.03 the result is 0.1 / sqrt(0.01 + 0.03) = 0.5, not 1
    assert_close(ops.rms_norm(x, eps=0.03), np.full((1, 4), 0.5, np.float32), F32)


RMS_VMAP = [
    # x shape, gamma shape, in_axes
    ((3, 4, 5), (3, 5), (0, 0)),       # batched gamma
    ((4, 5), (3, 5), (None, 0)),       # batched gamma only
    ((4, 3, 5), (5, 3), (1, 1)),       # x batched at axis 1, gamma batched at axis 1
    ((3, 4, 5), (5,), (0, None)),      # unbatched gamma
]


@pytest.mark.parametrize("xs,gs,in_axes", RMS_VMAP)
def test_rms_norm_vmap(xs, gs, in_axes):
    x, gamma = rand(xs, F32, seed=5), rand(gs, F32, seed=6)
    assert_vmap_matches_loop(lambda a, g: ops.rms_norm(a, g, eps=1e-5), (x, gamma), in_axes)


# ---------------------------------------------------------------------------------------- layer_norm
LN_CASES = [
    # shape, has gamma, has beta, eps
    ((1,), True, True, 1e-5),       # a single element normalises to beta
    ((7,), False, False, 1e-5),
    ((3, 5), True, False, 1e-5),
    ((1, 13), False, True, 0.25),
    ((4, 1, 6), True, True, 1e-3),
    ((2, 3, 17), True, True, 0.0),
]


@pytest.mark.parametrize("shape,has_g,has_b,eps,dtype", rotate_dtypes(LN_CASES, FLOATS))
def test_layer_norm_golden(shape, has_g, has_b, eps, dtype):
    x = rand(shape, dtype, seed=7)
    gamma = rand(shape[-1:], dtype, seed=8) if has_g else None
    beta = rand(shape[-1:], dtype, seed=9) if has_b else None
    args = [a for a in (x, gamma, beta) if a is not None]

    def fn(*a):
        a = list(a)
        return ops.layer_norm(a.pop(0), a.pop(0) if has_g else None, a.pop(0) if has_b else None, eps=eps)

    got = assert_eager_matches_jit(fn, *args)
    assert got.dtype == dtype and got.shape == shape
    assert_close(got, np_layer_norm(x, gamma, beta, eps).astype(dtype), dtype)


def test_layer_norm_beta_only_keyword():
    x, beta = rand((2, 5), F32, seed=10), rand((5,), F32, seed=11)
    assert_close(ops.layer_norm(x, beta=beta), np_layer_norm(x, None, beta, 1e-5).astype(F32), F32)


@pytest.mark.parametrize("in_axes", [(0, 0, None), (1, None, 0)])
def test_layer_norm_vmap(in_axes):
    x = rand((3, 3, 5), F32, seed=12)
    gamma = rand((3, 5) if in_axes[1] is not None else (5,), F32, seed=13)
    beta = rand((3, 5) if in_axes[2] is not None else (5,), F32, seed=14)
    assert_vmap_matches_loop(lambda a, g, b: ops.layer_norm(a, g, b), (x, gamma, beta), in_axes)


# ------------------------------------------------------------------------------------- quantization
QUANT_CASES = [
    # shape, axis, scale_dtype
    ((3, 5), -1, F32),            # per row
    ((4, 3, 17), -1, F32),        # per token-head on (T, H, D)
    ((4, 3, 17), None, F16),      # per tensor
    ((1,), -1, F32),
    ((7, 1), 0, BF16),
    ((2, 3, 5), (0, 2), F16),
]


def _scale_shape(shape, axis):
    axes = range(len(shape)) if axis is None else [a % len(shape) for a in np.atleast_1d(axis)]
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


@pytest.mark.parametrize("shape,axis,scale_dtype,dtype", rotate_dtypes(QUANT_CASES, FLOATS))
def test_quantize_golden(shape, axis, scale_dtype, dtype):
    x = rand(shape, dtype, seed=15)
    if len(shape) == 2 and shape[0] > 1:
        x[1] = 0  # an all-zero row
    q, scale = assert_eager_matches_jit(lambda a: ops.quantize(a, axis=axis, scale_dtype=scale_dtype), x)
    axes = None if axis is None else tuple(np.atleast_1d(axis) % len(shape))
    raw, want_scale = np_quantize(x, axes)
    assert q.shape == shape and scale.shape == _scale_shape(shape, axis)
    assert scale.dtype == scale_dtype
    assert_quantized(q, raw)
    assert_close(scale, want_scale.astype(scale_dtype), scale_dtype)


def test_quantize_all_zero_row():
    x = np.zeros((2, 4), np.float32)
    x[1] = [0.5, -1.0, 0.25, 0.0]
    q, scale = ops.quantize(x)
    np.testing.assert_array_equal(np.asarray(q), [[0, 0, 0, 0], [64, -127, 32, 0]])  # 63.5 -> 64 (even)
    np.testing.assert_array_equal(np.asarray(scale)[0], [0.0])
    assert_close(np.asarray(scale)[1], np.array([1.0 / 127], np.float32), F32)


def test_quantize_scale_float16_roundtrip():
    x = rand((5, 9), F16, seed=16)
    q, scale = ops.quantize(x, scale_dtype=np.float16)
    assert scale.dtype == F16 and scale.shape == (5, 1)
    # dequantizing recovers x to within half a quantization step (plus the fp16 scale rounding)
    back = _f64(q) * _f64(scale)
    step = _f64(scale)
    assert np.all(np.abs(back - _f64(x)) <= 0.5 * step + 2e-3 * np.abs(_f64(x)) + 1e-6)


@pytest.mark.parametrize("in_axis,axis", [(1, -1), (2, 0), (1, None), (0, (0, 1))])
def test_quantize_vmap(in_axis, axis):
    x = rand((3, 4, 5), F32, seed=17)
    assert_vmap_matches_loop(lambda a: ops.quantize(a, axis=axis), (x,), (in_axis,))


DEQ_CASES = [
    # q shape, q dtype, scale shape, scale dtype, out dtype
    ((3, 5), I8, (3, 1), F32, F32),
    ((4, 3, 17), I8, (4, 3, 1), F16, F16),
    ((4, 3, 17), I32, (1, 1, 17), F32, BF16),   # int32 accumulator, per-channel scale
    ((7,), I32, (), F32, F32),                   # per-tensor scalar scale
    ((1, 13), I8, (1, 1), BF16, F32),
    ((5,), I32, (3, 1), F16, F32),               # scale of higher rank broadcasts the result
]


@pytest.mark.parametrize("qs,qdt,ss,sdt,dtype", DEQ_CASES)
def test_dequantize_golden(qs, qdt, ss, sdt, dtype):
    q = rand(qs, qdt, seed=18)
    scale = rand(ss, sdt, seed=19, low=0.001, high=0.05)
    got = assert_eager_matches_jit(lambda a, s: ops.dequantize(a, s, dtype=dtype), q, scale)
    want = _f64(q) * _f64(scale)
    assert got.dtype == dtype and got.shape == want.shape
    assert_close(got, want.astype(dtype), dtype)


@pytest.mark.parametrize("in_axes", [(0, 0), (1, None), (None, 0), (1, 2)])
def test_dequantize_vmap(in_axes):
    q = rand((3, 3, 5) if in_axes[0] is not None else (3, 5), I8, seed=20)
    sshape = {None: (3, 1), 0: (3, 3, 1), 2: (3, 1, 3)}[in_axes[1]]  # batch of 3 at in_axes[1]
    scale = rand(sshape, F32, seed=21)
    assert_vmap_matches_loop(lambda a, s: ops.dequantize(a, s), (q, scale), in_axes)


# ---------------------------------------------------------------------------------------- bad inputs
def _raises(cls, fn, *needles):
    with pytest.raises(cls) as info:
        fn()
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, (needle, msg)


@pytest.mark.parametrize("dtype", [I32, I8])
def test_softmax_of_int(dtype):
    _raises(pj.PtoDtypeError, lambda: ops.softmax(np.zeros((2, 3), dtype)),
            "pto.softmax", np.dtype(dtype).name, "(2, 3)")


def test_softmax_axis_out_of_range():
    _raises(pj.PtoArgumentError, lambda: ops.softmax(np.zeros((2, 3), np.float32), axis=-3), "pto.softmax", "-3")


def test_rms_norm_gamma_wrong_length():
    _raises(pj.PtoShapeError, lambda: ops.rms_norm(np.zeros((3, 5), np.float32), np.ones((4,), np.float32)),
            "pto.rms_norm", "(4,)", "(3, 5)")


def test_rms_norm_gamma_wrong_length_broadcastable():
    # gamma (1,) broadcasts but does not end in the normalised axis 5
    _raises(pj.PtoShapeError, lambda: ops.rms_norm(np.zeros((3, 5), np.float32), np.ones((1,), np.float32)),
            "pto.rms_norm", "(1,)", "(3, 5)")


def test_rms_norm_gamma_dtype_mismatch():
    _raises(pj.PtoDtypeError, lambda: ops.rms_norm(np.zeros((3, 5), np.float16), np.ones((5,), np.float32)),
            "pto.rms_norm", "float16", "float32")


@pytest.mark.parametrize("eps", [-1e-6, "1e-6"])
def test_rms_norm_bad_eps(eps):
    _raises(pj.PtoArgumentError, lambda: ops.rms_norm(np.zeros((3, 5), np.float32), eps=eps),
            "pto.rms_norm", "eps", repr(eps))


def test_layer_norm_beta_wrong_length():
    _raises(pj.PtoShapeError,
            lambda: ops.layer_norm(np.zeros((2, 6), np.float32), np.ones((6,), np.float32),
                                   np.ones((3,), np.float32)),
            "pto.layer_norm", "(3,)", "(2, 6)")


def test_layer_norm_of_int():
    _raises(pj.PtoDtypeError, lambda: ops.layer_norm(np.zeros((2, 6), np.int32)), "pto.layer_norm", "int32")


@pytest.mark.parametrize("dtype", [F32, F16])
def test_dequantize_of_float_values(dtype):
    _raises(pj.PtoDtypeError, lambda: ops.dequantize(np.zeros((2, 3), dtype), np.ones((2, 1), np.float32)),
            "pto.dequantize", np.dtype(dtype).name, "(2, 3)")


def test_dequantize_int_scale():
    _raises(pj.PtoDtypeError, lambda: ops.dequantize(np.zeros((2, 3), np.int8), np.ones((2, 1), np.int32)),
            "pto.dequantize", "scale", "int32")


def test_dequantize_int_output_dtype():
    _raises(pj.PtoArgumentError,
            lambda: ops.dequantize(np.zeros((2, 3), np.int8), np.ones((2, 1), np.float32), dtype=np.int32),
            "pto.dequantize", "int32")


def test_dequantize_shapes_do_not_broadcast():
    _raises(pj.PtoShapeError, lambda: ops.dequantize(np.zeros((2, 3), np.int8), np.ones((4, 1), np.float32)),
            "pto.dequantize", "(2, 3)", "(4, 1)")


@pytest.mark.parametrize("scale_dtype", [np.int8, np.int32, np.bool_])
def test_quantize_int_scale_dtype(scale_dtype):
    _raises(pj.PtoArgumentError,
            lambda: ops.quantize(np.zeros((2, 3), np.float32), scale_dtype=scale_dtype),
            "pto.quantize", "scale_dtype", np.dtype(scale_dtype).name)


def test_quantize_of_int():
    _raises(pj.PtoDtypeError, lambda: ops.quantize(np.zeros((2, 3), np.int8)), "pto.quantize", "int8")


def test_quantize_repeated_axis():
    _raises(pj.PtoArgumentError, lambda: ops.quantize(np.zeros((2, 3), np.float32), axis=(1, -1)),
            "pto.quantize", "repeated")


# ---------------------------------------------------------------- row-wise composites over wide rows
WIDE_ROWS = [  # op, x shape, axis: rows past a tile's 4095 columns, or whole axes past half the UB
    ("softmax", (3, 7168), -1), ("softmax", (30000, 2), 0), ("rms_norm", (2, 7168), -1),
    ("layer_norm", (3, 9000), -1), ("rms_norm", (1, 40000), -1),
]


@pytest.mark.parametrize("op,shape,axis", WIDE_ROWS, ids=lambda v: str(v))
def test_composite_over_a_wide_row_runs_as_its_reference_ops(op, shape, axis):
    """A composite whose whole axis does not fit one tile lowers as its reference's ops (reductions
    in stages, or a row loop over column chunks of the row): every tile of its PTO text within 4095
    columns, the result the golden."""
    import re
    x = rand(shape, F32, seed=7, low=-4, high=4)
    g = rand(shape[-1:], F32, seed=8)
    fn, want = {"softmax": (lambda a, b: ops.softmax(a, axis=axis), np_softmax(x, axis)),
                "rms_norm": (lambda a, b: ops.rms_norm(a, b), np_rms_norm(x, g, 1e-6)),
                "layer_norm": (lambda a, b: ops.layer_norm(a, b, b), np_layer_norm(x, g, g, 1e-5))}[op]
    k = pj.kernel(fn)
    assert_close(np.asarray(k(x, g)), want, F32)
    compiled = k.compiled_for(x, g)
    assert f"pto.{op}" not in compiled.as_text("tile")
    cols = [int(c) for c in re.findall(r"tile_buf<loc=vec, dtype=\w+, rows=\d+, cols=(\d+)", compiled.as_text("pto"))]
    assert cols and max(cols) <= 4095, cols
