"""What every tile compute instruction computes, in NumPy, in the hardware's dtypes.

The PTO interpreter runs a block program tile by tile; for each compute instruction (``pto.tadd``,
``pto.tsum``, ``pto.tcvt``, ``pto.tmatmul``, ``pto.mgather``, ...) it calls :func:`execute` with the
tiles' valid regions as NumPy arrays. The contract:

* **Same params as the tensor op.** ``SEMANTICS[name]`` takes the operands positionally and exactly the
  keyword params of the tensor op's primitive (``axes``, ``keepdims``, ``dtype``, ``rounding``, ...);
  a scalar operand arrives as a 0-d array of the tile's dtype. Binary ops broadcast by NumPy rules.
  Results have exactly the tensor op's output dtypes and shapes (two arrays for ``tquant``, ``ttopk``
  and ``tsort``).
* **Hardware dtypes.** float16 / bfloat16 elementwise instructions compute in float32 and round once
  to the operand dtype, except ``texp`` / ``tlog`` / ``trsqrt`` / ``tpow``, which compute in float64
  and round once, as pto-isa's CPU simulator does; float sums, products, prefix sums, softmax, norms
  and quantization accumulate in float32, ``tsum`` strictly left to right (the simulator's row and
  column sums); the cube multiplies int8 exactly into int32 and floats into float32. Integers wrap modulo 2**bits. ``tcvt`` follows :mod:`ptojax.primitives.cast` bit for bit
  (rounding modes, NaN -> 0, saturation or wrap, the int32 edges).
* **Indexed rows.** Out-of-range indices (-1 is the padding) read zeros and write nothing; a repeated
  ``scatter_update`` index keeps the last write; ``index_add`` adds repeats in index order, each add
  rounded to the operand dtype (as the reference's scatter-add does).

Only NumPy, ml_dtypes and (for the exact GELU's erfc, when installed) ``scipy.special``: no JAX.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ptojax.errors import PtoUnsupportedError
from ptojax.primitives._base import BF16, BOOL, F16, F32, FLOAT, I8, I32, INT

try:
    from numpy.lib.array_utils import normalize_axis_tuple
except ImportError:                                  # NumPy < 2
    from numpy.core.numeric import normalize_axis_tuple


SEMANTICS: dict[str, Callable] = {}


def _register(*names):
    def wrap(fn):
        for name in names:
            SEMANTICS[name] = fn
        return fn
    return wrap


def _f32(x):
    """``x`` widened to float32 (exact for float16 / bfloat16 / int8; float32 passes through)."""
    return np.asarray(x).astype(F32, copy=False)


def _float_op(fn):
    """A float instruction: compute ``fn`` on float32 operands, round once to the operands' dtype."""
    def run(*args, **params):
        dtype = args[0].dtype
        return np.asarray(fn(*[_f32(a) for a in args], **params), F32).astype(dtype, copy=False)
    return run


def _double_op(fn):
    """A float instruction pto-isa's CPU simulator computes in double: ``fn`` on float64 operands,
    rounded once to the operands' dtype (``static_cast<T>(std::exp(static_cast<double>(x)))``)."""
    def run(*args, **params):
        dtype = args[0].dtype
        return np.asarray(fn(*[np.asarray(a).astype(np.float64) for a in args], **params)).astype(dtype, copy=False)
    return run


def _numeric_op(fn):
    """Floats as in :func:`_float_op` (exact for add/max/...: one rounding); integers wrap in place."""
    float_fn = _float_op(fn)

    def run(*args, **params):
        if args[0].dtype in FLOAT:
            return float_fn(*args, **params)
        return np.asarray(fn(*args, **params)).astype(args[0].dtype, copy=False)
    return run


def _compare(fn):
    def run(x, y):
        if x.dtype in (F16, BF16):
            x, y = _f32(x), _f32(y)
        return np.asarray(fn(x, y), BOOL)
    return run


# ------------------------------------------------------------------------------------ elementwise
def _sigmoid(x):
    return np.float32(1) / (np.float32(1) + np.exp(-x))


