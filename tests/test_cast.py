"""``cast`` against NumPy goldens: every dtype pair, float -> int rounding modes, saturation and wrap.

Goldens use NumPy only: rounding in float64, saturation by clamping in float64, wrap-around with
int64 modular arithmetic; float destinations are the float64 value rounded once by NumPy/ml_dtypes.
Casts are correctly rounded, so results must match bit for bit.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import ptojax as pj
from helpers import (BF16, BOOL, F16, F32, FLOATS, I8, I32, INTS, assert_close, assert_eager_matches_jit,
                     assert_vmap_matches_loop, rand)

OPS = pj.ops
ALL = (F32, F16, BF16, I8, I32, BOOL)
MODES = ("rint", "round", "floor", "ceil", "trunc")


# ------------------------------------------------------------------------------------------ goldens
def _round64(v, mode):
    v = np.asarray(v, np.float64)
    if mode == "rint":
        return np.rint(v)  # half to even
    if mode == "round":
        return np.sign(v) * np.floor(np.abs(v) + 0.5)  # half away from zero (exact: v came from <= f32)
    return {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}[mode](v)


def _float_to_int_golden(x, dtype, mode, saturate):
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        r = _round64(x, mode)
    r = np.where(np.isnan(r), 0.0, r)
    if saturate:
        return np.clip(r, info.min, info.max).astype(np.int64).astype(dtype)
    assert np.isfinite(r).all()
    m = 1 << info.bits
    ri = r.astype(np.int64)  # |r| < 2**62 in every case below
    return (np.mod(ri + m // 2, m) - m // 2).astype(dtype)


def _int_to_int_golden(x, dtype, saturate):
    info = np.iinfo(dtype)
    x = np.asarray(x).astype(np.int64)
    if saturate:
        return np.clip(x, info.min, info.max).astype(dtype)
    m = 1 << info.bits
    return (np.mod(x + m // 2, m) - m // 2).astype(dtype)


def _golden(x, dst):
    """Default cast (rint, saturate=True) of ``x`` to ``dst``."""
    x, dst = np.asarray(x), np.dtype(dst)
    if dst == BOOL:
        return x != 0
    if x.dtype == BOOL:
        return x.astype(dst)
    if x.dtype in FLOATS and dst in INTS:
        return _float_to_int_golden(x, dst, "rint", True)
    if x.dtype in INTS and dst in INTS:
        return _int_to_int_golden(x, dst, True)
    with np.errstate(over="ignore"):
        return x.astype(np.float64).astype(dst)


def _source(dtype, shape=(3, 7)):
    """Values that exercise a cast out of ``dtype``: ties, zeros, out-of-range, extremes."""
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rand(shape, BOOL, 0)
    if dtype == I32:
        x = rand(shape, I32, 0).reshape(-1)
        x[:10] = [0, 1, -1, 127, 128, -128, -129, 70000, 2**31 - 1, -2**31]
        return x.reshape(shape)
    if dtype == I8:
        x = rand(shape, I8, 0).reshape(-1)
        x[:5] = [0, 1, -1, 127, -128]
        return x.reshape(shape)
    x = rand(shape, np.float64, 0, -200.0, 200.0).reshape(-1)
    x[:12] = [0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -2.5, 127.5, -128.5, 1e-3, 1e5, -1e5]
    with np.errstate(over="ignore"):
        return x.astype(dtype).reshape(shape)


def _check(fn, args, golden):
    out = assert_eager_matches_jit(fn, *args)
    golden = np.asarray(golden)
    assert np.asarray(out).dtype == golden.dtype, (np.asarray(out).dtype, golden.dtype)
    if golden.dtype in FLOATS:  # casts are correctly rounded: bit-exact, NaN in the same places
        np.testing.assert_array_equal(np.asarray(out).astype(np.float64), golden.astype(np.float64))
    else:
        assert_close(out, golden, golden.dtype)
    return out


# -------------------------------------------------------------------------------------- every pair
@pytest.mark.parametrize("dst", ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("src", ALL, ids=lambda d: d.name)
def test_cast_every_pair(src, dst):
    x = _source(src)
    out = _check(lambda a: OPS.cast(a, dst), (x,), _golden(x, dst))
    if src == dst:  # identity is a no-op
        np.testing.assert_array_equal(np.asarray(out), x)


@pytest.mark.parametrize("dst", ["float16", "bfloat16", "int8", "bool"])
def test_cast_dtype_by_name(dst):
    x = _source(F32)
    _check(lambda a: OPS.cast(a, dst), (x,), _golden(x, np.dtype(BF16 if dst == "bfloat16" else dst)))


def test_float_to_float_special_values():
    x = np.array([np.nan, np.inf, -np.inf, 65504.0, 65520.0, 1e6, 3.4e38, -0.0, 1e-8, 1.00390625], F32)
    for dst in (F16, BF16):
        # helpers.assert_eager_matches_jit compares bf16 arrays raw, where NumPy does not see NaN == NaN;
        # compare eager and jit in float64 here instead.
        eager, jitted = OPS.cast(x, dst), jax.jit(lambda a: OPS.cast(a, dst))(x)
        assert np.asarray(eager).dtype == dst
        np.testing.assert_array_equal(np.asarray(eager, np.float64), np.asarray(jitted, np.float64))
        np.testing.assert_array_equal(np.asarray(eager, np.float64), _golden(x, dst).astype(np.float64))
        assert np.signbit(np.asarray(eager, np.float64)[7])  # -0.0 keeps its sign
    out = _check(lambda a: OPS.cast(a, BOOL), (x,), _golden(x, BOOL))
    assert np.asarray(out)[0]  # NaN != 0


# ------------------------------------------------------------------------------ float -> int modes
SPECIAL = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 0.0, -0.0, 3.7, -3.7,
           126.5, 127.5, -128.5, -129.5, 255.5, 300.7, -300.7, 1e5, -1e5,
           2147483520.0, 2.0**31, -2.0**31, -2147483904.0, 3e9, -3e9, 1e10, -1e10, 2.0**40 + 2.0**17]
NONFINITE = [np.nan, np.inf, -np.inf]


# Every mode from float32; fp16/bf16 sources (upcast exactly to float32 first) on two modes.
FLOAT_INT_CASES = [(m, dst, src) for src in FLOATS for dst in INTS for m in MODES
                   if src == F32 or m in ("rint", "floor")]
FLOAT_INT_IDS = [f"{m}-{dst.name}-{src.name}" for m, dst, src in FLOAT_INT_CASES]


@pytest.mark.parametrize("mode, dst, src", FLOAT_INT_CASES, ids=FLOAT_INT_IDS)
def test_float_to_int_saturate(mode, dst, src):
    """Clamp to the integer range; NaN -> 0; +-inf -> the limits; int32 >= 2**31 -> 2147483647."""
    with np.errstate(over="ignore"):
        x = np.array(SPECIAL + NONFINITE, np.float64).astype(src)
    golden = _float_to_int_golden(x, dst, mode, True)
    out = _check(lambda a: OPS.cast(a, dst, rounding=mode, saturate=True), (x,), golden)
    if src == F32 and dst == I32:
        assert np.asarray(out)[SPECIAL.index(2.0**31)] == 2147483647
        assert np.asarray(out)[SPECIAL.index(3e9)] == 2147483647


@pytest.mark.parametrize("mode, dst, src", FLOAT_INT_CASES, ids=FLOAT_INT_IDS)
def test_float_to_int_wrap(mode, dst, src):
    """saturate=False wraps modulo 2**bits; NaN -> 0. (+-inf has no residue: not part of the contract,
    so it is left out here.) Random wide magnitudes probe the float32 modulo arithmetic."""
    rng = np.random.default_rng(7)
    wide = np.sign(rng.random(40) - 0.5) * 10.0 ** rng.uniform(0, 12, 40)
    with np.errstate(over="ignore"):
        x = np.concatenate([SPECIAL, [np.nan], wide]).astype(src)
    x = x[~np.isinf(x)]  # fp16 overflows the big ones to inf
    golden = _float_to_int_golden(x, dst, mode, False)
    _check(lambda a: OPS.cast(a, dst, rounding=mode, saturate=False), (x,), golden)


def test_float_to_int_modes_spelled_out():
    x = np.array([2.5, -2.5, 0.5, -0.5, 1.5, 2.7, -2.7, np.nan], F32)
    expected = {"rint": [2, -2, 0, 0, 2, 3, -3, 0], "round": [3, -3, 1, -1, 2, 3, -3, 0],
                "floor": [2, -3, 0, -1, 1, 2, -3, 0], "ceil": [3, -2, 1, 0, 2, 3, -2, 0],
                "trunc": [2, -2, 0, 0, 1, 2, -2, 0]}
    for mode, want in expected.items():
        np.testing.assert_array_equal(np.asarray(OPS.cast(x, I8, rounding=mode)), np.array(want, I8))
        np.testing.assert_array_equal(np.asarray(OPS.cast(x, I8, rounding=mode)),
                                      _float_to_int_golden(x, I8, mode, True))


# ------------------------------------------------------------------------------------ int -> int
INT_VALUES = [0, 1, -1, 127, 128, -128, -129, 255, 256, -256, 1000, -1000, 40000,
              2**31 - 1, -2**31, 2**31 - 129]


@pytest.mark.parametrize("saturate", [True, False])
def test_int32_to_int8_narrowing(saturate):
    x = np.array(INT_VALUES, I32)
    out = _check(lambda a: OPS.cast(a, I8, saturate=saturate), (x,), _int_to_int_golden(x, I8, saturate))
    assert np.asarray(out)[INT_VALUES.index(128)] == (127 if saturate else -128)


@pytest.mark.parametrize("saturate", [True, False])
def test_int8_to_int32_widening(saturate):
    x = np.arange(-128, 128).astype(I8)
    _check(lambda a: OPS.cast(a, I32, saturate=saturate), (x,), x.astype(np.int64).astype(I32))


@pytest.mark.parametrize("dst", FLOATS, ids=lambda d: d.name)
def test_int_to_float_rounds_to_nearest_even(dst):
    x = np.array(INT_VALUES + [2**24 + 1, 2**24 + 3, 2049, 2051, 257, 259], I32)
    _check(lambda a: OPS.cast(a, dst), (x,), _golden(x, dst))


def _rne(i: int, bits: int) -> int:
    """The integer ``i`` rounded to ``bits`` significant bits, ties to even (exact, in Python ints)."""
    drop = max(abs(i).bit_length() - bits, 0)
    q, r = divmod(abs(i), 1 << drop)
    half = 1 << drop >> 1
    q += drop > 0 and (r > half or (r == half and q & 1))
    return (q << drop) * (-1 if i < 0 else 1)


def test_int32_to_bfloat16_rounds_once_from_the_exact_integer():
    """Just past a bf16 half-way point, rounding through float32 first lands on the tie and then on
    the even neighbour below (XLA's astype); pto-isa's convert rounds once, and so does every level."""
    x = np.array([2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**30 + 2**22 + 3, 2**31 - 1, -2**31,
                  2**24 + 2**16, 2**24 + 2**16 + 2**8], I32)
    want = np.array([_rne(int(i), 8) for i in x], np.float64).astype(F32).astype(BF16)
    for got in (pj.kernel(lambda a: OPS.cast(a, BF16))(x), jax.jit(lambda a: OPS.cast(a, BF16))(x),
                jax.jit(pj.kernel(lambda a: a.astype(BF16)))(x)):
        np.testing.assert_array_equal(np.asarray(got).view(np.uint16), want.view(np.uint16))


# -------------------------------------------------------------------------------------------- vmap
@pytest.mark.parametrize("src, dst, kw", [(F32, I8, dict(rounding="floor", saturate=False)),
                                          (BF16, I32, dict(rounding="round")),
                                          (I32, I8, dict(saturate=True)), (F16, F32, {}), (F32, BOOL, {})])
@pytest.mark.parametrize("axis", [0, 1])
def test_cast_vmap(src, dst, kw, axis):
    x = _source(src, (3, 4))
    assert_vmap_matches_loop(lambda a: OPS.cast(a, dst, **kw), (x,), (axis,), rtol=0, atol=0)


# -------------------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("src, dst", [(F32, F16), (F16, BF16), (BF16, F32)])
@pytest.mark.parametrize("mode", ["round", "floor", "ceil", "trunc"])
def test_non_rint_rounding_on_float_to_float(src, dst, mode):
    with pytest.raises(pj.PtoArgumentError) as err:
        OPS.cast(np.ones(3, src), dst, rounding=mode)
    assert isinstance(err.value, ValueError)
    msg = str(err.value)
    assert "pto.cast" in msg and repr(mode) in msg and src.name in msg and dst.name in msg


@pytest.mark.parametrize("src, dst", [(I32, F32), (I32, I8), (BOOL, I8)])
def test_non_rint_rounding_on_non_float_source(src, dst):
    with pytest.raises(pj.PtoArgumentError, match=rf"pto\.cast: rounding 'floor'.*{src.name} -> {dst.name}"):
        OPS.cast(np.ones(3, src), dst, rounding="floor")


def test_unknown_rounding_mode():
    with pytest.raises(pj.PtoArgumentError, match=r"pto\.cast: rounding 'nearest' is not one of"):
        OPS.cast(np.ones(3, F32), I32, rounding="nearest")


@pytest.mark.parametrize("dtype, pattern", [("float64", r"dtype float64 is not supported"),
                                            ("int64", r"dtype int64 is not supported"),
                                            (np.complex64, r"dtype complex64 is not supported"),
                                            ("notadtype", r"'notadtype' is not a dtype")])
def test_unsupported_cast_dtype(dtype, pattern):
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.cast: " + pattern) as err:
        OPS.cast(np.ones(3, F32), dtype)
    assert isinstance(err.value, TypeError)


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["float32", "float16", "bfloat16"])
def test_saturating_float_to_int_is_xlas_nan_zero_and_limits(dtype):
    """``astype`` / ``pj.ops.cast`` (saturating) of floats to int32 and int8 as XLA converts: NaN to 0,
    ±inf and out-of-range values to the limits — the real ``tcvt`` clamps NaN to the upper limit and,
    into i32, turns 2**31 (the limit rounded to float32) into INT32_MIN; an f16 source clamped ±inf to
    ±65504. Eagerly and under jax.jit; the text is real (ptoas)."""
    row = np.array([1.0, np.nan, np.inf, -np.inf, 3e9, -3e9, 200.7, -300.5, 2147483520.0, -2.5, 65504, 1e5,
                    0.5, -0.0, 127.5, -128.6], np.float32)
    with np.errstate(over="ignore"):
        x = np.tile(row, (8, 4)).astype(dtype)
    for to in (I32, I8):
        for fn in (lambda v: v.astype(to), lambda v: pj.ops.cast(v, to, rounding="rint")):
            want = np.asarray(jax.jit(fn)(x))
            kernel = pj.kernel(fn)
            np.testing.assert_array_equal(np.asarray(kernel(x)), want)
            np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x)), want)
            kernel.lower(x).compile().ptoas()


@pytest.mark.parametrize("backend", ["sim", "xla"])
def test_bool_cast_times_a_negative_value_is_negative_zero(backend):
    """``cast(False, f16) * y`` for a negative ``y`` is -0.0, so ``1 / it`` is -inf (IEEE, NumPy, eager
    JAX, the real TCVT then TMUL). XLA rewrites ``convert(pred) * y`` as ``select(pred, y, 0)`` (+0.0):
    the levels and the xla backend, jitted, gave +inf, and a fuzz kernel's Tile level differed from its
    Tensor level (tests/regressions/fuzz_bool_cast_times_negative_zero.py)."""
    b = np.array([[True, False, False, True, False, True, False, False]] * 2)
    y = np.array([[-1.5, -1.5, 2.0, 0.5, -0.25, -1.0, 1.0, -2.0], [-0.5, 0.75, -2.0, -1.0, 1.5, 0.25, -0.125, -1.25]],
                 F16)

    def fn(b, y):
        return OPS.div(1.0, OPS.mul(OPS.cast(b, F16), y))

    with np.errstate(divide="ignore"):
        want = np.float16(1.0) / (b.astype(F16) * y)
    assert np.isneginf(want).sum() == 6
    kernel = pj.kernel(fn, backend=backend)
    np.testing.assert_array_equal(np.asarray(kernel(b, y)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(b, y)), want)
    with jax.disable_jit():
        np.testing.assert_array_equal(np.asarray(fn(b, y)), want)
    low = pj.lower(fn, b, y)
    low.verify(b, y)
    for level in ("tensor", "tile", "block"):
        np.testing.assert_array_equal(np.asarray(low.evaluate(level, b, y)), want, err_msg=level)
