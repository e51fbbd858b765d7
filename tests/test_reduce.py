"""Reductions (sum, amax, amin, prod, argmax, argmin, cumsum) against independent NumPy goldens.

Goldens are computed in float64 (int64 for integers, wrapped back to the dtype) with NumPy only and
rounded once to the operand dtype; ptojax and its jnp references never produce an expected value.
"""
from __future__ import annotations

import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend.ptoas import find_ptoas
from helpers import (BF16, F16, F32, I8, I32, NUMERIC, SHAPES, assert_close, assert_eager_matches_jit,
                     assert_vmap_matches_loop, rand)

OPS = pj.ops
HAVE_PTOAS = bool(find_ptoas()) or os.environ.get("CI") == "true"


# ------------------------------------------------------------------------------------------ goldens
def _wide(x):
    x = np.asarray(x)
    return x.astype(np.int64) if x.dtype in (I8, I32) else x.astype(np.float64)


def _np_axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def golden_sum(x, axis, keepdims):
    # float64 (int64) exact-ish sum, then one rounding / wrap to the operand dtype.
    return np.sum(_wide(x), axis=_np_axis(axis), keepdims=keepdims).astype(x.dtype)


def golden_prod(x, axis, keepdims):
    # int64 products wrap mod 2**64, which preserves the value mod 2**8 / 2**32.
    with np.errstate(over="ignore"):
        return np.prod(_wide(x), axis=_np_axis(axis), keepdims=keepdims).astype(x.dtype)


def golden_amax(x, axis, keepdims):
    return np.max(_wide(x), axis=_np_axis(axis), keepdims=keepdims).astype(x.dtype)


def golden_amin(x, axis, keepdims):
    return np.min(_wide(x), axis=_np_axis(axis), keepdims=keepdims).astype(x.dtype)


def golden_cumsum(x, axis, reverse):
    w = _wide(x)
    if reverse:
        return np.flip(np.cumsum(np.flip(w, axis), axis=axis), axis).astype(x.dtype)
    return np.cumsum(w, axis=axis).astype(x.dtype)


def golden_arg(kind, x, axis, keepdims):
    fn = np.argmax if kind == "argmax" else np.argmin  # NumPy returns the first occurrence on ties
    return fn(_wide(x), axis=axis, keepdims=keepdims).astype(np.int32)


REDUCTIONS = {"sum": golden_sum, "amax": golden_amax, "amin": golden_amin, "prod": golden_prod}


def _inputs(name, shape, dtype, seed=0):
    if name == "prod" and dtype not in (I8, I32):
        # Keep |product| well inside the fp16 range (3**17 would overflow fp16 to inf).
        return rand(shape, dtype, seed, low=-1.5, high=1.5)
    return rand(shape, dtype, seed)


def _axis_specs(ndim):
    """axis as None, int, negative int and tuple, resolved for a rank-``ndim`` operand."""
    specs = [None, 0, -1]
    if ndim >= 2:
        specs.append((0, ndim - 1))
    if ndim >= 3:
        specs.append((-1, 1))
    return specs


# keepdims alternates along each shape's axis specs (both values for every shape), plus axis=None kept.
SHAPE_AXIS = ([(s, a, i % 2 == 1) for s in SHAPES for i, a in enumerate(_axis_specs(len(s)))]
              + [(s, None, True) for s in SHAPES])


def _id(v):
    return str(v).replace(" ", "")


# ---------------------------------------------------------------------------- float32 shape × axis grid
@pytest.mark.parametrize("shape,axis,keepdims", SHAPE_AXIS,
                         ids=[f"{_id(s)}-ax{_id(a)}-kd{int(k)}" for s, a, k in SHAPE_AXIS])
def test_sum_float32_shapes_axes(shape, axis, keepdims):
    x = rand(shape, F32, seed=len(shape))
    out = assert_eager_matches_jit(lambda v: OPS.sum(v, axis=axis, keepdims=keepdims), x)
    assert out.dtype == F32
    assert_close(out, golden_sum(x, axis, keepdims), F32)


