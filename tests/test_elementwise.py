"""Elementwise ops (arithmetic, activations, comparisons, logic, where, clip) against NumPy goldens.

Goldens are independent of ptojax: floats are computed in float64 with NumPy/SciPy from the
operand values (already rounded to the operand dtype) and rounded once to the dtype; integers are
computed in int64 and wrapped back with NumPy's modular ``astype``. Neither ptojax nor its jnp
references ever produce an expected value.
"""
from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from scipy.special import erf

import ptojax as pj
from helpers import (BF16, BOOL, F16, F32, FLOATS, I8, I32, INTS, NUMERIC, SHAPES, assert_close,
                     assert_eager_matches_jit, assert_vmap_matches_loop, rand)

OPS = pj.ops


# ------------------------------------------------------------------------------------------ goldens
def _wide(x):
    x = np.asarray(x)
    if x.dtype == BOOL:
        return x
    return x.astype(np.int64) if x.dtype in INTS else x.astype(np.float64)


def _golden(fn, dtype, *xs):
    """``fn`` on the float64/int64 widening of ``xs``, rounded (floats) or wrapped (ints) to ``dtype``."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return np.asarray(fn(*[_wide(x) for x in xs])).astype(dtype)


def _check(fn, args, golden, dtype, rtol=None, atol=None, jit=True):
    """Golden check; with ``jit`` also eager == ``jax.jit`` (grids do that on one shape per op/dtype,
    since every extra shape costs two XLA compiles)."""
    out = assert_eager_matches_jit(fn, *args) if jit else fn(*args)
    assert np.asarray(out).dtype == np.dtype(dtype), (np.asarray(out).dtype, dtype)
    assert_close(out, golden, dtype, rtol=rtol, atol=atol)
    return out


def _nonzero(shape, dtype, seed):
    """Magnitudes in [0.5, 3) with random signs: safe divisors."""
    rng = np.random.default_rng(seed + 100)
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return (sign * rng.uniform(0.5, 3.0, size=shape)).astype(dtype)


# ------------------------------------------------------------------------------------------- binary
BINARY = {
    # name: (golden on widened operands, accepted dtypes)
    "add": (lambda x, y: x + y, NUMERIC),
    "sub": (lambda x, y: x - y, NUMERIC),
    "mul": (lambda x, y: x * y, NUMERIC),
    "div": (lambda x, y: x / y, FLOATS),
    "maximum": (np.maximum, NUMERIC),
    "minimum": (np.minimum, NUMERIC),
    "pow": (np.power, FLOATS),
}

# Full shape grid (equal shapes) plus broadcasting pairs, on float32.
F32_PAIRS = [((3, 1), (1, 5))] + [(s, s) for s in SHAPES] + [((4,), (2, 4)), ((1,), (2, 3, 17)),
                                                             ((4, 1, 6), (5, 1))]
# Part of the float32 grid that runs by default (size-1, odd/prime, 3-D, broadcasting); the rest of
# the grid is marked slow (`pytest -m slow`) to keep the default run short: each shape is a compile.
F32_PAIRS_FAST = {((3, 1), (1, 5)), ((1,), (1,)), ((2, 3, 17), (2, 3, 17)), ((4,), (2, 4)),
                  ((1,), (2, 3, 17))}
UNARY_SHAPES_FAST = {(7,), (1,), (2, 3, 17)}
# The other dtypes on a few shapes: broadcast both ways, rank-broadcast (the first also under jit).
DTYPE_PAIRS = [((3, 1), (1, 5)), ((4,), (2, 4))]


def _binary_inputs(name, sx, sy, dtype, seed=0):
    if name == "pow":  # positive base, moderate exponent: defined and finite in fp16
        return rand(sx, dtype, seed, 0.5, 2.0), rand(sy, dtype, seed + 1, -2.0, 2.0)
    x = rand(sx, dtype, seed)
    y = _nonzero(sy, dtype, seed) if name == "div" else rand(sy, dtype, seed + 1)
    return x, y


def _binary_cases():
    for name, (_, dtypes) in BINARY.items():
        for sx, sy in F32_PAIRS:
            yield pytest.param(name, F32, sx, sy, (sx, sy) == F32_PAIRS[0], id=f"{name}-float32-{sx}x{sy}",
                               marks=() if (sx, sy) in F32_PAIRS_FAST else pytest.mark.slow)
        for dt in dtypes:
            if dt == F32:
                continue
            for sx, sy in DTYPE_PAIRS:
                yield pytest.param(name, dt, sx, sy, (sx, sy) == DTYPE_PAIRS[0], id=f"{name}-{dt.name}-{sx}x{sy}")


@pytest.mark.parametrize("name, dtype, sx, sy, jit", list(_binary_cases()))
def test_binary(name, dtype, sx, sy, jit):
    golden_fn, _ = BINARY[name]
    x, y = _binary_inputs(name, sx, sy, dtype)
    op = getattr(OPS, name)
    _check(lambda a, b: op(a, b), (x, y), _golden(golden_fn, dtype, x, y), dtype, jit=jit)


@pytest.mark.parametrize("name", ["add", "sub", "mul"])
@pytest.mark.parametrize("dtype", INTS)
def test_integer_wraparound(name, dtype):
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, info.max, info.min, 100, -100, 0, 1], dtype)
    y = np.array([1, -1, info.max, info.min, 100, 100, info.min, info.min], dtype)
    out = _check(lambda a, b: getattr(OPS, name)(a, b), (x, y), _golden(BINARY[name][0], dtype, x, y), dtype)
    if name == "add":  # spell the two's-complement wrap out once
        assert int(np.asarray(out)[0]) == info.min


SCALARS = {F32: [1.75], BF16: [0.3], I8: [100]}  # int or float; 0.3 is inexact in bf16


def _scalar_cases():
    for name in BINARY:
        for dt, scalars in SCALARS.items():
            if dt not in BINARY[name][1]:
                continue
            for s in scalars:
                for side in ("left", "right"):
                    yield pytest.param(name, dt, s, side, id=f"{name}-{dt.name}-{s}-{side}")


@pytest.mark.parametrize("name, dtype, scalar, side", list(_scalar_cases()))
def test_binary_python_scalar(name, dtype, scalar, side):
    """tensor (x) Python scalar on either side: the scalar takes the tensor's dtype."""
    golden_fn, _ = BINARY[name]
    x, _ = _binary_inputs(name, (3, 5), (3, 5), dtype)
    if name == "pow" and side == "left":
        scalar = abs(scalar)  # positive base
    s = np.asarray(scalar, dtype)  # the scalar rounded to the tensor dtype, as the op documents
    op = getattr(OPS, name)
    if side == "left":
        fn, golden = (lambda a: op(scalar, a)), _golden(golden_fn, dtype, s, x)
    else:
        fn, golden = (lambda a: op(a, scalar)), _golden(golden_fn, dtype, x, s)
    _check(fn, (x,), golden, dtype)


