"""What each real PTO tile instruction computes, as ``jax.numpy`` functions on valid regions.

The reference is pto-isa's CPU simulator (``include/pto/cpu/*.hpp`` built with ``-D__CPU_SIM``, g++ on
x86-64, as :mod:`ptojax.ascend.cpusim` builds it): each function mirrors the simulator's loop —
dtype of every intermediate, accumulation order, comparison used, tie rule — and says so where that
is not the obvious NumPy reading.

Contract of ``SEMANTICS[mnemonic](*operands, **attrs)``:

* Tile operands are the tiles' VALID regions as 2-D arrays (NumPy or jax) in the tiles' own dtypes;
  scalar operands are 0-d arrays (cast to the tile dtype, as the simulator's ``DType scalar`` does).
  ``tmp`` scratch operands are accepted and ignored.
* The result is the destination's valid region (a tuple for ``tmrgsort``'s multi-list form). Where
  the destination's dtype or shape cannot be inferred, pass ``out=jax.ShapeDtypeStruct(shape, dtype)``
  (``tcvt``, ``trowexpand``/``tcolexpand``/``texpands``/``tci``, reductions into a wider dtype).
  Every function accepts ``out=None``.
* Pure jnp: works eagerly and under ``jax.jit`` / ``jax.vmap``; attributes (``cmpMode``, ``rmode``,
  ``blockLen``, ...) must be concrete Python values.

Numerics worth knowing (details in each docstring):

* Elementwise float ops compute in the tile dtype with one round-to-nearest (the simulator's
  ``_Float16`` arithmetic rounds each result). ``texp/tlog/tsqrt/trsqrt`` are computed by the
  simulator in double and rounded once; here too, in float64 under a local x64 scope whatever
  ``jax_enable_x64`` says (the eager engine runs their :data:`ON_NUMPY` forms, NumPy in double).
* Subnormals are IEEE's (the simulator is g++ without fast-math); XLA:CPU flushes them to zero, so
  these functions under XLA do too; the eager engine keeps them (:data:`ON_NUMPY` and NumPy-evaluated
  jaxprs).
  Under ``jax.jit`` of a whole program, run XLA with ``--xla_allow_excess_precision=false`` so it
  does not skip the f16/bf16 rounding between instructions.
* ``tmax/tmin`` are ``std::max/std::min``: ``a < b ? b : a`` — NaN only propagates from ``src0``
  and ``max(+0, -0)`` is ``+0`` (the first operand). ``tabs(-0.0) = -0.0`` (``x < 0 ? -x : x``).
* Sums/products are sequential left-to-right folds (``trowsum`` in float32 for f16/bf16, the column
  reductions and products in the destination dtype); max/min/argmax/argmin keep the FIRST of equal
  values; NaN is only "seen" when it is the first element.
* ``tmatmul`` starts every dot product from ``+0.0`` and folds ``acc = fma(a_k, b_k, acc)`` for
  k = 0..K-1 in float32, so an all-(-0.0) product sum is ``+0.0``. The fma is the backend's own
  where XLA fuses ``x*y + z`` (checked once per process), else emulated exactly in float64.
* Masks (``tcmp``/``tcmps`` → ``tsel``) are packed LSB-first, 8 elements per byte; see
  :func:`mask_shape`.
"""
from __future__ import annotations

import functools
import operator
from typing import Callable

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from ..errors import PtoExecutionError
from ..primitives.cast import int_to_bfloat16

F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
I8, I16, I32, U8, U32 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.uint8, np.uint32))

SEMANTICS: dict[str, Callable] = {}


def _register(*names):
    def wrap(fn):
        for name in names:
            SEMANTICS[name] = fn
        return fn
    return wrap


# ----------------------------------------------------------------------------------- helpers

def _a(x):
    return jnp.asarray(x)


def _dt(x) -> np.dtype:
    return np.dtype(x.dtype)


def _is_float(dt) -> bool:
    return jnp.issubdtype(np.dtype(dt), jnp.floating)


def _out_dtype(out, default) -> np.dtype:
    return np.dtype(out.dtype) if out is not None else np.dtype(default)


def _static_int(v, what: str) -> int:
    """A concrete Python int from an int / 0-d array attribute (it fixes shapes, so it must be static)."""
    try:
        return operator.index(v) if isinstance(v, (int, np.integer)) else int(np.asarray(v))
    except (TypeError, jax.errors.ConcretizationTypeError) as e:  # a tracer
        raise TypeError(f"{what} must be a concrete value, not a traced one") from e


def _std_max(a, b):
    """``std::max(a, b)`` = ``a < b ? b : a``."""
    return jnp.where(a < b, b, a)


def _std_min(a, b):
    """``std::min(a, b)`` = ``b < a ? b : a``."""
    return jnp.where(b < a, b, a)


def _div(a, b):
    """C ``/``: IEEE division for floats, truncating division for integers.

    XLA rewrites ``x / broadcast(s)`` as ``x * (1 / s)``, which is off by an ulp for about half of all
    ``x``: a divisor broadcast to a whole dividend ``x`` is taken as ``isnan(x) ? x : s`` (a NaN
    dividend gives NaN either way), which XLA cannot rewrite and still fuses into one loop; any other
    divisor goes through an optimization barrier (``1 / s`` would become a reciprocal, ``1 / sqrt`` an
    rsqrt).
    """
    if not _is_float(a.dtype):
        return lax.div(a, b)
    shape = jnp.broadcast_shapes(a.shape, b.shape)
    if a.shape == shape != b.shape:
        return a / jnp.where(jnp.isnan(a), a, jnp.broadcast_to(b, shape))
    return jnp.broadcast_to(a, shape) / lax.optimization_barrier(jnp.broadcast_to(b, shape))


def _c_shift(shift):
    """C's ``a << b`` / ``a >> b`` as pto-isa's simulator computes them: both promoted to ``int`` (an
    unsigned 32-bit ``a`` stays unsigned, so ``>>`` is logical for it alone), the count taken modulo 32
    (x86's; C leaves a count outside ``[0, 32)`` undefined), the result truncated to ``a``'s type.
    Selection never emits such a count (:func:`ptojax.ops.shift_left` checks one from data)."""
    def apply(a, b):
        wide = jnp.uint32 if a.dtype == jnp.uint32 else jnp.int32
        return shift(a.astype(wide), (jnp.asarray(b).astype(jnp.int32) & 31).astype(wide)).astype(a.dtype)
    return apply


# The binary element functions shared by the tile-tile, tile-scalar and row/col-expand families.
_BINARY: dict[str, Callable] = {
    "add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "div": _div,
    "max": _std_max, "min": _std_min,
    "fmod": lax.rem,                     # C fmod / integer %: sign of the dividend (exact)
    "and": jnp.bitwise_and, "or": jnp.bitwise_or, "xor": jnp.bitwise_xor,
    "shl": _c_shift(jnp.left_shift), "shr": _c_shift(jnp.right_shift),
}


def _binary_op(name: str, fn: Callable):
    def op(src0, src1, *tmp, out=None):
        a, b = _a(src0), _a(src1)
        return fn(a, b.astype(a.dtype))
    op.__name__ = f"t{name}"
    op.__doc__ = f"``t{name}(src0, src1[, tmp])``: elementwise ``{name}`` of two equal-shape tiles."
    return op


def _scalar_op(name: str, fn: Callable):
    def op(src, scalar, *tmp, out=None):
        a = _a(src)
        s = _a(scalar).astype(a.dtype)
        if name in ("add", "sub") and _is_float(a.dtype):
            s = lax.optimization_barrier(s)     # XLA folds x + 0.0 to x: -0.0 + 0.0 is +0.0
        return fn(a, s)
    op.__name__ = f"t{name}s"
    op.__doc__ = (f"``t{name}s(src, scalar)``: ``{name}(src, scalar)``; the scalar is first converted "
                  "to the tile dtype (the simulator's ``DType scalar`` parameter).")
    return op


