"""ptojax.ascend.tile_semantics against independent NumPy references (and values probed from
pto-isa's CPU simulator built with g++ on x86-64)."""
import math

import jax
import ml_dtypes
import numpy as np
import pytest

from ptojax.ascend.tile_semantics import SEMANTICS as S, mask_shape

F32, F16, BF16 = np.float32, np.float16, ml_dtypes.bfloat16
I8, I16, I32 = np.int8, np.int16, np.int32
SDS = jax.ShapeDtypeStruct
RNG = np.random.default_rng(0)
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.5]


def bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" or a.dtype == BF16 else a


def same(got, want):
    """Bit-identical, except that any NaN matches any NaN (sign/payload are not specified)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype.kind == "f" or got.dtype == BF16:
        gn, wn = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
        np.testing.assert_array_equal(gn, wn)
        got, want = np.where(gn, 0, got).astype(got.dtype), np.where(wn, 0, want).astype(want.dtype)
    np.testing.assert_array_equal(bits(got), bits(want))


def tile(dt, r=4, c=16, special=True):
    if np.issubdtype(np.dtype(dt), np.integer):
        info = np.iinfo(dt)
        x = RNG.integers(info.min, info.max, (r, c), endpoint=True).astype(dt)
        x.flat[:4] = [info.min, info.max, 0, -1]
        return x
    x = (RNG.standard_normal((r, c)) * 4).astype(np.float32)
    if special:
        x.flat[: len(SPECIAL)] = SPECIAL
    return x.astype(dt)


FLOATS, INTS = [F32, F16, BF16], [I8, I16, I32]


def f32(x):
    return np.asarray(x).astype(np.float32)


# ---------------------------------------------------------------------- elementwise

def ref_binary(name, a, b):
    dt = a.dtype
    if name in ("max", "min"):
        return np.where(a < b, b, a) if name == "max" else np.where(b < a, b, a)
    if dt.kind == "f" or dt == BF16:
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "fmod": np.fmod}[name]
        with np.errstate(all="ignore"):
            return fn(f32(a), f32(b)).astype(dt)       # one rounding of the exact-in-f32 result
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "and": np.bitwise_and,
          "or": np.bitwise_or, "xor": np.bitwise_xor}[name]
    return fn(a.astype(np.int64), b.astype(np.int64)).astype(dt)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "max", "min", "fmod"])
@pytest.mark.parametrize("dt", FLOATS)
def test_float_binary(name, dt):
    a, b = tile(dt), tile(dt)
    b.flat[len(SPECIAL):len(SPECIAL) + 3] = a.flat[len(SPECIAL):len(SPECIAL) + 3]   # ties
    same(S[f"t{name}"](a, b), ref_binary(name, a, b))
    s = np.asarray(1.75, dt)
    if name != "fmod":
        same(S[f"t{name}s"](a, s), ref_binary(name, a, np.full_like(a, s)))
    else:
        same(S["tfmods"](a, s), ref_binary(name, a, np.full_like(a, s)))


def test_max_min_nan_and_zero_follow_std_max():
    a = np.array([[np.nan, 1.0, 0.0, -0.0]], F32)
    b = np.array([[1.0, np.nan, -0.0, 0.0]], F32)
    same(S["tmax"](a, b), np.array([[np.nan, 1.0, 0.0, -0.0]], F32))
    same(S["tmin"](a, b), np.array([[np.nan, 1.0, 0.0, -0.0]], F32))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "max", "min", "and", "or", "xor"])
@pytest.mark.parametrize("dt", INTS)
def test_int_binary(name, dt):
    a, b = tile(dt), tile(dt)
    same(S[f"t{name}"](a, b, np.zeros_like(a)), ref_binary(name, a, b))   # a tmp operand is ignored
    if name in ("add", "sub", "mul", "max", "min", "and", "or"):
        s = np.asarray(37, dt)
        same(S[f"t{name}s"](a, s), ref_binary(name, a, np.full_like(a, s)))


@pytest.mark.parametrize("dt", [I16, I32])
def test_int_div_fmod_shift(dt):
    a, b = tile(dt), tile(dt)
    b[b == 0] = 3
    b.flat[0] = 7                                   # avoid INT_MIN / -1
    q = np.trunc(a.astype(np.float64) / b).astype(dt)
    same(S["tdiv"](a, b), q)
    same(S["tfmod"](a, b), np.fmod(a.astype(np.int64), b).astype(dt))
    cnt = RNG.integers(0, np.dtype(dt).itemsize * 8, a.shape).astype(dt)
    same(S["tshl"](a, cnt), (a.astype(np.int64) << cnt.astype(np.int64)).astype(dt))
    same(S["tshr"](a, cnt), (a.astype(np.int64) >> cnt.astype(np.int64)).astype(dt))   # arithmetic
    same(S["tnot"](a), ~a)


def test_tdivs_operand_order():
    x = np.array([[1.0, 2.0, -4.0, 0.0]], F32)
    s = np.asarray(2.0, F32)
    same(S["tdivs"](x, s), x / s)
    with np.errstate(divide="ignore"):
        same(S["tdivs"](s, x), s / x)


@pytest.mark.parametrize("dt", [F32, F16])
def test_broadcast_divisor_is_divided_under_jit(dt):
    """XLA rewrites ``x / broadcast(s)`` as ``x * (1 / s)`` (an ulp off for many ``x``): the jitted and
    vmapped row-expand and scalar divisions still equal IEEE division, specials and NaN dividends included."""
    x = np.stack([tile(dt, 4, 16), tile(dt, 4, 16, special=False)])
    col = np.stack([tile(dt, 4, 1, special=False), np.array([[0.0], [-0.0], [np.inf], [np.nan]], dt)])
    s = np.array([3.0, -0.0], dt)
    with np.errstate(all="ignore"):
        same(jax.jit(jax.vmap(S["trowexpanddiv"]))(x, col), x / col)
        same(jax.jit(jax.vmap(S["tdivs"]))(x, s), x / s[:, None, None])
        same(jax.jit(jax.vmap(S["tdivs"]))(s, x), s[:, None, None] / x)


@pytest.mark.parametrize("dt", FLOATS)
def test_unary(dt):
    x = tile(dt)
    with np.errstate(all="ignore"):
        same(S["tabs"](x), np.where(x < 0, -x, x))          # -0.0 stays -0.0
        same(S["tneg"](x), -x)
        same(S["trelu"](x), np.where(x < 0, np.zeros_like(x), x))
        same(S["tsqrt"](x), np.sqrt(x.astype(np.float64)).astype(dt))
        same(S["trecip"](x), (np.float32(1) / f32(x)).astype(dt))
        same(S["tlrelu"](x, np.asarray(0.1, F32)), np.where(x > 0, x, (f32(x) * f32(np.asarray(0.1, dt))).astype(dt)))
        for name, fn in (("texp", np.exp), ("tlog", np.log), ("trsqrt", lambda v: 1 / np.sqrt(v))):
            got = f32(S[name](x))
            want = f32(fn(x.astype(np.float64)).astype(dt))
            ulp = np.spacing(np.abs(want).astype(dt)).astype(np.float64)
            ok = (got == want) | (np.isnan(got) & np.isnan(want)) | (np.abs(got.astype(np.float64) - want) <= ulp)
            assert ok.all(), (name, x[~ok], got[~ok], want[~ok])
    assert bits(S["tabs"](np.array([[-0.0]], F32)))[0, 0] == 0x80000000


# --------------------------------------------------------------------- broadcasts

@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "max", "min"])
@pytest.mark.parametrize("dt", [F32, F16, I32])
def test_expand_ops(name, dt):
    a = tile(dt, 4, 16, special=False)
    col = tile(dt, 4, 1, special=False)
    row = tile(dt, 1, 16, special=False)
    if np.dtype(dt).kind == "i":
        if name == "div":
            return
        col, row = col % 100 + 1, row % 100 + 1
    same(S[f"trowexpand{name}"](a, col), ref_binary(name, a, np.broadcast_to(col, a.shape)))
    same(S[f"trowexpand{name}"](col, a), ref_binary(name, np.broadcast_to(col, a.shape), a))
    same(S[f"tcolexpand{name}"](a, row), ref_binary(name, a, np.broadcast_to(row, a.shape)))


def test_expand_concat_trans_tci():
    x = tile(F32, 4, 8)
    same(S["trowexpand"](x[:, :1], out=SDS((4, 8), F32)), np.broadcast_to(x[:, :1], (4, 8)))
    same(S["tcolexpand"](x[:1], out=SDS((3, 8), F32)), np.broadcast_to(x[:1], (3, 8)))
    same(S["texpands"](np.asarray(2.5, F32), out=SDS((2, 3), F16)), np.full((2, 3), 2.5, F16))
    same(S["tconcat"](x, x[:, :3]), np.concatenate([x, x[:, :3]], 1))
    same(S["ttrans"](x, np.zeros_like(x)), x.T)
    same(S["tci"](np.asarray(5, I32), out=SDS((1, 6), I32)), np.arange(5, 11, dtype=I32)[None])
    same(S["tci"](np.asarray(5, I16), descending=True, out=SDS((1, 6), I16)), np.arange(5, -1, -1, dtype=I16)[None])


# ---------------------------------------------------------------------- reductions

def seq_fold(x, axis, acc_dt, op, init):
    x = np.moveaxis(np.asarray(x), axis, 0)
    acc = np.full(x.shape[1:], init, acc_dt)
    for v in x:
        acc = op(acc, v.astype(acc_dt)).astype(acc_dt)
    return acc


def scan_best(x, axis, largest):
    x = np.moveaxis(np.asarray(x), axis, 0)
    best, idx = x[0].copy(), np.zeros(x.shape[1:], np.int32)
    for k in range(1, x.shape[0]):
        better = x[k] > best if largest else x[k] < best
        best = np.where(better, x[k], best)
        idx = np.where(better, k, idx)
    return idx, best


@pytest.mark.parametrize("dt", [F32, F16, BF16])
def test_sums_and_products_are_sequential(dt):
    x = tile(dt, 4, 32, special=False)
    x.flat[0] = -0.0
    same(S["trowsum"](x, x), seq_fold(x, 1, F32, np.add, 0).astype(dt)[:, None])       # f32 acc
    same(S["trowsum"](x, x, out=SDS((4, 1), F32)), seq_fold(x, 1, F32, np.add, 0)[:, None])
    same(S["tcolsum"](x), seq_fold(x, 0, dt, np.add, 0)[None, :])                       # dst-dtype acc
    y = (x.astype(F32) / 4 + 1).astype(dt)
    same(S["trowprod"](y, y), seq_fold(y, 1, dt, np.multiply, 1)[:, None])
    same(S["tcolprod"](y), seq_fold(y, 0, dt, np.multiply, 1)[None, :])
    z = np.array([[-0.0, -0.0]], F32)
    assert bits(S["trowsum"](z, z))[0, 0] == 0          # 0 + -0 + -0 = +0


@pytest.mark.parametrize("dt", [F32, F16, BF16])
def test_long_folds_are_sequential_under_jit_and_vmap(dt):
    """Folds long enough to run as loops of blocks plus a tail (157 = 2 x 64 + 3 x 8 + 5 terms), on
    values of mixed magnitudes (where the order decides the rounding) with -0.0, inf and NaN."""
    n = 157
    x = (RNG.standard_normal((6, n)) * RNG.choice([1e-3, 1.0, 1e3], (6, n))).astype(F32)
    x[0, 0], x[1, :] = -0.0, -0.0                       # an all -0.0 row sums to +0.0
    x[2, 100], x[3, 70], x[4, 1:3] = np.inf, np.nan, [np.inf, -np.inf]
    x = x.astype(dt)
    y = (x.astype(F32) / 256 + 1).astype(dt)
    batch = np.stack([x, x[::-1]])
    sums = jax.jit(jax.vmap(lambda t: S["trowsum"](t, t, out=SDS((6, 1), F32))))(batch)
    for k in range(2):
        same(sums[k], seq_fold(batch[k], 1, F32, np.add, 0)[:, None])
    same(jax.jit(lambda t: S["trowsum"](t, t))(x), seq_fold(x, 1, F32, np.add, 0).astype(dt)[:, None])
    same(jax.jit(lambda t: S["tcolsum"](t))(x.T), seq_fold(x.T, 0, dt, np.add, 0)[None, :])
    with np.errstate(all="ignore"):
        same(jax.jit(lambda t: S["trowprod"](t, t))(y), seq_fold(y, 1, dt, np.multiply, 1)[:, None])
        same(jax.vmap(S["tcolprod"])(np.stack([y.T, y.T]))[1], seq_fold(y.T, 0, dt, np.multiply, 1)[None, :])
    assert bits(sums[0])[1, 0] == 0
    if dt != F32:                                       # f16/bf16 products are exact in f32: one add each
        b = (RNG.standard_normal((n, 3)) * 8).astype(dt)
        b[:, 0] = -0.0                                  # column 0: products +-0 only, sums to +0.0
        acc = np.zeros((6, 3), F32)
        for k in range(n):
            acc = acc + f32(x[:, k:k + 1]) * f32(b[k:k + 1, :])
        same(jax.jit(S["tmatmul"])(x, b), acc)


@pytest.mark.parametrize("dt", [F32, F16, I16, I32])
def test_max_min_arg_reductions_first_wins(dt):
    x = tile(dt, 4, 16, special=False)
    if np.dtype(dt).kind == "f":
        x[0, :12] = [np.nan, 1, 3, 3, np.nan, -1, 0, 0, 1, 2, 3, -5]
        x[1, :12] = [1, np.nan, 3, 3, np.nan, -1, 0, 0, 1, 2, 3, -5]
        x[2, :] = -3
        x[2, :4] = [-0.0, 0.0, -1, -1]
        x[:, 12:] = x[:, :4]
    else:
        x[0, :12] = [1, 5, 5, 2, 5, -7, -7, 0, 0, 0, 0, 0]
        x[1, :] = 5
    for axis, kind in ((1, "row"), (0, "col")):
        for largest, k in ((True, "max"), (False, "min")):
            idx, val = scan_best(x, axis, largest)
            idx, val = (np.expand_dims(v, axis) for v in (idx, val))
            same(S[f"t{kind}arg{k}"](x, x), idx)
            same(S[f"t{kind}{k}"](x, x), val)



@pytest.mark.parametrize("dt", [F32, BF16])
def test_max_min_of_signed_zeros_is_the_first_zero(dt):
    """Rows and columns whose extreme is a zero: the scan keeps the first zero, +0 or -0."""
    signs = RNG.integers(0, 2, (32, 40))
    x = np.where(RNG.random((32, 40)) < 0.3, np.where(signs == 1, -0.0, 0.0), -1 - RNG.random((32, 40)))
    x[::5] = -x[::5]                                      # every fifth row: zeros are the minimum
    x[3, 0], x[7, :] = np.nan, np.where(signs[7] == 1, -0.0, 0.0)
    x = x.astype(dt)
    for axis, kind in ((1, "row"), (0, "col")):
        for largest, k in ((True, "max"), (False, "min")):
            want = np.expand_dims(scan_best(x, axis, largest)[1], axis)
            same(S[f"t{kind}{k}"](x, x), want)
            same(jax.jit(lambda t, f=S[f"t{kind}{k}"]: f(t, t))(x), want)


# ----------------------------------------------------------------- compare / select

@pytest.mark.parametrize("dt", [F32, F16, I32])
@pytest.mark.parametrize("mode", ["eq", "ne", "lt", "gt", "le", "ge"])
def test_tcmp_packing_and_tsel_round_trip(dt, mode):
    a, b = tile(dt, 4, 24), tile(dt, 4, 24)
    b[:, ::3] = a[:, ::3]
    pred = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "gt": np.greater,
            "le": np.less_equal, "ge": np.greater_equal}[mode](a, b)
    m = S["tcmp"](a, b, cmpMode=mode)
    assert m.shape == mask_shape(4, 24) == (4, 3) and m.dtype == np.int8
    same(m, np.packbits(pred, axis=1, bitorder="little").view(np.int8))
    same(S["tsel"](m, a, b, np.zeros((1, 16), np.uint32)), np.where(pred, a, b))
    s = a.flat[7]
    ms = S["tcmps"](a, np.asarray(s), cmpMode=mode.upper())
    preds = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "gt": np.greater,
             "le": np.less_equal, "ge": np.greater_equal}[mode](a, s)
    if np.dtype(dt).kind == "f" and mode in ("eq", "ne"):
        preds = preds & ~np.isinf(a) if mode == "eq" else preds | np.isnan(a)   # inf - inf is NaN
        if np.isinf(s):
            preds = np.zeros_like(preds) if mode == "eq" else np.isnan(a) | (a != s)
    same(S["tsel"](ms, a, b), np.where(preds, a, b))


def test_tcmp_partial_byte_and_tcmps_tolerance():
    a = np.arange(12, dtype=F32)[None].repeat(2, 0)
    m = S["tcmp"](a, np.full_like(a, 5.0), cmpMode="ge")
    same(m, np.array([[0xE0, 0x0F]] * 2, np.uint8).view(np.int8))
    x = np.array([[0.0, 1e-10, 2e-9, np.inf, np.nan, 1.0, 1.0, 1.0]], F32)
    same(S["tcmps"](x, np.asarray(0.0, F32), cmpMode="eq"), np.array([[0b11]], np.uint8).view(np.int8))
    same(S["tcmps"](np.array([[np.inf] * 8], F32), np.asarray(np.inf, F32), cmpMode="eq"),
         np.zeros((1, 1), np.int8))
    # tcmps lays W//8 bytes per source row out over the mask's valid columns (W = static src cols)
    y = np.ones((2, 8), F32)
    same(S["tcmps"](y, np.asarray(1.0, F32), cmpMode="eq", src_cols=16, out=SDS((2, 2), np.int8)),
         np.array([[-1, 0], [-1, 0]], np.int8))
    same(S["tcmps"](y, np.asarray(1.0, F32), cmpMode="eq", src_cols=16, out=SDS((1, 4), np.int8)),
         np.array([[-1, 0, -1, 0]], np.int8))


# ------------------------------------------------------------------------------ tcvt

# (src dtype, value, dst dtype, rmode, sat, expected) — printed by a g++ 12 / x86-64 build of
# pto-isa's TCvt_Impl (include/pto/cpu/TCvt.hpp).
SIM_TCVT = [
    (F32, np.nan, I32, "RINT", "OFF", -2 ** 31), (F32, np.nan, I32, "RINT", "ON", -2 ** 31),
    (F32, np.inf, I32, "RINT", "OFF", -2 ** 31), (F32, 3e9, I32, "RINT", "ON", -2 ** 31),
    (F32, -3e9, I32, "RINT", "ON", -2 ** 31), (F32, 2147483520.0, I32, "RINT", "ON", 2147483520),
    (F32, np.nan, I16, "RINT", "OFF", 0), (F32, np.nan, I16, "RINT", "ON", 32767),
    (F32, 40000.0, I16, "RINT", "OFF", -25536), (F32, 40000.0, I16, "RINT", "ON", 32767),
    (F32, 1e6, I16, "RINT", "OFF", 16960), (F32, 3e9, I16, "RINT", "OFF", 0),
    (F32, 200.0, I8, "RINT", "OFF", -56), (F32, 200.0, I8, "RINT", "ON", 127), (F32, -200.0, I8, "RINT", "OFF", 56),
    (F32, np.nan, I8, "RINT", "OFF", 0), (F32, np.nan, I8, "RINT", "ON", 127),
    (F16, np.inf, I32, "RINT", "ON", 65504), (F16, np.nan, I32, "RINT", "ON", 65504),
    (F16, np.inf, I32, "RINT", "OFF", -2 ** 31), (F16, 300.0, I8, "RINT", "OFF", 44),
    (F32, 1e6, F16, "RINT", "OFF", np.inf), (F32, 1e6, F16, "RINT", "ON", 65504.0),
    (F32, np.nan, F16, "RINT", "ON", 65504.0), (F32, np.inf, F16, "RINT", "ON", 65504.0),
    (F32, 65519.0, F16, "RINT", "OFF", 65504.0), (F32, 65520.0, F16, "RINT", "OFF", np.inf),
    (I32, 70000, I16, "RINT", "OFF", 4464), (I32, 70000, I16, "RINT", "ON", 32767),
    (I32, -129, I8, "RINT", "OFF", 127), (I32, -129, I8, "RINT", "ON", -128),
    (I32, 70000, F16, "RINT", "OFF", np.inf), (I32, 70000, F16, "RINT", "ON", 65504.0),
    (F32, 2.5, I32, "RINT", "OFF", 2), (F32, 2.5, I32, "ROUND", "OFF", 3), (F32, 2.5, I32, "ODD", "OFF", 3),
    (F32, 2.5, I32, "NONE", "OFF", 2), (F32, -2.5, I32, "ODD", "OFF", -3), (F32, -2.7, I32, "NONE", "OFF", -2),
    (F32, 3.5, I32, "ODD", "OFF", 3),
]


@pytest.mark.parametrize("case", SIM_TCVT, ids=lambda c: f"{np.dtype(c[0])}-{c[1]}-{np.dtype(c[2])}-{c[3]}-{c[4]}")
def test_tcvt_matches_simulator_probe(case):
    s, v, d, mode, sat, want = case
    got = S["tcvt"](np.array([[v]], s), rmode=mode, sat_mode=sat, out=SDS((1, 1), d))
    same(got, np.array([[want]], d))


def ref_round(v, mode):
    if mode in ("RINT", "CAST_RINT"):
        return np.rint(v)
    if mode == "ROUND":
        return np.trunc(v + np.copysign(0.5, v)) if abs(v - np.trunc(v)) >= 0.5 else np.trunc(v)
    if mode == "FLOOR":
        return math.floor(v)
    if mode == "CEIL":
        return math.ceil(v)
    if mode in ("TRUNC", "NONE"):
        return np.trunc(v)
    f = math.floor(v)
    fr = v - f
    return f + 1 if fr > 0.5 else f if fr < 0.5 else (f if f % 2 else f + 1)


def ref_tcvt(x, d, mode, sat):
    """The simulator's per-element algorithm in Python floats (double)."""
    s = x.dtype
    lim = lambda t: ((-65504.0, 65504.0) if np.dtype(t) == F16 else
                     (-float(ml_dtypes.finfo(t).max), float(ml_dtypes.finfo(t).max)) if np.dtype(t).kind == "f" or t == BF16
                     else (float(np.iinfo(t).min), float(np.iinfo(t).max)))
    out = []
    for v in x.ravel():
        v = float(v)
        if sat == "ON":
            (sl, sh), (dl, dh) = lim(s), lim(d)
            lo, hi = max(sl, dl), min(sh, dh)
            v = hi if math.isnan(v) else min(max(v, lo), hi)
            v = float(np.array(v).astype(s))
        if (s.kind == "f" or s == BF16) and np.dtype(d).kind == "i":
            r = ref_round(v, mode) if not math.isnan(v) and not math.isinf(v) else v
            i = int(r) if not math.isnan(r) and -2 ** 31 <= r < 2 ** 31 else -2 ** 31
            out.append(np.array(i, np.int64).astype(np.int32).astype(d))
        else:
            out.append(np.array(v).astype(d) if np.dtype(d).kind == "f" or d == BF16 else np.array(int(v)).astype(np.int64).astype(d))
    return np.array(out, d).reshape(x.shape)