def test_int8_scalar_wraps():
    x = np.array([100, 127, -128, 0], I8)
    _check(lambda a: OPS.add(a, 100), (x,), np.array([-56, -29, -28, 100], I8), I8)
    _check(lambda a: OPS.mul(a, -1), (x,), np.array([-100, -127, -128, 0], I8), I8)


@pytest.mark.parametrize("name, fn", [("maximum", np.maximum), ("minimum", np.minimum)])
def test_extremum_nan_propagates(name, fn):
    x = np.array([np.nan, 1.0, -2.0, np.nan, 0.0], F32)
    y = np.array([1.0, np.nan, 3.0, np.nan, -0.5], F32)
    out = _check(lambda a, b: getattr(OPS, name)(a, b), (x, y), _golden(fn, F32, x, y), F32)
    assert np.isnan(np.asarray(out)[[0, 1, 3]]).all()


# -------------------------------------------------------------------------------------------- unary
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _gelu_erf(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


UNARY = {
    # id: (call, golden, dtypes, (low, high) input range or None for the default / nonzero)
    "exp": (OPS.exp, np.exp, FLOATS, (-3.0, 3.0)),
    "log": (OPS.log, np.log, FLOATS, (0.05, 5.0)),
    "sqrt": (OPS.sqrt, np.sqrt, FLOATS, (0.0, 5.0)),
    "rsqrt": (OPS.rsqrt, lambda x: 1.0 / np.sqrt(x), FLOATS, (0.05, 5.0)),
    "reciprocal": (OPS.reciprocal, lambda x: 1.0 / x, FLOATS, None),
    "tanh": (OPS.tanh, np.tanh, FLOATS, (-4.0, 4.0)),
    "sigmoid": (OPS.sigmoid, _sigmoid, FLOATS, (-6.0, 6.0)),
    "silu": (OPS.silu, lambda x: x * _sigmoid(x), FLOATS, (-6.0, 6.0)),
    "gelu_tanh": (lambda x: OPS.gelu(x, approximate=True), _gelu_tanh, FLOATS, (-4.0, 4.0)),
    "gelu_erf": (lambda x: OPS.gelu(x, approximate=False), _gelu_erf, FLOATS, (-4.0, 4.0)),
    "abs": (OPS.abs, np.abs, NUMERIC, (-3.0, 3.0)),
    "neg": (OPS.neg, np.negative, NUMERIC, (-3.0, 3.0)),
    "relu": (OPS.relu, lambda x: np.maximum(x, 0), NUMERIC, (-3.0, 3.0)),
    "round": (OPS.round, np.rint, FLOATS, (-6.0, 6.0)),  # np.rint: half to even
}
UNARY_DTYPE_SHAPES = [(7,), (2, 3, 17)]


def _unary_input(name, shape, dtype, seed=0):
    _, _, _, rng = UNARY[name]
    if rng is None:
        return _nonzero(shape, dtype, seed)
    x = rand(shape, dtype, seed, *rng)
    if name == "round" and dtype in FLOATS:  # plant exact .5 ties, both signs
        flat = x.reshape(-1)
        ties = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5], dtype)
        flat[: min(flat.size, ties.size)] = ties[: flat.size]
    return x


