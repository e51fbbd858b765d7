"""The semantics cases: one call per tile instruction over the dtypes its op accepts, two shapes
(size-1 and odd) and edge cases (wrap, NaN, ties, out-of-range and repeated indices), with the
tolerance each needs (``TOL``)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ptojax.primitives._base import OPS
from ptojax.primitives.tile import MNEMONIC

F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
I8, I32, BOOL = np.dtype(np.int8), np.dtype(np.int32), np.dtype(np.bool_)
FLOATS = (F32, F16, BF16)
NUMERIC = FLOATS + (I8, I32)
ANY = NUMERIC + (BOOL,)
MOVES = {"tload", "tstore", "tmov"}
TENSOR_OP = {MNEMONIC.get(name, "t" + name): name for name in OPS}

# Relative tolerance per float dtype: "exact" for instructions with one correctly rounded step
# (float32 arithmetic, float16/bfloat16 results of an exact float32 value); "math" for float32
# transcendentals, reductions and composites (libm / summation order differ between NumPy and XLA);
# float16 within 1 ulp (2**-10 < 1e-3), bfloat16 within 1 ulp (2**-7 < 8e-3): the float32 value
# computed by NumPy and by XLA may fall on either side of a rounding boundary.
TOL = {"exact": {F32: 1e-6, F16: 1e-3, BF16: 8e-3}, "math": {F32: 1e-5, F16: 1e-3, BF16: 8e-3}}


def rand(rng, shape, dtype, low=-3.0, high=3.0):
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype == I8:
        return rng.integers(-128, 128, size=shape).astype(I8)
    if dtype == I32:
        return rng.integers(-1000, 1000, size=shape).astype(I32)
    return np.asarray(rng.uniform(low, high, size=shape)).astype(dtype)


def small_ints(rng, shape, dtype, n=4):
    """Values from a small set, so that ties and equal operands occur."""
    return np.asarray(rng.integers(-n, n, size=shape)).astype(dtype)


# ------------------------------------------------------------------------------------------- cases
CASES = []


def case(name, args, tol="exact", atol_scale=0.0, **params):
    """One instruction call. ``atol_scale``: absolute tolerance as a multiple of max|golden| * rtol,
    for results that cancel (sums, matmuls, norms): their error scales with the operands, not the result."""
    dtypes = "-".join(np.asarray(a).dtype.name for a in args)
    shapes = "-".join("x".join(map(str, np.shape(a))) or "s" for a in args)
    CASES.append(pytest.param(name, args, params, tol, atol_scale, id=f"{name}-{dtypes}-{shapes}-{len(CASES)}"))


rng = np.random.default_rng(0)
SHAPE_PAIRS = [((1,), ()), ((3, 5), (1, 5))]          # size-1 with a scalar; odd with a broadcast row

for name in ("tadd", "tsub", "tmul", "tmax", "tmin"):
    for dt in NUMERIC:
        for sx, sy in SHAPE_PAIRS:
            case(name, [rand(rng, sx, dt), rand(rng, sy, dt)])
for dt in FLOATS:
    for sx, sy in SHAPE_PAIRS:
        case("tdiv", [rand(rng, sx, dt), rand(rng, sy, dt, 0.5, 3.0) * np.asarray(-1, dt)])
        case("tpow", [rand(rng, sx, dt, 0.1, 4.0), rand(rng, sy, dt, -2.0, 2.0)], tol="math")
for dt in NUMERIC:
    for sx, sy in SHAPE_PAIRS:
        case("tfmod", [rand(rng, sx, dt), rand(rng, sy, dt, 0.5, 3.0)])
for dt in (I8, I32):
    for sx, sy in SHAPE_PAIRS:
        for name in ("tand", "tor", "txor"):
            case(name, [rand(rng, sx, dt), rand(rng, sy, dt)])
    bits = 8 * np.dtype(dt).itemsize                       # counts past both ends: XLA's 0 / sign fill
    counts = np.arange(-2, bits + 3).astype(dt)
    values = np.resize(np.array([1, -1, 77, -77, np.iinfo(dt).min, np.iinfo(dt).max], dt), counts.shape)
    case("tnot", [values])
    case("tshl", [values, counts])
    case("tshr", [values, counts])
# int8 / int32 arithmetic wraps
case("tadd", [np.array([127, -128, 100], I8), np.array([1, -1, 100], I8)])
case("tmul", [np.array([2**30, -7, 2**31 - 1], I32), np.array([4, 2**29, 2], I32)])
case("tneg", [np.array([-128, 127, 0], I8)])
case("tabs", [np.array([-128, -127, 5], I8)])

UNARY = {"texp": (-3, 3), "tlog": (0.05, 5), "tsqrt": (0.0, 5), "trsqrt": (0.05, 5), "trecip": (0.2, 5),
         "ttanh": (-3, 3), "tsigmoid": (-8, 8), "tsilu": (-5, 5)}
for name, (lo, hi) in UNARY.items():
    for dt in FLOATS:
        case(name, [rand(rng, (1,), dt, lo, hi)], tol="math")
        case(name, [rand(rng, (3, 5), dt, lo, hi)], tol="math")
for dt in FLOATS:
    for approximate in (True, False):
        # the tanh form computes 1 + tanh(..) ~ 1e-4 for x < -3: one ulp of tanh (libm vs XLA) is
        # amplified there, so the error is bounded by ulp(1) * |x| rather than by ulp(result)
        case("tgelu", [rand(rng, (3, 5), dt, -4, 4)], tol="math", atol_scale=1.0, approximate=approximate)
    case("tgelu", [rand(rng, (1,), dt)], tol="math", approximate=False)
    # ties to even: k / 2 is exact in every float dtype
    case("tround", [(rng.integers(-9, 9, size=(3, 5)) / 2).astype(dt)])
    case("tround", [rand(rng, (1,), dt)])
    case("texp", [np.array([np.nan, np.inf, -np.inf, 0.0], dt)], tol="math")
    for name in ("tsigmoid", "tsilu", "tgelu"):
        extra = {"approximate": False} if name == "tgelu" else {}
        case(name, [np.array([-100.0, -30.0, 30.0, 100.0, np.inf, -np.inf], dt)], tol="math", **extra)
for name in ("tabs", "tneg", "trelu"):
    for dt in NUMERIC:
        case(name, [rand(rng, (1,), dt)])
        case(name, [rand(rng, (3, 5), dt)])

for name in ("teq", "tne", "tlt", "tle", "tgt", "tge"):
    for dt in (ANY if name in ("teq", "tne") else NUMERIC):
        for sx, sy in SHAPE_PAIRS:
            gen = rand if dt == BOOL else small_ints
            case(name, [gen(rng, sx, dt), gen(rng, sy, dt)])
case("teq", [np.array([np.nan, 1.0, 0.0], F32), np.array([np.nan, 1.0, -0.0], F32)])
case("tlt", [np.array([np.nan, -np.inf, 1.0], BF16), np.array(np.inf, BF16)])
for name in ("tlogical_and", "tlogical_or"):
    for sx, sy in SHAPE_PAIRS:
        case(name, [rand(rng, sx, BOOL), rand(rng, sy, BOOL)])
for shape in ((1,), (3, 5)):
    case("tlogical_not", [rand(rng, shape, BOOL)])
for dt in ANY:
    case("tsel", [rand(rng, (3, 5), BOOL), rand(rng, (3, 5), dt), rand(rng, (1, 5), dt)])
    case("tsel", [rand(rng, (1,), BOOL), rand(rng, (1,), dt), rand(rng, (), dt)])
for dt in NUMERIC:
    if dt == I8:
        lo, hi = np.asarray(-50, dt), np.asarray(60, dt)
    else:
        lo, hi = np.asarray(-1, dt), rand(rng, (1, 5), dt, 0.0, 2.0)
    case("tclip", [rand(rng, (3, 5), dt), lo, hi])
    case("tclip", [rand(rng, (1,), dt), np.asarray(0, dt), np.asarray(1, dt)])

# ------------------------------------------------------------------------------------------- cast
EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 127.4, 127.5, 128.0,
         -128.5, -129.0, 255.0, 256.0, 300.7, -300.7, 65504.0, 2.0**31 - 128, 2.0**31, -(2.0**31), -(2.0**31) - 256,
         2.0**32 + 512, -(2.0**33) - 1024, 1e10, -1e10, 3.4e38]


def cast_input(dt):
    if dt in FLOATS:
        with np.errstate(over="ignore"):                 # 1e10 and 3.4e38 overflow float16 to inf
            edges = np.array(EDGES, F32).astype(dt)
        return np.concatenate([edges, rand(rng, (9,), dt, -200, 200)])
    if dt == I32:
        # 2**24 + 2**16 + 1 -> bfloat16: the reference converts through float32 (two roundings: 2**24)
        edges = [2**31 - 1, -2**31, 128, -129, 255, 256, 16777217, -16777219, 2**24 + 2**16 + 1]
        return np.concatenate([np.array(edges, I32),
                               rng.integers(-2**31, 2**31, size=9).astype(I32)])
    return rand(rng, (17,), dt)


for src in ANY:
    for dst in ANY:
        if src == dst:
            continue
        for saturate in ((True, False) if dst in (I8, I32) else (True,)):
            case("tcvt", [cast_input(src)], dtype=dst, rounding="rint", saturate=saturate)
for src in FLOATS:
    for dst in (I8, I32):
        for rounding in ("round", "floor", "ceil", "trunc"):
            for saturate in (True, False):
                case("tcvt", [cast_input(src)], dtype=dst, rounding=rounding, saturate=saturate)
case("tcvt", [rand(rng, (1, 1), F32)], dtype=F16, rounding="rint", saturate=True)

# ------------------------------------------------------------------------------------- reductions
REDUCE_AXES = [((1, 1), (0, 1), False), ((3, 5), (1,), True), ((3, 5), (0,), False)]
for name in ("tsum", "tprod", "tamax", "tamin"):
    for dt in NUMERIC:
        for shape, axes, keepdims in REDUCE_AXES[:2] if dt != F32 else REDUCE_AXES:
            x = rand(rng, shape, dt, 0.5, 1.5) if name == "tprod" and dt in FLOATS else rand(rng, shape, dt)
            case(name, [x], tol="math", atol_scale=1.0, axes=axes, keepdims=keepdims)
case("tsum", [np.full((2, 300), 100, I8)], axes=(1,), keepdims=False)          # wraps modulo 256
case("tamax", [np.array([[1.0, np.nan, 3.0], [-np.inf, -1.0, -2.0]], F16)], axes=(1,), keepdims=False)
for name in ("targmax", "targmin"):
    for dt in NUMERIC:
        case(name, [small_ints(rng, (1, 1), dt)], axes=(0,), keepdims=False)
        case(name, [small_ints(rng, (3, 5), dt)], axes=(1,), keepdims=True)
    case(name, [np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 2.0, -1.0, 5.0]], BF16)], axes=(1,), keepdims=False)
for dt in NUMERIC:
    case("tcumsum", [rand(rng, (1, 1), dt)], tol="math", atol_scale=1.0, axes=(1,), reverse=False)
    case("tcumsum", [rand(rng, (3, 5), dt)], tol="math", atol_scale=1.0, axes=(1,), reverse=True)
    case("tcumsum", [rand(rng, (3, 5), dt)], tol="math", atol_scale=1.0, axes=(0,), reverse=False)
    acc = {F16: F32, BF16: F32, I8: np.dtype(np.int16)}.get(np.dtype(dt), dt)     # the carry: what it adds in
    case("tcumsum_carry", [rand(rng, (1, 1), dt), rand(rng, (1, 1), acc)], tol="math", atol_scale=1.0, reverse=False)
    case("tcumsum_carry", [rand(rng, (3, 5), dt), rand(rng, (3, 1), acc)], tol="math", atol_scale=1.0, reverse=True)

# ----------------------------------------------------------------------------------------- matmul
OUTS = {I8: (I32,), F16: (F32, F16), BF16: (F32, BF16), F32: (F32,)}
ACC = {I8: I32, F16: F32, BF16: F32, F32: F32}
for dt, outs in OUTS.items():
    for out in outs:
        case("tmatmul", [rand(rng, (1, 1), dt), rand(rng, (1, 1), dt)], tol="math", atol_scale=1.0,
             out_dtype=out, transpose_a=False, transpose_b=False)
        case("tmatmul", [rand(rng, (5, 3), dt), rand(rng, (7, 5), dt)], tol="math", atol_scale=1.0,
             out_dtype=out, transpose_a=True, transpose_b=True)
    case("tmatmul", [rand(rng, (2, 3, 5), dt), rand(rng, (5, 7), dt), rand(rng, (1, 7), ACC[dt])], tol="math",
         atol_scale=1.0, out_dtype=outs[-1], transpose_a=False, transpose_b=False)
    case("tmatmul", [rand(rng, (3, 5), dt), rand(rng, (2, 7, 5), dt)], tol="math", atol_scale=1.0,
         out_dtype=outs[0], transpose_a=False, transpose_b=True)
    for acc in dict.fromkeys((ACC[dt], outs[-1])):          # ordered: test ids must not depend on hashing
        case("tmatmul_acc", [rand(rng, (3, 7), acc), rand(rng, (3, 5), dt), rand(rng, (5, 7), dt)], tol="math",
             atol_scale=1.0, transpose_a=False, transpose_b=False)
    case("tmatmul_acc", [rand(rng, (1, 1), ACC[dt]), rand(rng, (1, 1), dt), rand(rng, (1, 1), dt)], tol="math",
         atol_scale=1.0, transpose_a=True, transpose_b=True)
# int8 x int8 sums exactly in int32 (|sum| up to 129 * 128 * 128 > 2**16)
case("tmatmul", [np.full((2, 129), -128, I8), np.full((129, 3), -128, I8)], out_dtype=I32, transpose_a=False,
     transpose_b=False)

# the tile of a symbolic-size iota: base + step * index + j
case("tci", [np.int32(3)], size=8, step=8, base=16)
case("tci", [np.int32(0)], size=1, step=1, base=0)

# ----------------------------------------------------------------------------------------- layout
for dt in ANY:
    case("treshape", [rand(rng, (3, 5), dt)], new_shape=(5, 3, 1))
    case("treshape", [rand(rng, (1,), dt)], new_shape=(1, 1))
    case("ttrans", [rand(rng, (3, 5, 2), dt)], permutation=(2, 0, 1))
    case("ttrans", [rand(rng, (1, 1), dt)], permutation=(1, 0))
    case("texpand", [rand(rng, (1, 5), dt)], shape=(2, 3, 5))
    case("texpand", [rand(rng, (), dt)], shape=(1,))
    case("tconcat", [rand(rng, (3, 5), dt), rand(rng, (3, 1), dt), rand(rng, (3, 2), dt)], axis=1)
    case("tconcat", [rand(rng, (1,), dt), rand(rng, (1,), dt)], axis=0)
    if np.dtype(dt).itemsize in (2, 4):      # the selection's dtypes
        case("tdeinterleave", [rand(rng, (3, 2, 16), dt)], step=2, offset=1)
        case("tdeinterleave", [rand(rng, (2, 8), dt)], step=4, offset=3)
        case("tinterleave", [rand(rng, (3, 8), dt), rand(rng, (3, 8), dt)])
        case("tinterleave", [rand(rng, (1, 2, 4), dt) for _ in range(4)])
    case("tview", [rand(rng, (5, 7), dt)], shape=(3, 4), offsets=(1, 2), valid_shape=(2, 3))
    case("tview", [rand(rng, (1, 1), dt)], shape=(1, 1), offsets=(0, 0), valid_shape=(1, 1))
    case("tassemble", [rand(rng, (2, 3), dt), rand(rng, (3, 5), dt)], offsets=(1, 2))
    case("tassemble", [rand(rng, (1,), dt), rand(rng, (1,), dt)], offsets=(0,))
    case("tpad", [rand(rng, (3, 5), dt)], pads=((1, 0), (2, 3)), value=True if dt == BOOL else 7)
    case("tpad", [rand(rng, (1,), dt)], pads=((0, 2),), value=0)
for dt in FLOATS:
    case("tpad", [rand(rng, (1, 3), dt)], pads=((1, 1), (0, 1)), value=-np.inf)

# --------------------------------------------------------------------------------------- indexing
IDX = np.array([[2, -1], [0, 5], [4, 2]], I32)       # out of range: -1 and 5 on a size-5 axis
for dt in ANY:
    for name in ("tgather", "mgather"):
        case(name, [rand(rng, (5, 3), dt), IDX], axis=0)
        case(name, [rand(rng, (1, 1), dt), np.array([0], I32)], axis=1)
    case("tgather", [rand(rng, (2, 5, 3), dt), np.array([4, 4, -1, 1, 7], I32)], axis=1)
    case("tscatter_update", [rand(rng, (5, 3), dt), np.array([1, 3, 1, -1, 9], I32), rand(rng, (5, 3), dt)], axis=0)
    case("tscatter_update", [rand(rng, (1, 1), dt), np.array([0], I32), rand(rng, (1, 1), dt)], axis=1)
    case("mscatter", [rand(rng, (2, 5), dt), np.array([4, 4, -1], I32), rand(rng, (2, 3), dt)], axis=1,
         accumulate=False)
for dt in NUMERIC:
    # repeated indices accumulate (in index order, each add rounded to the dtype)
    case("tindex_add", [rand(rng, (5, 3), dt), IDX, rand(rng, (3, 2, 3), dt)], tol="math", axis=0)
    case("tindex_add", [rand(rng, (1, 1), dt), np.array([0], I32), rand(rng, (1, 1), dt)], axis=1)
    case("mscatter", [rand(rng, (2, 5), dt), np.array([4, 4, -1, 0], I32), rand(rng, (2, 4), dt)], tol="math",
         axis=1, accumulate=True)
    for largest in (True, False):
        case("ttopk", [small_ints(rng, (3, 5), dt)], k=3, axis=1, largest=largest)
        case("ttopk", [small_ints(rng, (3, 5), dt)], k=7, axis=0, largest=largest)   # padded past n
        case("tsort", [small_ints(rng, (3, 5), dt)], k=5, axis=1, largest=largest)
    case("tsort", [rand(rng, (1,), dt)], k=1, axis=0, largest=False)
    for largest in (True, False):      # lists of (value, index) pairs with ties and -1 padding
        case("tmrgsort", [small_ints(rng, (2, 3, 4), dt), rng.integers(-1, 9, (2, 3, 4)).astype(I32)], k=6,
             largest=largest)
        case("tmrgsort", [small_ints(rng, (1, 2, 3), dt), rng.integers(0, 9, (1, 2, 3)).astype(I32)], k=8,
             largest=largest)          # padded past the 6 pairs
for largest in (True, False):
    nan_row = np.array([[1.0, np.nan, np.inf, -np.inf, 1.0, np.nan, -2.0]], F32)
    case("ttopk", [nan_row.astype(F16)], k=9, axis=1, largest=largest)
    case("tsort", [nan_row], k=7, axis=1, largest=largest)
    case("tmrgsort", [nan_row, np.arange(7, dtype=I32).reshape(1, 7)], k=7, largest=largest)

# -------------------------------------------------------------------------------------- composite
for dt in FLOATS:
    case("tsoftmax", [rand(rng, (3, 5), dt, -6, 6)], tol="math", axes=(1,))
    case("tsoftmax", [rand(rng, (1, 1), dt)], tol="math", axes=(0, 1))
    case("trms_norm", [rand(rng, (3, 5), dt)], tol="math", atol_scale=1.0, eps=1e-6)
    case("trms_norm", [rand(rng, (1, 1), dt), rand(rng, (1,), dt)], tol="math", atol_scale=1.0, eps=1e-6)
    case("trms_norm", [rand(rng, (3, 5), dt), rand(rng, (5,), dt)], tol="math", atol_scale=1.0, eps=0.5)
    for has_gamma, has_beta in ((False, False), (True, False), (True, True), (False, True)):
        affine = [rand(rng, (5,), dt) for _ in range(has_gamma + has_beta)]
        case("tlayer_norm", [rand(rng, (3, 5), dt), *affine], tol="math", atol_scale=1.0, eps=1e-5,
             has_gamma=has_gamma, has_beta=has_beta)
    case("tlayer_norm", [rand(rng, (1, 1), dt)], tol="math", atol_scale=1.0, eps=1e-5, has_gamma=False,
         has_beta=False)
    for scale_dtype in FLOATS:
        case("tquant", [rand(rng, (3, 5), dt)], tol="math", axes=(1,), scale_dtype=scale_dtype)
    zero_row = np.concatenate([np.zeros((1, 5)), rng.uniform(-3, 3, (2, 5))]).astype(dt)
    case("tquant", [zero_row], tol="math", axes=(0, 1), scale_dtype=F32)
    case("tquant", [zero_row], tol="math", axes=(1,), scale_dtype=dt)
    case("tquant", [rand(rng, (1, 1), dt)], tol="math", axes=(0,), scale_dtype=F32)
    for q in (I8, I32):
        case("tdequant", [rand(rng, (3, 5), q), rand(rng, (3, 1), dt, 0.001, 0.1)], dtype=dt)
        case("tdequant", [rand(rng, (1,), q), rand(rng, (), dt, 0.001, 0.1)], dtype=F32)


# ------------------------------------------------------------------------------------------ checks