ALL = [F32, F16, BF16, I32, I16, I8]
FAST_PAIRS = [(F32, I32), (F32, I16), (F16, I8), (BF16, I32), (F32, F16), (F32, BF16), (I32, I16), (I16, F16)]
PAIRS = [pytest.param(s, d, marks=() if (s, d) in FAST_PAIRS else pytest.mark.slow) for s in ALL for d in ALL if s != d]


@pytest.mark.parametrize("sat", ["ON", "OFF"])
@pytest.mark.parametrize("s,d", PAIRS)
def test_tcvt_all_pairs(s, d, sat):
    if np.dtype(s).kind == "i":
        x = tile(s, 2, 16)
    else:
        x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, -3.5, 2.4999, 2.5001, 0.0, -0.0, 1e5, -1e5, 3e9,
                      70000.7, np.inf, np.nan] + list(RNG.standard_normal(16) * 300), F32).reshape(2, 16).astype(s)
    for mode in ["NONE", "RINT", "ROUND", "FLOOR", "CEIL", "TRUNC", "ODD", "CAST_RINT"]:
        with np.errstate(all="ignore"):
            want = ref_tcvt(x, d, mode, sat)
        same(S["tcvt"](x, rmode=mode, sat_mode=sat, out=SDS(x.shape, d)), want)
        if np.dtype(s).kind == "i" or np.dtype(d).kind == "f" or d == BF16:
            break                                    # the mode only matters for float -> int