def _unary_cases():
    for name, (_, _, dtypes, _) in UNARY.items():
        for shape in SHAPES:
            yield pytest.param(name, F32, shape, shape == (7,), id=f"{name}-float32-{shape}",
                               marks=() if shape in UNARY_SHAPES_FAST else pytest.mark.slow)
        for dt in dtypes:
            if dt == F32:
                continue
            for shape in UNARY_DTYPE_SHAPES:
                yield pytest.param(name, dt, shape, shape == (7,), id=f"{name}-{dt.name}-{shape}",
                                   marks=() if shape == (7,) else pytest.mark.slow)


@pytest.mark.parametrize("name, dtype, shape, jit", list(_unary_cases()))
def test_unary(name, dtype, shape, jit):
    call, golden_fn, _, _ = UNARY[name]
    x = _unary_input(name, shape, dtype)
    _check(lambda a: call(a), (x,), _golden(golden_fn, dtype, x), dtype, jit=jit)


def test_round_ties_to_even_exact():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 1e7 + 0.5], F32)
    out = assert_eager_matches_jit(OPS.round, x)
    np.testing.assert_array_equal(np.asarray(out), np.array([0, 2, 2, -0.0, -2, -2, 0, -0.0, 1e7], F32))


@pytest.mark.parametrize("dtype", INTS)
def test_int_abs_neg_extremes(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, -1, 0, 1, info.max], dtype)
    # two's complement: abs(min) and neg(min) stay min
    abs_out = _check(OPS.abs, (x,), _golden(np.abs, dtype, x), dtype)
    neg_out = _check(OPS.neg, (x,), _golden(np.negative, dtype, x), dtype)
    relu_out = _check(OPS.relu, (x,), _golden(lambda v: np.maximum(v, 0), dtype, x), dtype)
    assert int(np.asarray(abs_out)[0]) == info.min and int(np.asarray(neg_out)[0]) == info.min
    assert int(np.asarray(relu_out)[0]) == 0