def _erfc(x):
    """float32 erfc: ``scipy.special.erfc`` (float32 loop) where SciPy is installed, else libm's."""
    try:
        from scipy import special
    except ImportError:  # SciPy is a test extra, not a dependency: libm's erfc rounded to float32
        return np.vectorize(math.erfc, otypes=[F32])(x)
    return special.erfc(x).astype(F32, copy=False)


def _gelu(x, *, approximate):
    if approximate:
        c = np.float32(np.sqrt(2 / np.pi))
        cdf = np.float32(0.5) * (np.float32(1.0) + np.tanh(c * (x + np.float32(0.044715) * (x * x * x))))
        return x * cdf
    return np.float32(0.5) * x * _erfc(-x * np.float32(np.sqrt(0.5)))


_BINARY = {"tadd": np.add, "tsub": np.subtract, "tmul": np.multiply, "tmax": np.maximum, "tmin": np.minimum}
for _name, _fn in _BINARY.items():
    SEMANTICS[_name] = _numeric_op(_fn)
SEMANTICS["tdiv"] = _float_op(np.divide)
SEMANTICS["tpow"] = _double_op(np.power)


SEMANTICS["tand"] = lambda x, y: np.bitwise_and(x, y)
SEMANTICS["tor"] = lambda x, y: np.bitwise_or(x, y)
SEMANTICS["txor"] = lambda x, y: np.bitwise_xor(x, y)
SEMANTICS["tnot"] = lambda x: np.invert(x)


def _counted(shift, beyond):
    """A shift whose counts outside ``[0, bits)`` give ``beyond(x)`` (C leaves them undefined; the x86
    shift masks them), as XLA defines them."""
    def run(x, n):
        bits = 8 * x.dtype.itemsize
        inside = (n >= 0) & (n < bits)
        shifted = shift(x, np.where(inside, n, np.zeros((), n.dtype)))
        return np.where(inside, shifted, beyond(x)).astype(x.dtype, copy=False)
    return run


SEMANTICS["tshl"] = _counted(np.left_shift, lambda x: np.zeros((), x.dtype))
SEMANTICS["tshr"] = _counted(np.right_shift, lambda x: np.where(x < 0, np.array(-1, x.dtype), np.zeros((), x.dtype)))


@_register("tfmod")
def fmod(x, y):
    """C's fmod (exact, so one rounding to fp16/bf16 changes nothing); integers: ``x`` where ``y`` is 0 and
    0 for ``INT_MIN`` by -1 (as XLA defines them: the ISA leaves division by zero to the target)."""
    if x.dtype in FLOAT:
        return _float_op(np.fmod)(x, y)
    zero = y == 0
    return np.where(zero, x, np.fmod(x, np.where(zero, np.ones((), y.dtype), y))).astype(x.dtype, copy=False)

_UNARY_FLOAT = {
    "tsqrt": np.sqrt, "trecip": lambda x: np.float32(1) / x, "ttanh": np.tanh, "tsigmoid": _sigmoid,
    "tsilu": lambda x: np.multiply(x, _sigmoid(x)), "tround": np.rint,
}
for _name, _fn in _UNARY_FLOAT.items():
    SEMANTICS[_name] = _float_op(_fn)
for _name, _fn in {"texp": np.exp, "tlog": np.log, "trsqrt": lambda x: 1.0 / np.sqrt(x)}.items():
    SEMANTICS[_name] = _double_op(_fn)
SEMANTICS["tgelu"] = _float_op(_gelu)
SEMANTICS["tabs"] = _numeric_op(np.abs)          # int8 -128 stays -128
SEMANTICS["tneg"] = _numeric_op(np.negative)
SEMANTICS["trelu"] = _numeric_op(lambda x: np.maximum(x, np.zeros((), x.dtype)))
SEMANTICS["tclip"] = _numeric_op(lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi))

for _name, _fn in {"teq": np.equal, "tne": np.not_equal, "tlt": np.less, "tle": np.less_equal,
                   "tgt": np.greater, "tge": np.greater_equal}.items():
    SEMANTICS[_name] = _compare(_fn)
