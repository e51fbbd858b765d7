"""Indexing ops: gather (index_select), index_add, scatter_update, topk, sort.

Indices are int32. An index outside ``[0, n)`` (-1 is the usual padding) selects zeros in ``gather``
and writes nothing in ``index_add`` and ``scatter_update``: this is how padded top-k lists and
unused KV-cache slots behave. When ``scatter_update`` writes one row twice, the last write wins;
``index_add`` adds repeated indices one at a time in index order, in the operand's dtype (fp16 and
bf16 round after each add).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._jax import ad, batching
from ..errors import PtoArgumentError, PtoShapeError, op_error
from . import dims, elementwise, layout
from ._base import (ANY, FLOAT, I32, NUMERIC, batch_size, check_dtype, check_same_dtype, define, flag,
                    normalize_axis, shaped, tensor)


def _in_range(idx, n):
    return (idx >= 0) & (idx < n)


def _index_shape(x_shape, idx_shape, axis):
    return tuple(x_shape[:axis]) + tuple(idx_shape) + tuple(x_shape[axis + 1:])


def _check_index(op, idx):
    check_dtype(op, "indices", idx, (I32,))


# ----------------------------------------------------------------------- folding a batched index set
def _fold(x, axis):
    """``x`` of shape ``(B, pre, n, post)`` (``axis`` counts without B) as ``(B*n, pre, post)``."""
    b, n = x.shape[0], x.shape[axis + 1]
    perm = (0, axis + 1) + tuple(i for i in range(1, x.ndim) if i != axis + 1)
    x = layout.permute(x, perm)
    return layout.reshape(x, (b * n,) + tuple(x.shape[2:]))


def _unfold(y, b, axis):
    """Inverse of :func:`_fold` for a result of shape ``(B*n, pre, post)``."""
    y = layout.reshape(y, (b, y.shape[0] // b) + tuple(y.shape[1:]))
    perm = (0,) + tuple(range(2, axis + 2)) + (1,) + tuple(range(axis + 2, y.ndim))
    return layout.permute(y, perm)


def _offset(idx, n):
    """Per-batch indices ``idx`` (B, ...) into a folded axis of size B*n; invalid ones stay invalid."""
    b = idx.shape[0]
    base = np.arange(b, dtype=np.int32).reshape((b,) + (1,) * (idx.ndim - 1)) * np.int32(n)
    valid = elementwise.logical_and(elementwise.ge(idx, 0), elementwise.lt(idx, n))
    return elementwise.where(valid, elementwise.add(idx, base), -1)


def _swap_blocks(y, start, len1, len2):
    """Swap the adjacent axis blocks ``y[start : start+len1]`` and ``y[start+len1 : start+len1+len2]``."""
    if not len1 or not len2:
        return y
    first, second = range(start, start + len1), range(start + len1, start + len1 + len2)
    return layout.permute(y, tuple(range(start)) + tuple(second) + tuple(first)
                          + tuple(range(start + len1 + len2, y.ndim)))


# ------------------------------------------------------------------------------------------- gather
def _gather_abstract(x, idx, *, axis):
    _check_index("gather", idx)
    check_dtype("gather", "operand", x, ANY)
    if x.shape[axis] == 0 and dims.size(idx.shape) != 0:
        raise op_error(PtoShapeError, "gather", f"cannot select from the empty axis {axis} of {tuple(x.shape)}")
    return shaped(_index_shape(x.shape, idx.shape, axis), x.dtype)


def _gather_reference(x, idx, *, axis):
    valid = _in_range(idx, x.shape[axis])
    taken = jnp.take(x, jnp.where(valid, idx, 0), axis=axis)
    mask = valid.reshape((1,) * axis + idx.shape + (1,) * (x.ndim - axis - 1))
    return jnp.where(mask, taken, jnp.zeros((), x.dtype))


def _gather_batch(args, dims, *, axis):
    (x, idx), (dx, di) = args, dims
    if di is None:
        return gather_p.bind(layout._front(x, dx), idx, axis=axis + 1), 0
    idx = layout._front(idx, di)
    if dx is None:
        return gather_p.bind(x, idx, axis=axis), axis
    x = layout._front(x, dx)
    out = gather_p.bind(_fold(x, axis), _offset(idx, x.shape[axis + 1]), axis=0)
    return _swap_blocks(out, 1, idx.ndim - 1, axis), 0


gather_p = define("gather", "indexing", abstract=_gather_abstract, reference=_gather_reference)
ad.defjvp(gather_p, lambda g, x, idx, *, axis: gather_p.bind(g, idx, axis=axis), None)
ad.primitive_transposes[gather_p] = lambda ct, x, idx, *, axis: [
    None if type(ct) is ad.Zero else index_add_p.bind(jnp.zeros(x.aval.shape, ct.dtype), idx, ct, axis=axis),
    None]
batching.primitive_batchers[gather_p] = _gather_batch


def gather(x, indices, axis: int = 0):
    """Select entries of ``x`` along ``axis`` by int32 ``indices`` of any shape (``index_select``).

    The result has shape ``x.shape[:axis] + indices.shape + x.shape[axis+1:]``; out-of-range indices
    select zeros.
    """
    x, indices = tensor("gather", x), tensor("gather", indices)
    return gather_p.bind(x, indices, axis=normalize_axis("gather", axis, x.ndim))


# ---------------------------------------------------------------------------------------- index_add
def _batch_rows(prim, flat_indices):
    """vmap rule of index_add / scatter_update; batched indices fold the batch into the row axis."""

    def rule(args, dims, *, axis, **params):
        (x, idx, rows), (dx, di, dr) = args, dims
        size = batch_size(args, dims)
        x = layout._front_or_broadcast(x, dx, size)
        rows = layout._front_or_broadcast(rows, dr, size)
        if di is None:
            return prim.bind(x, idx, rows, axis=axis + 1, **params), 0
        idx = layout._front(idx, di)
        rows = _swap_blocks(rows, 1, axis, idx.ndim - 1)          # (B, idx..., pre, post)
        idx = _offset(idx, x.shape[axis + 1])
        if flat_indices:
            rows = layout.reshape(rows, (-1,) + tuple(rows.shape[idx.ndim:]))
            idx = layout.reshape(idx, (-1,))
        return _unfold(prim.bind(_fold(x, axis), idx, rows, axis=0, **params), size, axis), 0

    batching.primitive_batchers[prim] = rule


def _rows_abstract(op, dtypes, what, one_d=False):
    """Shape rule of ops writing rows ``what`` into ``x`` at ``indices`` along ``axis``."""

    def abstract(x, idx, rows, *, axis, **_):
        _check_index(op, idx)
        check_dtype(op, "operand", x, dtypes)
        check_same_dtype(op, x, rows)
        if one_d and idx.ndim != 1:
            raise op_error(PtoShapeError, op, f"indices must be 1-D, got {tuple(idx.shape)}")
        want = _index_shape(x.shape, idx.shape, axis)
        if tuple(rows.shape) != want:
            raise op_error(PtoShapeError, op, f"{what} {tuple(rows.shape)} must be {want} for input "
                           f"{tuple(x.shape)}, indices {tuple(idx.shape)}, axis {axis}")
        return shaped(x.shape, x.dtype)

    return abstract


def _index_add_reference(x, idx, src, *, axis):
    n, k = x.shape[axis], idx.ndim
    target = jnp.where(_in_range(idx, n), idx, n).reshape(-1)
    rows = jnp.moveaxis(x, axis, 0)
    updates = jnp.moveaxis(src, tuple(range(axis, axis + k)), tuple(range(k))).reshape((-1,) + rows.shape[1:])
    return jnp.moveaxis(rows.at[target].add(updates, mode="drop"), 0, axis)


index_add_p = define("index_add", "indexing", abstract=_rows_abstract("index_add", NUMERIC, "source"),
                     reference=_index_add_reference, dtypes=NUMERIC)
ad.defjvp(index_add_p, lambda g, x, idx, src, *, axis: g, None,
          lambda g, x, idx, src, *, axis: index_add_p.bind(jnp.zeros(x.shape, g.dtype), idx, g, axis=axis))
ad.primitive_transposes[index_add_p] = lambda ct, x, idx, src, *, axis: (
    [None, None, None] if type(ct) is ad.Zero else
    [ct if ad.is_undefined_primal(x) else None, None,
     gather_p.bind(ct, idx, axis=axis) if ad.is_undefined_primal(src) else None])
_batch_rows(index_add_p, flat_indices=False)


def index_add(x, indices, source, axis: int = 0):
    """``x`` with ``source`` added at ``indices`` along ``axis`` (repeats accumulate).

    ``source`` has shape ``x.shape[:axis] + indices.shape + x.shape[axis+1:]`` (the shape
    :func:`gather` returns); out-of-range indices add nothing.
    """
    x, indices, source = (tensor("index_add", a) for a in (x, indices, source))
    return index_add_p.bind(x, indices, source, axis=normalize_axis("index_add", axis, x.ndim))


# ------------------------------------------------------------------------------------ scatter_update
def _winners(idx, n):
    """For each of the ``n`` rows, the position in ``idx`` of its last write (-1: untouched)."""
    target = jnp.where(_in_range(idx, n), idx, n)
    return jnp.full((n,), -1, jnp.int32).at[target].max(jnp.arange(idx.shape[0], dtype=jnp.int32), mode="drop")


def _scatter_reference(x, idx, updates, *, axis, unique_indices=False):
    if idx.size == 0:                           # nothing written (jnp.take refuses an empty axis)
        return x
    winner = _winners(idx, x.shape[axis])
    picked = jnp.take(updates, jnp.maximum(winner, 0), axis=axis)
    written = (winner >= 0).reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))
    return jnp.where(written, picked, x)


def _scatter_transpose(ct, x, idx, updates, *, axis, unique_indices):
    if type(ct) is ad.Zero:
        return [None, None, None]
    ct_x = ct_u = None
    u_shape = (updates.aval if ad.is_undefined_primal(updates) else updates).shape
    if ad.is_undefined_primal(x):
        ct_x = scatter_update_p.bind(ct, idx, jnp.zeros(u_shape, ct.dtype), axis=axis, unique_indices=unique_indices)
    if ad.is_undefined_primal(updates):
        n = ct.shape[axis]
        won = jnp.take(_winners(idx, n), jnp.where(_in_range(idx, n), idx, 0)) == jnp.arange(idx.shape[0])
        won = won.reshape((1,) * axis + (-1,) + (1,) * (ct.ndim - axis - 1))
        ct_u = elementwise.where(won, gather_p.bind(ct, idx, axis=axis), 0)
    return [ct_x, None, ct_u]


scatter_update_p = define("scatter_update", "indexing",
                          abstract=_rows_abstract("scatter_update", ANY, "updates", one_d=True), reference=_scatter_reference)
ad.defjvp(scatter_update_p,
          lambda g, x, idx, u, **p: scatter_update_p.bind(g, idx, jnp.zeros(u.shape, g.dtype), **p),
          None,
          lambda g, x, idx, u, **p: scatter_update_p.bind(jnp.zeros(x.shape, g.dtype), idx, g, **p))
ad.primitive_transposes[scatter_update_p] = _scatter_transpose
_batch_rows(scatter_update_p, flat_indices=True)


def scatter_update(x, indices, updates, axis: int = 0, *, unique_indices: bool = False):
    """``x`` with slices ``updates[..., i, ...]`` written at ``indices[i]`` along ``axis``.

    The paged KV-cache write: ``indices`` is 1-D int32, ``updates`` has ``x``'s shape with
    ``len(indices)`` at ``axis``. Out-of-range indices (e.g. -1 for an unused slot) write nothing;
    when an index repeats, the last write wins. ``unique_indices=True`` promises that no in-range
    index repeats (as ``lax.scatter``'s): the tasks writing different index tiles then need no order
    between them (with repeats, which write wins is unspecified).
    """
    x, indices, updates = (tensor("scatter_update", a) for a in (x, indices, updates))
    return scatter_update_p.bind(x, indices, updates, axis=normalize_axis("scatter_update", axis, x.ndim),
                                 unique_indices=flag("scatter_update", "unique_indices", unique_indices))


# ------------------------------------------------------------------------------------- topk and sort
def _pad_value(dtype, largest):
    if dtype in FLOAT:
        return -np.inf if largest else np.inf
    info = np.iinfo(dtype)
    return info.min if largest else info.max


def _selection_reference(x, *, k, axis, largest):
    n = x.shape[axis]
    order = jnp.argsort(x, axis=axis, stable=True, descending=largest).astype(jnp.int32)
    idx = jnp.take(order, jnp.arange(min(k, n)), axis=axis)
    values = jnp.take_along_axis(x, idx, axis=axis)
    if k > n:
        pads = [(0, 0)] * x.ndim
        pads[axis] = (0, k - n)
        values = jnp.pad(values, pads, constant_values=np.asarray(_pad_value(x.dtype, largest), x.dtype))
        idx = jnp.pad(idx, pads, constant_values=-1)
    return [values, idx]


def _selection(name):
    """``topk`` and ``sort``: one sorting network, ``k`` entries kept (values, int32 indices)."""

    def abstract(x, *, k, axis, largest):
        check_dtype(name, "operand", x, NUMERIC)
        shape = list(x.shape)
        shape[axis] = k
        return [shaped(shape, x.dtype), shaped(shape, I32)]

    def jvp(primals, tangents, *, k, axis, largest):
        (x,), (t,) = primals, tangents
        values, idx = prim.bind(x, k=k, axis=axis, largest=largest)
        valid = idx >= 0
        picked = jnp.take_along_axis(ad.instantiate_zeros(t), jnp.where(valid, idx, 0), axis=axis)
        return [values, idx], [jnp.where(valid, picked, jnp.zeros((), picked.dtype)),
                               ad.Zero(jax.typeof(idx).to_tangent_aval())]

    def batch(args, dims, *, k, axis, largest):
        return prim.bind(layout._front(args[0], dims[0]), k=k, axis=axis + 1, largest=largest), [0, 0]

    prim = define(name, "indexing", abstract=abstract, reference=_selection_reference, multiple_results=True,
                  dtypes=NUMERIC)
    ad.primitive_jvps[prim] = jvp
    batching.primitive_batchers[prim] = batch
    return prim


topk_p = _selection("topk")
sort_p = _selection("sort")


def topk(x, k: int, axis: int = -1, *, largest: bool = True):
    """The ``k`` largest (or smallest) entries along ``axis`` and their int32 indices, in order.

    Ties keep the lower index first; NaN sorts above +inf (XLA's order; not the ``sim`` backend's, docs/ops.md). When ``k`` exceeds the axis size, the tail
    is padded with index -1 and value -inf (+inf for ``largest=False``; the integer limits for
    integer inputs).
    """
    x = tensor("topk", x)
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise op_error(PtoArgumentError, "topk", f"k must be a positive int, got {k!r}")
    values, indices = topk_p.bind(x, k=int(k), axis=normalize_axis("topk", axis, x.ndim),
                                 largest=flag("topk", "largest", largest))
    return values, indices


def sort(x, axis: int = -1, *, descending: bool = False):
    """``x`` sorted along ``axis`` (stable; NaN sorts above +inf as in XLA, not on the ``sim`` backend: docs/ops.md) and the int32 indices that sort it."""
    x = tensor("sort", x)
    axis = normalize_axis("sort", axis, x.ndim)
    values, indices = sort_p.bind(x, k=x.shape[axis], axis=axis, largest=flag("sort", "descending", descending))
    return values, indices


# ------------------------------------------------------------------------------------- merge_topk
def _merge_order(v, indices, k, largest):
    """Positions along the (flattened) last axis of the ``k`` best (value, index) pairs: by value
    (NaN above +inf), ties by the lower index, -1 (padding) after every real index."""
    i = indices.astype(jnp.uint32)
    if jnp.issubdtype(v.dtype, jnp.floating):
        nan = jnp.isnan(v)
        w = v.astype(jnp.float32) + jnp.float32(0)              # -0.0 ties with 0.0
        key = jnp.where(nan, jnp.float32(0), -w if largest else w)
        rank = (~nan if largest else nan).astype(jnp.int32)
    else:
        key = ~v if largest else v                              # ~v reverses the order without overflow
        rank = jnp.zeros(v.shape, jnp.int32)
    pos = jax.lax.broadcasted_iota(jnp.int32, v.shape, v.ndim - 1)
    order = jax.lax.sort((rank, key, i, pos), dimension=v.ndim - 1, num_keys=3)[-1]
    return order[..., :min(k, v.shape[-1])]


def _merge_topk_reference(values, indices, *, k, largest):
    v, indices = (jnp.reshape(a, a.shape[:-2] + (-1,)) for a in (values, indices))
    order = _merge_order(v, indices, k, largest)
    out_v = jnp.take_along_axis(v, order, axis=-1)
    out_i = jnp.take_along_axis(indices, order, axis=-1)
    if k > v.shape[-1]:
        pads = [(0, 0)] * (v.ndim - 1) + [(0, k - v.shape[-1])]
        out_v = jnp.pad(out_v, pads, constant_values=np.asarray(_pad_value(v.dtype, largest), v.dtype))
        out_i = jnp.pad(out_i, pads, constant_values=-1)
    return [out_v, out_i]


def _merge_topk_abstract(values, indices, *, k, largest):
    check_dtype("merge_topk", "values", values, NUMERIC)
    _check_index("merge_topk", indices)
    if values.ndim < 2 or tuple(values.shape) != tuple(indices.shape):
        raise op_error(PtoShapeError, "merge_topk", f"values {tuple(values.shape)} and indices "
                       f"{tuple(indices.shape)} must have one shape [..., lists, length]")
    shape = tuple(values.shape[:-2]) + (k,)
    return [shaped(shape, values.dtype), shaped(shape, I32)]


def _merge_topk_jvp(primals, tangents, *, k, largest):
    """Each picked value's tangent is the tangent of the entry holding its index (the first one, where
    lists repeat an index); padding's is 0. Found by matching indices, in catalogue ops, so that
    ``jax.grad`` of a kernel body that merges stays translatable."""
    values, indices = primals
    out = merge_topk_p.bind(values, indices, k=k, largest=largest)
    flat = lambda a: jnp.reshape(a, a.shape[:-2] + (-1,))  # noqa: E731
    pos = jnp.argmax(flat(indices)[..., None, :] == out[1][..., :, None], axis=-1)
    picked = jnp.take_along_axis(flat(ad.instantiate_zeros(tangents[0])), pos, axis=-1)
    return out, [jnp.where(out[1] >= 0, picked, jnp.zeros((), picked.dtype)),
                 ad.Zero(jax.typeof(out[1]).to_tangent_aval())]


def _merge_topk_batch(args, dims, *, k, largest):
    size = batch_size(args, dims)
    values, indices = (layout._front_or_broadcast(a, d, size) for a, d in zip(args, dims))
    return merge_topk_p.bind(values, indices, k=k, largest=largest), [0, 0]


merge_topk_p = define("merge_topk", "indexing", abstract=_merge_topk_abstract, reference=_merge_topk_reference,
                      multiple_results=True, dtypes=NUMERIC)
ad.primitive_jvps[merge_topk_p] = _merge_topk_jvp
batching.primitive_batchers[merge_topk_p] = _merge_topk_batch


def merge_topk(values, indices, k: int, *, largest: bool = True):
    """The ``k`` best (value, index) pairs of several lists (PTO's TMRGSORT merges sorted lists):
    ``values`` / ``indices`` ``[..., lists, length]`` — typically per-chunk :func:`topk` results,
    indices already offset to the row; returns ``[..., k]`` values and int32 indices.

    Order as :func:`topk` over the whole row: larger values first (NaN above +inf), ties by the lower
    index, padding (-1) after every real index; past the ``lists * length`` pairs the tail is padded
    like :func:`topk`. Merging per-chunk top-k lists equals ``topk`` over the row: this is how rows
    wider than a tile (4 095 columns) are selected, in stages (the tile pass does it for ``topk``).
    """
    values, indices = tensor("merge_topk", values), tensor("merge_topk", indices)
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise op_error(PtoArgumentError, "merge_topk", f"k must be a positive int, got {k!r}")
    out_v, out_i = merge_topk_p.bind(values, indices, k=int(k), largest=flag("merge_topk", "largest", largest))
    return out_v, out_i


# ------------------------------------------------------------------------------------------ iota
iota_p = define("iota", "indexing", abstract=lambda *, size: shaped((size,), I32),
                reference=lambda *, size: jnp.arange(size, dtype=jnp.int32), catalogue=False)


def iota(size):
    """``0, 1, ..., size-1`` (int32) computed on the cores: the Tensor level's ``lax.iota`` of a size known
    at run time (a symbolic dim), which cannot fold to a constant; each tile makes its own indices."""
    return iota_p.bind(size=size)