def test_gelu_variants_differ():
    """approximate=True and False are different functions (the flag reaches the reference)."""
    x = np.linspace(-3, 3, 13).astype(F32)
    a = np.asarray(OPS.gelu(x, approximate=True), np.float64)
    e = np.asarray(OPS.gelu(x, approximate=False), np.float64)
    assert np.max(np.abs(a - e)) > 1e-5
    assert_close(a.astype(F32), _gelu_tanh(x.astype(np.float64)).astype(F32), F32)
    assert_close(e.astype(F32), _gelu_erf(x.astype(np.float64)).astype(F32), F32)


# ------------------------------------------------------------------------------------ comparisons
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}


def _compare_inputs(sx, sy, dtype, seed=0):
    """Random operands where a third of ``y`` copies ``x`` (ties exercise eq/le/ge)."""
    x = rand(sx, dtype, seed)
    y = rand(sy, dtype, seed + 1)
    if sx == sy:
        y = np.where(np.random.default_rng(seed).random(sx) < 0.35, x, y).astype(dtype)
    return x, y


def _compare_cases():
    for name in COMPARE:
        dtypes = NUMERIC + ((BOOL,) if name in ("eq", "ne") else ())
        for sx, sy in [((2, 3, 17), (2, 3, 17)), ((3, 1), (1, 5)), ((7,), (7,)), ((4,), (2, 4))]:
            yield pytest.param(name, F32, sx, sy, id=f"{name}-float32-{sx}x{sy}",
                               marks=() if sx == (2, 3, 17) or sx == (3, 1) else pytest.mark.slow)
        for dt in dtypes:  # le/gt/ge share lt's lowering path: a lighter dtype grid for them
            if dt != F32 and (name in ("eq", "ne", "lt") or dt in (BF16, I8)):
                yield pytest.param(name, dt, (3, 5), (3, 5), id=f"{name}-{dt.name}")


@pytest.mark.parametrize("name, dtype, sx, sy", list(_compare_cases()))
def test_compare(name, dtype, sx, sy):
    x, y = _compare_inputs(sx, sy, dtype)
    op = getattr(OPS, name)
    _check(lambda a, b: op(a, b), (x, y), _golden(COMPARE[name], BOOL, x, y), BOOL)


@pytest.mark.parametrize("name", list(COMPARE))
def test_compare_nan_and_scalar(name):
    x = np.array([np.nan, 1.0, 2.0, -1.0, 2.0], F32)
    y = np.array([np.nan, np.nan, 2.0, 0.0, 3.0], F32)
    op = getattr(OPS, name)
    _check(lambda a, b: op(a, b), (x, y), _golden(COMPARE[name], BOOL, x, y), BOOL)
    _check(lambda a: op(a, 2.0), (x,), _golden(COMPARE[name], BOOL, x, np.float32(2.0)), BOOL)
    _check(lambda a: op(2, a), (x,), _golden(COMPARE[name], BOOL, np.float32(2.0), x), BOOL)


LOGIC = {"logical_and": np.logical_and, "logical_or": np.logical_or}


@pytest.mark.parametrize("name", list(LOGIC))
@pytest.mark.parametrize("sx, sy", [((7,), (7,)), ((3, 1), (1, 5)), ((4,), (2, 4)), ((1,), (2, 3, 17))])
def test_logical_binary(name, sx, sy):
    x, y = rand(sx, BOOL, 0), rand(sy, BOOL, 1)
    op = getattr(OPS, name)
    _check(lambda a, b: op(a, b), (x, y), _golden(LOGIC[name], BOOL, x, y), BOOL)
    _check(lambda a: op(a, True), (x,), _golden(LOGIC[name], BOOL, x, np.True_), BOOL)
    _check(lambda a: op(False, a), (x,), _golden(LOGIC[name], BOOL, np.False_, x), BOOL)