SEMANTICS["tlogical_and"] = lambda x, y: np.logical_and(x, y)
SEMANTICS["tlogical_or"] = lambda x, y: np.logical_or(x, y)
SEMANTICS["tlogical_not"] = lambda x: np.logical_not(x)


@_register("tsel")
def where(cond, x, y):
    return np.where(cond, x, y).astype(x.dtype, copy=False)


# ------------------------------------------------------------------------------------------- cast
def _round_away(r):
    """Round half away from zero, exactly (``x - trunc(x)`` is exact; ``x + 0.5`` is not)."""
    t = np.trunc(r)
    frac = np.abs(r - t)
    return np.where(frac >= np.float32(0.5), t + np.copysign(np.float32(1), r), t).astype(F32, copy=False)


ROUNDING = {"rint": np.rint, "round": _round_away, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}


def _float_to_int(x, dtype, rounding, saturate):
    r = ROUNDING[rounding](_f32(x)).astype(F32, copy=False)
    info = np.iinfo(dtype)
    nan = np.isnan(r)
    if saturate:
        # float32 cannot hold 2**31 - 1: clamp below it, then pin the true limits (as cast.py).
        hi = np.float32(info.max if dtype != I32 else 2.0**31 - 128)
        clamped = np.clip(np.where(nan, np.float32(0), r), np.float32(info.min), hi).astype(dtype)
        if dtype == I32:
            clamped = np.where(r >= np.float32(2.0**31), info.max, clamped).astype(dtype)
        return np.where(nan, 0, clamped).astype(dtype)
    # Wrap modulo 2**32 (fmod is exact in float32), then let the integer conversions wrap the rest.
    rem = np.fmod(r, np.float32(2.0**32))
    rem = np.where(np.isfinite(rem), rem, np.float32(0))
    mag = np.abs(rem).astype(np.uint32)
    return np.where(rem < 0, -mag, mag).astype(np.uint32).astype(I32).astype(dtype)


@_register("tcvt")
def cast(x, *, dtype, rounding="rint", saturate=True):
    dtype, src = np.dtype(dtype), x.dtype
    if src == dtype:
        return x.copy()
    if dtype == BOOL:
        return np.asarray((_f32(x) if src in (F16, BF16) else x) != 0, BOOL)
    if src in FLOAT and dtype in INT:
        return _float_to_int(x, dtype, rounding, saturate)
    if src in INT and dtype in INT and saturate and np.iinfo(dtype).bits < np.iinfo(src).bits:
        info = np.iinfo(dtype)
        return np.clip(x, info.min, info.max).astype(dtype)
    if src in (F16, BF16):
        x = _f32(x)                                # exact; the conversion below rounds once
    return x.astype(dtype)


# ------------------------------------------------------------------------------------- reductions
def _accumulate(fn):
    """Float inputs accumulate in float32 and round once; integers keep (and wrap in) their dtype."""
    def run(x, **params):
        acc = F32 if x.dtype in FLOAT else x.dtype
        return np.asarray(fn(x.astype(acc, copy=False), dtype=acc, **params)).astype(x.dtype)
    return run


@_register("tsum")
@_accumulate
def sum_(x, *, axes, keepdims, dtype):
    return sequential_sum(x, tuple(axes), keepdims, dtype)


def sequential_sum(x, axes: tuple, keepdims: bool, dtype=None):
    """``x`` summed over ``axes`` strictly left to right in C order (NumPy's reduce sums pairwise
    along a contiguous axis; pto-isa's row and column sums add one element after another)."""
    axes = normalize_axis_tuple(axes, x.ndim)
    kept = [a for a in range(x.ndim) if a not in axes]
    moved = np.transpose(x, kept + list(axes))
    flat = moved.reshape(moved.shape[:len(kept)] + (-1,))
    if flat.shape[-1] == 0:
        total = np.zeros(flat.shape[:-1], dtype or x.dtype)
    else:
        total = np.cumsum(flat, axis=-1, dtype=dtype)[..., -1]
    return np.expand_dims(total, axes) if keepdims else total