def test_tcvt_int32_to_bf16_rounds_once():
    x = np.array([[2 ** 24 + 2 ** 16 + 1, 16777217, -(2 ** 31), 2 ** 31 - 1, 0x01018000, 0x01008001, -0x01008001, 255]], I32)
    same(S["tcvt"](x, out=SDS(x.shape, BF16)), np.array([[_bf16_of_int(int(v)) for v in x[0]]], np.float32).astype(BF16))


def _bf16_of_int(v: int) -> float:
    """``v`` rounded once to bfloat16's 8 significant bits, ties to even, in exact integer arithmetic (the
    result is a float32 exactly; a float64 -> bfloat16 cast may round twice, through float32)."""
    shift = max(abs(v).bit_length() - 8, 0)
    q, r = divmod(abs(v), 1 << shift)
    half = (1 << shift) // 2 if shift else 1
    q += r > half or (r == half and shift > 0 and q % 2 == 1)
    return float(q << shift) * (1 if v >= 0 else -1)


# ---------------------------------------------------------------------------- matmul

def ref_matmul(a, b, acc_dt):
    if acc_dt == I32:
        return a.astype(np.int64) @ b.astype(np.int64)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float64)
    for k in range(a.shape[1]):
        acc = (a[:, k:k + 1].astype(np.float64) * b[k:k + 1].astype(np.float64) + acc).astype(F32).astype(np.float64)
    return acc.astype(F32)