@pytest.mark.parametrize("shape", SHAPES)
def test_logical_not(shape):
    x = rand(shape, BOOL, 3)
    _check(OPS.logical_not, (x,), _golden(np.logical_not, BOOL, x), BOOL)


# -------------------------------------------------------------------------------------------- where
WHERE_SHAPES = [((7,), (7,), (7,)), ((3, 1), (1, 5), (3, 5)), ((2, 4), (4,), (1,)),
                ((1, 13), (1, 13), (1, 13)), ((4, 1, 6), (1, 5, 1), (6,))]


@pytest.mark.parametrize("dtype", NUMERIC + (BOOL,))
@pytest.mark.parametrize("sc, sx, sy", WHERE_SHAPES[:3])
def test_where(dtype, sc, sx, sy):
    c, x, y = rand(sc, BOOL, 0), rand(sx, dtype, 1), rand(sy, dtype, 2)
    _check(OPS.where, (c, x, y), _golden(np.where, dtype, c, x, y), dtype)


@pytest.mark.parametrize("sc, sx, sy", WHERE_SHAPES[3:])
def test_where_shapes_f32(sc, sx, sy):
    c, x, y = rand(sc, BOOL, 0), rand(sx, F32, 1), rand(sy, F32, 2)
    _check(OPS.where, (c, x, y), _golden(np.where, F32, c, x, y), F32)


@pytest.mark.parametrize("dtype", [F32, BF16, I8])
def test_where_scalar_branches(dtype):
    c, x = rand((3, 5), BOOL, 0), rand((3, 5), dtype, 1)
    s = -2 if dtype == I8 else 0.25
    _check(lambda cc, a: OPS.where(cc, a, s), (c, x), _golden(np.where, dtype, c, x, np.asarray(s, dtype)), dtype)
    _check(lambda cc, a: OPS.where(cc, s, a), (c, x), _golden(np.where, dtype, c, np.asarray(s, dtype), x), dtype)


@pytest.mark.parametrize("case", ["compares", "compare and constant", "b and not b", "the condition itself",
                                  "nan and finite", "summed", "as f16", "as i8 times x"])
def test_where_between_predicates_the_kernel_computes(case):
    """Predicates a kernel computes (compares, logical not, isnan / isfinite) selected between: they
    were read as bytes their packed masks never wrote (all False), eagerly and under jax.jit."""
    import jax.numpy as jnp
    m = np.array([[True, True, False, False, True, False, True, False]] * 3)
    x = rand((3, 8), F32, 1)
    x[0, :3] = [np.nan, np.inf, -0.0]
    b = rand((3, 8), BOOL, 2)
    bodies = {"compares": lambda m, x, b: jnp.where(m, x > 0, x < 0),
              "compare and constant": lambda m, x, b: jnp.where(m, x > 0, False),
              "b and not b": lambda m, x, b: jnp.where(m, b, ~b),
              "the condition itself": lambda m, x, b: jnp.where(m, m, x > 0),
              "nan and finite": lambda m, x, b: jnp.where(m, jnp.isnan(x), jnp.isfinite(x)),
              "summed": lambda m, x, b: jnp.where(m, x > 0, x < -1).sum(axis=-1),
              "as f16": lambda m, x, b: jnp.where(m, x > 0, b).astype(jnp.float16),
              "as i8 times x": lambda m, x, b: jnp.where(m, x >= 0, b).astype(jnp.int8) * x.astype(jnp.int8)}
    wide = x.astype(np.float64)
    goldens = {"compares": np.where(m, wide > 0, wide < 0), "compare and constant": np.where(m, wide > 0, False),
               "b and not b": np.where(m, b, ~b), "the condition itself": np.where(m, m, wide > 0),
               "nan and finite": np.where(m, np.isnan(wide), np.isfinite(wide)),
               "summed": np.where(m, wide > 0, wide < -1).sum(axis=-1).astype(np.int32),
               "as f16": np.where(m, wide > 0, b).astype(np.float16),
               "as i8 times x": np.where(m, wide >= 0, b).astype(np.int8) * np.where(np.isfinite(x), x, 0).astype(np.int8)}
    kernel = pj.kernel(bodies[case])
    for run in (kernel, jax.jit(kernel)):
        got = np.asarray(run(m, x, b))
        assert got.dtype == goldens[case].dtype, (case, got.dtype)
        if case == "as i8 times x":          # x's NaN / inf to int8 are implementation-defined: rows 1, 2
            got, want = got[1:], goldens[case][1:]
        else:
            want = goldens[case]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=lambda d: np.dtype(d).name)