@_register("tprod")
@_accumulate
def prod(x, *, axes, keepdims, dtype):
    return np.multiply.reduce(x, axis=tuple(axes), dtype=dtype, keepdims=keepdims)


def _widen(x):
    return _f32(x) if x.dtype in (F16, BF16) else x


@_register("tamax")
def amax(x, *, axes, keepdims):
    return np.asarray(np.maximum.reduce(_widen(x), axis=tuple(axes), keepdims=keepdims)).astype(x.dtype)


@_register("tamin")
def amin(x, *, axes, keepdims):
    return np.asarray(np.minimum.reduce(_widen(x), axis=tuple(axes), keepdims=keepdims)).astype(x.dtype)


@_register("targmax")
def argmax(x, *, axes, keepdims):
    return np.asarray(np.argmax(_widen(x), axis=axes[0], keepdims=keepdims)).astype(I32)


@_register("targmin")
def argmin(x, *, axes, keepdims):
    return np.asarray(np.argmin(_widen(x), axis=axes[0], keepdims=keepdims)).astype(I32)


@_register("tcumsum")
@_accumulate
def cumsum(x, *, axes, reverse, dtype):
    axis = axes[0] % max(x.ndim, 1)
    if x.ndim and axis == x.ndim - 1:
        return doubling_cumsum(x, reverse)
    if reverse:
        return np.flip(np.cumsum(np.flip(x, axis), axis=axis, dtype=dtype), axis)
    return np.cumsum(x, axis=axis, dtype=dtype)


def doubling_cumsum(x, reverse=False):
    """A scan along the last axis by doubling (Hillis-Steele), in ``x``'s dtype: pass ``s`` adds to each
    element the one ``s`` before it (``reverse``: after it), ``s`` = 1, 2, 4, ... (a scan along a tile's
    rows; along a leading axis the row blocks add one after another)."""
    y, n, s = np.array(x), x.shape[-1], 1
    while s < n:
        z = y.copy()
        if reverse:
            z[..., :n - s] = y[..., :n - s] + y[..., s:]
        else:
            z[..., s:] = y[..., s:] + y[..., :n - s]
        y, s = z, 2 * s
    return y


@_register("tcumsum_carry")
def cumsum_carry(x, carry, *, reverse):
    """A scan along the last axis from ``carry`` (each row's sum before the tile, in the dtype it adds in):
    the carry added to the first element scanned, then :func:`doubling_cumsum`."""
    y = x.astype(carry.dtype)
    y[..., -1 if reverse else 0] += carry[..., 0]
    y = doubling_cumsum(y, reverse)
    return y.astype(x.dtype), y[..., :1] if reverse else y[..., -1:]


# ----------------------------------------------------------------------------------------- matmul
ACCUMULATOR = {I8: I32, F16: F32, BF16: F32, F32: F32}
EXACT_F32_TERMS = 2**24 // 2**14      # int8 x int8 terms whose every partial sum float32 holds exactly


def _product(a, b, transpose_a, transpose_b):
    """``a @ b`` in the cube's accumulator: int8 exactly in int32, floats in float32.

    int8 products run through float BLAS where every partial sum is an integer the float holds exactly,
    whatever the summation order: a product is at most 2**14 in magnitude, so K <= 1024 terms stay
    within float32's 2**24, and longer sums within float64's 2**53. The result then wraps to int32 as
    the accumulator does."""
    acc = ACCUMULATOR[a.dtype]
    a = np.swapaxes(a, -1, -2) if transpose_a else a
    b = np.swapaxes(b, -1, -2) if transpose_b else b
    if acc == I32:
        if a.shape[-1] <= EXACT_F32_TERMS:           # |sum| <= 2**24: int32 holds it without wrapping
            return np.matmul(a.astype(F32), b.astype(F32)).astype(I32), acc
        exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
        return exact.astype(np.int64).astype(I32), acc
    return np.matmul(a.astype(acc), b.astype(acc)), acc


@_register("tmatmul")
def matmul(a, b, *bias, out_dtype, transpose_a, transpose_b):
    c, acc = _product(a, b, transpose_a, transpose_b)
    if bias:
        c = c + bias[0].astype(acc, copy=False)
    return np.asarray(c).astype(out_dtype)