@pytest.mark.parametrize("dt", [I8, F16, BF16, F32])
def test_tmatmul(dt):
    a, b = tile(dt, 6, 20, special=False), tile(dt, 20, 5, special=False)
    acc_dt = I32 if dt == I8 else F32
    want = ref_matmul(a, b, acc_dt).astype(acc_dt)
    same(S["tmatmul"](a, b), want)
    c = tile(acc_dt, 6, 5, special=False)
    same(S["tmatmul.acc"](c, a, b), (c.astype(np.float64) + want).astype(acc_dt) if dt != I8 else c + want)
    bias = tile(acc_dt, 1, 5, special=False)
    same(S["tmatmul.bias"](a, b, bias), (want + bias).astype(acc_dt))


def test_tmatmul_sign_of_zero():
    a = np.array([[-0.0, 1.0, -1.0]], F16)
    b = np.array([[1.0], [-0.0], [0.0]], F16)            # products -0, -0, -0
    assert bits(S["tmatmul"](a, b))[0, 0] == 0             # +0: the chain starts from +0.0
    acc = np.array([[-0.0]], F32)
    assert bits(S["tmatmul.acc"](acc, a, b))[0, 0] == 0    # -0 + (+0) = +0
    assert bits(S["tmatmul.bias"](a, b, np.array([[-0.0]], F32)))[0, 0] == 0