def _cycle_cols(x, cols: int):
    """``x[:, c % x.shape[1]]`` for ``c < cols``, as a broadcast or a tiling (no gather)."""
    rows, width = x.shape
    if width == cols:
        return x
    if width == 1:
        return jnp.broadcast_to(x, (rows, cols))
    return jnp.tile(x, (1, -(-cols // width)))[:, :cols]


def _row_expand_op(name: str, fn: Callable):
    def op(src0, src1, *tmp, out=None):
        a, b = _a(src0), _a(src1)
        cols = max(a.shape[1], b.shape[1])
        # TRowExpandOp reads src[r, c % validCol] for both operands: the R x 1 one is broadcast
        # (a row-major R x (32/sizeof) one repeats its first 32 bytes), either operand may be it.
        return fn(_cycle_cols(a, cols), _cycle_cols(b, cols).astype(a.dtype))
    op.__name__ = f"trowexpand{name}"
    op.__doc__ = (f"``trowexpand{name}(src0, src1[, tmp])``: ``{name}(src0[r, c], src1[r, 0])`` with "
                  "src1 R x 1 (either operand may be the narrow one, as in the simulator).")
    return op


def _col_expand_op(name: str, fn: Callable):
    def op(src0, src1, *tmp, out=None):
        a, b = _a(src0), _a(src1)
        return fn(a, jnp.broadcast_to(b[:1, :], a.shape).astype(a.dtype))
    op.__name__ = f"tcolexpand{name}"
    op.__doc__ = f"``tcolexpand{name}(src0, src1)``: ``{name}(src0[r, c], src1[0, c])`` with src1 1 x C."
    return op


for _n in ("add", "sub", "mul", "div", "max", "min", "fmod", "and", "or", "xor", "shl", "shr"):
    _register(f"t{_n}")(_binary_op(_n, _BINARY[_n]))
for _n in ("add", "sub", "mul", "max", "min", "fmod", "and", "or", "xor", "shl", "shr"):
    _register(f"t{_n}s")(_scalar_op(_n, _BINARY[_n]))
for _n in ("add", "sub", "mul", "div", "max", "min"):
    _register(f"trowexpand{_n}")(_row_expand_op(_n, _BINARY[_n]))
    _register(f"tcolexpand{_n}")(_col_expand_op(_n, _BINARY[_n]))


@_register("tdivs")
def tdivs(x, y, *tmp, out=None):
    """``tdivs(tile, scalar)`` = tile / scalar; ``tdivs(scalar, tile)`` = scalar / tile.

    The order of the operands decides, as in PTOAS (whose parser accepts both ``ins(%t, %s)`` and
    ``ins(%s, %t)``) and the simulator's two ``TDIVS_IMPL`` overloads (``OP_DIVS`` / ``OP_RDIVS``).
    The 0-d operand is the scalar.
    """
    x, y = _a(x), _a(y)
    if x.ndim == 0:
        return _div(x.astype(y.dtype), y)
    return _div(x, y.astype(x.dtype))


@_register("tlrelu")
def tlrelu(src, slope, *tmp, out=None):
    """``x > 0 ? x : x * slope``; the f32 slope is first converted to the tile dtype."""
    x = _a(src)
    return jnp.where(x > 0, x, x * _a(slope).astype(x.dtype))


# ------------------------------------------------------------------------------------ unary

def _via_wide(fn, x):
    """``fn`` in float64 (a local x64 scope: whatever ``jax_enable_x64`` says), rounded to float32 and
    then to ``x``'s dtype: the simulator's double math (for f16 tiles its float function, which a
    correctly rounded float32 result stands for)."""
    with jax.enable_x64(True):
        return fn(x.astype(jnp.float64)).astype(F32).astype(x.dtype)


@_register("texp")
def texp(src, *tmp, out=None):
    """``exp``: the simulator uses ``expf`` (float) for f16 tiles and ``std::exp`` (double) otherwise."""
    return _via_wide(jnp.exp, _a(src))


@_register("tlog")
def tlog(src, *tmp, out=None):
    """``std::log`` in double, rounded to the tile dtype."""
    return _via_wide(jnp.log, _a(src))


@_register("tsqrt")
def tsqrt(src, *tmp, out=None):
    """``std::sqrt`` in double, rounded (identical to a correctly rounded sqrt in the tile dtype)."""
    return _via_wide(jnp.sqrt, _a(src))


@_register("trsqrt")
def trsqrt(src, *tmp, out=None):
    """``1.0 / std::sqrt(x)`` in double, rounded once."""
    return _via_wide(lambda v: _div(jnp.ones_like(v), jnp.sqrt(v)), _a(src))   # no fused rsqrt


@_register("trecip")
def trecip(src, *tmp, out=None):
    """``1 / x`` in the tile dtype (integer division for integer tiles)."""
    x = _a(src)
    return _div(jnp.ones_like(x), x)


@_register("tabs")
def tabs(src, *tmp, out=None):
    """``x < 0 ? -x : x``: ``-0.0`` and NaN pass through unchanged, integer minimum wraps."""
    x = _a(src)
    return jnp.where(x < 0, -x, x)


@_register("tneg")
def tneg(src, *tmp, out=None):
    """``-x`` (integers wrap)."""
    return -_a(src)


@_register("tnot")
def tnot(src, *tmp, out=None):
    """``~x``."""
    return jnp.bitwise_not(_a(src))


@_register("trelu")
def trelu(src, *tmp, out=None):
    """``std::max(x, 0)`` = ``x < 0 ? 0 : x``: ``-0.0`` and NaN pass through."""
    x = _a(src)
    return jnp.where(x < 0, jnp.zeros_like(x), x)


# ------------------------------------------------------------------------------- broadcasts

@_register("trowexpand")
def trowexpand(src, *tmp, out):
    """``dst[r, c] = src[r, 0]`` for the ``out`` shape (R x C), converted to ``out.dtype``."""
    x = _a(src)
    return jnp.broadcast_to(x[:, :1], tuple(out.shape)).astype(out.dtype)


@_register("tcolexpand")
def tcolexpand(src, *tmp, out):
    """``dst[r, c] = src[0, c]`` for the ``out`` shape (R x C)."""
    x = _a(src)
    return jnp.broadcast_to(x[:1, :], tuple(out.shape)).astype(out.dtype)


@_register("texpands")
def texpands(scalar, *tmp, out):
    """Every element of the ``out`` tile set to the scalar (converted to ``out.dtype``)."""
    return jnp.full(tuple(out.shape), _a(scalar).astype(out.dtype))


@_register("tconcat")
def tconcat(src0, src1, *tmp, out=None):
    """Column concatenation ``[src0 | src1]`` (equal valid rows)."""
    return jnp.concatenate([_a(src0), _a(src1)], axis=1)


@_register("ttrans")
def ttrans(src, *tmp, out=None):
    """Transpose of the valid region."""
    return _a(src).T


@_register("tci")
def tci(start, *tmp, descending=False, out):
    """``dst[0, j] = start + j`` (``start - j`` if descending) for j < ``out.shape[1]``; one row.

    Integer tiles compute in int and wrap on store; float tiles add ``j`` converted to the tile dtype.
    """
    rows, cols = tuple(out.shape)
    if rows != 1:
        raise ValueError(f"tci writes a 1-row tile, got out shape {tuple(out.shape)}")
    dt = np.dtype(out.dtype)
    j = jnp.arange(cols, dtype=jnp.int32)
    s = _a(start).astype(dt)
    if _is_float(dt):
        seq = s - j.astype(dt) if descending else s + j.astype(dt)
    else:
        s32 = s.astype(jnp.int32) if dt.itemsize < 4 else s.astype(dt)
        seq = (s32 - j.astype(s32.dtype) if descending else s32 + j.astype(s32.dtype)).astype(dt)
    return seq[None, :]


# ------------------------------------------------------------------------------- reductions

FOLD_BLOCKS = (64, 8)    # terms of a fold per loop trip: longer chains compile longer, more trips run longer
FOLD_UNROLLED = 64       # folds of at most this many terms are one chain (a loop trip costs microseconds)


def _chain(n: int, acc, block, step, blocks=FOLD_BLOCKS, unrolled=FOLD_UNROLLED):
    """``acc = step(acc, term_j)`` for ``j = 0 .. n-1`` in order; ``block(start, size)`` gives the
    terms ``start .. start+size-1`` as a list (``start`` an int, or a loop counter).

    Longer than ``unrolled`` terms, the chain is written out in blocks of ``blocks`` terms, one
    ``fori_loop`` trip each, and the last few terms as they are: XLA fuses a block into one loop over
    the accumulator's elements, in the chain's order, where a trip per term costs a loop iteration
    each and one chain of all the terms a long compile. A trip slices its block once (a cached
    slice of the operand, where a slice per term strides through all of it). XLA may rewrite a first
    step ``0 + x`` as ``x`` (-0.0 for +0.0)."""
    def run(acc, start, size):
        for term in block(start, size) if size else ():
            acc = step(acc, term)
        return acc

    done = 0
    for size in blocks if n > unrolled else ():
        trips = (n - done) // size
        if trips > 1:
            acc = lax.fori_loop(0, trips, lambda k, a, at=done, size=size: run(a, at + k * size, size), acc)
            done += trips * size
    return run(acc, done, n - done)


def _slice(x, start, size: int, axis: int):
    """``size`` elements from ``start`` along ``axis``: a static slice where ``start`` is an int
    (cheaper to trace and to compile), else a dynamic one (a loop counter)."""
    if isinstance(start, int):
        return lax.slice_in_dim(x, start, start + size, axis=axis)
    return lax.dynamic_slice_in_dim(x, start, size, axis)


def _fold(x, identity, acc_dtype, step, axis):
    """``acc = identity; acc = step(acc, x_j)`` for every ``j`` along ``axis`` in order, in ``acc_dtype``.

    Each block's folded axis is moved first: a step then adds one contiguous row to the accumulators
    (a vector operation), where along a later axis every accumulator would read its own strided element."""
    acc = jnp.full_like(x, identity, dtype=acc_dtype, shape=x.shape[:axis] + x.shape[axis + 1:])  # varies as x
    x = x.astype(acc_dtype)

    def block(start, size):
        terms = jnp.moveaxis(_slice(x, start, size, axis), axis, 0)
        return [terms[j] for j in range(size)]

    return _chain(x.shape[axis], acc, block, lambda a, v: step(a, v).astype(acc_dtype))


def _no_minus_zero(total):
    """A sum from +0 is never -0 (x + y is -0 only for -0 + -0): where XLA rewrote the chain's first
    step ``0 + x_0`` as ``x_0``, the chain differs only in the sign of an all -0 sum."""
    return jnp.where(total == 0, jnp.zeros_like(total), total)


@functools.partial(jax.jit, static_argnums=(1, 2, 3))     # eagerly: compiled once per shape
def _sum(x, axis, out_dt, acc_dt):
    if not _is_float(acc_dt):               # modular integer sum: order does not matter
        return jnp.sum(x.astype(acc_dt), axis=axis, dtype=acc_dt).astype(out_dt)
    return _no_minus_zero(_fold(x, 0, acc_dt, jnp.add, axis)).astype(out_dt)      # from +0 as the simulator


@functools.partial(jax.jit, static_argnums=(1, 2))
def _prod(x, axis, out_dt):
    if not _is_float(out_dt):
        return jnp.prod(x.astype(out_dt), axis=axis, dtype=out_dt)
    return _fold(x, 1, out_dt, jnp.multiply, axis)        # 1 * x_0 == x_0


def _skip_nan_extreme(x, axis, largest: bool):
    """The largest (smallest) non-NaN value along ``axis`` (-inf / +inf where every one is NaN), kept as
    a dim: one reduction by ``select(v > best, v, best)``, which skips NaN. (``max`` of ``x`` with its
    NaNs replaced runs several times slower on XLA:CPU where a later reduction reads the result.)"""
    worst = jnp.asarray(-jnp.inf if largest else jnp.inf, x.dtype)
    better = (lambda p, q: lax.select(q > p, q, p)) if largest else (lambda p, q: lax.select(q < p, q, p))
    return jnp.expand_dims(lax.reduce(x, worst, better, (axis,)), axis)


def _hits(x, axis, largest: bool):
    """(extreme, hits, whether element 0 is NaN) of the simulator's scan ``if (x > best) best = x``
    (``<`` for min): NaN is skipped but at index 0 (nothing compares greater than it), +0 and -0 tie."""
    extreme = jnp.max if largest else jnp.min
    if not _is_float(x.dtype):
        m = extreme(x, axis=axis, keepdims=True)
        return m, x == m, jnp.zeros_like(m, dtype=jnp.bool_)
    nan = jnp.isnan(x)
    m = _skip_nan_extreme(x, axis, largest)
    return m, ~nan & (x == m), lax.slice_in_dim(nan, 0, 1, axis=axis)


def _first(hit, axis, key=None):
    """The smallest ``key`` (default: the index) of the hits along ``axis``."""
    key = lax.broadcasted_iota(jnp.int32, hit.shape, axis) if key is None else key
    return jnp.min(jnp.where(hit, key, jnp.iinfo(jnp.int32).max), axis=axis, keepdims=True)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _best(x, axis, largest: bool):
    """The index the scan of :func:`_hits` ends at: the first hit (0 where element 0 is NaN)."""
    _, hit, nan0 = _hits(x, axis, largest)
    return jnp.where(nan0, 0, _first(hit, axis))


@functools.partial(jax.jit, static_argnums=(1, 2))
def _best_value(x, axis, largest: bool):
    """The value the scan of :func:`_hits` ends at: every hit equals the extreme but for a zero's
    sign, the first zero's (the parity of the smallest ``2 * index + signbit``); element 0 if NaN."""
    if not _is_float(x.dtype):
        return _hits(x, axis, largest)[0]
    m = _skip_nan_extreme(x, axis, largest)
    key = lax.broadcasted_iota(jnp.int32, x.shape, axis) * 2 + jnp.signbit(x).astype(jnp.int32)
    first_zero = jnp.min(jnp.where(x == 0, key, jnp.iinfo(jnp.int32).max), axis=axis, keepdims=True)
    zero = jnp.where(first_zero % 2 == 1, jnp.asarray(-0.0, x.dtype), jnp.zeros_like(m))
    nan0 = jnp.isnan(lax.slice_in_dim(x, 0, 1, axis=axis))
    return jnp.where(nan0, lax.slice_in_dim(x, 0, 1, axis=axis), jnp.where(m == 0, zero, m))


def _sum_acc(out_dt):
    """``TypeSum<Dst>`` of TRowSum: float for f16/bf16 destinations, else the destination dtype."""
    return F32 if out_dt in (F16, BF16) else out_dt


@_register("trowsum")
def trowsum(src, *tmp, out=None):
    """R x 1 row sums: a left-to-right fold from 0 in float32 (f16/bf16 dst) or the dst dtype."""
    x = _a(src)
    dt = _out_dtype(out, x.dtype)
    return _sum(x, 1, dt, _sum_acc(dt))[:, None]


@_register("tcolsum")
def tcolsum(src, *tmp, isBinary=False, out=None):
    """1 x C column sums: a top-to-bottom fold from 0 in the DESTINATION dtype (f16 dst: f16 adds)."""
    x = _a(src)
    dt = _out_dtype(out, x.dtype)
    return _sum(x, 0, dt, dt)[None, :]


def _np_sum(x, axis: int, out_dt, acc_dt):
    """:func:`_sum` on NumPy, ``x`` with any leading (grid point) axes: the same in-order fold from +0
    (``np.add.accumulate`` adds left to right), IEEE subnormals kept where XLA:CPU flushes them."""
    x = np.asarray(x)
    if not _is_float(acc_dt) or x.shape[axis] == 0:
        return np.sum(x.astype(acc_dt), axis=axis, keepdims=True, dtype=acc_dt).astype(out_dt)
    with np.errstate(all="ignore"):
        total = np.take(np.add.accumulate(x.astype(acc_dt), axis=axis), [-1], axis=axis)
    return np.where(total == 0, np.zeros((), acc_dt), total).astype(out_dt)


def _np_rowsum(src, *tmp, out=None):
    dt = _out_dtype(out, np.asarray(src).dtype)
    return _np_sum(src, -1, dt, _sum_acc(dt))


def _np_colsum(src, *tmp, isBinary=False, out=None):
    dt = _out_dtype(out, np.asarray(src).dtype)
    return _np_sum(src, -2, dt, dt)


# instruction -> its semantics on NumPy operands with leading grid point axes, which the eager engine
# runs: the jnp functions' in-order folds bit for bit on normal values, subnormals kept where XLA:CPU
# flushes them (and a loop XLA runs far faster than NumPy runs its jaxpr); the matmuls where NumPy
# computes them exactly (:func:`_np_exact`), the rest go to XLA (the engine asks :data:`ON_NUMPY_IF`)
ON_NUMPY: dict[str, Callable] = {"trowsum": _np_rowsum, "tcolsum": _np_colsum}
ON_NUMPY_IF: dict[str, Callable] = {}


def _np_expand(rows: bool):
    """``trowexpand`` / ``tcolexpand`` of one dtype: the bits moved (XLA:CPU flushes bf16 subnormals)."""
    def expand(src, *tmp, out=None):
        x = np.asarray(src)
        edge = x[..., :, :1] if rows else x[..., :1, :]
        return np.array(np.broadcast_to(edge, x.shape[:-2] + tuple(out.shape)))
    return expand


for _name, _rows in (("trowexpand", True), ("tcolexpand", False)):
    ON_NUMPY[_name] = _np_expand(_rows)
    ON_NUMPY_IF[_name] = lambda src, *tmp, out=None: out is not None and np.asarray(src).dtype == np.dtype(out.dtype)


def _np_via_wide(fn):
    """:func:`_via_wide` on NumPy: the same roundings, IEEE subnormals kept where XLA:CPU flushes them."""
    def run(src, *tmp, out=None):
        x = np.asarray(src)
        with np.errstate(all="ignore"):
            return fn(x.astype(np.float64)).astype(F32).astype(x.dtype)
    return run


ON_NUMPY.update({"texp": _np_via_wide(np.exp), "tlog": _np_via_wide(np.log), "tsqrt": _np_via_wide(np.sqrt),
                 "trsqrt": _np_via_wide(lambda v: 1.0 / np.sqrt(v))})
ON_NUMPY_IF.update({op: (lambda src, *tmp, out=None: np.asarray(src).dtype.kind == "f")
                    for op in ("texp", "tlog", "tsqrt", "trsqrt")})


@_register("trowprod")
def trowprod(src, *tmp, out=None):
    """R x 1 row products: a left-to-right fold from 1 in the destination dtype."""
    x = _a(src)
    return _prod(x, 1, _out_dtype(out, x.dtype))[:, None]


@_register("tcolprod")
def tcolprod(src, *tmp, out=None):
    """1 x C column products: a top-to-bottom fold from 1 in the destination dtype."""
    x = _a(src)
    return _prod(x, 0, _out_dtype(out, x.dtype))[None, :]


def _reduce_best(axis: int, largest: bool, want_index: bool):
    def op(src, *tmp, out=None):
        x = _a(src)
        if want_index:
            return _best(x, axis, largest).astype(_out_dtype(out, I32))
        return _best_value(x, axis, largest).astype(_out_dtype(out, x.dtype))
    kind = ("arg" if want_index else "") + ("max" if largest else "min")
    op.__name__ = f"t{'row' if axis == 1 else 'col'}{kind}"
    op.__doc__ = (f"{'R x 1' if axis == 1 else '1 x C'} {kind}: a sequential scan keeping the first of "
                  "equal values; a NaN counts only at index 0." + (" int32 indices." if want_index else ""))
    return op


def _np_reduce_best(axis: int, largest: bool, want_index: bool):
    """:func:`_reduce_best` on NumPy (operands with leading grid point axes; ``axis`` -1 or -2): the
    scan ends at the first hit of the extreme (0 where element 0 is NaN) and keeps its value, IEEE
    subnormals compared as they are where XLA:CPU takes them for zeros."""
    def op(src, *tmp, out=None):
        x = np.asarray(src)
        nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
        clean = np.where(nan, -np.inf if largest else np.inf, x) if x.dtype.kind == "f" else x
        extreme = (np.max if largest else np.min)(clean, axis=axis, keepdims=True)
        first = np.argmax(~nan & (clean == extreme), axis=axis, keepdims=True)
        at = np.where(np.take(nan, [0], axis=axis), 0, first)
        if want_index:
            return at.astype(_out_dtype(out, I32))
        return np.take_along_axis(x, at, axis=axis).astype(_out_dtype(out, x.dtype))
    return op


def _np_prod(axis: int):
    """:func:`trowprod` / :func:`tcolprod` on NumPy: the same in-order fold (``np.multiply.accumulate``
    multiplies in order; an integer product wraps in any order), subnormals kept."""
    def op(src, *tmp, out=None):
        x = np.asarray(src)
        dt = _out_dtype(out, x.dtype)
        with np.errstate(all="ignore"):
            if not _is_float(dt):
                return np.prod(x.astype(dt), axis=axis, keepdims=True, dtype=dt)
            return np.take(np.multiply.accumulate(x.astype(dt), axis=axis), [-1], axis=axis)
    return op


for _axis, _name in ((1, "row"), (0, "col")):
    for _largest, _k in ((True, "max"), (False, "min")):
        _register(f"t{_name}{_k}")(_reduce_best(_axis, _largest, False))
        _register(f"t{_name}arg{_k}")(_reduce_best(_axis, _largest, True))
        ON_NUMPY[f"t{_name}{_k}"] = _np_reduce_best(_axis - 2, _largest, False)
        ON_NUMPY[f"t{_name}arg{_k}"] = _np_reduce_best(_axis - 2, _largest, True)
    ON_NUMPY[f"t{_name}prod"] = _np_prod(_axis - 2)     # not in f16 / bf16: NumPy's half NaN is not x86's
    ON_NUMPY_IF[f"t{_name}prod"] = lambda src, *tmp, out=None: _out_dtype(out, np.asarray(src).dtype) in (F32, I32, I8)


# ---------------------------------------------------------------------------- compare/select

_CMP = {"eq": jnp.equal, "ne": jnp.not_equal, "lt": jnp.less, "gt": jnp.greater,
        "le": jnp.less_equal, "ge": jnp.greater_equal}


def _cmp_mode(mode) -> str:
    m = str(mode).lower().replace("cmpmode.", "").strip()
    if m not in _CMP:
        raise ValueError(f"unknown cmpMode {mode!r}")
    return m


def mask_shape(rows: int, cols: int) -> tuple[int, int]:
    """Valid shape of the i8 mask tile ``tcmp``/``tcmps`` write for an R x C compare (A2/A3).

    One bit per element, LSB first, 8 elements per byte, one mask row per source row:
    ``(rows, ceil(cols / 8))`` — e.g. 16 x 16 f32 → a ``16 x 2`` valid region (pto-isa's TCMP/TSEL
    examples use a ``Tile<Vec, uint8_t, 16, 32>`` with valid ``(16, 2)``; static columns are padded
    to 32 bytes). ``tsel`` reads the bits back as one stream over the mask's valid region, so the
    round trip is exact when ``cols % 8 == 0`` (see :func:`tsel`).
    """
    return rows, -(-cols // 8)


def _pack_bits(bits):
    """(R, C) bool → (R, ceil(C/8)) uint8, element ``8*j + b`` in bit ``b`` of byte ``j``."""
    r, c = bits.shape
    nb = -(-c // 8)
    b = jnp.pad(bits.astype(jnp.uint8), ((0, 0), (0, nb * 8 - c))).reshape(r, nb, 8)
    return jnp.sum(b << jnp.arange(8, dtype=jnp.uint8), axis=2, dtype=jnp.uint8)


def _fit(a, shape):
    """``a`` cut or zero-padded to ``shape``."""
    a = a[: shape[0], : shape[1]]
    return jnp.pad(a, ((0, shape[0] - a.shape[0]), (0, shape[1] - a.shape[1])))


def _as_mask(bytes_u8, out):
    dt = _out_dtype(out, I8)
    return bytes_u8 if dt == U8 else lax.bitcast_convert_type(bytes_u8, dt)


@_register("tcmp")
def tcmp(src0, src1, *tmp, cmpMode="eq", out=None):
    """Packed compare mask of two tiles (exact IEEE comparisons; NaN compares unequal).

    Mask row r = source row r; byte j bit b = ``src0[r, 8j+b] cmpMode src1[r, 8j+b]``; bits past
    the last column are 0; bytes past ``min(ceil(C/8), out cols)`` are 0. Default ``out`` shape:
    :func:`mask_shape`. (pto-isa notes that A2/A3 hardware compares i32 tiles with EQ whatever the
    mode; the simulator — and this function — honours the mode.)
    """
    a, b = _a(src0), _a(src1)
    bits = _CMP[_cmp_mode(cmpMode)](a, b.astype(a.dtype))
    shape = tuple(out.shape) if out is not None else mask_shape(*a.shape)
    return _as_mask(_fit(_pack_bits(bits), shape), out)


def _cmps_bits(x, s, mode):
    """TCMPS's ``CmpCall``: EQ/NE through a double difference ``|x - s| < 1e-9``; others exact."""
    if mode not in ("eq", "ne") or not _is_float(x.dtype):
        return _CMP[mode](x, s)
    # |double(x) - double(s)| < 1e-9. inf - inf is NaN, so equal infinities are NOT EQ (and not NE).
    # f16/bf16 differences are either 0 or >= 2**-133 (bf16) / 2**-24 (f16): only bf16/f32 subnormal-
    # scale values hit the tolerance; a float32 difference decides it (exact near the threshold
    # except where f32 rounding of x - s crosses 1e-9).
    d = jnp.abs(x.astype(F32) - s.astype(F32))
    thr = np.nextafter(np.float32(1e-9), np.float32(0)) if np.float32(1e-9) >= 1e-9 else np.float32(1e-9)
    close = d <= thr
    if mode == "eq":
        return close
    return jnp.isnan(x) | jnp.isnan(s) | (d > thr)


@_register("tcmps")
def tcmps(src, scalar, *tmp, cmpMode="eq", src_cols=None, out=None):
    """Packed mask of ``src cmpMode scalar``.

    The simulator packs ``W // 8`` bytes per source row (W = the source tile's STATIC column count,
    given here as ``src_cols``, default ``8 * ceil(C / 8)``; columns past C are 0) into one byte
    stream and lays it out row-major over the mask's valid columns. With the default ``out`` shape
    (:func:`mask_shape`) this is the same layout as :func:`tcmp`.

    EQ is ``|double(x) - double(s)| < 1e-9`` (so ``inf == inf`` is false and tiny different f32
    values compare equal); NE is ``isnan(x) || isnan(s) || |x - s| > 1e-9`` (``inf != inf`` false).
    A ``scalar`` given as a tile uses its element ``[0, 0]`` (TCMPS's tile form).
    """
    x, s = _a(src), _a(scalar)
    s = (s.reshape(-1)[0] if s.ndim else s).astype(x.dtype)
    r, c = x.shape
    w = src_cols if src_cols is not None else 8 * (-(-c // 8))
    bits = _cmps_bits(x, s, _cmp_mode(cmpMode))
    bits = jnp.pad(bits, ((0, 0), (0, max(w - c, 0))))[:, : (w // 8) * 8]
    stream = _pack_bits(bits).reshape(-1)
    shape = tuple(out.shape) if out is not None else mask_shape(r, c)
    n = shape[0] * shape[1]
    stream = jnp.pad(stream[:n], (0, max(n - stream.shape[0], 0)))
    return _as_mask(stream.reshape(shape), out)


@_register("tsel")
def tsel(mask, src0, src1, *tmp, out=None):
    """``bit ? src0 : src1`` where the bits are read as ONE stream over the mask's valid region.

    The simulator (TSel_Impl) walks the R x C elements row-major with a running bit index: element
    k = r*C + c uses bit ``k % 8`` of byte ``k // 8`` of the mask's valid region (row-major, mask
    valid columns wide). For ``C % 8 == 0`` and a :func:`mask_shape` mask this is exactly the per-row
    layout :func:`tcmp` writes (and what A2/A3 hardware reads: one mask row per data row); for other
    C the simulator's rows drift. Missing bytes read as 0.
    """
    a, b = _a(src0), _a(src1)
    m = _a(mask)
    m = m if _dt(m) == U8 else lax.bitcast_convert_type(m, jnp.uint8)
    r, c = a.shape
    stream = m.reshape(-1)
    need = -(-r * c // 8)
    stream = jnp.pad(stream[:need], (0, max(need - stream.shape[0], 0)))
    bits = ((stream[:, None] >> jnp.arange(8, dtype=jnp.uint8)) & 1).reshape(-1)[: r * c].reshape(r, c)
    return jnp.where(bits == 1, a, b.astype(a.dtype))


# ------------------------------------------------------------------------------------- tcvt

_RMODES = ("none", "rint", "round", "floor", "ceil", "trunc", "odd")


def _rmode(mode) -> str:
    m = str(mode).lower().replace("roundmode.", "")
    m = m[5:] if m.startswith("cast_") else m
    if m not in _RMODES:
        raise ValueError(f"unknown rmode {mode!r}")
    return m


def _sat_on(sat) -> bool:
    if isinstance(sat, str):
        s = sat.upper().replace("SATURATIONMODE.", "")
        if s not in ("ON", "OFF"):
            raise ValueError(f"unknown sat_mode {sat!r}")
        return s == "ON"
    return bool(sat)


def _limits(dt: np.dtype) -> tuple[float, float]:
    """``SafeLimits<T>``: f16 ±65504, bf16/f32 ±max finite, integers their range."""
    if _is_float(dt):
        m = float(ml_dtypes.finfo(dt).max)
        return -m, m
    info = np.iinfo(dt)
    return float(info.min), float(info.max)


def _round_integral(v, mode: str, xp=jnp):
    """``applyRoundingToIntegral`` on float32 values (exact: every step is representable)."""
    if mode == "rint":
        return xp.round(v)                                # half to even
    if mode == "round":                                   # half away from zero
        t = xp.trunc(v)
        return xp.where(xp.abs(v - t) >= 0.5, t + xp.sign(v), t)
    if mode == "floor":
        return xp.floor(v)
    if mode == "ceil":
        return xp.ceil(v)
    if mode == "trunc":
        return xp.trunc(v)
    if mode == "odd":                                     # ties to the odd neighbour
        f = xp.floor(v)
        frac = v - f
        f_odd = xp.fmod(f, 2) != 0
        return xp.where(frac > 0.5, f + 1, xp.where(frac < 0.5, f, xp.where(f_odd, f, f + 1)))
    return v                                              # NONE: the cast truncates


def _float_to_int(v, dst: np.dtype, xp=jnp):
    """g++/x86 ``static_cast<D>(double)``: cvttsd2si to int32 (NaN / out of range → INT32_MIN),
    then the low bits for int16/int8."""
    v = v.astype(F32)
    ok = (v >= -2.0 ** 31) & (v < 2.0 ** 31)              # False for NaN
    i = xp.where(ok, xp.trunc(xp.where(ok, v, 0)).astype(np.int32), np.int32(-2 ** 31))
    return i.astype(dst)


def _saturated(x, s: np.dtype, d: np.dtype, xp=jnp):
    """``sat_mode`` ON: ``x`` clamped to the source and destination ranges (NaN to the upper limit)."""
    (sl, sh), (dl, dh) = _limits(s), _limits(d)
    lo, hi = max(sl, dl), min(sh, dh)
    if _is_float(s):
        lo_s, hi_s = (xp.asarray(np.asarray(v, np.float64).astype(s)) for v in (lo, hi))
        return xp.where(xp.isnan(x), hi_s, xp.minimum(xp.maximum(x, lo_s), hi_s))
    return xp.clip(x, int(lo), int(hi)).astype(s)


@_register("tcvt")
def tcvt(src, *tmp, rmode="CAST_RINT", sat_mode="OFF", out):
    """Convert to ``out.dtype`` as pto-isa's CPU simulator does (TCvt_Impl, g++ on x86-64).

    * ``rmode``: NONE/RINT/ROUND/FLOOR/CEIL/TRUNC/ODD (``CAST_`` prefix optional; PTOAS maps RINT and
      CAST_RINT to ``CAST_RINT``, its default). It only affects float → int: RINT half-even, ROUND
      half-away, ODD ties to odd, NONE truncates. Float → float and int → float round to nearest
      even whatever the mode; int → int wraps.
    * ``sat_mode`` ON (PTOAS ``#pto<saturation_mode ON>``; absent = OFF): BEFORE converting, the
      source value is clamped to the intersection of the source and destination ranges and
      converted back to the source dtype. NaN clamps to the upper limit (``std::max(lo,
      std::min(hi, NaN))`` = hi): f32→f16 NaN → 65504, inf → 65504, f32→i8 NaN → 127. For f32 → i32
      the limit 2147483647 rounds to 2**31 in f32, so big positives and NaN give INT32_MIN
      (the simulator's x86 cast of an out-of-range double) — mirrored here.
    * Float → int without saturation: NaN or outside int32 → INT32_MIN for i32, and for i16/i8 the
      low bits of the int32 conversion (NaN, ±inf, |x| >= 2**31 → 0; 40000 → -25536 for i16).
    * Float → f16 without saturation overflows to ±inf.
    bf16 is true bfloat16 (the simulator's C++23 ``std::bfloat16_t``; under C++20 it is an f16 alias).
    """
    x = _a(src)
    s, d = _dt(x), np.dtype(out.dtype)
    mode = _rmode(rmode)
    if _sat_on(sat_mode):
        x = _saturated(x, s, d)
    if _is_float(s) and not _is_float(d):
        return _float_to_int(_round_integral(x.astype(F32), mode), d)
    if not _is_float(s) and d == BF16 and s.itemsize == 4:
        return int_to_bfloat16(x.astype(jnp.int32))
    if not _is_float(s) and not _is_float(d) and d.itemsize < s.itemsize:
        return _wrapped(x, d)
    return x.astype(d)        # RNE float→float / int→float (exact via f32)


def _wrapped(x, d):
    """``x`` narrowed to the integer dtype ``d``, wrapping: through the unsigned dtypes of both widths
    (XLA:CPU in jax 0.10.2 crashes compiling ``a | convert_i8(~convert_i16(b))``, a signed narrowing into
    an int8 ``or`` / ``and``; the unsigned one compiles)."""
    unsigned = lambda t: np.dtype(f"uint{8 * np.dtype(t).itemsize}")     # noqa: E731
    bits = lax.bitcast_convert_type(x, unsigned(x.dtype)) if np.dtype(x.dtype).kind == "i" else x
    narrow = lax.convert_element_type(bits, unsigned(d))
    return narrow if d.kind == "u" else lax.bitcast_convert_type(narrow, d)


def _np_tcvt(src, *tmp, rmode="CAST_RINT", sat_mode="OFF", out):
    """:func:`tcvt` of floats to integers on NumPy: the same steps, subnormals rounded as the numbers
    they are (XLA:CPU takes them for 0: ``floor(-1e-42)`` was 0, not -1)."""
    x = np.asarray(src)
    s, d = x.dtype, np.dtype(out.dtype)
    with np.errstate(all="ignore"):
        if _sat_on(sat_mode):
            x = _saturated(x, s, d, np)
        return _float_to_int(_round_integral(x.astype(F32), _rmode(rmode), np), d, np)


ON_NUMPY["tcvt"] = _np_tcvt
ON_NUMPY_IF["tcvt"] = lambda src, *tmp, out=None, **attrs: (np.asarray(src).dtype.kind == "f"
                                                            and np.dtype(out.dtype).kind in "iu")


# ----------------------------------------------------------------------------------- matmul

def _fma_f32(a, b, c):
    """float32 ``fma(a, b, c)``, correctly rounded, from float64 operations (under a local x64 scope).

    ``a*b`` is exact in float64 (48-bit significands); ``s = a*b + c`` and its TwoSum error give ``s``
    rounded to odd (one ulp toward the error where it is inexact and even), and a round-to-odd float64
    (53 >= 24 + 2 bits) rounds to the correctly rounded float32. Every product is exact, so XLA fusing
    a multiply and an add changes nothing; inf/NaN flow through ``s`` (their NaN error is ignored)."""
    with jax.enable_x64(True):
        a, b, c = (v.astype(jnp.float64) for v in (a, b, c))
        p = a * b
        s = p + c
        bp = s - c
        err = (c - (s - bp)) + (p - bp)
        bits = lax.bitcast_convert_type(s, jnp.int64)
        toward_zero = lax.shift_right_logical(bits ^ lax.bitcast_convert_type(err, jnp.int64), jnp.int64(63))
        odd = (bits - toward_zero) | jnp.int64(1)   # s if odd, else its neighbour on err's side
        s = lax.bitcast_convert_type(jnp.where(jnp.abs(err) > 0, odd, bits), jnp.float64)
        return s.astype(jnp.float32)


MATMUL_BLOCKS = (8,)     # products per loop trip of a matmul: its accumulator is a whole tile


def _mm_zeros(a32, b32):
    """(M, N) float32 zeros that vary as the operands do (shard_map)."""
    return jnp.zeros_like(a32[:, :1] * b32[:1, :]) if a32.shape[1] else jnp.zeros((a32.shape[0], b32.shape[1]), F32)


def _mul_add_chain(a32, b32):
    """``acc = +0.0; acc = acc + a[:, k] * b[k, :]`` for k in order, one multiply and one add per step.

    The +0.0 start goes through an optimization barrier: XLA would otherwise drop the first add
    (``0 + x`` is ``x`` but for -0.0), and a backend that fuses multiply-adds could then fuse the
    second add with the FIRST product instead of the second."""
    def block(start, size):     # a slice per product: a block sliced once ran 2-3x slower under vmap
        return [(_slice(a32, start + k, 1, 1), _slice(b32, start + k, 1, 0)) for k in range(size)]

    return _chain(a32.shape[1], lax.optimization_barrier(_mm_zeros(a32, b32)), block,
                  lambda acc, ab: acc + ab[0] * ab[1], MATMUL_BLOCKS, MATMUL_BLOCKS[-1])


def _fma_scan(a32, b32):
    """``acc = +0.0; acc = fma(a[:, k], b[k, :], acc)`` by :func:`_fma_f32`, one product per scan trip."""
    step = lambda acc, ab: (_fma_f32(ab[0][:, None], ab[1][None, :], acc), None)  # noqa: E731
    return lax.scan(step, _mm_zeros(a32, b32), (a32.T, b32))[0]


@functools.cache
def _fuses_multiply_add(platform: str, disable_jit: bool) -> bool:
    """Whether :func:`_mul_add_chain` compiled by XLA on ``platform`` is a chain of fused multiply-adds
    (XLA:CPU on FMA hardware and XLA:GPU contract ``x*y + z``): run once per process on random
    operands, in both chain forms (K = 2 unrolled, K = 21 in loop trips) and over 19 columns (vector
    body and remainder), against :func:`_fma_scan`."""
    if disable_jit:                               # op by op: a multiply and an add, each rounded
        return False
    rng = np.random.default_rng(0)
    for k in (2, 21):
        a, b = rng.standard_normal((3, k)).astype(F32), rng.standard_normal((k, 19)).astype(F32)
        # compiled ahead of time and called: runs now and whole, also while a caller is being traced
        got, want = (np.asarray(jax.jit(f).lower(a, b).compile()(a, b)) for f in (_mul_add_chain, _fma_scan))
        if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            return False
    return True


@functools.partial(jax.jit, static_argnums=(2,))
def _mmad(lhs, rhs, acc_dt):
    """TMatmulNzZn's dot products from +0.0: int32 ``+= a*b`` or float32 ``acc = fma(a, b, acc)`` —
    the backend's fused multiply-add where it has one (see :func:`_fuses_multiply_add`), else
    :func:`_fma_f32`; f16/bf16 products are exact in float32, so there fma is one rounded add."""
    a, b = _a(lhs), _a(rhs)
    if not _is_float(acc_dt):
        return jnp.matmul(a.astype(acc_dt), b.astype(acc_dt), preferred_element_type=acc_dt)
    a32, b32 = a.astype(F32), b.astype(F32)
    if (_dt(a) != F32 or a.shape[1] < 2
            or _fuses_multiply_add(jax.default_backend(), bool(jax.config.jax_disable_jit))):
        return _mul_add_chain(a32, b32).astype(acc_dt)
    return _fma_scan(a32, b32).astype(acc_dt)


def _acc_dtype(lhs, out):
    return _out_dtype(out, I32 if _dt(_a(lhs)) == I8 else F32)


NUMPY_MACS = 1 << 24   # multiply-adds of a 16-bit float matmul (all its grid points) that NumPy folds in
#                      about 10 ms: more, and one XLA compile of the form (~0.5 s) pays for itself


def _np_exact(lhs, rhs, *rest, out=None) -> bool:
    """Whether :func:`_np_mmad` computes this matmul: int8 operands (exact in int64, wrapped as int32
    wraps), 16-bit float operands (every product exact in float32, so each fma is one rounded add)
    with at most :data:`NUMPY_MACS` multiply-adds, or float32 operands (``rest``: an accumulator or bias
    added after) whose products or sums may be subnormal, which XLA:CPU flushes (:func:`_subnormal_free`)."""
    a, b = np.asarray(lhs), np.asarray(rhs)
    if a.dtype == I8 and b.dtype == I8:
        return True
    if a.dtype == F32 and b.dtype == F32:
        return not _subnormal_free(a, b, *rest)
    macs = int(np.prod(np.broadcast_shapes(a.shape[:-1], b.shape[:-2] + (1,)))) * a.shape[-1] * b.shape[-1]
    return a.dtype in (F16, BF16) and b.dtype in (F16, BF16) and macs <= NUMPY_MACS


def _min_exponent(x) -> int:
    """``floor(log2 |v|)`` of the smallest finite nonzero ``|v|`` in float32 ``x`` (large if none)."""
    v = np.abs(np.asarray(x, F32))
    v = v[np.isfinite(v) & (v != 0)]
    return int(np.frexp(v.min())[1]) - 1 if v.size else 1 << 20


def _subnormal_free(a, b, *added) -> bool:
    """Whether no product, partial sum or added operand of the float32 fma chain ``a @ b (+ added)`` can
    be subnormal: no operand is, and every value is a multiple of ``ulp(min |a|) * ulp(min |b|)`` and of
    each added operand's smallest ulp (a rounded sum of multiples of a power of two stays one), which is
    a normal float32's granularity at least. Then XLA:CPU's flushing changes nothing."""
    ea, eb = _min_exponent(a), _min_exponent(b)
    es = [_min_exponent(c) for c in added]
    return min(ea, eb, *es) >= -126 and ea + eb - 46 >= -126 and all(e - 23 >= -126 for e in es)


def _np_mmad(lhs, rhs, acc_dt):
    """:func:`_mmad` on NumPy (operands with any leading grid point axes), where :func:`_np_exact`."""
    a, b = np.asarray(lhs), np.asarray(rhs)
    if not _is_float(acc_dt):
        return np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(acc_dt)
    if a.dtype == F32 or b.dtype == F32:
        return _np_fma_chain(a.astype(np.float64), b.astype(np.float64)).astype(acc_dt)
    a32, b32 = a.astype(F32), b.astype(F32)
    acc = np.zeros(np.broadcast_shapes(a.shape[:-1] + (1,), b.shape[:-2] + (1, b.shape[-1])), F32)
    with np.errstate(all="ignore"):
        for k in range(a.shape[-1]):                    # from +0.0, k in order: acc + a_k * b_k
            acc = acc + a32[..., :, k:k + 1] * b32[..., k:k + 1, :]
    return acc.astype(acc_dt)


def _np_fma_chain(a, b):
    """``acc = fmaf(a_k, b_k, acc)`` for k in order from +0.0, IEEE subnormals kept, on float32 values
    held in float64: a product is exact there; the sum's rounding error (TwoSum) makes an inexact sum
    odd (round to odd), so rounding it to float32 rounds ``a_k b_k + acc`` once, as fmaf does."""
    acc = np.zeros(np.broadcast_shapes(a.shape[:-1] + (1,), b.shape[:-2] + (1, b.shape[-1])), np.float64)
    with np.errstate(all="ignore"):
        for k in range(a.shape[-1]):
            p = a[..., :, k:k + 1] * b[..., k:k + 1, :]
            s = acc + p
            t = s - acc
            err = (acc - (s - t)) + (p - t)
            inexact = (err != 0) & np.isfinite(err) & (s.view(np.int64) % 2 == 0)
            s = np.where(inexact, np.nextafter(s, np.copysign(np.inf, err)), s)
            acc = s.astype(F32).astype(np.float64)
    return acc.astype(F32)


def _np_tmatmul(lhs, rhs, *, out=None):
    return _np_mmad(lhs, rhs, _out_dtype(out, I32 if np.asarray(lhs).dtype == I8 else F32))


def _np_tmatmul_acc(acc, lhs, rhs, *, out=None):
    acc = np.asarray(acc)
    with np.errstate(all="ignore"):
        return acc + _np_mmad(lhs, rhs, acc.dtype)


def _np_tmatmul_bias(lhs, rhs, bias, *, out=None):
    prod = _np_tmatmul(lhs, rhs, out=out)
    with np.errstate(all="ignore"):
        return prod + np.asarray(bias)[..., :1, :prod.shape[-1]].astype(prod.dtype)


ON_NUMPY.update({"tmatmul": _np_tmatmul, "tmatmul.acc": _np_tmatmul_acc, "tmatmul.bias": _np_tmatmul_bias})
ON_NUMPY_IF.update({"tmatmul": _np_exact, "tmatmul.acc": lambda acc, *ab, out=None: _np_exact(*ab, acc),
                    "tmatmul.bias": lambda lhs, rhs, bias, out=None: _np_exact(lhs, rhs, bias)})
ON_NUMPY_BY_DATA = frozenset(("tmatmul", "tmatmul.acc", "tmatmul.bias"))   # conditions that read the values


@_register("tmatmul")
def tmatmul(lhs, rhs, *, out=None):
    """``lhs @ rhs`` into the accumulator: i8·i8 → i32 exactly; f16/bf16/f32 → f32 by a sequential
    float32 FMA chain over k starting from +0.0 (so -0.0 products sum to +0.0)."""
    return _mmad(lhs, rhs, _acc_dtype(lhs, out))


@_register("tmatmul.acc")
def tmatmul_acc(acc, lhs, rhs, *, out=None):
    """``acc + (lhs @ rhs)``: the product is formed from 0 as in :func:`tmatmul`, then one add."""
    acc = _a(acc)
    return acc + _mmad(lhs, rhs, _dt(acc))


@_register("tmatmul.bias")
def tmatmul_bias(lhs, rhs, bias, *, out=None):
    """``(lhs @ rhs) + bias[0, :N]`` (bias 1 x N or wider, in the accumulator dtype; N = the product's
    columns, as pto-isa reads it), added after the product."""
    prod = _mmad(lhs, rhs, _acc_dtype(lhs, out))
    return prod + _a(bias)[:1, :prod.shape[1]].astype(prod.dtype)


# ------------------------------------------------------------------------------ sort/gather

def _struct_elems(dt: np.dtype) -> int:
    """Tile elements per 8-byte (value, u32 index) struct: 2 for 4-byte, 4 for 2-byte dtypes."""
    return 8 // np.dtype(dt).itemsize


def _order_key(v):
    """A signed integer whose order is ``v``'s with +0 == -0 (floats: their bits, a negative's magnitude
    bits flipped; NaN at an end), compared as integers: XLA:CPU compares floats with subnormals taken for
    zeros, the simulator's C++ ``>`` does not."""
    if not _is_float(v.dtype):
        return v
    it = jnp.int16 if _dt(v).itemsize == 2 else jnp.int32
    i = lax.bitcast_convert_type(v, it)
    i = jnp.where(i == jnp.iinfo(it).min, jnp.zeros_like(i), i)                 # -0 as +0
    return jnp.where(i < 0, i ^ jnp.iinfo(it).max, i)


def _greater(a, b):
    """The C++ ``a > b`` of the simulator's sorts and merges: false where either is NaN."""
    if not _is_float(a.dtype):
        return a > b
    return (_order_key(a) > _order_key(b)) & ~jnp.isnan(a) & ~jnp.isnan(b)


def _desc_key(v):
    """A key whose ascending order is ``v``'s descending order with +0 == -0 (the C++ ``>``)."""
    return jnp.bitwise_not(_order_key(v))


def _pack_structs(vals, idx):
    """(..., n) values + u32 indices → (..., n*E) interleaved structs (value[, 0], index bytes)."""
    dt = _dt(vals)
    idx = idx.astype(jnp.uint32)
    if dt.itemsize == 4:
        parts = [vals, lax.bitcast_convert_type(idx, dt)]
    else:
        lo = lax.bitcast_convert_type((idx & 0xFFFF).astype(jnp.uint16), dt)
        hi = lax.bitcast_convert_type((idx >> 16).astype(jnp.uint16), dt)
        parts = [vals, jnp.zeros_like(vals), lo, hi]
    return jnp.stack(parts, axis=-1).reshape(*vals.shape[:-1], -1)


@_register("tsort32")
def tsort32(src, idx, *tmp, out=None):
    """Sort each row in blocks of 32 columns, descending, into (value, index) structs.

    Within a block: stable by value descending, ties by the u32 ``idx`` value ascending (+0 == -0;
    NaN order is unspecified — the simulator's comparator is not a strict weak order with NaN). The
    last block may be partial. Each element becomes an 8-byte struct: ``[v, bits(idx)]`` for 4-byte
    dtypes (dst 2C columns), ``[v, 0, idx_lo16, idx_hi16]`` for 2-byte dtypes (dst 4C columns).
    Block b starts at dst column ``b * 32 * E`` (E = 2 or 4).
    """
    x, ix = _a(src), _a(idx).astype(jnp.uint32)
    r, c = x.shape
    nblk = -(-c // 32)
    pad = nblk * 32 - c
    flag = jnp.pad(jnp.zeros((r, c), jnp.int32), ((0, 0), (0, pad)), constant_values=1)
    xv = jnp.pad(x, ((0, 0), (0, pad)))
    iv = jnp.pad(ix, ((0, 0), (0, pad)))
    blk = (r, nblk, 32)
    _, _, si, sv = lax.sort((flag.reshape(blk), _desc_key(xv).reshape(blk), iv.reshape(blk),
                             xv.reshape(blk)), dimension=2, num_keys=3, is_stable=True)
    return _pack_structs(sv.reshape(r, -1)[:, :c], si.reshape(r, -1)[:, :c])


def _merge(lists, out_n: int, exhausted: bool):
    """TMrgsort's k-way merge of (n_i, E) struct lists: repeatedly take the head with the largest
    value (``v > best``: the lowest list wins ties); stop after ``out_n`` structs, when all lists
    are empty, or (``exhausted``) as soon as any list runs out. Returns (structs, consumed counts)."""
    e = lists[0].shape[1]
    sizes = [l_.shape[0] for l_ in lists]
    nmax = max(max(sizes), 1)
    arr = jnp.stack([jnp.pad(l_, ((0, nmax - l_.shape[0]), (0, 0))) for l_ in lists])
    size = jnp.asarray(sizes, jnp.int32)

    def body(carry, _):
        pos, done = carry
        head = arr[jnp.arange(len(lists)), jnp.minimum(pos, nmax - 1)]        # (L, E)
        pick = jnp.int32(-1)
        for li in range(len(lists)):
            ok = (pos[li] < size[li]) & ((pick < 0) | _greater(head[li, 0], head[jnp.maximum(pick, 0), 0]))
            pick = jnp.where(ok, li, pick)
        write = (~done) & (pick >= 0)
        val = jnp.where(write, head[jnp.maximum(pick, 0)], jnp.zeros((e,), arr.dtype))
        pos = pos + jnp.where(write, (jnp.arange(len(lists)) == pick).astype(jnp.int32), 0)
        stop = done | (pick < 0)
        if exhausted:
            stop = stop | jnp.any(pos == size)
        return (pos, stop), val

    start = (jnp.zeros_like(arr[:, 0, 0], jnp.int32), jnp.zeros_like(arr[0, 0, 0], jnp.bool_))   # vary as arr
    (pos, _), vals = lax.scan(body, start, None, length=out_n)
    return vals, pos


@_register("tmrgsort")
def tmrgsort(*operands, exhausted=False, out=None):
    """Merge sorted (value, index) struct runs (1-row tiles), descending.

    * ``tmrgsort(src, blockLen)``: ``src`` holds groups of 4 consecutive sorted blocks of
      ``blockLen`` tile elements (a 64 = 32 f32 pairs); each group of ``4*blockLen`` columns is
      merged in place (ties: lower block first). Columns after the last whole group are not written
      by the simulator; they are returned as ``src``'s. ``blockLen`` must be concrete.
    * ``tmrgsort(l0, l1[, l2[, l3]], tmp, exhausted=False)`` → ``(dst, executed)``: 2–4 sorted lists
      merged (ties: lower list first) into ``out`` (default: all structs); with ``exhausted`` it
      stops as soon as one list is used up. ``executed`` (int16[4]) = structs consumed per list;
      dst columns not written are 0.
    """
    first = _a(operands[0])
    e = _struct_elems(_dt(first))
    if len(operands) == 2 and np.ndim(operands[1]) == 0:
        block = _static_int(operands[1], "tmrgsort blockLen")
        cols = out.shape[1] if out is not None else first.shape[1]
        per, group = block // e, 4 * block
        ngroups = cols // group if block and block % e == 0 else 0
        res = first[:, :cols] if cols <= first.shape[1] else jnp.pad(first, ((0, 0), (0, cols - first.shape[1])))
        if ngroups == 0:
            return res
        g = first[0, : ngroups * group].reshape(ngroups, 4, per, e)
        merged = jax.vmap(lambda q: _merge([q[0], q[1], q[2], q[3]], 4 * per, False)[0])(g)
        return res.at[0, : ngroups * group].set(merged.reshape(-1))
    lists = [_a(o) for o in operands[:-1]]          # the last operand is the tmp tile
    if not 2 <= len(lists) <= 4:
        raise ValueError("tmrgsort merges 2 to 4 lists (plus the tmp tile)")
    structs = [l_[0, : (l_.shape[1] // e) * e].reshape(-1, e) for l_ in lists]
    cols = out[0].shape[1] if isinstance(out, tuple) else (out.shape[1] if out is not None
                                                           else sum(s.shape[0] for s in structs) * e)
    vals, pos = _merge(structs, cols // e, bool(exhausted))
    dst = jnp.pad(vals.reshape(1, -1), ((0, 0), (0, cols - (cols // e) * e)))
    executed = jnp.pad(pos, (0, 4 - len(lists))).astype(jnp.int16)
    return dst, executed


_PATTERNS = {"P0101": (2, 0), "P1010": (2, 1), "P0001": (4, 0), "P0010": (4, 1), "P0100": (4, 2),
             "P1000": (4, 3), "P1111": (1, 0)}


@_register("tgather")
def tgather(src, indices=None, *tmp, maskPattern=None, out=None):
    """Two forms.

    * Mask pattern (``maskPattern="P0101"`` …): in every row keep the columns ``c`` with
      ``c % 2 == 0`` (P0101), ``c % 2 == 1`` (P1010), ``c % 4 == 0/1/2/3`` (P0001/P0010/P0100/
      P1000) or all (P1111); the kept elements of all rows form ONE row-major stream written into the
      dst (default shape ``(R, C / step)``), bit-copied when ``out.dtype`` differs (same size), e.g.
      the u32 indices out of tsort32/tmrgsort structs.
    * Index (``tgather(src, indices, tmp)``): ``dst[i, j] = src.flat[indices[i, j]]`` over the src
      valid region taken row-major (the simulator uses the static tile; equal when valid == static);
      negative or out-of-range indices give 0.
    """
    x = _a(src)
    if maskPattern is not None:
        p = str(maskPattern).upper().split(".")[-1].split("<")[-1].rstrip(">")
        p = p if p.startswith("P") else "P" + p
        step, off = _PATTERNS[p]
        r, c = x.shape
        stream = x[:, off::step].reshape(-1)
        shape = tuple(out.shape) if out is not None else (r, stream.shape[0] // r)
        n = shape[0] * shape[1]
        stream = jnp.pad(stream[:n], (0, max(n - stream.shape[0], 0))).reshape(shape)
        dt = _out_dtype(out, x.dtype)
        return stream if dt == _dt(x) else lax.bitcast_convert_type(stream, dt)
    ix = _a(indices)
    flat = x.reshape(-1)
    if jnp.issubdtype(ix.dtype, jnp.signedinteger):
        ok = (ix >= 0) & (ix < flat.shape[0])
    else:
        ok = ix < flat.shape[0]
    got = flat[jnp.where(ok, ix, 0).astype(jnp.int32)]
    return jnp.where(ok, got, jnp.zeros_like(got)).astype(_out_dtype(out, x.dtype))


# ------------------------------------------------------------------------ user-defined instructions
USER: dict[str, Callable | None] = {}   # a user's instruction -> its NumPy semantics, None: its jnp reference


def zn(t) -> bool:
    """Whether tile type ``t`` is an L1 tile of a transposed matmul operand (``zn``: selection loads
    it through a ``dn`` view, in the transposed shape): it holds the transpose of its value."""
    return t.loc == "mat" and t.blayout == "row_major" and t.slayout == "col_major"


def register(name: str, reference: Callable, numpy: Callable | None = None) -> None:
    """Add user-defined instruction ``name`` (``pj.tiles.register_op``) to :data:`SEMANTICS`: its
    ``reference`` (jnp: traced, vmapped and jitted as the built-ins are) or, where given, ``numpy``
    (run on the host on one grid point's operands at a time, :data:`USER`; under a trace through
    ``jax.pure_callback``); its operands are read-only. A first operand may be a whole GM tensor (a GM
    reader). The results must have the destinations' valid shapes (but for dims of one: a (16,) result
    fills a 16 x 1 destination) and dtypes; attribute ``zn`` (one
    flag per operand, then per destination: :func:`zn` tiles) transposes those operands and results."""
    if numpy is None:
        def fn(*operands, out=None, zn=(), where=None, **attrs):
            return _flipped(name, reference, operands, out, zn, attrs, jnp)
        USER[name] = None
    else:
        def host(*operands, out=None, zn=(), where=None, **attrs):
            """``where``: the instruction's place (the jitted replay's), named by a fault in ``numpy``."""
            try:
                with np.errstate(all="ignore"):
                    return _flipped(name, numpy, [_read_only(o) for o in operands], out, zn, attrs, np)
            except Exception as err:
                if where is None:
                    raise
                raise PtoExecutionError(f"pto replay: {where}: pto.{name} failed: {type(err).__name__}: {err}") from err

        def fn(*operands, out=None, **attrs):
            if out is None or not any(isinstance(o, jax.core.Tracer) for o in operands):
                return host(*operands, out=out, **attrs)
            return jax.pure_callback(functools.partial(host, out=out, **attrs), out, *operands,
                                     vmap_method="sequential")
        USER[name] = host
    SEMANTICS[name] = fn


def _read_only(x) -> np.ndarray:
    """A read-only view of an operand: a user's NumPy semantics that writes into it fails (the engine's
    tile buffers would change under the instructions after it)."""
    view = np.asarray(x).view()
    view.flags.writeable = False
    return view


def unregister(name: str) -> None:
    USER.pop(name, None)
    SEMANTICS.pop(name, None)


def _flipped(name: str, fn, operands, out, flags, attrs, xp):
    """``fn`` on ``operands`` where the flagged ones (tiles of :func:`zn` type) are transposed, its
    results fitted to ``out`` (the flagged destinations: to their transposes, then transposed)."""
    if not any(flags):
        return _fitted(name, fn(*operands, **attrs), out, xp)
    flags = tuple(flags) + (False,) * (len(operands) + len(out if isinstance(out, tuple) else (out,)))
    operands = [xp.swapaxes(o, -1, -2) if f else o for o, f in zip(operands, flags)]
    outs = out if isinstance(out, tuple) else (out,)
    at = flags[len(operands):]
    logical = tuple(jax.ShapeDtypeStruct(o.shape[::-1], o.dtype) if f and o is not None else o
                    for o, f in zip(outs, at))
    res = _fitted(name, fn(*operands, **attrs), logical if isinstance(out, tuple) else logical[0], xp)
    res = res if isinstance(out, tuple) else (res,)
    res = tuple(xp.swapaxes(r, -1, -2) if f else r for r, f in zip(res, at))
    return res if isinstance(out, tuple) else res[0]


def _fitted(name: str, result, out, xp):
    """A user's ``result`` (an array or a sequence of them) as the destinations ``out`` take it."""
    outs = out if isinstance(out, tuple) else (out,)
    res = tuple(result) if isinstance(result, (list, tuple)) else (result,)
    if len(res) != len(outs):
        raise ValueError(f"pto.{name} gave {len(res)} results for {len(outs)} destinations")
    fitted = []
    for r, o in zip(res, outs):
        r = xp.asarray(r)
        if o is not None and r.dtype == np.bool_ and np.dtype(o.dtype) == np.int8:     # a bool tile's bytes
            r = r.astype(np.int8)
        if o is not None:
            squeezed = [[d for d in shape if d != 1] for shape in (r.shape, o.shape)]
            if np.dtype(r.dtype) != np.dtype(o.dtype) or squeezed[0] != squeezed[1]:
                raise ValueError(f"pto.{name} gave {np.dtype(r.dtype).name}{list(r.shape)} for a destination of "
                                 f"{np.dtype(o.dtype).name}{list(o.shape)}")
            r = r.reshape(o.shape)
        fitted.append(r)
    return tuple(fitted) if isinstance(out, tuple) else fitted[0]


__all__ = ["SEMANTICS", "USER", "mask_shape", "register", "unregister"]
