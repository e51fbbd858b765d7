"""The Tensor level: a kernel's jaxpr rewritten so that every eqn is a ``pto.*`` op.

``jnp``/``lax`` primitives are translated into ``pj.ops`` calls; ``jit``, ``custom_jvp_call``,
``custom_vjp_call`` and ``remat`` bodies are inlined (the kernel is lowered forward-only: training
differentiates ``pj.kernel`` calls through ``jax.custom_vjp``, outside the kernel), and so is a
``pj.kernel`` called inside the kernel (``pto_call``, a ``pj.nn`` op's too: :func:`_inline_kernel`), so
that the outer kernel fuses and partitions the whole graph; ``scan``,
``while`` and ``cond`` stay as loops and branches with translated bodies (a ``scan`` over stacked
inputs or outputs becomes a counted loop over its carries). Gathers, scatters and dynamic slices are
``gathers.py``'s rules, math functions without an instruction ``libm.py``'s, pads, strided slices and
window reductions ``windows.py``'s. Eqns whose inputs are all
constants are folded (up to :data:`FOLD_ELEMENTS` output elements; a constant array broadcast past
:data:`SPREAD_ELEMENTS` stays a broadcast), except an iota or constant of a size
known at run time (a symbolic dim, or a polymorphic compile's template rows: :func:`run_time_sizes`),
which the cores compute (``pto.iota``, ``tci`` per tile). Anything else is a
:class:`PtoUnsupportedError`; every error raised while translating an eqn names the user's
``jnp``/``lax`` call and source line (``origin.py``).
"""
from __future__ import annotations

import collections
import contextlib
import contextvars
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import ops
from .._jax import ClosedJaxpr, Var, frames, jaxprs_in_params, traced_at
from ..errors import PtoUnsupportedError
from ..primitives import layout
from ..primitives.matmul import mixed_dtype_remedy
from . import libm, windows
from .reduce import identity
from .gathers import dynamic_slice, dynamic_update_slice, gather, read_window, rev, rows_of, scatter, write_window
from .nan_rows import mark_skip_nan
from .origin import ENCLOSING, blame, own_path, unsupported, user_traceback
from .partition import Options as PassOptions
from .scope import TileConfig
from .scope import read as read_scope
from .symbolic import arange, at_run_time
from .walk import CONTROL, Memo, body_of, by_rule, control, interpret, is_const, live, retrace

_FLOAT = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(jnp.bfloat16))


# ------------------------------------------------------------------------------------- translation
def _convert(eqn, x):
    dtype = np.dtype(eqn.params["new_dtype"])
    if x.dtype in _FLOAT and dtype not in _FLOAT and dtype != np.bool_:
        return ops.cast(x, dtype, rounding="trunc")           # XLA converts float -> int by truncation
    return ops.cast(x, dtype, saturate=False)                 # and wraps integer narrowing


def _integer_pow(eqn, x):
    y = eqn.params["y"]
    if y == 0:
        return ops.expand(np.ones((), x.dtype), x.shape)
    result, base, n = None, x, abs(y)
    while n:
        if n & 1:
            result = base if result is None else ops.mul(result, base)
        n >>= 1
        if n:
            base = ops.mul(base, base)
    return ops.reciprocal(result) if y < 0 else result


def _pow(eqn, x, y):
    """``x ** y``; an integer exponent of a float base converted to the result's dtype first, as XLA
    lowers ``lax.pow(float, int)`` (exact for int8; int32 up to the float's integers). Within
    ``jnp.ldexp`` (which scales by ``2.0 ** e``) float32 ``2.0 ** y`` is exact for integral ``y``, as XLA's:
    :func:`libm.power_of_two` (three exponentials to ``pow``'s two; ``pow`` is within 2 ulp elsewhere)."""
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    if np.dtype(y.dtype) != dtype:
        y = np.asarray(y).astype(dtype) if is_const(y) else ops.cast(y, dtype)
    if (is_const(x) and np.ndim(x) == 0 and float(x) == 2.0 and not is_const(y) and dtype == np.float32
            and any(e.params.get("name") == "ldexp" for e in ENCLOSING if e.primitive.name in ("jit", "pjit"))):
        return libm.power_of_two(y)       # (float16 / bfloat16 pow is float32's rounded once: exact already)
    return ops.pow(x, y)


def _broadcast_in_dim(eqn, x):
    shape, dims = eqn.params["shape"], eqn.params["broadcast_dimensions"]
    expanded = [1] * len(shape)
    for d, n in zip(dims, x.shape):
        expanded[d] = n
    return ops.expand(ops.reshape(x, expanded), shape)


def _matrix(x, batch_dims, rows_dims, cols_dims, shape):
    """``x`` as the ``(*batch, rows, cols)`` matrix ``shape`` of a matmul operand and whether the cube
    loads it transposed, where one of the two orders is ``x``'s own in GM (a reshape): the flipped one
    ``(*batch, cols, rows)`` with matmul's transpose_a / transpose_b (the cube's ``dn`` view); else None."""
    *batch, rows, cols = shape
    for order, flip in (((*batch_dims, *rows_dims, *cols_dims), False), ((*batch_dims, *cols_dims, *rows_dims), True)):
        if not layout.moves_data(x.shape, order):
            return ops.reshape(ops.permute(x, order), (*batch, cols, rows) if flip else shape), flip
    return None


def _operand(x, batch_dims, rows_dims, cols_dims, shape):
    """:func:`_matrix` of ``x``, or of the tensor a ``transpose`` made ``x`` from (``b.T`` of ``a @ b.T``:
    ``b`` loaded transposed; the transpose, unused, then goes: :func:`_live`), else ``x`` permuted."""
    made = _TRANSPOSED.get().get(x)
    if made is not None:                           # x = transpose(source, p): x's dim d is source's p[d]
        source, p = made
        folded = _matrix(source, [p[d] for d in batch_dims], [p[d] for d in rows_dims], [p[d] for d in cols_dims],
                         shape)
        if folded is not None:
            return folded
    return _matrix(x, batch_dims, rows_dims, cols_dims, shape) or (
        ops.reshape(ops.permute(x, (*batch_dims, *rows_dims, *cols_dims)), shape), False)


def _transpose(eqn, x):
    out = ops.permute(x, eqn.params["permutation"])
    if out is not x:
        _TRANSPOSED.get()[out] = (x, tuple(eqn.params["permutation"]))
    return out


_TRANSPOSED = contextvars.ContextVar("transposed", default=Memo())    # result -> (source, permutation)