# ---------------------------------------------------------------------- sort / gather

def sorted_pairs(v, idx):
    order = np.lexsort((idx, -np.where(v == 0, 0, v).astype(np.float64)))
    return v[order], idx[order]


@pytest.mark.parametrize("dt", [F32, F16])
def test_tsort32_then_tmrgsort_sorts_descending(dt):
    n = 128 if dt == F32 else 64                 # one group of 4 x 32 structs (blockLen 64 f32 / 128 f16)
    v = RNG.integers(-20, 20, (1, n)).astype(dt)   # many ties
    idx = np.arange(n, dtype=np.uint32)[None]
    e = 8 // np.dtype(dt).itemsize
    st = S["tsort32"](v, idx, np.zeros_like(v))
    assert st.shape == (1, n * e)
    for blk in range(n // 32):
        got = np.asarray(st)[0, blk * 32 * e:(blk + 1) * 32 * e].reshape(32, e)
        wv, wi = sorted_pairs(v[0, blk * 32:(blk + 1) * 32], idx[0, blk * 32:(blk + 1) * 32])
        same(got[:, 0], wv)
    if dt == F32:
        full = S["tmrgsort"](st, 64)
        vals = S["tgather"](full, maskPattern="P0101")
        inds = S["tgather"](full, maskPattern="P1010", out=SDS((1, n), np.uint32))
        wv, wi = sorted_pairs(v[0], idx[0])
        same(vals, wv[None])
        same(inds, wi[None])
    else:
        got = np.asarray(st).reshape(n, 4)
        assert (got[:, 1] == 0).all()
        same(got[:, 2].view(np.uint16).astype(np.uint32) | (got[:, 3].view(np.uint16).astype(np.uint32) << 16),
             np.concatenate([sorted_pairs(v[0, k:k + 32], idx[0, k:k + 32])[1] for k in (0, 32)]))


def test_tmrgsort_lists_and_exhausted():
    def run(vals, start):
        v = np.sort(np.asarray(vals, F32))[::-1].copy()[None]
        return np.asarray(S["tsort32"](v, np.arange(start, start + v.shape[1], dtype=np.uint32)[None]))
    l0, l1, l2 = run([5, 3, 1, 1], 0), run([4, 3, 2], 10), run([9, 0], 20)
    dst, executed = S["tmrgsort"](l0, l1, l2, np.zeros((1, 32), F32))
    same(S["tgather"](dst, maskPattern="P0101"), np.array([[9, 5, 4, 3, 3, 2, 1, 1, 0]], F32))
    same(S["tgather"](dst, maskPattern="P1010", out=SDS((1, 9), np.uint32)),
         np.array([[20, 0, 10, 1, 11, 12, 2, 3, 21]], np.uint32))
    same(executed, np.array([4, 3, 2, 0], np.int16))
    dst, executed = S["tmrgsort"](l0, l1, l2, np.zeros((1, 32), F32), exhausted=True)
    # 9, 5, 4, 3 (l0 wins the tie), 3, 2: list 1 is used up -> stop; the rest of dst stays 0
    same(executed, np.array([2, 3, 1, 0], np.int16))
    same(S["tgather"](dst, maskPattern="P0101"), np.array([[9, 5, 4, 3, 3, 2, 0, 0, 0]], F32))


def test_tgather_index_form():
    x = tile(F32, 3, 8)
    ix = np.array([[0, 23, 5, -1, 24, 9]], I32)
    same(S["tgather"](x, ix, np.zeros_like(ix)), np.where((ix >= 0) & (ix < 24), x.ravel()[np.clip(ix, 0, 23)], 0).astype(F32))


# ------------------------------------------------------------------- jit / vmap == eager

def _cases():
    a32, b32 = tile(F32, 4, 16), tile(F32, 4, 16)
    a16 = tile(F16, 4, 16)
    i16, j16 = tile(I16, 4, 16), tile(I16, 4, 16) % 7
    i32 = tile(I32, 4, 16)
    col, row = tile(F32, 4, 1), tile(F32, 1, 16)
    s = np.asarray(1.5, F32)
    pairs = np.asarray(S["tsort32"](tile(F32, 1, 128, special=False), np.arange(128, dtype=np.uint32)[None]))
    cases = []
    for n in ("add", "sub", "mul", "div", "max", "min", "fmod"):
        cases.append((f"t{n}", (a32, b32) if n != "max" else (a16, a16), {}))
    for n in ("and", "or", "xor", "shl", "shr"):
        cases.append((f"t{n}", (i16, j16), {}))
    for n in ("adds", "subs", "muls", "divs", "maxs", "mins", "fmods", "lrelu"):
        cases.append((f"t{n}", (a32, s), {}))
    cases += [("tdivs", (s, a32), {}), ("tands", (i16, np.asarray(5, I16)), {}), ("tors", (i16, np.asarray(5, I16)), {})]
    for n in ("exp", "log", "sqrt", "rsqrt", "recip", "abs", "neg", "relu"):
        cases.append((f"t{n}", (a32,), {}))
    cases.append(("tnot", (i16,), {}))
    for n in ("add", "sub", "mul", "div", "max", "min"):
        cases += [(f"trowexpand{n}", (a32, col), {}), (f"tcolexpand{n}", (a32, row), {})]
    for n in ("rowsum", "colsum", "rowprod", "colprod", "rowmax", "rowmin", "colmax", "colmin",
              "rowargmax", "rowargmin", "colargmax", "colargmin"):
        cases.append((f"t{n}", (a16, a16) if n in ("colsum", "rowmax") else (a32, a32), {}))
    cases += [
        ("trowexpand", (col,), {"out": SDS((4, 16), F32)}), ("tcolexpand", (row,), {"out": SDS((4, 16), F32)}),
        ("texpands", (s,), {"out": SDS((4, 16), F16)}), ("tconcat", (a32, b32), {}), ("ttrans", (a32, a32), {}),
        ("tci", (np.asarray(3, I32),), {"descending": True, "out": SDS((1, 16), I32)}),
        ("tcmp", (a32, b32), {"cmpMode": "lt"}), ("tcmps", (a32, s), {"cmpMode": "ne"}),
        ("tsel", (np.asarray(S["tcmp"](a32, b32, cmpMode="gt")), a32, b32, np.zeros((1, 16), np.uint32)), {}),
        ("tcvt", (a32,), {"rmode": "ODD", "sat_mode": "ON", "out": SDS((4, 16), I16)}),
        ("tcvt", (i32,), {"out": SDS((4, 16), BF16)}),
        ("tcvt", (a32,), {"rmode": "ROUND", "out": SDS((4, 16), I32)}),
        ("tmatmul", (tile(F32, 4, 8, False), tile(F32, 8, 3, False)), {}),
        ("tmatmul", (tile(I8, 4, 8), tile(I8, 8, 3)), {}),
        ("tmatmul.acc", (tile(F32, 4, 3, False), tile(F16, 4, 8, False), tile(F16, 8, 3, False)), {}),
        ("tmatmul.bias", (tile(BF16, 4, 8, False), tile(BF16, 8, 3, False), tile(F32, 1, 3, False)), {}),
        ("tsort32", (tile(F16, 2, 40), np.arange(80, dtype=np.uint32).reshape(2, 40)), {}),
        ("tgather", (a32,), {"maskPattern": "P1010"}),
        ("tgather", (a32, RNG.integers(-3, 70, (2, 8)).astype(I32), None), {}),
    ]
    cases.append(("tmrgsort", (pairs[:, :64], pairs[:, 64:128], pairs[:, :64]), {"exhausted": True}))
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_jit_matches_eager(case):
    name, args, kw = case
    eager = S[name](*args, **kw)
    jitted = jax.jit(lambda *xs: S[name](*xs, **kw))(*args)
    for e, j in zip(jax.tree.leaves(eager), jax.tree.leaves(jitted)):
        same(j, e)


def test_tmrgsort_block_form_under_jit_and_vmap():
    v = tile(F32, 1, 256, special=False)
    st = np.asarray(S["tsort32"](v, np.arange(256, dtype=np.uint32)[None]))
    eager = S["tmrgsort"](st, 64)
    same(jax.jit(lambda x: S["tmrgsort"](x, 64))(st), eager)
    stacked = np.stack([st, st[:, ::-1].copy()])
    batched = jax.vmap(lambda x: S["tmrgsort"](x, 64))(stacked)
    same(batched[0], eager)


def test_vmap_over_tiles():
    a, b = tile(F32, 4, 16), tile(F32, 4, 16)
    stacked = np.stack([a, b])
    for name in ("tadd", "tcmp", "trowsum", "tmatmul"):
        args = (stacked, stacked.transpose(0, 2, 1)) if name == "tmatmul" else (stacked, stacked[::-1])
        got = jax.vmap(S[name])(*args)
        same(got[1], S[name](args[0][1], args[1][1]))


@pytest.mark.parametrize("op", ["tmatmul", "tmatmul.acc", "tmatmul.bias"])
@pytest.mark.parametrize("dtype", [F16, BF16, np.int8], ids=["f16", "bf16", "i8"])
def test_numpy_matmul_folds_equal_the_jnp_semantics(op, dtype):
    """The engine's NumPy matmuls (``ON_NUMPY``: 3 grid points at once, the right operand shared) give
    each point the jnp semantics' bits — specials, -0.0 and int32 wrap-around included (a NaN, any
    NaN: its sign is the CPU's) — and are used
    only where exact: not on float32 operands, nor past ``NUMPY_MACS`` multiply-adds."""
    from ptojax.ascend import tile_semantics as TS

    if dtype == np.int8:
        a, b = (RNG.integers(-128, 128, s).astype(np.int8) for s in ((3, 16, 4096), (4096, 24)))
        acc, bias = RNG.integers(-2**31, 2**31, (3, 16, 24)).astype(np.int32), RNG.integers(-99, 99, (1, 24)).astype(np.int32)
    else:
        a, b = (RNG.standard_normal(s).astype(dtype) for s in ((3, 16, 40), (40, 24)))
        a[0, 0, :3], a[1, 2, :] = [np.inf, np.nan, -0.0], -0.0
        b[:, 5] = -0.0
        acc, bias = RNG.standard_normal((3, 16, 24)).astype(F32), RNG.standard_normal((1, 24)).astype(F32)
    ins = {"tmatmul": (a, b), "tmatmul.acc": (acc, a, b), "tmatmul.bias": (a, b, bias)}[op]
    assert TS.ON_NUMPY_IF[op](*ins)
    got = TS.ON_NUMPY[op](*ins, out=None)
    want = np.stack([np.asarray(S[op](*(x[p] if x.ndim == 3 else x for x in ins), out=None)) for p in range(3)])
    assert got.dtype == want.dtype
    nan = np.isnan(want) if got.dtype.kind == "f" else np.zeros(want.shape, bool)
    np.testing.assert_array_equal(np.isnan(got) if got.dtype.kind == "f" else nan, nan)   # a NaN's sign is the CPU's
    bits = f"u{got.dtype.itemsize}"
    np.testing.assert_array_equal(got.view(bits)[~nan], want.view(bits)[~nan])
    wide = np.zeros((1, 1024, 4096), F16), np.zeros((4096, 8), F16)      # 2**25 multiply-adds
    assert not TS.ON_NUMPY_IF["tmatmul"](*wide) and not TS.ON_NUMPY_IF["tmatmul"](a.astype(F32), b.astype(F32))