@pytest.mark.parametrize("name", ["amax", "amin", "prod"])
@pytest.mark.parametrize("shape,axis,keepdims", [((7,), None, False), ((1, 13), 0, True), ((3, 5), -1, False),
                                                 ((4, 1, 6), (0, 2), True), ((2, 3, 17), (-1, 1), False),
                                                 ((2, 3, 17), None, True)])
def test_reduction_float32_shapes_axes(name, shape, axis, keepdims):
    x = _inputs(name, shape, F32, seed=3)
    fn = getattr(OPS, name)
    out = assert_eager_matches_jit(lambda v: fn(v, axis=axis, keepdims=keepdims), x)
    assert out.dtype == F32
    assert_close(out, REDUCTIONS[name](x, axis, keepdims), F32)


# ---------------------------------------------------------------------------------------- dtype grid
@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: d.name)
@pytest.mark.parametrize("name", ["sum", "amax", "amin", "prod"])
@pytest.mark.parametrize("shape,axis,keepdims", [((2, 3, 17), -1, False), ((1, 13), None, True),
                                                 ((4, 1, 6), (0, 1), False)])
def test_reduction_dtypes(name, dtype, shape, axis, keepdims):
    x = _inputs(name, shape, dtype, seed=11)
    fn = getattr(OPS, name)
    out = assert_eager_matches_jit(lambda v: fn(v, axis=axis, keepdims=keepdims), x)
    assert out.dtype == dtype, (out.dtype, dtype)
    # Floating sums/products accumulate in float32 and round once; the float64 golden rounded once
    # to the dtype is within the per-dtype tolerance. Integer results (incl. wrap) must be exact.
    assert_close(out, REDUCTIONS[name](x, axis, keepdims), dtype)


def test_sum_int8_wraps():
    x = np.array([[100, 100, 100], [-128, -1, 0]], np.int8)
    out = OPS.sum(x, axis=1)
    assert out.dtype == I8
    np.testing.assert_array_equal(np.asarray(out), np.array([300 - 256, -129 + 256], np.int8))
    np.testing.assert_array_equal(np.asarray(OPS.sum(np.full((1000,), 1, np.int8))), np.int8(1000 - 4 * 256))


def test_prod_int8_wraps():
    x = np.array([16, 16, 3], np.int8)  # 768 = 3 * 256 -> 0
    np.testing.assert_array_equal(np.asarray(OPS.prod(x)), np.int8(0))
    np.testing.assert_array_equal(np.asarray(OPS.prod(np.array([11, 13], np.int8))), np.int8(143 - 256))


@pytest.mark.parametrize("dtype,big,n", [(F16, 2048.0, 1000), (BF16, 256.0, 500)], ids=["float16", "bfloat16"])
def test_low_precision_sum_accumulates_in_float32(dtype, big, n):
    # big + n ones: every partial sum is exact in float32, while a running sum kept in the operand
    # dtype would get stuck at ``big`` (1 is below half an ulp there). The true total is representable.
    x = np.concatenate([np.array([big]), np.ones(n)]).astype(dtype)
    out = assert_eager_matches_jit(lambda v: OPS.sum(v), x)
    assert out.dtype == dtype
    np.testing.assert_array_equal(np.asarray(out, np.float64), big + n)
    c = assert_eager_matches_jit(lambda v: OPS.cumsum(v), x)
    np.testing.assert_array_equal(np.asarray(c, np.float64)[-1], big + n)


def test_amax_amin_extremes_exact():
    x = np.array([[-128, 127, 0], [5, -128, 127]], np.int8)
    np.testing.assert_array_equal(np.asarray(OPS.amax(x, axis=0)), np.array([5, 127, 127], np.int8))
    np.testing.assert_array_equal(np.asarray(OPS.amin(x, axis=-1)), np.array([-128, -128], np.int8))


# ------------------------------------------------------------------------------------ argmax/argmin
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("shape,axis,keepdims", [((1,), 0, True), ((7,), -1, False), ((3, 5), 0, True),
                                                 ((1, 13), -1, False), ((4, 1, 6), 1, True),
                                                 ((2, 3, 17), -1, False), ((2, 3, 17), 0, True)])