def _dot_general(eqn, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:      # a product by a scalar (jnp.dot(x, 2.0)): elementwise
        dtype = eqn.outvars[0].aval.dtype
        a, b = (np.asarray(x, dtype) if is_const(x) else ops.cast(x, dtype) for x in (a, b))
        if is_const(a) and is_const(b):
            return a & b if dtype == np.bool_ else a * b
        return ops.logical_and(a, b) if dtype == np.bool_ else ops.mul(a, b)
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lf = [d for d in range(a.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(b.ndim) if d not in rc and d not in rb]
    batch = [a.shape[d] for d in lb]
    m, k, n = (math.prod(s[d] for d in ds) for s, ds in ((a.shape, lf), (a.shape, lc), (b.shape, rf)))
    a2, ta = _operand(a, lb, lf, lc, (*batch, m, k))
    b2, tb = _operand(b, rb, rc, rf, (*batch, k, n))
    if a.dtype != b.dtype and a.dtype in _FLOAT and b.dtype in _FLOAT:   # (a mixed-precision gradient's)
        a2, b2 = ops.cast(a2, np.float32), ops.cast(b2, np.float32)        # widened exactly, as XLA multiplies
    if a2.dtype != b2.dtype or a2.dtype not in (*_FLOAT, np.dtype(np.int8)):
        raise unsupported(eqn, f"multiplies {a.dtype.name} by {b.dtype.name}; the cube takes int8, fp16, bf16 or fp32 "
                               f"operands of one dtype (two float dtypes are both widened to fp32): "
                               f"{mixed_dtype_remedy(a.dtype, b.dtype)}")
    out = np.dtype(eqn.outvars[0].aval.dtype)
    acc = np.dtype(np.int32) if a2.dtype == np.int8 else np.dtype(np.float32)
    native = out if out in ((acc,) if a2.dtype in (np.int8, np.float32) else (acc, a2.dtype)) else acc
    y = ops.matmul(a2, b2, out_dtype=native, transpose_a=ta, transpose_b=tb)
    y = ops.reshape(y, (*batch, *[a.shape[d] for d in lf], *[b.shape[d] for d in rf]))
    if native == out:
        return y
    return ops.cast(y, out, rounding="trunc") if out in (np.int8, np.int32) and y.dtype in _FLOAT \
        else ops.cast(y, out, saturate=False)


def _reduce(op, on_bools=None):
    """A reduction over ``eqn``'s axes; ``on_bools``: its rule where ``x`` is bool (``jnp.max`` of a mask)."""
    def rule(eqn, x):
        if _empty(eqn, x):
            return _folded(eqn, [np.zeros(x.shape, x.dtype)])
        if on_bools is not None and x.dtype == np.bool_:
            return on_bools(eqn, x)
        return op(x, tuple(eqn.params["axes"]))
    return rule


def _arg_reduce(op):
    def rule(eqn, x):
        (axis,) = eqn.params["axes"]
        if x.dtype == np.bool_:                       # jnp.select's argmax over its conditions
            x = ops.cast(x, jnp.int8)
        return ops.cast(op(x, axis), eqn.params["index_dtype"])
    return rule


def _empty(eqn, x) -> bool:
    """Whether reduction ``eqn`` reduces an empty axis of ``x`` to a static shape: its result is then its
    identity everywhere (``jnp.max(x, 0, initial=-inf)`` of no rows: -inf), which JAX folds."""
    axes = eqn.params["axes"]
    return any(x.shape[a] == 0 for a in axes) and all(isinstance(d, int) for d in eqn.outvars[0].aval.shape)


def _bool_reduce(op):
    """``reduce_or`` / ``reduce_and`` of booleans: the max / min of their int32 values."""
    def rule(eqn, x):
        if _empty(eqn, x):
            return _folded(eqn, [np.zeros(x.shape, x.dtype)])
        if x.dtype != np.bool_:
            raise unsupported(eqn, f"is only translated on bool operands, not {x.dtype.name}")
        return ops.gt(op(ops.cast(x, jnp.int32), tuple(eqn.params["axes"])), np.int32(0))
    return rule


def _to_integer(mode):
    """``floor`` / ``ceil`` / ``round``: through int32 with that rounding where |x| < 2**23 (larger
    floats, infinities and NaN are their own value); a zero result takes ``x``'s sign, as IEEE's."""
    def rule(eqn, x):
        how = mode(eqn) if callable(mode) else mode
        r = ops.cast(ops.cast(x, jnp.int32, rounding=how), x.dtype)
        limit = min(2.0 ** 23, float(jnp.finfo(x.dtype).max))     # float16 holds no 2**23: its largest
        r = ops.where(ops.lt(ops.abs(x), np.asarray(limit, x.dtype)), r, x)
        return ops.where(ops.eq(r, np.zeros((), x.dtype)), ops.mul(x, np.zeros((), x.dtype)), r)
    return rule


def _in_float32(fn):
    """Compute ``fn`` in float32 on float16/bfloat16 operands, rounding the result once."""
    def rule(eqn, x):
        if x.dtype == np.float32:
            return fn(x)
        return ops.cast(fn(ops.cast(x, jnp.float32)), x.dtype)
    return rule


def _gelu_erf(x):
    """The exact GELU ``x erfc(-x / sqrt 2) / 2`` (float32, as ``jax.nn.gelu`` writes it: no cancellation
    for negative x) in vector instructions: no ``tgelu`` computes it."""
    return ops.mul(ops.mul(x, np.float32(0.5)), libm.erfc(ops.mul(x, np.float32(-1 / np.sqrt(2)))))


def _select_n(eqn, pred, *cases):
    """``cases[pred]``: one ``where`` for a boolean predicate; for an integer one a tree of them on
    ``pred < middle``, as XLA lowers it (so an index below the range takes the first case, above it
    the last). A constant predicate of one value picks its case (``jnp.var``'s ``where(dof > 0, v, nan)``)."""
    if is_const(pred) and np.size(pred) and np.all(np.asarray(pred) == np.asarray(pred).flat[0]):
        return cases[min(max(int(np.asarray(pred).flat[0]), 0), len(cases) - 1)]
    if pred.dtype == np.bool_:
        return ops.where(pred, cases[1], cases[0]) if len(cases) == 2 else cases[0]

    def pick(offset, group):
        if len(group) == 1:
            return group[0]
        mid = len(group) // 2
        return ops.where(ops.lt(pred, np.asarray(offset + mid, pred.dtype)), pick(offset, group[:mid]),
                         pick(offset + mid, group[mid:]))
    return pick(0, list(cases))


def _slice(eqn, x):
    start, limit, strides = eqn.params["start_indices"], eqn.params["limit_indices"], eqn.params["strides"]
    if strides and any(s != 1 for s in strides):
        return windows.strided(x, start, limit, strides)
    window = [hi - lo for lo, hi in zip(start, limit)]
    merged = _merged(x.shape, start, window, _SQUEEZED.get().get(id(eqn), ()))
    if merged is None:
        return ops.view(x, window, start)
    shape, start, window = merged
    return ops.view(ops.reshape(x, shape), window, start)


def _merged(shape, start, window, squeezed):
    """``(shape, start, window)`` of the same elements with each dim in ``squeezed`` (a one-wide
    window) merged into the dim after it — ``x[i]`` of a (n, c) tensor as elements ``i*c : +c`` of it
    flattened — so the window has the squeezed rank and the op reading it its grid (one program, no
    GM round trip); None where a squeezed dim is the last or a size is symbolic."""
    if not squeezed or max(squeezed) == len(shape) - 1 or not all(isinstance(n, int) for n in shape):
        return None
    dims = [list(d) for d in zip(shape, start, window)]
    for d in sorted(squeezed, reverse=True):
        (n, o, _), (m, p, w) = dims[d], dims[d + 1]
        dims[d:d + 2] = [[n * m, o * m + p, w]]
    return tuple(zip(*dims))


_SQUEEZED = contextvars.ContextVar("squeezed_slices", default={})   # id(slice eqn) -> the dims its squeeze drops


def _squeezed_slices(jaxpr) -> dict:
    """The static slices of ``jaxpr`` and its bodies whose one reader is a ``squeeze``: id -> its dims."""
    uses = collections.Counter(v for v in [*(v for e in jaxpr.eqns for v in e.invars), *jaxpr.outvars]
                               if isinstance(v, Var))
    slices = {e.outvars[0]: e for e in jaxpr.eqns if e.primitive.name == "slice"}
    out = {id(slices[e.invars[0]]): tuple(e.params["dimensions"]) for e in jaxpr.eqns
           if e.primitive.name == "squeeze" and e.invars[0] in slices and uses[e.invars[0]] == 1}
    for e in jaxpr.eqns:
        for sub in jaxprs_in_params(e.params):
            out.update(_squeezed_slices(sub))
    return out


_SPREAD = contextvars.ContextVar("spread", default=Memo())   # result -> its value: constants kept broadcasts
_IOTAS = contextvars.ContextVar("iotas", default=Memo())     # result -> (axis, first, step): iotas of
                                                             # run-time shapes (reversed: first n - 1, step -1)


def _iota_form(payload, shape, axis):
    """``(first, step)`` where ``payload`` is ``first + step * iota`` along ``axis`` (step 1, or -1: the
    reversed iota of a descending ``jnp.argsort``), else None. A constant kept a broadcast (``jax.vmap``
    of an argsort broadcasts its iota over the batch) counts by its value, an iota of a shape known at run
    time by its axis."""
    made = _IOTAS.get().get(payload)
    if made is not None:
        return made[1:] if made[0] == axis else None
    if not is_const(payload):
        spread = _SPREAD.get().get(payload)
        if spread is None:
            return None
        payload = spread()
    iota = np.broadcast_to(np.arange(shape[axis]).reshape([-1 if d == axis else 1 for d in range(len(shape))]), shape)
    for first, step in ((0, 1), (shape[axis] - 1, -1)):
        if np.array_equal(np.asarray(payload), first + step * iota):
            return first, step
    return None


SORTED_IN_TILE = 512    # a sort along a leading axis longer than this sorts the rows of its transpose: a tile of
#                         the axis whole and the last dim (padded to 32 bytes) overfills the UB from 640 (int8) to
#                         1 536 (float32) elements


def _combining_scatter(eqn, *_):
    """``x.at[i].multiply`` / ``.min`` / ``.max``: refused, with the rewrite that translates."""
    how = eqn.primitive.name.replace("-", "_").removeprefix("scatter_")
    raise unsupported(eqn, f"(x.at[i].{ {'mul': 'multiply'}.get(how, how)}) has no ptojax translation: GM stores "
                           "combine by an atomic add only; gather the rows (x[i]), combine them, and .set them back "
                           "with unique indices (jnp.unique(i, size=n) first where indices repeat)")


def _sort(eqn, *operands):
    """``jnp.sort`` (one operand) and ``jnp.argsort`` (keys plus the iota it permutes, or the reversed
    one of ``descending=True``), and their derivatives (another iota, uint32, whose permutation
    ``jax.grad`` takes: each payload the sort's order, in its form)."""
    axis = eqn.params["dimension"]
    forms = [_iota_form(p, operands[0].shape, axis) for p in operands[1:]]
    if eqn.params["num_keys"] != 1 or None in forms:
        raise unsupported(eqn, f"sorts {eqn.params['num_keys']} key(s) with {len(forms)} payload(s); it is translated "
                               "for one key whose payloads are iotas along the sorted axis (jnp.sort, jnp.argsort "
                               "and their gradients): sort other payloads by gathering with the argsort's indices")
    keys = operands[0]
    key = ops.cast(keys, jnp.int8) if keys.dtype == np.bool_ else keys                            # False < True
    last = keys.ndim - 1
    n = keys.shape[axis]
    if axis != last and isinstance(n, int) and n > SORTED_IN_TILE:     # sorted as rows: moved last and back
        moved = tuple(d for d in range(keys.ndim) if d != axis) + (axis,)
        back = tuple(int(i) for i in np.argsort(moved))
        values, order = (ops.permute(y, back) for y in ops.sort(ops.permute(key, moved), last))
    else:
        values, order = ops.sort(key, axis)
    outs = [ops.cast(values, np.bool_) if keys.dtype == np.bool_ else values]
    for payload, (first, step) in zip(operands[1:], forms):
        index = ops.sub(np.int32(first), order) if step < 0 else order
        # a uint32 iota (a derivative's) no tile holds: its int32 order (< 2**31) serves
        outs.append(index if payload.dtype == np.uint32 else ops.cast(index, payload.dtype))
    return outs


def _reduce_precision(eqn, x):
    """``lax.reduce_precision`` to a format at least ``x``'s own (``x``), or float32 to float16's
    (5, 10) or bfloat16's (8, 7): a round trip through that dtype; a value that its own binade's rounding
    (to the narrow mantissa) leaves below float16's smallest normal is a zero of its sign, as XLA flushes
    where the exponent narrows (the narrow dtype's subnormal rounding would keep some as its smallest
    normal)."""
    bits, own = (eqn.params["exponent_bits"], eqn.params["mantissa_bits"]), jnp.finfo(x.dtype)
    if bits[0] >= own.nexp and bits[1] >= own.nmant:
        return x
    narrow = {(5, 10): jnp.float16, (8, 7): jnp.bfloat16}.get(bits)
    if narrow is None or x.dtype != np.float32:
        raise unsupported(eqn, f"to {bits[0]} exponent and {bits[1]} mantissa bits of {x.dtype.name} is not "
                               "translated: only float32 to float16's (5, 10) or bfloat16's (8, 7)")
    out = ops.cast(ops.cast(x, narrow), x.dtype)
    if bits[0] == own.nexp:
        return out
    info = jnp.finfo(narrow)       # half a mantissa step of the binade below the smallest normal under it
    small = ops.lt(ops.abs(x), np.float32(float(info.smallest_normal) * (1 - 2.0 ** -(info.nmant + 2))))
    return ops.where(small, ops.mul(x, np.float32(0)), out)


@windows.as_bytes
def _top_k(eqn, x):
    values, idx = ops.topk(x, eqn.params["k"], eqn.params.get("axis", -1))
    return [values, idx]


def _with_unit(shape, axis):
    return tuple(shape[:axis]) + (1,) + tuple(shape[axis:])


def _stacks(eqn) -> bool:
    """Whether a ``scan`` has stacked inputs or outputs (beyond its consts and carries)."""
    p = eqn.params
    return len(eqn.invars) + len(eqn.outvars) > p["num_consts"] + 2 * p["num_carry"]


def _scan_over_tensors(eqn, invals, stack):
    """A ``lax.scan`` with stacked inputs (xs) or outputs (ys) as a counted loop over carries only: step
    ``i`` reads row ``k`` of each x (``k = i``, or ``length - 1 - i`` reversed) and writes row ``k`` of
    each y, as ``lax.dynamic_slice`` / ``dynamic_update_slice`` at ``k`` do (``gathers.py``: a window's
    rows, a long row — a layer's weight matrix — in chunks, so that no step needs a whole row in the UB
    at once). The runtime then runs it as any ``fori_loop``."""
    p = eqn.params
    body, consts = body_of(p["jaxpr"])
    nc, ncarry, n = p["num_consts"], p["num_carry"], p["length"]
    fixed, init, xs = invals[:nc], list(invals[nc:nc + ncarry]), invals[nc + ncarry:]
    run = by_rule(_rule)

    def at(k, shape):
        return [k] + [0] * (len(shape) - 1)

    def step(i, state):
        carry, ys = state
        k = ops.sub(np.int32(n - 1), i) if p["reverse"] else i
        x = [ops.reshape(read_window(v, at(k, v.shape), (1, *v.shape[1:])), v.shape[1:]) for v in xs]
        out = run(body, consts, [*fixed, *carry, *x], stack)
        ys = [write_window(acc, ops.reshape(y, (1, *y.shape)), at(k, acc.shape)) for acc, y in zip(ys, out[ncarry:])]
        return out[:ncarry], ys

    ys0 = [ops.expand(np.zeros((), v.aval.dtype), v.aval.shape) for v in eqn.outvars[ncarry:]]
    if n == 0:                                  # no step: the initial carries, empty ys
        return [*init, *ys0]
    carry, ys = jax.lax.fori_loop(0, n, step, (init, ys0))
    return [*carry, *ys]


def _logaddexp(a, b):
    """``log(exp(a) + exp(b))`` as jnp computes it (two -inf give -inf, not NaN)."""
    delta = ops.sub(a, b)
    out = ops.add(ops.maximum(a, b), libm.log1p(ops.exp(ops.neg(ops.abs(delta)))))
    return ops.where(ops.ne(delta, delta), ops.add(a, b), out)


def _cumulative(combine, like):
    """``cummax`` / ``cummin`` / ``cumprod`` / ``cumlogsumexp``: log2(n) steps of Hillis and Steele's scan,
    each combining every element with the one ``2**s`` before it (after it, reversed), the array's edge
    reading the identity of the reduction ``like`` (``reduce.identity``: -inf for max and logaddexp)."""
    def rule(eqn, x):
        axis, n = eqn.params["axis"], x.shape[eqn.params["axis"]]
        step = 1
        while step < n:
            size = [step if d == axis else m for d, m in enumerate(x.shape)]
            size[axis] = n - step
            start = [0] * x.ndim
            if eqn.params["reverse"]:
                start[axis] = step
            edge = [(0, 0)] * x.ndim
            edge[axis] = (0, step) if eqn.params["reverse"] else (step, 0)
            x = combine(x, ops.pad(ops.view(x, size, start), edge, identity(like, x.dtype)))
            step *= 2
        return x
    return rule


SCAN_BLOCK = 16     # XLA's cumulative reductions on CPU scan blocks of this many elements (ReduceWindowRewriter)


def _cumprod(eqn, x):
    """``cumprod`` of floats as XLA computes it on CPU, bit for bit (XLA:CPU is the reference, and a
    product that overflows or underflows differs in kind, not in ulps, with its association: 0 or inf
    where another order gives NaN): each output the product of its prefix (its suffix, reversed) from
    its left end, within blocks of :data:`SCAN_BLOCK`; the blocks' totals scanned the same way, one
    level up, and multiplied into the blocks after (before) them. Integer products wrap exactly in any
    order: Hillis and Steele's scan (:func:`_cumulative`)."""
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return _cumulative(ops.mul, "prod")(eqn, x)
    axis, reverse = eqn.params["axis"], eqn.params["reverse"]

    def at(v, start, size, d):
        return ops.view(v, [size if a == d else m for a, m in enumerate(v.shape)],
                        [start if a == d else 0 for a in range(v.ndim)])

    def within(v, d):           # the scan of ``v`` along ``d`` (at most SCAN_BLOCK long), folds from the left
        n = v.shape[d]
        if not reverse:         # a running product is each prefix's fold
            cols = [at(v, 0, 1, d)]
            for j in range(1, n):
                cols.append(ops.mul(cols[-1], at(v, j, 1, d)))
            return ops.concat(cols, d)
        acc = v                 # a suffix's fold: step t multiplies x[i + t] into every output i
        for t in range(1, n):
            acc = ops.mul(acc, ops.pad(at(v, t, n - t, d), [(0, t) if a == d else (0, 0) for a in range(v.ndim)], 1))
        return acc

    def scan(v, d):
        n = v.shape[d]
        if n <= SCAN_BLOCK:
            return within(v, d)
        blocks = -(-n // SCAN_BLOCK)
        v = ops.pad(v, [(0, blocks * SCAN_BLOCK - n) if a == d else (0, 0) for a in range(v.ndim)], 1)
        v = within(ops.reshape(v, v.shape[:d] + (blocks, SCAN_BLOCK) + v.shape[d + 1:]), d + 1)
        totals = ops.reshape(at(v, 0 if reverse else SCAN_BLOCK - 1, 1, d + 1), v.shape[:d + 1] + v.shape[d + 2:])
        totals = ops.reshape(scan(totals, d), v.shape[:d + 1] + (1,) + v.shape[d + 2:])
        ends = (at(totals, 1, blocks - 1, d), at(v, 0, blocks - 1, d)) if reverse else \
            (at(totals, 0, blocks - 1, d), at(v, 1, blocks - 1, d))
        carried = ops.mul(ops.expand(ends[0], ends[1].shape), ends[1])
        v = ops.concat([carried, at(v, blocks - 1, 1, d)] if reverse else [at(v, 0, 1, d), carried], d)
        return at(ops.reshape(v, v.shape[:d] + (blocks * SCAN_BLOCK,) + v.shape[d + 2:]), 0, n, d)

    return scan(x, axis) if x.shape[axis] else x


def _cumlogsumexp(eqn, x):
    return _in_float32(lambda v: _cumulative(_logaddexp, "amax")(eqn, v))(eqn, x)


def _rev(eqn, x):
    """``jnp.flip`` (:func:`~.gathers.rev`); of an iota of a run-time shape along its axis, the reversed
    iota (``jnp.argsort(descending=True)``'s payload)."""
    out = rev(eqn, x)
    made = _IOTAS.get().get(x)
    if made is not None and eqn.params["dimensions"] == (made[0],):
        _IOTAS.get()[out] = (made[0], made[1] + made[2] * (x.shape[made[0]] - 1), -made[2])
    return out


def _tile(eqn, x):
    """``jnp.tile``: ``x`` as (1, n0, 1, n1, ...) broadcast to (r0, n0, r1, n1, ...), then merged."""
    reps = tuple(eqn.params["reps"])
    pairs = [(r, n) for r, n in zip(reps, x.shape)]
    spread = ops.expand(ops.reshape(x, [d for _, n in pairs for d in (1, n)]), [d for p in pairs for d in p])
    return ops.reshape(spread, [r * n for r, n in pairs])


def _shift_right_logical(eqn, x, n):
    """``x >> n`` filling with zeros: the arithmetic shift with the sign's copies masked off
    (``(1 << (bits - n)) - 1``, all ones for n = 0: a shift by the width is 0); 0 for counts outside
    ``[0, bits)`` (as XLA)."""
    bits = 8 * x.dtype.itemsize
    if is_const(n):
        n = np.asarray(n, x.dtype)
        inside = (n > 0) & (n < bits)
        mask = np.where(inside, (np.int64(1) << np.where(inside, bits - n, 0).astype(np.int64)) - 1, 0).astype(x.dtype)
        r = ops.bitwise_and(ops.shift_right(x, np.where(inside, n, 0).astype(x.dtype)), mask)
        return ops.where(np.asarray(n == 0), x, r)
    one = np.ones((), x.dtype)
    mask = ops.sub(ops.shift_left(one, ops.sub(np.asarray(bits, x.dtype), n)), one)
    return ops.where(ops.logical_or(ops.lt(n, np.zeros((), x.dtype)), ops.ge(n, np.asarray(bits, x.dtype))),
                     np.zeros((), x.dtype), ops.bitwise_and(ops.shift_right(x, n), mask))


def _population_count(eqn, x):
    """Set bits per element by SWAR sums (pairs, nibbles, bytes, then a multiply that adds the bytes into
    the top one); each arithmetic shift is masked, so the sign's copies never count."""
    bits, dt = 8 * x.dtype.itemsize, x.dtype.type

    def mask(byte):
        return dt(np.array(int.from_bytes(bytes([byte] * (bits // 8)), "little"), np.uint64).astype(x.dtype))

    v = ops.sub(x, ops.bitwise_and(ops.shift_right(x, dt(1)), mask(0x55)))
    v = ops.add(ops.bitwise_and(v, mask(0x33)), ops.bitwise_and(ops.shift_right(v, dt(2)), mask(0x33)))
    v = ops.bitwise_and(ops.add(v, ops.shift_right(v, dt(4))), mask(0x0F))
    if bits > 8:
        v = ops.bitwise_and(ops.shift_right(ops.mul(v, mask(0x01)), dt(bits - 8)), dt(0xFF))
    return v


def _clz(eqn, x):
    """Leading zeros: ``bits`` minus the set bits of ``x`` with its top bit smeared down (a negative
    ``x`` smears to all ones: 0)."""
    bits, dt = 8 * x.dtype.itemsize, x.dtype.type
    step = 1
    while step < bits:
        x = ops.bitwise_or(x, ops.shift_right(x, dt(step)))
        step *= 2
    return ops.sub(dt(bits), _population_count(eqn, x))


def _split(eqn, x):
    axis, start, out = eqn.params["axis"], 0, []
    for size in eqn.params["sizes"]:
        out.append(ops.view(x, [size if d == axis else n for d, n in enumerate(x.shape)],
                            [start if d == axis else 0 for d in range(x.ndim)]))
        start += size
    return out


def _unstack(eqn, x):
    """``jnp.unstack`` (and the derivative of ``jnp.stack``): each index of ``axis`` as a one-wide view,
    reshaped without the axis."""
    axis = eqn.params["axis"]
    rest = [n for d, n in enumerate(x.shape) if d != axis]
    return [ops.reshape(ops.view(x, [1 if d == axis else n for d, n in enumerate(x.shape)],
                                 [i if d == axis else 0 for d in range(x.ndim)]), rest) for i in range(x.shape[axis])]


def _ordered(x, y):
    """``x``, ``y`` as operands of a comparison: bools as int32."""
    return (ops.cast(x, jnp.int32), ops.cast(y, jnp.int32)) if x.dtype == np.bool_ else (x, y)


def _zeros_below(x, y):
    """Where ``x`` is -0.0 and ``y`` is +0.0: ``1 / x < 1 / y`` of two zeros (-inf < +inf)."""
    zero, one = np.zeros((), x.dtype), np.ones((), x.dtype)
    both = ops.logical_and(ops.eq(x, zero), ops.eq(y, zero))
    return ops.logical_and(both, ops.lt(ops.div(one, x), ops.div(one, y)))


def _total_order(x, y, strict):
    """``lax.lt_to`` / ``le_to``: integers compare as ``lt`` / ``le``; floats by lax's total order, -inf < ...
    < -0.0 < +0.0 < ... < inf < NaN, every NaN counted as +NaN (a NaN's sign needs a bit cast, which the
    vector unit has not: ``-NaN`` sorts last here, first in XLA)."""
    x, y = _ordered(x, y)
    if x.dtype not in _FLOAT:
        return ops.lt(x, y) if strict else ops.le(x, y)
    if not strict:                                  # a total order: x <= y where not y < x
        return ops.logical_not(_total_order(y, x, strict=True))
    below_nan = ops.logical_and(ops.eq(x, x), ops.ne(y, y))
    return ops.logical_or(ops.logical_or(ops.lt(x, y), below_nan), _zeros_below(x, y))


def _total_eq(x, y):
    """``lax.eq_to``: equal in :func:`_total_order` (two NaNs equal, -0.0 and +0.0 not)."""
    x, y = _ordered(x, y)
    if x.dtype not in _FLOAT:
        return ops.eq(x, y)
    return ops.logical_not(ops.logical_or(_total_order(x, y, strict=True), _total_order(y, x, strict=True)))


def _ordered_bools(op, on_bools):
    """``op`` (a comparison, max or min), in its form as logic where both operands are bool (False < True):
    the vector units compare numbers only."""
    def rule(e, x, y):
        if all(np.dtype(getattr(v, "dtype", None) or np.asarray(v).dtype) == np.bool_ for v in (x, y)):
            return on_bools(x, y)
        return op(x, y)
    return rule


_AND, _OR, _NOT = ops.logical_and, ops.logical_or, ops.logical_not
RULES = {
    "add": lambda e, x, y: ops.add(x, y), "add_any": lambda e, x, y: ops.add(x, y),    # add_any: grad's sums
    "sub": lambda e, x, y: ops.sub(x, y),
    "mul": lambda e, x, y: ops.mul(x, y), "max": _ordered_bools(ops.maximum, _OR),
    "min": _ordered_bools(ops.minimum, _AND), "pow": _pow,
    "rem": lambda e, x, y: ops.fmod(x, y),
    "and": lambda e, x, y: ops.bitwise_and(x, y), "or": lambda e, x, y: ops.bitwise_or(x, y),
    "xor": lambda e, x, y: ops.bitwise_xor(x, y), "not": lambda e, x: ops.bitwise_not(x),
    "shift_left": lambda e, x, n: ops.shift_left(x, n), "shift_right_arithmetic": lambda e, x, n: ops.shift_right(x, n),
    "shift_right_logical": _shift_right_logical, "population_count": _population_count, "clz": _clz,
    "exp": lambda e, x: ops.exp(x), "log": lambda e, x: ops.log(x), "sqrt": lambda e, x: ops.sqrt(x),
    "rsqrt": lambda e, x: ops.rsqrt(x), "tanh": lambda e, x: ops.tanh(x), "logistic": lambda e, x: ops.sigmoid(x),
    "abs": lambda e, x: ops.abs(x), "neg": lambda e, x: ops.neg(x), "square": lambda e, x: ops.mul(x, x),
    "is_finite": lambda e, x: ops.eq(ops.sub(x, x), np.zeros((), x.dtype)),    # inf - inf and NaN - NaN: NaN
    "reduce_or": _bool_reduce(ops.amax), "reduce_and": _bool_reduce(ops.amin),
    "floor": _to_integer("floor"), "ceil": _to_integer("ceil"),
    "round": _to_integer(lambda e: "rint" if int(e.params["rounding_method"]) else "round"),
    **{name: _in_float32(getattr(libm, name)) for name in (
        "log1p", "expm1", "exp2", "erf", "erfc", "sin", "cos", "tan", "atan", "asin", "acos", "sinh", "cosh",
        "asinh", "acosh", "atanh", "cbrt")},
    "atan2": lambda e, y, x: _in_float32(lambda v: libm.atan2(v, ops.cast(x, jnp.float32)))(e, y),
    "sign": lambda e, x: ops.where(ops.gt(x, np.zeros((), x.dtype)), np.ones((), x.dtype),   # x * 0 keeps -0.0 and
                                   ops.where(ops.lt(x, np.zeros((), x.dtype)), -np.ones((), x.dtype),   # NaN, and is
                                             ops.mul(x, np.zeros((), x.dtype)))),  # ±0 for a subnormal flushed to 0
    "integer_pow": _integer_pow, "convert_element_type": _convert,
    "eq": lambda e, x, y: ops.eq(x, y), "ne": lambda e, x, y: ops.ne(x, y),
    "lt": _ordered_bools(ops.lt, lambda x, y: _AND(_NOT(x), y)), "le": _ordered_bools(ops.le, lambda x, y: _OR(_NOT(x), y)),
    "gt": _ordered_bools(ops.gt, lambda x, y: _AND(x, _NOT(y))), "ge": _ordered_bools(ops.ge, lambda x, y: _OR(x, _NOT(y))),
    "select_n": _select_n, "clamp": lambda e, lo, x, hi: ops.clip(x, lo, hi),
    "reduce_sum": _reduce(ops.sum), "reduce_max": _reduce(ops.amax, _bool_reduce(ops.amax)),
    "reduce_min": _reduce(ops.amin, _bool_reduce(ops.amin)),
    "reduce_prod": _reduce(ops.prod), "argmax": _arg_reduce(ops.argmax), "argmin": _arg_reduce(ops.argmin),
    "cumsum": lambda e, x: ops.cumsum(x, e.params["axis"], reverse=e.params["reverse"]),
    "cummax": _cumulative(ops.maximum, "amax"), "cummin": _cumulative(ops.minimum, "amin"),
    "cumprod": _cumprod, "cumlogsumexp": _cumlogsumexp,
    "dot_general": _dot_general, "broadcast_in_dim": _broadcast_in_dim,
    "reshape": lambda e, x: ops.reshape(x if e.params["dimensions"] is None else ops.permute(x, e.params["dimensions"]),
                                        e.params["new_sizes"]),
    "squeeze": lambda e, x: ops.reshape(x, [n for d, n in enumerate(x.shape) if d not in e.params["dimensions"]]),
    "expand_dims": lambda e, x: ops.reshape(x, e.outvars[0].aval.shape),
    "transpose": _transpose,
    "concatenate": lambda e, *xs: ops.concat(xs, e.params["dimension"]),
    "slice": _slice, "dynamic_slice": dynamic_slice, "dynamic_update_slice": dynamic_update_slice,
    "gather": gather, "scatter": scatter(ops.scatter_update), "scatter-add": scatter(ops.index_add),
    "scatter_add": scatter(ops.index_add), "sort": _sort, "top_k": _top_k,
    **{name: _combining_scatter for name in ("scatter-mul", "scatter_mul", "scatter-min", "scatter_min",
                                             "scatter-max", "scatter_max")},
    "stack": lambda e, *xs: ops.concat([ops.reshape(x, _with_unit(x.shape, e.params["axis"])) for x in xs],
                                       e.params["axis"]),
    "split": lambda e, x: _split(e, x), "unstack": lambda e, x: _unstack(e, x), "rev": _rev, "tile": _tile,
    "lt_to": lambda e, x, y: _total_order(x, y, strict=True), "le_to": lambda e, x, y: _total_order(x, y, strict=False),
    "eq_to": lambda e, x, y: _total_eq(x, y),
    "copy": lambda e, x: x, "copy_p": lambda e, x: x, "stop_gradient": lambda e, x: x, "name": lambda e, x: x,
    "bitcast_convert_type": lambda e, x: ops.bitcast(x, e.params["new_dtype"]),
    "optimization_barrier": lambda e, *xs: xs, "reduce_precision": _reduce_precision,
    **windows.RULES,
}
_ROWS = {"pto.gather": ops.gather, "pto.scatter_update": ops.scatter_update, "pto.index_add": ops.index_add}
_BOOL_RULES = {"and": ops.logical_and, "or": ops.logical_or, "not": ops.logical_not, "xor": ops.ne}
_INLINE = ("jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call", "remat2", "checkpoint")


_SHRINK = np.float32(1 - 2.0 ** -22)   # float32 quotients times this never pass |x / y|: 4 roundings < 2**-22


def _integer_div(x, y):
    """``lax.div`` of int32 (truncating; x / 0 is -1, INT_MIN / -1 wraps to INT_MIN, as XLA) with the
    vector unit's float divide, as a compiler does for hardware without an integer one: a float32
    quotient shrunk toward zero never passes the true one, so ``x - q y`` keeps ``x``'s sign and
    fits; a second such step leaves a remainder below ``2 |y|``, and one correction ends it."""
    one = np.int32(1)
    if is_const(y):             # a constant divisor's terms folded here, not left as scalar ops on constants
        zero = np.asarray(y) == 0
        nonzero = np.where(zero, one, y).astype(np.int32)
        fy, negative = nonzero.astype(np.float32), nonzero < 0
    else:
        zero = ops.eq(y, np.int32(0))
        nonzero = ops.where(zero, one, y)
        fy, negative = ops.cast(nonzero, jnp.float32), ops.lt(nonzero, np.int32(0))

    def step(r):
        return ops.cast(ops.mul(ops.div(ops.cast(r, jnp.float32), fy), _SHRINK), jnp.int32, rounding="trunc")

    q1 = step(x)
    r = ops.sub(x, ops.mul(q1, nonzero))
    q2 = step(r)
    q, r = ops.add(q1, q2), ops.sub(r, ops.mul(q2, nonzero))
    same = ops.eq(ops.lt(x, np.int32(0)), negative)
    toward = ops.sub(ops.mul(ops.cast(same, jnp.int32), np.int32(2)), one)   # sign(x) sign(y): 1 or -1
    past = ops.sub(r, ops.mul(nonzero, toward))               # the remainder of q + toward
    fits = ops.logical_or(ops.eq(past, np.int32(0)), ops.eq(ops.lt(past, np.int32(0)), ops.lt(x, np.int32(0))))
    q = ops.where(fits, ops.add(q, toward), q)
    return q if is_const(zero) and not zero.any() else ops.where(zero, np.int32(-1), q)


def _div(eqn, x, y):
    if x.dtype in _FLOAT:
        return ops.div(x, y)
    if is_const(y):         # a Python divisor (x // 2): a 0-d array, which the scalar steps can take
        y = np.asarray(y, eqn.invars[1].aval.dtype)
    if x.dtype == np.int8:                                    # exact in int32; -128 / -1 wraps back to -128
        y = y.astype(np.int32) if is_const(y) else ops.cast(y, jnp.int32)
        return ops.cast(_integer_div(ops.cast(x, jnp.int32), y), jnp.int8, saturate=False)
    return _integer_div(x, y)


RULES["div"] = _div


FOLD_ELEMENTS = 1 << 20   # constant eqns fold at trace time up to this many output elements; a larger
                          # one (jnp.where(mask, 1.0, 0.0) over a vocabulary's logits) runs on the cores


SPREAD_ELEMENTS = 4096    # a constant array broadcast past this many elements stays a broadcast (the cores
                          # expand it per tile), not a folded copy of every element


def _spreads(eqn, invals) -> bool:
    """Whether ``eqn`` broadcasts a constant array (not a scalar: a uniform fill becomes a scalar of the tiles
    it meets) to more than :data:`SPREAD_ELEMENTS` elements: a causal mask ``tril(ones((16, 16)))[None, :, :,
    None, None]`` over a (4, 16, 16, 32, 16) tensor is 256 values in GM, not 524 288."""
    return eqn.primitive.name == "broadcast_in_dim" and np.size(invals[0]) > 1 and _elements(eqn) > SPREAD_ELEMENTS


def _elements(eqn) -> int:
    """The eqn's output elements; a count with a dim known at run time (symbolic, or a polymorphic
    compile's template rows: :func:`run_time_sizes`) counts as too large to fold."""
    if any(at_run_time(d) for v in eqn.outvars for d in v.aval.shape):
        return FOLD_ELEMENTS + 1
    return sum(math.prod(v.aval.shape) for v in eqn.outvars)


def _iota(eqn):
    """``lax.iota`` / ``broadcasted_iota`` with a dim known at run time: ``pto.iota`` along ``dimension``
    (``np.arange`` where that dim is static), cast, then broadcast to the shape."""
    shape, axis, dtype = eqn.params["shape"], eqn.params["dimension"], np.dtype(eqn.params["dtype"])
    n = shape[axis]
    line = arange(n)
    if dtype != np.int32:
        line = ops.cast(line, dtype)
    if len(shape) == 1:
        return line
    return ops.expand(ops.reshape(line, [n if d == axis else 1 for d in range(len(shape))]), shape)


# ------------------------------------------------------------------------------ kernels in a kernel
_TILES = contextvars.ContextVar("inlined_tiles", default=())   # the inlined kernels' tile overrides, innermost first


def _inline_kernel(eqn, invals, stack):
    """A ``pj.kernel`` called inside the kernel: its traced function translated in place (the ops of its
    Tensor level, with its ``pj.tile`` hints and labels, and its own source lines for errors), one graph
    with the caller's. Its ``options={"tiles": ...}`` stay its ops' tiles (:func:`_overridden`); how a
    kernel runs on its own (``target``, ``backend``, ``executor``, ``interpret``, ``donate_argnums``) and
    its schedule (``tiles_per_block``, ``row_loops``) are the outer kernel's to set for the whole graph,
    by the same labels."""
    call = eqn.params["call"]
    traced = call.lowering.traced
    tiles = dict(PassOptions.make(call.options.pass_options).tiles)
    default = tiles.pop("DEFAULT", TileConfig())
    ENCLOSING.append(eqn)
    token = _TILES.set((tiles, *_TILES.get()))
    try:
        with _tile_scope(default):
            return interpret(traced.jaxpr, traced.consts, invals, _rule, stack)
    finally:
        _TILES.reset(token)
        ENCLOSING.pop()


@contextlib.contextmanager
def _tile_scope(config: TileConfig):
    """Within: ``config`` as a ``pj.tile`` scope (nothing for an empty one)."""
    if config.vec is None and config.cube is None:
        yield
        return
    with jax.named_scope(config.scope_name()):
        yield


@contextlib.contextmanager
def _overridden(eqn, stack: str):
    """Within: the tile overrides inlined kernels give the label of an op at ``stack``, innermost (so
    winning over its ``pj.tile``) the outermost kernel's, as the outer one's own options win at the tile level."""
    tables = _TILES.get()
    if not tables or eqn.primitive.name in (*_INLINE, *CONTROL, "pto_call"):   # their bodies' ops get them
        yield
        return
    label = read_scope(stack)[1]
    with contextlib.ExitStack() as scopes:
        for table in tables:
            if label in table:
                scopes.enter_context(_tile_scope(table[label]))
        yield


def _polymorphic(eqn) -> bool:
    """Whether ``eqn`` is the call of a kernel compiled with ``polymorphic_shapes``: its compiled code
    (the replay of its dynamic module), not its function, is what reached the trace."""
    return eqn.primitive.name == "custom_jvp_call" and any(own_path(f) == "polymorphic.py"
                                                           for f, *_ in frames(eqn.source_info))


_POLYMORPHIC = ("a pj.kernel with polymorphic_shapes cannot run inside another kernel: its one compile for every row "
                "count reaches the trace as compiled code, not as a function to inline; call it without "
                "polymorphic_shapes inside (give them to the outer kernel)")


def _primitives(jaxpr) -> set:
    """The names of the primitives in ``jaxpr`` and its bodies."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    return {e.primitive.name for e in jaxpr.eqns}.union(*(_primitives(j) for e in jaxpr.eqns
                                                         for j in jaxprs_in_params(e.params)))


_SEARCHES = ("_searchsorted_scan_impl", "_searchsorted_sort_impl")


def _searchsorted(eqn, a, v):
    """``jnp.searchsorted``'s ``method='scan'`` (the default: a binary search on uint32 bounds, a dtype no
    tile holds) and ``method='sort'`` (a sort of the array and the queries, whose NaN order no sort here
    keeps) as ``method='compare_all'`` computes it: per query the count of the sorted array's entries
    before it (``a < v`` for side 'left'; ``a <= v`` for 'right'), floats in the order of ``jnp.sort``
    (-0.0 = +0.0, NaN last) — the same index for a sorted ``a``. The side: the scan's search compares
    ``v <= a[mid]`` (``le_to``) for 'left'; the sort puts the queries before the array for 'left'."""
    body = eqn.params["jaxpr"].jaxpr
    if eqn.params["name"] == "_searchsorted_sort_impl":
        joined = next(e for e in body.eqns if e.primitive.name == "concatenate")
        left = joined.invars[0] is not body.invars[0]
    else:
        left = "le_to" in _primitives(body)
    if a.ndim != 1:
        raise unsupported(eqn, f"(jnp.searchsorted) is translated for one 1-D sorted array, not {tuple(a.shape)}: "
                               "pass method='compare_all'")
    n = a.shape[0]
    if any(map(at_run_time, v.shape)):        # rows known at run time stay the leading dim: the array last
        axis, shape = v.ndim, (*v.shape, n)
        a, v = ops.reshape(a, (1,) * v.ndim + (n,)), ops.reshape(v, (*v.shape, 1))
    else:                                     # the array first: the count adds whole slabs
        axis, shape = 0, (n, *v.shape)
        a, v = ops.reshape(a, (n,) + (1,) * v.ndim), ops.reshape(v, (1, *v.shape))
    a, v = ops.expand(a, shape), ops.expand(v, shape)
    if a.dtype in _FLOAT:                           # jnp.sort's order: plain <, NaN above everything
        def less(p, q):
            return ops.logical_or(ops.lt(p, q), ops.logical_and(ops.eq(p, p), ops.ne(q, q)))
        before = less(a, v) if left else ops.logical_not(less(v, a))
    else:
        a, v = _ordered(a, v)
        before = ops.lt(a, v) if left else ops.le(a, v)
    out = ops.sum(ops.cast(before, jnp.int32), axis)
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    return out if dtype == np.int32 else ops.cast(out, dtype)


_RANDOM = ("random_seed", "random_bits", "random_split", "random_fold_in", "random_wrap", "random_unwrap",
           "random_clone", "threefry2x32")


def _draws(eqn) -> bool:
    """Whether ``eqn`` is a ``jax.random`` step: a PRNG primitive, or one taking or making a key."""
    return eqn.primitive.name in _RANDOM or any(
        jax.dtypes.issubdtype(v.aval.dtype, jax.dtypes.prng_key) for v in (*eqn.invars, *eqn.outvars)
        if hasattr(v.aval, "dtype"))


_COLLECTIVES = ("axis_index", "psum", "pmax", "pmin", "ppermute", "pbroadcast", "all_gather", "all_to_all",
                "psum_scatter", "reduce_scatter", "psum_invariant")
_CALLBACKS = ("debug_callback", "debug_print", "pure_callback", "io_callback")


def _refused(eqn) -> PtoUnsupportedError | None:
    """The refusal of a step no core program can take: a random draw, a collective over a mesh axis, a
    host callback, a complex number."""
    if _draws(eqn):
        return _no_random(eqn)
    if eqn.primitive.name in _COLLECTIVES:
        return unsupported(eqn, "is a collective over mesh axes, and a kernel is one core's program: apply it "
                                "outside the kernel (inside jax.shard_map, around the pj.kernel call)")
    if eqn.primitive.name in _CALLBACKS:
        return unsupported(eqn, "calls back to Python, and a kernel's body runs as PTO programs on the cores: "
                                "print or call back on the kernel's inputs or results outside it (or run the "
                                "function without pj.kernel)")
    complex_ = [v.aval.str_short() for v in eqn.outvars if jnp.issubdtype(v.aval.dtype, jnp.complexfloating)]
    if complex_ and eqn.primitive.name not in _INLINE:   # (jnp.fft, jnp.angle, complex arithmetic; a jit: its body)
        return unsupported(eqn, f"makes {', '.join(complex_)}, and the cores have no complex numbers: compute "
                                "with the real and imaginary parts as float32 arrays (an FFT as matmuls by the "
                                "cos / sin DFT matrices), or outside the kernel")
    return None


def _no_random(eqn) -> PtoUnsupportedError:
    """The refusal of a ``jax.random`` step in a kernel, at the user's ``jax.random`` call and line."""
    return unsupported(eqn, "makes or uses a jax.random key, and a kernel draws no random numbers: draw them "
                            "outside the kernel and pass them in as arguments (e.g. noise = "
                            "jax.random.gumbel(key, logits.shape) outside, then pj.kernel(f)(logits, noise))")


# ops exact on the bits of a uint32 id held as int32: jax.grad of ``x.at[i].set`` scatters its updates'
# ids (1, 2, ...) into zeros to see which write wins and gathers and compares them; the ids are constants
_ID_OPS = frozenset({"scatter", "gather", "eq", "ne", "select_n", "concatenate", "broadcast_in_dim", "reshape"})


def _ids(x):
    """A uint32 constant below 2**31 (no tile holds uint32) as int32, the same values; ``x`` otherwise."""
    if is_const(x) and np.asarray(x).dtype == np.uint32 and (np.size(x) == 0 or np.max(x) < 2 ** 31):
        return np.asarray(x).astype(np.int32)
    return x


def _rule(eqn, invals, stack):
    with blame(eqn), _overridden(eqn, stack), traced_at(user_traceback(eqn)):
        return _translate(eqn, invals, stack)


def _translate(eqn, invals, stack):
    name = eqn.primitive.name
    if name == "squeeze" and np.shape(invals[0]) == eqn.outvars[0].aval.shape:
        return invals                            # its slice already has the squeezed rank (_merged)
    refused = _refused(eqn)
    if refused is not None:
        raise refused
    const = all(is_const(x) for x in invals)
    if not const and name in _ID_OPS:
        invals = [_ids(x) for x in invals]
    # pto ops are not folded, constant operands or not (a gather's gradient: a constant into zeros)
    if name in _ROWS and eqn.params["axis"]:    # along an inner axis only the row form has a real PTO lowering
        out = rows_of(_ROWS[name], *invals, axis=eqn.params["axis"])
    elif name == "pto.gelu" and not eqn.params["approximate"]:
        out = _in_float32(_gelu_erf)(eqn, *invals)
    elif name.startswith("pto."):
        out = eqn.primitive.bind(*invals, **eqn.params)
    elif name == "pto_call":
        return _inline_kernel(eqn, invals, stack)
    elif _polymorphic(eqn):
        raise PtoUnsupportedError(_POLYMORPHIC)
    elif name in ("jit", "pjit") and eqn.params.get("name") in _SEARCHES and not const:
        return [_searchsorted(eqn, *invals)]
    elif name in _INLINE:
        body, consts = body_of(eqn.params.get("call_jaxpr") or eqn.params.get("jaxpr"))
        ENCLOSING.append(eqn)
        try:
            return interpret(body, consts, invals, _rule, stack)
        finally:
            ENCLOSING.pop()
    elif name == "scan" and _stacks(eqn):
        return _scan_over_tensors(eqn, invals, stack)
    elif name in CONTROL:                      # errors in JAX's own parts of a loop (fori's counter) name its line
        ENCLOSING.append(eqn)
        try:
            return control(eqn, invals, stack, by_rule(_rule))
        finally:
            ENCLOSING.pop()
    elif name == "dim_as_value":                 # a symbolic dimension's value (jax.export): known at run time
        out = eqn.primitive.bind(*invals, **eqn.params)
    elif name == "iota" and any(at_run_time(n) for n in eqn.params["shape"]):
        out = _iota(eqn)                         # indices of a size known at run time: made on the cores
        _IOTAS.get()[out] = (eqn.params["dimension"], 0, 1)
    elif const and name not in RULES and not all(isinstance(d, int) for v in eqn.outvars for d in v.aval.shape):
        raise unsupported(eqn, f"makes a constant of the symbolic shape {eqn.outvars[0].aval.str_short()}: constants "
                                "are folded at trace time, so their shapes must be static")
    elif const and (name not in RULES or _elements(eqn) <= FOLD_ELEMENTS) and not _spreads(eqn, invals):
        out = _folded(eqn, invals)
    elif name in _BOOL_RULES and all(x.dtype == np.bool_ for x in invals if hasattr(x, "dtype")):
        out = _BOOL_RULES[name](*invals)
    elif const:                                  # too large to fold: computed on the cores
        out = RULES[name](eqn, *[np.asarray(x, v.aval.dtype) for x, v in zip(invals, eqn.invars)])
        _SPREAD.get()[out] = functools.partial(_folded, eqn, invals)
    elif name in RULES:
        out = RULES[name](eqn, *invals)
    else:
        raise unsupported(eqn)
    return list(out) if eqn.primitive.multiple_results else [out]


def _folded(eqn, invals):
    """``eqn`` of constants evaluated at trace time (NumPy arrays)."""
    with jax.ensure_compile_time_eval():
        return jax.tree.map(np.asarray, eqn.primitive.bind(*invals, **eqn.params))


def to_tensor_level(closed: ClosedJaxpr) -> ClosedJaxpr:
    """The Tensor graph: ``closed`` with every compute eqn a ``pto.*`` op, those nothing reads dropped."""
    token, transposed = _SQUEEZED.set(_squeezed_slices(closed.jaxpr)), _TRANSPOSED.set(Memo())
    spread, iotas = _SPREAD.set(Memo()), _IOTAS.set(Memo())
    try:
        out = retrace(closed, _rule)
    finally:
        _SQUEEZED.reset(token)
        _TRANSPOSED.reset(transposed)
        _SPREAD.reset(spread)
        _IOTAS.reset(iotas)
    return mark_skip_nan(ClosedJaxpr(live(out.jaxpr), out.consts))