@_register("tmatmul_acc")
def matmul_acc(acc, a, b, *, transpose_a, transpose_b):
    """``acc + a @ b``: the product converted to ``acc``'s dtype, then added (one rounding each)."""
    product = matmul(a, b, out_dtype=acc.dtype, transpose_a=transpose_a, transpose_b=transpose_b)
    return SEMANTICS["tadd"](acc, product)


# ----------------------------------------------------------------------------------------- layout
@_register("treshape")
def reshape(x, *, new_shape):
    return np.reshape(x, new_shape).copy()


@_register("ttrans")
def transpose(x, *, permutation):
    return np.ascontiguousarray(np.transpose(x, permutation))


@_register("texpand")
def expand(x, *, shape):
    return np.broadcast_to(x, shape).copy()


@_register("tci")
def iota(index, *, size, step, base):
    """``base + step * index + j`` for ``j < size``, int32 (a symbolic-size iota's tile)."""
    return (np.int64(base) + np.int64(step) * np.asarray(index, np.int64) + np.arange(size)).astype(I32)


@_register("tconcat")
def concat(*xs, axis):
    return np.concatenate(xs, axis=axis)


@_register("tdeinterleave")
def deinterleave(x, *, step, offset):
    """Columns ``offset, offset + step, ...`` of each row."""
    return x[..., offset::step].copy()


@_register("tinterleave")
def interleave(*xs):
    """Column ``j`` of tile ``p`` at column ``j * k + p`` (``k`` tiles)."""
    out = np.empty(xs[0].shape[:-1] + (xs[0].shape[-1] * len(xs),), xs[0].dtype)
    for p, x in enumerate(xs):
        out[..., p::len(xs)] = x
    return out


@_register("tview")
def view(x, *, shape, offsets, valid_shape):
    window = x[tuple(slice(o, o + v) for o, v in zip(offsets, valid_shape))]
    return np.pad(window, [(0, s - v) for s, v in zip(shape, valid_shape)])


@_register("tassemble")
def assemble(x, out, *, offsets):
    out = out.copy()
    out[tuple(slice(o, o + n) for o, n in zip(offsets, x.shape))] = x
    return out


@_register("tpad")
def pad(x, *, pads, value):
    return np.pad(x, pads, constant_values=np.asarray(value, x.dtype))


# --------------------------------------------------------------------------------------- indexing
def _in_range(idx, n):
    return (idx >= 0) & (idx < n)


@_register("tgather", "mgather")
def gather(x, idx, *, axis):
    n = x.shape[axis]
    valid = _in_range(idx, n)
    shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
    if n == 0:
        return np.zeros(shape, x.dtype)
    taken = np.take(x, np.where(valid, idx, 0), axis=axis)
    mask = valid.reshape((1,) * axis + idx.shape + (1,) * (x.ndim - axis - 1))
    return np.where(mask, taken, np.zeros((), x.dtype)).astype(x.dtype, copy=False)


def _rows(x, idx, src, axis):
    """``x`` with ``axis`` moved first, and ``src`` as one update row per entry of ``idx`` (flattened)."""
    k = idx.ndim
    rows = np.moveaxis(x.copy(), axis, 0)
    updates = np.moveaxis(src, tuple(range(axis, axis + k)), tuple(range(k))).reshape((-1,) + rows.shape[1:])
    return rows, updates, idx.reshape(-1)


@_register("tindex_add")
def index_add(x, idx, src, *, axis):
    rows, updates, flat = _rows(x, idx, src, axis)
    add = SEMANTICS["tadd"]
    for i, t in enumerate(flat):
        if 0 <= t < rows.shape[0]:
            rows[t] = add(rows[t], updates[i])       # in index order, one rounding per add
    return np.ascontiguousarray(np.moveaxis(rows, 0, axis))