def test_arg_reductions_float32(kind, shape, axis, keepdims):
    x = rand(shape, F32, seed=5)
    fn = getattr(OPS, kind)
    out = assert_eager_matches_jit(lambda v: fn(v, axis=axis, keepdims=keepdims), x)
    assert out.dtype == I32
    np.testing.assert_array_equal(np.asarray(out), golden_arg(kind, x, axis, keepdims))


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: d.name)
def test_arg_reductions_ties_first_occurrence(kind, dtype):
    # Only three distinct values over 17 entries: ties everywhere; the first index must win.
    rng = np.random.default_rng(7)
    x = rng.integers(-1, 2, size=(2, 3, 17)).astype(dtype)
    fn = getattr(OPS, kind)
    for axis in (-1, 1):
        out = assert_eager_matches_jit(lambda v: fn(v, axis=axis), x)
        assert out.dtype == I32
        np.testing.assert_array_equal(np.asarray(out), golden_arg(kind, x, axis, False))


def test_arg_ties_explicit():
    x = np.array([[3, 1, 3, 1], [2, 2, 2, 2]], np.int32)
    np.testing.assert_array_equal(np.asarray(OPS.argmax(x, axis=1)), [0, 0])
    np.testing.assert_array_equal(np.asarray(OPS.argmin(x, axis=1)), [1, 0])
    np.testing.assert_array_equal(np.asarray(OPS.argmax(x, axis=0, keepdims=True)), [[0, 1, 0, 1]])


# ------------------------------------------------------------------------------------------- cumsum
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape,axis", [((1,), 0), ((7,), -1), ((3, 5), 0), ((1, 13), 1), ((4, 1, 6), -2),
                                        ((2, 3, 17), -1)])
def test_cumsum_float32(shape, axis, reverse):
    x = rand(shape, F32, seed=9)
    out = assert_eager_matches_jit(lambda v: OPS.cumsum(v, axis=axis, reverse=reverse), x)
    assert out.dtype == F32 and out.shape == x.shape
    assert_close(out, golden_cumsum(x, axis, reverse), F32)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: d.name)
def test_cumsum_dtypes(dtype, reverse):
    x = rand((3, 17), dtype, seed=13)
    out = assert_eager_matches_jit(lambda v: OPS.cumsum(v, axis=1, reverse=reverse), x)
    assert out.dtype == dtype
    assert_close(out, golden_cumsum(x, 1, reverse), dtype)


def test_a_scan_along_long_rows_loops_over_column_chunks():
    """A scan along the last axis runs down the row's transpose (32 bytes per value) by doubling, in two
    work tiles: 3000 f32 values per row no longer fit one tile, so each row block's program loops over
    column chunks, each scanned from the sums before it (``tcumsum_carry``); a few very long rows stage
    through GM instead (tests/test_scans.py)."""
    for shape, seed in (((4, 3000), 3), ((2, 5000), 4)):
        x = rand(shape, F32, seed=seed)
        f = pj.kernel(lambda v: jnp.cumsum(v, axis=-1))
        assert "pto.tcumsum_carry" in f.lower(x).as_text("tile")
        got = np.asarray(f(x))
        scale = np.cumsum(np.abs(x.astype(np.float64)), axis=-1)     # the running sum of magnitudes
        error = np.abs(got - np.cumsum(x.astype(np.float64), axis=-1)) / scale
        assert error.max() <= 8 * np.finfo(np.float32).eps


def test_cumsum_reverse_explicit():
    x = np.array([1, 2, 3, 4], np.int32)
    np.testing.assert_array_equal(np.asarray(OPS.cumsum(x)), [1, 3, 6, 10])
    np.testing.assert_array_equal(np.asarray(OPS.cumsum(x, reverse=True)), [10, 9, 7, 4])


# --------------------------------------------------------------------------------------------- vmap
@pytest.mark.parametrize("in_axis", [0, 1, -1], ids=["ax0", "ax1", "last"])
@pytest.mark.parametrize("name,kwargs", [("sum", dict(axis=-1)), ("sum", dict(axis=(0, 1), keepdims=True)),
                                         ("amax", dict(axis=0)), ("amin", dict(axis=None)),
                                         ("prod", dict(axis=1, keepdims=True)), ("argmax", dict(axis=-1)),
                                         ("argmin", dict(axis=0, keepdims=True)),
                                         ("cumsum", dict(axis=1, reverse=True)), ("cumsum", dict(axis=0))],
                         ids=lambda v: v if isinstance(v, str) else _id(tuple(v.items())))