def test_max_min_with_a_zero_order_zeros_as_xla(dtype):
    """``relu`` / ``max(x, +0.0)`` / ``min(x, -0.0)``: XLA orders -0.0 below +0.0, the real ``tmaxs`` /
    ``tmins`` keep ``x`` of equal values (``relu(-0.0)`` was -0.0, so ``1 / relu(x)`` -inf), eagerly
    and under jax.jit, the signs of zeros compared; NaN from either operand of a tile-tile max / min."""
    import jax.numpy as jnp
    x = np.array([[-0.0, 0.0, np.nan, 1.0, -2.0, -0.0, 3.0, 0.0]] * 2, np.float32).astype(dtype)
    y = np.array([[0.0, -0.0, 3.0, np.nan, -0.0, -5.0, 3.0, 0.0]] * 2, np.float32).astype(dtype)
    fns = [lambda x, y: (jax.nn.relu(x), jnp.maximum(x, 0.0), jnp.maximum(-0.0, x), jnp.minimum(x, 0.0),
                         jnp.minimum(x, -0.0), jnp.minimum(-0.0, y), 1 / jax.nn.relu(y)),
           lambda x, y: (jnp.maximum(x, y), jnp.minimum(y, x))]
    for fn in fns:
        want = [np.asarray(w).astype(np.float32) for w in jax.jit(fn)(x, y)]
        for run in (pj.kernel(fn), jax.jit(pj.kernel(fn))):
            for got, w in zip(run(x, y), want):
                got = np.asarray(got).astype(np.float32)
                np.testing.assert_array_equal(got, w)
                if fn is fns[0]:
                    zero = w == 0
                    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(w[zero]))


# --------------------------------------------------------------------------------------------- clip
def _clip_golden(x, lo, hi):
    return np.minimum(np.maximum(x, lo), hi)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("bounds", ["both", "min_only", "max_only", "inverted"])
def test_clip_scalar_bounds(dtype, bounds):
    x = rand((4, 1, 6), dtype, 0)
    lo, hi = (-1, 2) if dtype in FLOATS else (-50, 60)
    if bounds == "inverted":  # min > max: NumPy's clip rule gives max everywhere
        lo, hi = hi, lo
    kw = {"both": dict(min=lo, max=hi), "min_only": dict(min=lo), "max_only": dict(max=hi),
          "inverted": dict(min=lo, max=hi)}[bounds]
    wide_lo = -np.inf if "min" not in kw else np.asarray(kw["min"], dtype)
    wide_hi = np.inf if "max" not in kw else np.asarray(kw["max"], dtype)
    golden = _golden(lambda v: _clip_golden(v, _wide(wide_lo), _wide(wide_hi)), dtype, x)
    _check(lambda a: OPS.clip(a, **kw), (x,), golden, dtype)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_clip_tensor_bounds(dtype):
    x = rand((3, 5), dtype, 0)
    lo = rand((3, 1), dtype, 1, -3.0, 0.0)
    hi = rand((5,), dtype, 2, 0.0, 3.0)
    if dtype in INTS:
        lo, hi = np.minimum(lo, 0).astype(dtype), np.maximum(hi, 0).astype(dtype)
    _check(OPS.clip, (x, lo, hi), _golden(_clip_golden, dtype, x, lo, hi), dtype)


def test_clip_float_half_fractional_bounds():
    x = rand((7,), BF16, 0)
    lo, hi = -0.3, 0.7  # rounded to bfloat16 before clamping
    golden = _golden(lambda v: _clip_golden(v, float(np.asarray(lo, BF16)), float(np.asarray(hi, BF16))), BF16, x)
    _check(lambda a: OPS.clip(a, lo, hi), (x,), golden, BF16)