@_register("tscatter_update")
def scatter_update(x, idx, updates, *, axis):
    rows, updates, flat = _rows(x, idx, updates, axis)
    for i, t in enumerate(flat):
        if 0 <= t < rows.shape[0]:
            rows[t] = updates[i]                     # the last write wins
    return np.ascontiguousarray(np.moveaxis(rows, 0, axis))


@_register("mscatter")
def mscatter(gm, idx, rows, *, axis, accumulate):
    return (index_add if accumulate else scatter_update)(gm, idx, rows, axis=axis)


def mscatter_into(gm, idx, rows, *, axis, accumulate):
    """``gm[...] = mscatter(gm, idx, rows, ...)`` without copying ``gm``: the same row updates, in the
    same order, made in place (a paged KV cache takes a few rows per call)."""
    k = idx.ndim
    target = np.moveaxis(gm, axis, 0)                                  # a view: writes reach gm
    updates = np.moveaxis(rows, tuple(range(axis, axis + k)), tuple(range(k))).reshape((-1,) + target.shape[1:])
    add = SEMANTICS["tadd"]
    with np.errstate(all="ignore"):
        for i, t in enumerate(idx.reshape(-1)):
            if 0 <= t < target.shape[0]:
                target[t] = add(target[t], updates[i]) if accumulate else updates[i]


def _pad_value(dtype, largest):
    if dtype in FLOAT:
        return -np.inf if largest else np.inf
    info = np.iinfo(dtype)
    return info.min if largest else info.max