def test_vmap_matches_loop(name, kwargs, in_axis):
    x = rand((4, 5, 3), F32, seed=21, low=-1.5, high=1.5)
    fn = getattr(OPS, name)
    out = assert_vmap_matches_loop(lambda v: fn(v, **kwargs), (x,), in_axis)
    # Check against the golden too, so a wrong-but-consistent batching rule still fails.
    xs = np.moveaxis(x, in_axis, 0)
    if name in REDUCTIONS:
        golden = np.stack([REDUCTIONS[name](s, kwargs.get("axis"), kwargs.get("keepdims", False)) for s in xs])
    elif name == "cumsum":
        golden = np.stack([golden_cumsum(s, kwargs["axis"], kwargs.get("reverse", False)) for s in xs])
    else:
        golden = np.stack([golden_arg(name, s, kwargs["axis"], kwargs.get("keepdims", False)) for s in xs])
    assert_close(out, golden)


def test_vmap_int8_sum_and_none_mix():
    x = rand((6, 9), I8, seed=4)
    y = rand((9,), I8, seed=5)
    # x batched on its last axis, y unbatched: sum of x-slice plus sum of y (both wrap in int8).
    fn = lambda a, b: OPS.sum(a) + OPS.sum(b)  # noqa: E731
    out = assert_vmap_matches_loop(fn, (x, y), (1, None))
    golden = (np.sum(x.astype(np.int64), axis=0) + np.sum(y.astype(np.int64))).astype(np.int8)
    np.testing.assert_array_equal(np.asarray(out), golden)


def test_nested_vmap():
    x = rand((3, 4, 5, 6), F32, seed=8)
    fn = jax.vmap(jax.vmap(lambda v: OPS.sum(v, axis=-1), in_axes=1), in_axes=2)
    out = fn(x)  # outer maps axis 2 (size 5), inner maps axis 1 of the (3, 4, 6) slice (size 4)
    golden = np.transpose(np.sum(x.astype(np.float64), axis=-1), (2, 1, 0)).astype(F32)
    assert out.shape == (5, 4, 3)
    assert_close(out, golden, F32)
    jitted = jax.jit(fn)(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(jitted))


# ------------------------------------------------------------------------------------------- errors
def _raises(cls, op, *fragments):
    pattern = "".join(f"(?=.*{re.escape(f)})" for f in (f"pto.{op}",) + fragments)
    return pytest.raises(cls, match=re.compile(pattern, re.S))


def test_error_axis_out_of_range():
    x = jnp.zeros((3, 5), F32)
    with _raises(pj.PtoArgumentError, "sum", "axis 2", "rank-2"):
        OPS.sum(x, axis=2)
    with _raises(pj.PtoArgumentError, "amin", "axis -3", "rank-2"):
        OPS.amin(x, axis=(0, -3))
    with _raises(pj.PtoArgumentError, "argmax", "axis 5", "rank-2"):
        OPS.argmax(x, axis=5)
    with _raises(pj.PtoArgumentError, "cumsum", "axis -3"):
        OPS.cumsum(x, axis=-3)


def test_error_repeated_axis():
    with _raises(pj.PtoArgumentError, "sum", "repeated axis", "(1, -1)"):
        OPS.sum(jnp.zeros((3, 5), F32), axis=(1, -1))


def test_error_amax_empty_axis():
    x = jnp.zeros((3, 0), F32)
    with _raises(pj.PtoShapeError, "amax", "(3, 0)"):
        OPS.amax(x, axis=1)
    with _raises(pj.PtoShapeError, "amin", "(3, 0)"):
        OPS.amin(x)
    with _raises(pj.PtoShapeError, "argmin", "(3, 0)"):
        OPS.argmin(x, axis=-1)
    # Summing an empty axis is fine: the empty sum is 0.
    np.testing.assert_array_equal(np.asarray(OPS.sum(x, axis=1)), np.zeros(3, F32))