# -------------------------------------------------------------------------------------------- vmap
VMAP_BINARY = [
    # (x shape, x axis, y shape, y axis); B = 3 is the mapped size
    ((3, 4, 5), 0, (3, 4, 5), 0),
    ((4, 3, 5), 1, (5,), None),
    ((3, 1), None, (1, 3, 5), 1),
    ((3, 4), 0, (2, 3, 4), 1),
    ((4, 3), 1, (2, 4), None),
    ((2, 4, 3), 2, (3, 1, 4), 0),
]


def _vmap_binary_cases():
    for i, axes in enumerate(VMAP_BINARY):  # every in_axes layout on add; two per other op
        for name in ["add", "sub", "mul", "div", "maximum", "minimum", "pow", "lt", "eq", "logical_or"]:
            if name == "add" or i % 3 == (len(name) % 3):
                yield pytest.param(name, *axes, id=f"{name}-{i}")


@pytest.mark.parametrize("name, sx, ax, sy, ay", list(_vmap_binary_cases()))
def test_vmap_binary(name, sx, ax, sy, ay):
    if name == "logical_or":
        x, y = rand(sx, BOOL, 0), rand(sy, BOOL, 1)
    else:
        x, y = _binary_inputs(name if name in BINARY else "add", sx, sy, F32)
    op = getattr(OPS, name)
    assert_vmap_matches_loop(lambda a, b: op(a, b), (x, y), (ax, ay))


@pytest.mark.parametrize("dtype", [I8, BF16])
def test_vmap_binary_dtypes(dtype):
    x, y = rand((3, 4), dtype, 0), rand((4, 3), dtype, 1)
    assert_vmap_matches_loop(lambda a, b: OPS.add(a, b), (x, y), (0, 1), rtol=0, atol=0)
    assert_vmap_matches_loop(lambda a: OPS.mul(a, 3), (x,), (1,), rtol=0, atol=0)


@pytest.mark.parametrize("name, axis", [("exp", 0), ("rsqrt", 1), ("gelu_erf", 2), ("abs", 1), ("round", 2),
                                        ("sigmoid", 0), ("neg", 2)])
def test_vmap_unary(name, axis):
    call = UNARY[name][0]
    x = _unary_input(name, (2, 3, 4), F32)
    assert_vmap_matches_loop(lambda a: call(a), (x,), (axis,))


VMAP_TERNARY = [
    # (c/x shape, axis), (lo/x shape, axis), (hi/y shape, axis); B = 3
    (((3, 4), 0), ((4,), None), ((4,), None)),
    (((4, 3), 1), ((3, 4), 0), ((1, 3), 1)),
    (((4,), None), ((3, 2, 4), 0), ((2, 1, 3), 2)),
    (((2, 3, 4), 1), ((3, 1), 0), ((4, 3), 1)),
    (((2, 4), None), ((1, 4), None), ((3, 4), 0)),
]


@pytest.mark.parametrize("a, b, c", VMAP_TERNARY)
def test_vmap_where(a, b, c):
    (sc, ac), (sx, ax), (sy, ay) = a, b, c
    args = (rand(sc, BOOL, 0), rand(sx, F32, 1), rand(sy, F32, 2))
    assert_vmap_matches_loop(OPS.where, args, (ac, ax, ay))


@pytest.mark.parametrize("a, b, c", VMAP_TERNARY)
def test_vmap_clip(a, b, c):
    (sx, ax), (sl, al), (sh, ah) = a, b, c
    args = (rand(sx, F32, 0), rand(sl, F32, 1, -3.0, 0.0), rand(sh, F32, 2, 0.0, 3.0))
    assert_vmap_matches_loop(OPS.clip, args, (ax, al, ah))