@_register("ttopk", "tsort")
def topk(x, *, k, axis, largest):
    """The first ``k`` of a stable sort (lower index first on ties; NaN above +inf), padded past n."""
    n = x.shape[axis]
    keys = _widen(x)
    if largest:  # stable descending: sort the reversed axis ascending, reverse back, map indices
        order = n - 1 - np.flip(np.argsort(np.flip(keys, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(keys, axis=axis, kind="stable")
    idx = np.take(order, np.arange(min(k, n)), axis=axis).astype(I32)
    values = np.take_along_axis(x, idx, axis=axis)
    if k > n:
        pads = [(0, 0)] * x.ndim
        pads[axis] = (0, k - n)
        values = np.pad(values, pads, constant_values=np.asarray(_pad_value(x.dtype, largest), x.dtype))
        idx = np.pad(idx, pads, constant_values=-1)
    return values, idx


def _merge_key(v, largest):
    """A uint64 per value whose ascending order is the merge's order: best value first (NaN above +inf),
    -0.0 tied with 0.0. Floats (float16 / bfloat16 widened exactly) map through their IEEE bits."""
    if v.dtype in FLOAT:
        f = _f32(v)
        f = (-f if largest else f) + np.float32(0.0)                    # -0.0 -> 0.0
        bits = f.view(np.uint32)
        key = np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(0x80000000))
        key = np.where(np.isnan(f), np.uint32(0 if largest else 0xFFFFFFFF), key)
        return key.astype(np.uint64)
    wide = v.astype(np.int64)
    return (np.int64(2**31 - 1) - wide if largest else wide + np.int64(2**31)).astype(np.uint64)


@_register("tmrgsort")
def merge_topk(values, indices, *, k, largest):
    """The ``k`` best (value, index) pairs of ``[..., lists, length]``: by value (NaN above +inf), ties
    by the lower index, -1 after every real index; padded past the available pairs as ``ttopk``."""
    v, idx = (a.reshape(a.shape[:-2] + (-1,)) for a in (values, indices))
    order = np.argsort(_merge_key(v, largest) << np.uint64(32) | idx.astype(np.uint32).astype(np.uint64),
                       axis=-1)[..., :min(k, v.shape[-1])]
    out_v, out_i = np.take_along_axis(v, order, -1), np.take_along_axis(idx, order, -1).astype(I32)
    if k > v.shape[-1]:
        pads = [(0, 0)] * (v.ndim - 1) + [(0, k - v.shape[-1])]
        out_v = np.pad(out_v, pads, constant_values=np.asarray(_pad_value(v.dtype, largest), v.dtype))
        out_i = np.pad(out_i, pads, constant_values=-1)
    return out_v, out_i


# -------------------------------------------------------------------------------------- composite
# Softmax and the norms as the real instructions selection expands them into (``isel/composite.py``),
# each step with that instruction's semantics: row max, subtract, ``texp``, a row sum left to right,
# divide; a norm's mean as the row sum times ``1 / cols``, ``trsqrt`` of the mean square plus eps, then
# the products and sums with gamma / beta. float32 tiles: the text's bits; float16 / bfloat16: the
# same steps in float32, rounded once (the text rounds each step to the tile's dtype).
def _in_float32(fn):
    """``fn`` as is on float32 operands; float16 / bfloat16 ones widened, the result rounded once."""
    def run(*args, **params):
        dtype = args[0].dtype
        if dtype == F32:
            return fn(*args, **params)
        return np.asarray(fn(*[_f32(a) for a in args], **params)).astype(dtype, copy=False)
    return run


def _row_sum(x, axes=(-1,)):
    """``trowsum``: float32, left to right, rounded to ``x``'s dtype (kept dims)."""
    return sequential_sum(_f32(x), tuple(axes), True, F32).astype(x.dtype)


def _scalar(value, dtype):
    return np.asarray(value, np.float64).astype(dtype)


@_register("tsoftmax")
@_in_float32
def softmax(x, *, axes):
    e = SEMANTICS["texp"](SEMANTICS["tsub"](x, amax(x, axes=axes, keepdims=True)))
    return SEMANTICS["tdiv"](e, _row_sum(e, axes))


def _normalise(x, eps, centre: bool):
    inverse = _scalar(1.0 / x.shape[-1], x.dtype)
    if centre:
        x = SEMANTICS["tsub"](x, SEMANTICS["tmul"](_row_sum(x), inverse))
    var = SEMANTICS["tmul"](_row_sum(SEMANTICS["tmul"](x, x)), inverse)
    return SEMANTICS["tmul"](x, SEMANTICS["trsqrt"](SEMANTICS["tadd"](var, _scalar(eps, x.dtype))))


@_register("trms_norm")
@_in_float32
def rms_norm(x, *gamma, eps):
    y = _normalise(x, eps, centre=False)
    return SEMANTICS["tmul"](y, gamma[0]) if gamma else y


@_register("tlayer_norm")
@_in_float32
def layer_norm(x, *affine, eps, has_gamma, has_beta):
    y = _normalise(x, eps, centre=True)
    affine = list(affine)
    if has_gamma:
        y = SEMANTICS["tmul"](y, affine.pop(0))
    if has_beta:
        y = SEMANTICS["tadd"](y, affine.pop(0))
    return y


QMAX = np.float32(127.0)


@_register("tquant")
def quantize(x, *, axes, scale_dtype):
    x = _f32(x)
    amax = np.max(np.abs(x), axis=tuple(axes), keepdims=True)
    positive = amax > 0
    mult = np.where(positive, QMAX / np.where(positive, amax, np.float32(1)), np.float32(0)).astype(F32)
    r = np.rint(x * mult)
    q = np.clip(np.where(np.isnan(r), np.float32(0), r), -QMAX - 1, QMAX).astype(I8)
    return q, np.asarray(amax / QMAX, F32).astype(scale_dtype)


@_register("tdequant")
def dequantize(q, scale, *, dtype):
    return np.asarray(_f32(q) * _f32(scale), F32).astype(dtype)


# ---------------------------------------------------------------------------------------- execute
def execute(name: str, *args: np.ndarray, **params):
    """Run instruction ``name`` (``"tadd"`` or ``"pto.tadd"``) on NumPy tiles with the op's params."""
    key = name[4:] if name.startswith("pto.") else name
    fn = SEMANTICS.get(key)
    if fn is None:
        raise PtoUnsupportedError(f"pto.{key}: no NumPy semantics for this instruction "
                                  "(tload/tstore/tmov are moves the interpreter performs itself)")
    args = [np.asarray(a) for a in args]
    with np.errstate(all="ignore"):
        out = fn(*args, **params)
    if isinstance(out, tuple):
        return tuple(np.asarray(o) for o in out)
    return np.asarray(out)