def test_error_bool_operand():
    with _raises(pj.PtoDtypeError, "sum", "bool", "(2, 3)"):
        OPS.sum(jnp.zeros((2, 3), bool))


# ------------------------------------------------------------------------- reductions over a long axis
LONG_AXES = [  # shape, axis: the last axis past a tile's 4095 columns; other axes past half the UB
    ((3, 32000), -1),     # 8 chunks of 4000: no padding
    ((2, 9001), -1),      # padded with the identity
    ((4, 70000), 1),      # two stages: 18 partials of 4088, then one
    ((16384, 16), 0),     # a norm's dgamma over 16 384 tokens
    ((2, 12000, 8), 1),   # a middle axis
]


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("shape,axis", LONG_AXES, ids=_id)
def test_reduction_over_a_long_axis_runs_in_stages(name, shape, axis):
    rng = np.random.default_rng(3)
    if name == "prod":                                             # +-1: an exact product
        x = np.where(rng.random(shape) < 0.999, 1, -1).astype(I32)
    else:                                                          # integer sums are exact in any order
        x = rng.integers(-50, 50, shape).astype(I32 if name == "sum" else F32)
    staged = {"row_loops": {"DEFAULT": False}} if axis % len(shape) == len(shape) - 1 else {}   # else: a row loop
    k = pj.kernel(lambda v: getattr(OPS, name)(v, axis=axis, keepdims=True), options=staged)
    np.testing.assert_array_equal(np.asarray(k(x)), REDUCTIONS[name](x, axis, True))
    text = k.compiled_for(x).as_text("tile")
    tiles = [tuple(map(int, t.split(","))) for t in re.findall(r"%\d+:\w+\[([\d,]+)\] = pto\.tload", text)]
    assert "pto.reshape" in text and tiles                         # chunks of the axis, reduced whole
    assert all(t[-1] <= 4095 and 4 * int(np.prod(t)) <= 96 * 1024 for t in tiles), tiles


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("shape,axis", [((3, 32000), -1), ((2, 9001), -1), ((2, 512, 64), (1, 2))], ids=_id)
def test_reduction_over_a_long_row_loops_over_column_chunks_by_default(name, shape, axis):
    """Rows past a tile row's 4095 columns under the default tiles (two trailing axes merged into one,
    too): one program that loops over column chunks of the row, not stages that meet in GM."""
    rng = np.random.default_rng(3)
    x = (np.where(rng.random(shape) < 0.999, 1, -1) if name == "prod" else rng.integers(-50, 50, shape)).astype(I32)
    k = pj.kernel(lambda v: getattr(OPS, name)(v, axis=axis, keepdims=True))
    np.testing.assert_array_equal(np.asarray(k(x)), REDUCTIONS[name](x, axis, True))
    compiled = k.compiled_for(x)
    (program,) = compiled.lowering.programs
    assert "loop over column chunks" in program.note
    assert compiled.profile(x, compute=False).tasks == shape[0]      # a row a task: fewer rows than cores
    if HAVE_PTOAS:
        compiled.ptoas()


def test_float32_sum_over_a_long_row_matches_float64():
    x = rand((4, 50000), F32, seed=4)
    got = np.asarray(pj.kernel(lambda v: OPS.sum(v, axis=-1))(x))
    np.testing.assert_allclose(got, golden_sum(x, -1, False), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("vec", [None, (2, 1024)], ids=["default", "vec"])
@pytest.mark.parametrize("n", [9001, 128256])
@pytest.mark.parametrize("dtype,rtol", [(F16, 2 ** -11), (BF16, 2 ** -8)], ids=["float16", "bfloat16"])
def test_low_precision_sum_over_a_long_row(dtype, rtol, n, vec):
    """Summed in float32 and rounded once (within half an ulp), not rounded per column chunk of the
    row loop (bfloat16 over 128 256 columns was 2.5 % off)."""
    x = rand((2, n), dtype, seed=5, low=0.0, high=1.0)

    def fn(v):
        if vec is None:
            return OPS.sum(v, axis=-1)
        with pj.tile(vec=vec):
            return OPS.sum(v, axis=-1)
    got = np.asarray(pj.kernel(fn)(x))
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float64), np.sum(x.astype(np.float64), -1), rtol=rtol)