def test_vmap_clip_scalar_bounds():
    x = rand((4, 3), I32, 0)
    assert_vmap_matches_loop(lambda a: OPS.clip(a, -10, 200), (x,), (1,), rtol=0, atol=0)
    assert_vmap_matches_loop(lambda a: OPS.clip(a, max=5), (x,), (0,), rtol=0, atol=0)


# -------------------------------------------------------------------------------------- bad inputs
def test_dtype_mismatch_is_type_error():
    with pytest.raises(pj.PtoDtypeError) as err:
        OPS.add(np.ones(3, F32), np.ones(3, F16))
    assert isinstance(err.value, TypeError) and isinstance(err.value, pj.PtoError)
    msg = str(err.value)
    assert "pto.add" in msg and "float32" in msg and "float16" in msg


def test_dtype_mismatch_under_jit():
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.mul.*int8.*int32"):
        jax.jit(OPS.mul)(np.ones(3, I8), np.ones(3, I32))


@pytest.mark.parametrize("jit", [False, True])
def test_shapes_do_not_broadcast(jit):
    fn = jax.jit(OPS.add) if jit else OPS.add
    with pytest.raises(pj.PtoShapeError) as err:
        fn(np.ones((3,), F32), np.ones((4,), F32))
    assert isinstance(err.value, ValueError)
    msg = str(err.value)
    assert "pto.add" in msg and "(3,)" in msg and "(4,)" in msg


def test_where_shapes_do_not_broadcast():
    with pytest.raises(pj.PtoShapeError, match=r"pto\.where.*\(2,\).*\(3,\).*\(3,\)"):
        OPS.where(np.ones(2, bool), np.ones(3, F32), np.ones(3, F32))


def test_float_scalar_with_int_tensor():
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.add: .*1\.5.*int32"):
        OPS.add(np.ones(3, I32), 1.5)
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.clip: .*0\.5.*int8"):
        OPS.clip(np.ones(3, I8), 0.5, 2)


@pytest.mark.parametrize("scalar", [128, -129, 300])
def test_int_scalar_out_of_int8_range(scalar):
    with pytest.raises(pj.PtoArgumentError, match=rf"pto\.sub: .*{scalar}.*int8"):
        OPS.sub(scalar, np.ones(3, I8))


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "round"])
def test_float_only_unary_rejects_int(name):
    with pytest.raises(pj.PtoDtypeError, match=rf"pto\.{name}: .*int32.*\(2, 3\)"):
        getattr(OPS, name)(np.ones((2, 3), I32))


def test_div_pow_reject_int():
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.div: .*int8"):
        OPS.div(np.ones(3, I8), np.ones(3, I8))
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.pow: .*int32"):
        OPS.pow(np.ones(3, I32), 2)


@pytest.mark.parametrize("name", ["logical_and", "logical_or"])
def test_logical_rejects_floats(name):
    with pytest.raises(pj.PtoDtypeError, match=rf"pto\.{name}: .*float32"):
        getattr(OPS, name)(np.ones(3, F32), np.ones(3, F32))
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.logical_not: .*int8"):
        OPS.logical_not(np.ones(3, I8))


def test_where_condition_must_be_bool():
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.where: condition .*float32"):
        OPS.where(np.ones(3, F32), np.ones(3, F32), np.zeros(3, F32))


def test_where_branch_dtype_mismatch():
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.where: .*float32.*bfloat16"):
        OPS.where(np.ones(3, bool), np.ones(3, F32), np.zeros(3, BF16))


def test_clip_needs_a_bound_and_numeric():
    with pytest.raises(pj.PtoArgumentError, match=r"pto\.clip: needs min, max or both"):
        OPS.clip(np.ones(3, F32))
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.clip: .*bool"):
        OPS.clip(np.ones(3, bool), 0, 1)


def test_wrong_arity_and_scalars_only():
    with pytest.raises(pj.PtoArgumentError, match=r"pto\.add: takes 2 operands, got 3"):
        OPS.add(np.ones(3, F32), np.ones(3, F32), np.ones(3, F32))
    with pytest.raises(pj.PtoArgumentError, match=r"pto\.mul: needs at least one tensor operand"):
        OPS.mul(2, 3)
