"""Layout ops: reshape, transpose/permute, expand, concat, view, assemble, pad.

All are linear, so each has a JVP that re-applies the op and a transpose written with the others
(``expand``'s is a sum, registered in ``reduce.py``: layout sits below the reductions).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._jax import ad, batching
from ..errors import PtoArgumentError, PtoDtypeError, PtoShapeError, op_error
from . import dims
from ._base import (ALIASES, FLOAT, NUMERIC, batch_size, broadcast_shapes, canonical_dtype, check_dtype,
                    check_same_dtype, define, is_float_scalar, normalize_axis, operands, shaped, static_shape, tensor)


def _front(x, d):
    """Move batch dim ``d`` of ``x`` to the front (no-op when already there; a reshape when it only
    passes dims of size 1)."""
    if d == 0:
        return x
    perm = (d,) + tuple(i for i in range(x.ndim) if i != d)
    return _permuted(x, perm)


def moves_data(shape, permutation) -> bool:
    """Whether ``permutation`` of a tensor of ``shape`` moves any element: False where it only moves
    dims of size 1 (the other dims keep their order), so the result is the same bytes in the same
    order, a reshape. A symbolic dim counts as longer than 1."""
    kept = [p for p in permutation if not (isinstance(shape[p], (int, np.integer)) and shape[p] == 1)]
    return kept != sorted(kept)


def _permuted(x, permutation):
    """``transpose_p`` of ``x`` on its fewest dims: a reshape where the permutation moves only dims of
    size 1 (a GM reinterpretation instead of a transpose grid of one task per row: 4 096 tasks for a
    ``[1, 4096, 256]`` operand of a ``dot_general`` contracting its unit dim after the real one); else
    the transpose of ``x`` with its unit dims dropped and the runs of dims that stay side by side
    merged, between two reshapes (a trailing unit dim made every tile row one element long)."""
    permutation = tuple(int(p) for p in permutation)
    shape = tuple(x.shape[p] for p in permutation)
    if not moves_data(x.shape, permutation):
        return x if shape == tuple(x.shape) else reshape_p.bind(x, new_shape=shape)
    if not all(isinstance(n, (int, np.integer)) for n in x.shape):
        return transpose_p.bind(x, permutation=permutation)
    kept = [p for p in permutation if x.shape[p] != 1]           # the dims that move, in output order
    rank = {p: i for i, p in enumerate(sorted(kept))}             # their places once unit dims are gone
    runs = []                                                    # runs of them that stay side by side
    for p in kept:
        if runs and rank[runs[-1][-1]] + 1 == rank[p]:
            runs[-1].append(p)
        else:
            runs.append([p])
    order = sorted(range(len(runs)), key=lambda r: runs[r][0])    # the runs in input order
    merged = tuple(int(np.prod([x.shape[d] for d in runs[r]])) for r in order)
    if merged == tuple(x.shape):                                 # nothing to drop or merge
        return transpose_p.bind(x, permutation=permutation)
    y = transpose_p.bind(reshape(x, merged), permutation=tuple(order.index(r) for r in range(len(runs))))
    return reshape(y, shape)


def batch_front(x, d, rank):
    """A vmapped operand for a broadcasting op: batch dim ``d`` moved to the front, then 1s inserted
    so its logical rank is ``rank`` (unbatched operands, ``d is None``, pass through)."""
    if d is None:
        return x
    x = _front(x, d)
    return reshape(x, (x.shape[0],) + (1,) * (rank - x.ndim + 1) + tuple(x.shape[1:]))


def _front_or_broadcast(x, d, size):
    return _front(x, d) if d is not None else expand(x, (size,) + tuple(x.shape))


# ------------------------------------------------------------------------------------------ reshape
def _reshape_abstract(x, *, new_shape):
    return shaped(new_shape, x.dtype)


reshape_p = define("reshape", "layout", abstract=_reshape_abstract,
                   reference=lambda x, *, new_shape: jnp.reshape(x, new_shape))
ad.deflinear2(reshape_p, lambda ct, x, *, new_shape: [reshape_p.bind(ct, new_shape=tuple(x.aval.shape))])
batching.primitive_batchers[reshape_p] = lambda args, dims, *, new_shape: (
    reshape_p.bind(_front(args[0], dims[0]), new_shape=(args[0].shape[dims[0]],) + new_shape), 0)


def reshape(x, shape):
    """Reshape ``x`` to ``shape`` (one entry may be -1; dims may be ``jax.export`` symbols)."""
    x = tensor("reshape", x)
    shape = dims.dims("reshape", shape)
    size = dims.size(x.shape)
    if shape.count(-1) > 1 or any(s < -1 for s in shape if not dims.is_symbolic(s)):
        raise op_error(PtoArgumentError, "reshape", f"shape {shape} may hold one -1 and no other negatives")
    if -1 in shape:
        known = dims.size([s for s in shape if not (isinstance(s, int) and s == -1)])
        if known == 0 or dims.size((size // known, known)) != size:
            raise op_error(PtoShapeError, "reshape", f"cannot infer -1 in {dims.shape_text(shape)} for "
                           f"{dims.shape_text(x.shape)} ({size} elements)")
        shape = tuple(size // known if isinstance(s, int) and s == -1 else s for s in shape)
    if dims.size(shape) != size:
        raise op_error(PtoShapeError, "reshape", f"cannot reshape {dims.shape_text(x.shape)} ({size} elements) to "
                       f"{dims.shape_text(shape)} ({dims.size(shape)} elements)")
    return x if shape == tuple(x.shape) else reshape_p.bind(x, new_shape=shape)


# ------------------------------------------------------------------------------------------ bitcast
def _bitcast_abstract(x, *, dtype):
    return shaped(x.shape, dtype)


bitcast_p = define("bitcast", "layout", abstract=_bitcast_abstract, differentiable=False, dtypes=NUMERIC,
                   reference=lambda x, *, dtype: lax.bitcast_convert_type(x, dtype))
batching.primitive_batchers[bitcast_p] = lambda args, dims, *, dtype: (bitcast_p.bind(args[0], dtype=dtype), dims[0])


def bitcast(x, dtype):
    """The bits of ``x`` as ``dtype`` of the same width (``lax.bitcast_convert_type``): a GM reinterpretation,
    as a reshape is (float32 <-> int32, float16 <-> bfloat16)."""
    x = tensor("bitcast", x)
    dt = canonical_dtype("bitcast", dtype)
    check_dtype("bitcast", "operand", x, NUMERIC)
    if dt == np.dtype(np.bool_) or dt.itemsize != np.dtype(x.dtype).itemsize:
        raise op_error(PtoDtypeError, "bitcast", f"{np.dtype(x.dtype).name} to {dt.name}: the cores reinterpret "
                       "GM bytes between numeric dtypes of one width only (float32 <-> int32, float16 <-> bfloat16)")
    return x if dt == x.dtype else bitcast_p.bind(x, dtype=dt)


# ---------------------------------------------------------------------------------------- transpose
def _transpose_abstract(x, *, permutation):
    return shaped([x.shape[p] for p in permutation], x.dtype)


transpose_p = define("transpose", "layout", abstract=_transpose_abstract,
                     reference=lambda x, *, permutation: jnp.transpose(x, permutation))
ad.deflinear2(transpose_p, lambda ct, x, *, permutation: [
    transpose_p.bind(ct, permutation=tuple(int(i) for i in np.argsort(permutation)))])
batching.primitive_batchers[transpose_p] = lambda args, dims, *, permutation: (
    transpose_p.bind(_front(args[0], dims[0]), permutation=(0,) + tuple(p + 1 for p in permutation)), 0)


ALIASES["permute"] = "transpose"


def permute(x, dims):
    """Reorder the axes of ``x``: output axis ``i`` is input axis ``dims[i]``. A permutation that only
    moves dims of size 1 (the others keep their order) is a reshape: no data moves."""
    x = tensor("permute", x)
    dims = static_shape("permute", dims, "dims")
    if sorted(d % x.ndim if -x.ndim <= d < x.ndim else -1 for d in dims) != list(range(x.ndim)):
        raise op_error(PtoArgumentError, "permute", f"dims {dims} is not a permutation of the "
                       f"{x.ndim} axes of {x.shape}")
    dims = tuple(d % x.ndim for d in dims)
    return x if dims == tuple(range(x.ndim)) else _permuted(x, dims)


def transpose(x, dim0: int = -2, dim1: int = -1):
    """Swap axes ``dim0`` and ``dim1`` of ``x`` (PyPTO's ``transpose``); see :func:`permute`."""
    x = tensor("transpose", x)
    if x.ndim < 2:
        raise op_error(PtoShapeError, "transpose", f"needs rank >= 2, got shape {x.shape}")
    a, b = normalize_axis("transpose", dim0, x.ndim), normalize_axis("transpose", dim1, x.ndim)
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return permute(x, perm)


# ------------------------------------------------------------------------------------------- expand
def _expand_abstract(x, *, shape):
    if broadcast_shapes("expand", x.shape, shape) != shape:
        raise op_error(PtoShapeError, "expand", f"cannot broadcast {x.shape} to {shape}")
    return shaped(shape, x.dtype)


def _expand_batch(args, dims, *, shape):
    x = batch_front(args[0], dims[0], len(shape))
    return expand_p.bind(x, shape=(x.shape[0],) + shape), 0


expand_p = define("expand", "layout", abstract=_expand_abstract,
                  reference=lambda x, *, shape: jnp.broadcast_to(x, shape))
# expand's transpose is a sum: registered in reduce.py, next to sum.
batching.primitive_batchers[expand_p] = _expand_batch


def expand(x, shape):
    """Broadcast ``x`` to ``shape`` (NumPy rules; PyPTO's ``expand_clone``)."""
    x = tensor("expand", x)
    shape = dims.dims("expand", shape)
    return x if shape == tuple(x.shape) else expand_p.bind(x, shape=shape)


# ------------------------------------------------------------------------------------------- concat
def _concat_abstract(*xs, axis):
    check_same_dtype("concat", *xs)
    first = xs[0]
    for x in xs[1:]:
        if x.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != axis):
            raise op_error(PtoShapeError, "concat", f"shapes {[tuple(t.shape) for t in xs]} differ "
                           f"outside axis {axis}")
    shape = list(first.shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return shaped(shape, first.dtype)


def _concat_transpose(ct, *xs, axis):
    out, start = [], 0
    for x in xs:
        aval = x.aval if ad.is_undefined_primal(x) else x
        n = aval.shape[axis]
        if ad.is_undefined_primal(x):
            offsets = tuple(start if i == axis else 0 for i in range(len(aval.shape)))
            out.append(view(ct, tuple(aval.shape), offsets))
        else:
            out.append(None)
        start += n
    return out


def _concat_batch(args, dims, *, axis):
    size = batch_size(args, dims)
    xs = [_front_or_broadcast(x, d, size) for x, d in zip(args, dims)]
    return concat_p.bind(*xs, axis=axis + 1), 0


concat_p = define("concat", "layout", abstract=_concat_abstract,
                  reference=lambda *xs, axis: jnp.concatenate(xs, axis=axis))
ad.deflinear2(concat_p, _concat_transpose)
batching.primitive_batchers[concat_p] = _concat_batch


def concat(tensors, axis: int = 0):
    """Join ``tensors`` (same dtype, same shape outside ``axis``) along ``axis``."""
    xs = [tensor("concat", t) for t in tensors]
    if not xs:
        raise op_error(PtoArgumentError, "concat", "needs at least one tensor")
    if any(x.ndim != xs[0].ndim for x in xs):
        raise op_error(PtoShapeError, "concat", f"ranks differ: {[tuple(x.shape) for x in xs]}")
    if xs[0].ndim == 0:
        raise op_error(PtoShapeError, "concat", "cannot concatenate rank-0 tensors")
    axis = normalize_axis("concat", axis, xs[0].ndim)
    _concat_abstract(*xs, axis=axis)                      # dtypes and shapes agree, empty operands too
    kept = [x for x in xs if not (isinstance(x.shape[axis], int) and x.shape[axis] == 0)] or xs[:1]
    return kept[0] if len(kept) == 1 else concat_p.bind(*kept, axis=axis)


# --------------------------------------------------------------------------------------------- view
def _view_abstract(x, *, shape, offsets, valid_shape):
    if not len(shape) == len(offsets) == len(valid_shape) == x.ndim:
        raise op_error(PtoShapeError, "view", f"shape {shape}, offsets {offsets} and valid_shape "
                       f"{valid_shape} must each have rank {x.ndim} of the input {tuple(x.shape)}")
    for dim, (n, s, o, v) in enumerate(zip(x.shape, shape, offsets, valid_shape)):
        rule = f"0 <= offset, 0 <= valid <= size and offset + valid <= {n}"
        if dims.decide("view", lambda: o < 0 or v < 0 or v > s or o + v > n,
                       f"window dim {dim} (offset {o}, valid {v}, size {s}) of the input {dims.shape_text(x.shape)} "
                       f"satisfies {rule}"):
            raise op_error(PtoShapeError, "view", f"window dim {dim}: offset {o}, valid {v}, size {s} "
                           f"must satisfy {rule} (input {tuple(x.shape)})")
    return shaped(shape, x.dtype)


def _view_reference(x, *, shape, offsets, valid_shape):
    window = lax.slice(x, offsets, tuple(o + v for o, v in zip(offsets, valid_shape)))
    return jnp.pad(window, [(0, s - v) for s, v in zip(shape, valid_shape)])


def _view_transpose(ct, x, *, shape, offsets, valid_shape):
    in_shape = x.aval.shape
    valid = view(ct, valid_shape, (0,) * len(shape))
    return [pad(valid, [(o, n - o - v) for n, o, v in zip(in_shape, offsets, valid_shape)])]


def _view_batch(args, dims, *, shape, offsets, valid_shape):
    x = _front(args[0], dims[0])
    n = x.shape[0]
    return view_p.bind(x, shape=(n,) + shape, offsets=(0,) + offsets, valid_shape=(n,) + valid_shape), 0


view_p = define("view", "layout", abstract=_view_abstract, reference=_view_reference)
ad.deflinear2(view_p, _view_transpose)
batching.primitive_batchers[view_p] = _view_batch


def view(x, shape, offsets, *, valid_shape=None):
    """The static window ``x[offsets : offsets + shape]``.

    With ``valid_shape`` only the leading ``valid_shape`` part of the window is read from ``x``
    (a partial tail tile, as PyPTO's ``view(..., valid_shape=...)``); the rest of the window is zero.
    """
    x = tensor("view", x)
    shape = dims.dims("view", shape)
    offsets = static_shape("view", offsets, "offsets")
    valid_shape = shape if valid_shape is None else dims.dims("view", valid_shape, "valid_shape")
    if shape == tuple(x.shape) and valid_shape == shape and not any(offsets):
        return x
    return view_p.bind(x, shape=shape, offsets=offsets, valid_shape=valid_shape)


# ----------------------------------------------------------------------------------------- assemble
def _assemble_abstract(x, out, *, offsets):
    check_same_dtype("assemble", x, out)
    fits = f"input {dims.shape_text(x.shape)} at offsets {offsets} fits inside the output {dims.shape_text(out.shape)}"
    if x.ndim != out.ndim or len(offsets) != out.ndim or dims.decide("assemble", lambda: any(
            o < 0 or o + s > n for o, s, n in zip(offsets, x.shape, out.shape)), fits):
        raise op_error(PtoShapeError, "assemble", f"input {tuple(x.shape)} at offsets {offsets} does not "
                       f"fit inside the output {tuple(out.shape)}")
    return shaped(out.shape, out.dtype)


def _assemble_transpose(ct, x, out, *, offsets):
    x_shape = (x.aval if ad.is_undefined_primal(x) else x).shape
    ct_x = view(ct, x_shape, offsets) if ad.is_undefined_primal(x) else None
    ct_out = (assemble_p.bind(jnp.zeros(x_shape, ct.dtype), ct, offsets=offsets)
              if ad.is_undefined_primal(out) else None)
    return [ct_x, ct_out]


def _assemble_batch(args, dims, *, offsets):
    size = batch_size(args, dims)
    x, out = (_front_or_broadcast(a, d, size) for a, d in zip(args, dims))
    return assemble_p.bind(x, out, offsets=(0,) + offsets), 0


assemble_p = define("assemble", "layout", abstract=_assemble_abstract,
                    reference=lambda x, out, *, offsets: lax.dynamic_update_slice(out, x, offsets))
ad.deflinear2(assemble_p, _assemble_transpose)
batching.primitive_batchers[assemble_p] = _assemble_batch


def assemble(x, offsets, out):
    """``out`` with the window at ``offsets`` replaced by ``x`` (functional; PyPTO's ``assemble``)."""
    x, out = tensor("assemble", x), tensor("assemble", out)
    return assemble_p.bind(x, out, offsets=static_shape("assemble", offsets, "offsets"))


# ---------------------------------------------------------------------------------------------- pad
def _pad_abstract(x, *, pads, value):
    if len(pads) != x.ndim:
        raise op_error(PtoShapeError, "pad", f"pads {pads} needs one (low, high) pair per axis of {tuple(x.shape)}")
    return shaped([n + lo + hi for n, (lo, hi) in zip(x.shape, pads)], x.dtype)


def _pad_reference(x, *, pads, value):
    if not pads:                                # a rank-0 operand (jnp.pad refuses)
        return x
    return jnp.pad(x, pads, constant_values=np.asarray(value, x.dtype))


def _pad_transpose(ct, x, *, pads, value):
    return [view(ct, tuple(x.aval.shape), tuple(lo for lo, _ in pads))]


def _pad_batch(args, dims, *, pads, value):
    return pad_p.bind(_front(args[0], dims[0]), pads=((0, 0),) + pads, value=value), 0


pad_p = define("pad", "layout", abstract=_pad_abstract, reference=_pad_reference)
ad.primitive_jvps[pad_p] = lambda primals, tangents, *, pads, value: (
    pad_p.bind(primals[0], pads=pads, value=value),
    pad_p.bind(ad.instantiate_zeros(tangents[0]), pads=pads, value=0))
ad.primitive_transposes[pad_p] = _pad_transpose
batching.primitive_batchers[pad_p] = _pad_batch


def pad(x, pads, value=0):
    """Pad ``x`` with ``value`` (a number): ``pads`` holds one ``(low, high)`` pair of non-negative ints per axis."""
    x = tensor("pad", x)
    try:
        pads = tuple((dims.as_int(lo), dims.as_int(hi)) for lo, hi in pads)
    except (TypeError, ValueError):
        raise op_error(PtoArgumentError, "pad", f"pads must be (low, high) pairs of ints, got {pads!r}") from None
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        raise op_error(PtoArgumentError, "pad", f"pads {pads} must be non-negative")
    if is_float_scalar(value) and x.dtype not in FLOAT:
        raise op_error(PtoArgumentError, "pad", f"float pad value {value} for a {x.dtype.name} tensor")
    if isinstance(value, jax.core.Tracer):
        raise op_error(PtoArgumentError, "pad", "the pad value must be a number known when the kernel is traced "
                       f"(a Python or NumPy scalar), got a traced {value.dtype.name} value: for a value computed in "
                       "the kernel, pad with 0 and add the value where a mask of the border says (jnp.where)")
    (value,) = operands("pad", x, value.item() if isinstance(value, np.generic) else value)[1:]
    if value.ndim:
        raise op_error(PtoArgumentError, "pad", f"the pad value must be a scalar, got shape {value.shape}")
    return pad_p.bind(x, pads=pads, value=value.item())