@pytest.mark.parametrize("shape,axis,kind", [
    ((2, 3, 2, 16), 1, "sum"), ((2, 3, 2, 16), 1, "amax"), ((2, 3, 2, 16), 1, "argmax"), ((8, 2, 64), 1, "argmin"),
    ((3, 16, 64), 0, "argmax"), ((2, 2, 1), 0, "argmax"), ((3, 4, 1), 0, "sum"), ((2, 5, 3, 8), (1, 3), "sum"),
    ((3, 4, 5), 0, "argmax"), ((2, 3, 4, 5), 1, "sum")])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_a_reduction_that_keeps_leading_axes_of_one_tile(shape, axis, kind, dtype):
    """A middle or first axis reduced in a tile that keeps other leading axes (rows grouped, a value per
    row regrouped), eager and jitted, equals NumPy; NaN wins an arg-reduction as in JAX."""
    rng = np.random.default_rng(4)
    x = rng.integers(-5, 5, shape).astype(dtype) if dtype == I32 else rng.normal(size=shape).astype(dtype)
    if dtype == F32 and kind == "argmax":
        x.reshape(-1)[[x.size // 2, -1]] = np.nan

    def fn(v):
        with pj.tile(vec=shape):
            return getattr(OPS, kind)(v, axis=axis)

    kernel = pj.kernel(fn)
    want = {"sum": np.sum, "amax": np.max, "argmax": np.argmax, "argmin": np.argmin}[kind](x, axis=axis)
    for got in (kernel(x), jax.jit(kernel)(x)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
        assert np.asarray(got).dtype == (np.int32 if kind.startswith("arg") else dtype)


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reduction_over_a_vocabulary_row(kind):
    """Greedy decoding's argmax over 50 257 logits (the row's extremum, then the first index holding
    it, each a loop over the row): ties keep the first index, NaN wins as in the one-stage op, a row of
    -inf (or +inf) gives 0, the extremum at the very end is found; over a middle axis in stages."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=(6, 50257)).astype(F32)
    sign = 1 if kind == "argmax" else -1
    x[1, [40000, 45000, 3]] = sign * 100          # a tie across chunks, and an earlier one
    x[2, [30000, 7]] = np.nan
    x[3, :] = -sign * np.inf
    x[4, -1] = sign * 50
    x[5, [0, 45001]] = sign * 60, np.nan            # a NaN in a chunk whose other values are not the best
    kernel = pj.kernel(lambda v: getattr(OPS, kind)(v, axis=-1))
    got = np.asarray(kernel(x))
    np.testing.assert_array_equal(got, golden_arg(kind, x, -1, False))
    assert got[1] == 3 and got[2] == 7 and got[3] == 0 and got[4] == 50256 and got[5] == 45001
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x)), got)          # the jitted replay
    xi = rng.integers(-5, 5, (3, 9000, 4)).astype(I32)                  # a middle axis, integer ties
    got = np.asarray(pj.kernel(lambda v: getattr(OPS, kind)(v, axis=1, keepdims=True))(xi))
    np.testing.assert_array_equal(got, golden_arg(kind, xi, 1, True))


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=["float32", "bfloat16"])
def test_arg_reduction_over_few_long_rows_reduces_segments_side_by_side(kind, dtype):
    """Four rows of 131 072 logits: too few rows to give the vector cores a block each, so each row is
    8 segments of 16 384, whose extrema and first indices loops find side by side, then the first
    segment holding the best gives the index — ties across segments keep the first, a NaN in a later
    segment than the best wins, a row of -inf (+inf) gives 0, the very last entry is found. Not the
    stages through GM that the row took before (512 chunk tasks): 65 tasks."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=(4, 131072)).astype(dtype)
    sign = 1 if kind == "argmax" else -1
    x[0, [20000, 100000]] = sign * 100                 # a tie across segments
    x[1, [5, 70000]] = sign * 100, np.nan              # the best in segment 0, a NaN in segment 4
    x[2, :] = -sign * np.inf
    x[3, -1] = sign * 100
    kernel = pj.kernel(lambda v: getattr(jnp, kind)(v, -1))
    got = np.asarray(kernel(x))
    np.testing.assert_array_equal(got, [20000, 70000, 0, 131071])
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x)), got)
    compiled = kernel.compiled_for(x)
    assert compiled.profile(x, compute=False).tasks == 2 * 4 * 8 + 1
    assert all("loop" in p.note for p in compiled.lowering.programs[:2])
    if HAVE_PTOAS:
        compiled.ptoas()


def test_arg_reduction_over_many_long_rows_is_one_looping_program():
    """An argmax over 128 rows of 20 000 columns: one program per block of rows, whose two loops (the
    extremum, then the first index holding it) read each column tile once per loop though the index
    pass compares the tile with the extremum and with itself (NaN) — its loads are shared."""
    x = np.random.default_rng(9).normal(size=(128, 20000)).astype(F32)
    x[7, [3, 19999]] = np.nan
    kernel = pj.kernel(lambda v: jnp.argmax(v, -1))
    np.testing.assert_array_equal(np.asarray(kernel(x)), np.asarray(jnp.argmax(jnp.asarray(x), -1)))
    compiled = kernel.compiled_for(x)
    (program,) = compiled.lowering.programs
    bodies = [loop.split("return")[0] for loop in compiled.as_text("block").split("scan[")[1:]]
    assert [body.count("pto.tload") for body in bodies] == [1, 2]         # x; then x and the index row


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["float32", "float16", "bfloat16"])
def test_float_max_min_are_nan_wherever_a_nan_is(dtype):
    """``jnp.max`` / ``jnp.min`` of floats: NaN where the row (column, tile) holds one, as JAX's — the
    real ``trowmax`` / ``tcolmax`` see a NaN only in first place (a row [1, nan, inf] gave inf) — and
    argmax the first NaN's index; eagerly and under jax.jit, over the last axis, the first, all."""
    x = np.tile(np.array([1.0, np.nan, np.inf, 0.0], np.float32), (8, 16))
    x[1] = np.tile(np.array([1.0, 2.0, np.inf, np.nan], np.float32), 16)
    x[2], x[3] = np.arange(64), -np.arange(64)
    x[3, 63] = np.nan
    x = x.astype(dtype)
    for fn in (lambda v: jnp.max(v, -1), lambda v: jnp.min(v, -1), lambda v: jnp.max(v, 0, keepdims=True),
               lambda v: jnp.min(v), lambda v: jnp.argmax(v, -1), lambda v: jnp.argmin(v, 0)):
        want = np.asarray(fn(jnp.asarray(x))).astype(np.float32)
        for run in (pj.kernel(fn), jax.jit(pj.kernel(fn))):
            np.testing.assert_array_equal(np.asarray(run(x)).astype(np.float32), want)


def test_a_leading_axis_reduction_whose_slices_fill_a_stage_is_refused():
    """Under vec=(128, 128) one slice of axis 0 takes 64 KiB: a stage held one slice, reduced nothing,
    and the staging looped forever; now a capacity error names the tile."""
    def lead_sum(x):
        with pj.tile(vec=(128, 128)):
            return jnp.sum(x, axis=0)

    with pytest.raises(pj.PtoCapacityError, match=r"pto.sum.*a slice of reduced axis 0 under vec tile \(128, 128\)"):
        pj.lower(lead_sum, np.ones((2, 128, 128), np.float32))
    got = pj.kernel(lambda x: jnp.sum(x, axis=0))(np.ones((2, 128, 128), np.float32))      # default tiles
    np.testing.assert_array_equal(np.asarray(got), np.full((128, 128), 2, np.float32))


# ------------------------------------------------------------- reductions over several axes, in stages
SEVERAL_AXES = [  # shape, axes whose whole extent is past half the UB (or a tile row's 4095 columns)
    ((512, 64), None),          # a full reduction of 128 KiB
    ((2, 512, 64), (1, 2)),     # two trailing axes merged: rows of 32 768
    ((400, 100), None),         # rows padded to 416 bytes
    ((1, 50000), (0, 1)),       # a vocabulary row reduced over both of its axes
    ((300, 4, 100), (0, 2)),    # axes apart: one run at a time
    ((512, 64, 3), (0, 1)),     # two leading axes merged: a column of 32 768
]


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("shape,axis", SEVERAL_AXES, ids=_id)
def test_a_reduction_over_several_axes_runs_in_stages(name, shape, axis):
    """A reduction over several (or all) axes that one tile cannot hold whole reduces one run of adjacent
    axes at a time, each staged like a long axis; integer sums and +-1 products are exact in any order."""
    rng = np.random.default_rng(7)
    if name == "prod":
        x = np.where(rng.random(shape) < 0.999, 1, -1).astype(I32)
    else:
        x = rng.integers(-50, 50, shape).astype(I32 if name == "sum" else F32)
    for keepdims in (False, True):
        k = pj.kernel(lambda v: getattr(OPS, name)(v, axis=axis, keepdims=keepdims),
                      options={"row_loops": {"DEFAULT": False}})      # else a long last run loops (above)
        got = np.asarray(k(x))
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, REDUCTIONS[name](x, axis, keepdims))
    text = k.compiled_for(x).as_text("tile")
    tiles = [tuple(map(int, t.split(","))) for t in re.findall(r"%\d+:\w+\[([\d,]+)\] = pto\.tload", text)]
    assert tiles and all(t[-1] <= 4095 and 4 * int(np.prod(t)) <= 96 * 1024 for t in tiles), tiles


FLOAT_SEVERAL = [  # jnp reduction, its NumPy float64 golden, shape, axis, keepdims
    ("sum", (512, 64), None, False), ("mean", (512, 64), None, False), ("max", (400, 100), None, False),
    ("min", (512, 64), None, True), ("sum", (4, 128, 64), (0, 2), False), ("mean", (2, 512, 64), (1, 2), True),
    ("sum", (300, 300), None, False)]


@pytest.mark.parametrize("name,shape,axis,keepdims", FLOAT_SEVERAL, ids=_id)
def test_a_float32_reduction_over_several_axes_of_a_large_tensor(name, shape, axis, keepdims):
    """``jnp.sum(x)`` of a (512, 64) float32 tensor (128 KiB) was a capacity error; staged, it gives the
    same result eagerly and under jax.jit, within float32 tolerance of NumPy's float64 reduction."""
    x = rand(shape, F32, seed=8)
    fn = getattr(jnp, name)
    got = np.asarray(assert_eager_matches_jit(pj.kernel(lambda v: fn(v, axis=axis, keepdims=keepdims)), x))
    want = getattr(np, name)(x.astype(np.float64), axis=axis, keepdims=keepdims)
    assert got.dtype == F32 and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("dtype,rtol", [(F16, 2e-3), (BF16, 1e-2)], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("shape,axis", [((512, 64), None), ((300, 4, 100), (0, 2))], ids=_id)
def test_low_precision_sum_over_several_axes_of_a_large_tensor(dtype, rtol, shape, axis):
    """float16 / bfloat16 sums over several axes add in float32 and round once, staged or not."""
    x = rand(shape, dtype, seed=9, low=0.0, high=1.0)
    got = np.asarray(pj.kernel(lambda v: jnp.sum(v, axis=axis))(x))
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float64), np.sum(x.astype(np.float64), axis=axis), rtol=rtol)


def test_a_full_reduction_under_a_small_vec_tile_is_staged_too():
    """A smaller vec tile did not help a full reduction (its axes were whole in one tile whatever the
    tile); now it is staged under that tile."""
    x = rand((512, 64), F32, seed=10)

    def small(v):
        with pj.tile(vec=(8, 8)):
            return jnp.sum(v), jnp.max(v)

    total, top = pj.kernel(small)(x)
    np.testing.assert_allclose(float(total), np.sum(x.astype(np.float64)), rtol=1e-5, atol=1e-3)
    assert float(top) == float(np.max(x))
