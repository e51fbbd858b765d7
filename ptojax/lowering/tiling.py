"""The Tile level: every tensor op expanded over its tile grid into ``tload`` / ``t<op>`` / ``tstore``.

Each op becomes one ``pto.tile_grid`` per *region* of its iteration space: the full tiles form one grid
(a loop, so the IR does not grow with the tensor), and where a dimension does not divide by its tile,
the tail tiles form another grid whose tiles have the smaller (valid) shape. Vector ops tile by the
``vec`` shape in force; reductions, scans, sorts and row-wise composites keep their reduced axes whole
(PyPTO's advice: do not tile a reduce axis), except an axis too long for one tile: reductions and scans
go in stages (``reduce.py``), a top-k in chunks and merges (``topk.py``) — but a last-axis reduction
under a ``vec`` tile that splits its row stays whole however long the row, for partition's row loop to
read in column tiles (``rowloop.py``; ``row_loops`` off for its label: stages). ``matmul`` tiles by the
``cube`` shape ``(m, k, n)`` with a K-accumulation chain (``tmatmul`` then ``tmatmul_acc``); a batched
matmul whose M is below the cube tile's m and whose right operand the batch shares is one matmul of M =
batch x M (axis merging). Indexed ops stream their indices in tiles and move rows with
``mgather``/``mscatter``. ``reshape`` stays a GM reinterpretation and 0-d (scalar) ops stay as they are:
they run on the orchestrator, not on a core. Reductions first keep their reduced dims (``rowform.py``);
elementwise ops on such R×1 results tile by the row block they were reduced from, so that partition can
keep the whole chain in one program.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import ops
from .._jax import ClosedJaxpr, Literal
from ..errors import PtoArgumentError, PtoCapacityError, PtoShapeError, PtoUnsupportedError
from ..primitives import OPS
from ..primitives import tile as T
from ..primitives.layout import reshape_p
from ..primitives.matmul import ACCUMULATOR
from ..primitives.tile import Window
from . import ir
from .gathers import row_chunk, rows_of
from .memory import ASCEND_CORE, CoreMemory, aligned_bytes
from .reduce import OPS as STAGED_REDUCTIONS
from .reduce import EXTREMUM, first_extremum, reduce_axes, scan_chunk, staged_cumsum, staged_reduce
from .rowloop import column_cuts
from .rowform import REDUCTIONS as ROW_REDUCTIONS
from .rowform import keep_rows
from .scope import TileConfig, read
from .symbolic import templated
from .tensor import to_tensor_level
from .topk import (SORT_COLS, STAGED_INT32_SORT, pass_k, sort_int32_by_halves, staged_topk, topk_by_sort,
                   topk_in_passes)
from .origin import blame
from .walk import CONTROL, Memo, by_rule, control, interpret, live, retrace

# Ops that keep some axes whole: name -> function(params, rank) giving those axes.
_WHOLE_AXES = {
    "sum": lambda p, r: p["axes"], "amax": lambda p, r: p["axes"], "amin": lambda p, r: p["axes"],
    "prod": lambda p, r: p["axes"], "argmax": lambda p, r: p["axes"], "argmin": lambda p, r: p["axes"],
    "cumsum": lambda p, r: p["axes"], "softmax": lambda p, r: p["axes"], "quantize": lambda p, r: p["axes"],
    "topk": lambda p, r: (p["axis"],), "sort": lambda p, r: (p["axis"],), "merge_topk": lambda p, r: (r - 2, r - 1),
    "rms_norm": lambda p, r: (r - 1,), "layer_norm": lambda p, r: (r - 1,),
}
_INDEXED = ("gather", "index_add", "scatter_update")
_COPIES = ("view", "assemble", "pad", "concat")


@dataclasses.dataclass(frozen=True)
class Region:
    """A box of full-size tiles: ``grid`` points of tile ``tile`` starting at ``base``."""

    grid: tuple[int, ...]
    tile: tuple[int, ...]
    base: tuple[int, ...]
    stride: tuple[int, ...]


def regions(shape, tile) -> list[Region]:
    """Split ``shape`` into the full-tile box and the tail boxes along each dimension."""
    per_dim = []
    for n, t in zip(shape, tile):
        parts = [(n // t, t, 0)] if n // t else []
        if n % t:
            parts.append((1, n % t, (n // t) * t))
        per_dim.append(parts or [(1, 0, 0)])
    out = []
    for combo in itertools.product(*per_dim):
        grid, sizes, base = zip(*combo) if combo else ((), (), ())
        out.append(Region(tuple(grid), tuple(sizes), tuple(base), tuple(tile)))
    return out


@dataclasses.dataclass
class _Context:
    """What a tiling rule needs to know about the eqn it expands."""

    op: str
    config: TileConfig
    label: str
    memory: CoreMemory
    rows: Memo = dataclasses.field(default_factory=Memo)   # R×1 value -> the tile of its row block
    reshaped: Memo = dataclasses.field(default_factory=Memo)   # a reshape's result -> the tensor it reshapes
    row_loops: bool = True     # the label's long rows may loop inside one program (partition's row_loops)
    wide: dict = dataclasses.field(default_factory=dict)   # shape -> rows of a default row loop over it
    shared: dict = dataclasses.field(default_factory=dict)  # (shape, label) -> the default tile all its ops take
    met: dict = dataclasses.field(default_factory=dict)     # (shape, label) -> the default tiles met


# -------------------------------------------------------------------------------------- tile shapes
TEMPLATE_ROWS = 256     # a default tile's rows at most, lowered at a template row count (a tile of all the
                        # template's rows would be a different tile at each template)


def vector_tile(ctx: _Context, shape, dtypes, whole=()) -> tuple[int, ...]:
    """The vector tile for an iteration space ``shape``: the ``vec`` setting aligned to the trailing
    dims (leading dims take 1), whole axes kept whole, everything clipped to the shape. At a template
    row count a vector (of the symbolic rows) whose ``vec`` size would not tile every template (no power of
    two up to :data:`TEMPLATE_ROWS`) takes the default tile."""
    rank = len(shape)
    vec = ctx.config.vec
    if vec is not None and not (templated() and rank == 1 and (vec[-1] & (vec[-1] - 1) or vec[-1] > TEMPLATE_ROWS)):
        splits_last = rank and rank - 1 not in whole and vec[-1] < shape[-1]
        for dtype in dtypes if splits_last else ():
            if np.dtype(dtype) == np.bool_:  # compare results are bit masks on the vector unit
                continue
            size = np.dtype(dtype).itemsize
            if vec[-1] * size % ctx.memory.align:
                raise PtoArgumentError(
                    f"pto.{ctx.op}{_at(ctx)}: vec tile {vec} has a last dim of {vec[-1]} x {size} bytes "
                    f"({np.dtype(dtype).name}) = {vec[-1] * size} bytes; it must be a multiple of {ctx.memory.align} bytes")
        tile = ((1,) * rank + tuple(vec))[-rank:] if rank else ()
    else:
        tile = default_vector_tile(shape, max((np.dtype(d).itemsize for d in dtypes), default=4), ctx.memory,
                                   whole_rows=rank - 1 in whole)
        key = (tuple(shape), ctx.label)
        if rank > 1:                      # the tiles of this shape's ops alike, whatever their dtypes: they fuse
            ctx.met.setdefault(key, set()).add(tile)
            tile = ctx.shared.get(key, tile)
        if tuple(shape) in ctx.wide and rank > 1:     # the rows of the default row loop over this shape
            tile = (*tile[:-2], ctx.wide[tuple(shape)], tile[-1])
        if templated() and rank > 1:      # rows that divide every template row count, several blocks of it
            tile = (1,) * (rank - 2) + (min(1 << (tile[-2].bit_length() - 1), TEMPLATE_ROWS), tile[-1])
        elif templated() and rank == 1:   # a vector of the symbolic rows: its entries are the rows
            tile = (min(1 << (tile[0].bit_length() - 1), TEMPLATE_ROWS),)
        elif whole:                       # (a template lowering keeps its rows' tiles: one program per size)
            tile = _fit_whole(tile, shape, whole, max((np.dtype(d).itemsize for d in dtypes), default=4), ctx.memory)
    return tuple(n if d in whole else max(1, min(t, n)) for d, (n, t) in enumerate(zip(shape, tile)))


def _fit_whole(tile, shape, whole, itemsize: int, memory: CoreMemory) -> tuple[int, ...]:
    """A default tile whose whole axes (a cumsum or sort along a leading axis of 129) take their full
    length: its other axes cut so that it stays within ``memory.tile_bytes`` (:func:`_at_most`)."""
    tile = [n if d in whole else max(1, min(t, n)) for d, (n, t) in enumerate(zip(shape, tile))]
    return _at_most(tile, max(1, memory.tile_bytes // itemsize), max(1, memory.align // itemsize), keep=whole)


def _at_most(tile, count: int, step: int, keep=()) -> tuple[int, ...]:
    """``tile`` cut to at most ``count`` elements where its dims not in ``keep`` allow: leading dims to 1
    first, then the last dim to a multiple of ``step`` (its alignment) where it has to be cut."""
    tile = list(tile)
    for d in range(len(tile) - 1):
        if d not in keep and math.prod(tile) > count:
            tile[d] = max(1, count // max(1, math.prod(tile) // tile[d]))
    if tile and len(tile) - 1 not in keep and math.prod(tile) > count:
        tile[-1] = max(min(tile[-1], step), count // math.prod(tile[:-1]) // step * step)
    return tuple(tile)


def default_vector_tile(shape, itemsize, memory: CoreMemory, whole_rows: bool = False):
    """About ``memory.tile_bytes`` of aligned rows: whole rows where they fit (half of it, in
    ``max_cols`` columns) or must be whole (``whole_rows``: one row at least), a power-of-two column
    block otherwise; where the rows take their whole dim, the leading dims too while the budget lasts
    (a (256, 2, 4, 64) tensor in (16, 2, 4, 64) tiles, not 512 tiles of (1, 1, 4, 64))."""
    if not shape:
        return ()
    target = memory.tile_bytes
    half, max_cols = (target // 2) // itemsize, memory.max_cols
    whole = whole_rows or shape[-1] <= min(half, max_cols)
    cols = shape[-1] if whole else min(half, 1 << (max_cols.bit_length() - 1))
    row = -(-cols * itemsize // memory.align) * memory.align
    rows = max(1, min(memory.max_rows, target // row))
    tile = [1] * len(shape)
    tile[-1] = cols
    for d in range(len(shape) - 2, -1, -1):     # rows, then the leading dims while the ones after are whole
        tile[d] = min(shape[d], rows)
        if tile[d] < shape[d] or not whole and d == len(shape) - 2:
            break
        rows //= shape[d]
    return tuple(tile)


def _at(ctx):
    return f" (label '{ctx.label}')" if ctx.label else ""


# ------------------------------------------------------------------------------------------ windows
def broadcast_window(shape, space, region: Region) -> Window:
    """The window of an operand of ``shape`` broadcast into the iteration ``space`` (trailing-aligned)."""
    lead = len(space) - len(shape)
    sizes, index, stride, base = [], [], [], []
    for j, n in enumerate(shape):
        d = lead + j
        if n == 1 and space[d] != 1:
            sizes.append(1), index.append(-1), stride.append(0), base.append(0)
        else:
            sizes.append(region.tile[d]), index.append(d), stride.append(region.stride[d]), base.append(region.base[d])
    return Window(tuple(sizes), tuple(index), tuple(stride), tuple(base))


def mapped_window(dims, full_shape, region: Region) -> Window:
    """Window of a tensor whose dim ``j`` follows iteration dim ``dims[j]`` (None: taken whole)."""
    sizes, index, stride, base = [], [], [], []
    for j, d in enumerate(dims):
        if d is None:
            sizes.append(full_shape[j]), index.append(-1), stride.append(0), base.append(0)
        else:
            sizes.append(region.tile[d]), index.append(d), stride.append(region.stride[d]), base.append(region.base[d])
    return Window(tuple(sizes), tuple(index), tuple(stride), tuple(base))


def shifted(window: Window, offsets) -> Window:
    return dataclasses.replace(window, base=tuple(b + o for b, o in zip(window.base, offsets)))


def _is_tensor(x):
    return isinstance(x, jax.core.Tracer) or (isinstance(x, np.ndarray) and x.ndim > 0)


def emit(ctx: _Context, kind, parts, inputs, outputs, body_fn, previous=None, fill=0):
    """Bind one ``pto.tile_grid`` with a part per region: ``body_fn(region, index, inputs, outputs)``
    returns the updated outputs.

    The outputs (avals ``outputs``) continue ``previous`` (results updated in place), or start
    filled with ``fill`` (None: what the grid leaves unwritten, later grids write before any read).
    """
    parts = [r for r in parts if 0 not in r.tile]
    if not parts:
        return previous or [jnp.full(a.shape, 0 if fill is None else fill, a.dtype) for a in outputs]
    specs = ([ir.Output(alias=len(inputs) + i) for i in range(len(outputs))] if previous is not None
             else [ir.Output(fill=0 if fill is None else fill, written_later=fill is None)] * len(outputs))
    inputs = [*inputs, *(previous or [])]
    outs_avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in outputs]
    in_avals = [jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in inputs]
    m = len(in_avals)
    bodies = []
    for region in parts:
        n = len(region.grid)

        def body(*args, region=region, n=n):
            return list(body_fn(region, list(args[:n]), list(args[n:n + m]), list(args[n + m:])))

        index_avals = [jax.ShapeDtypeStruct((), jnp.int32)] * n
        bodies.append(ir.Part(jax.make_jaxpr(body)(*index_avals, *in_avals, *outs_avals), region.grid))
    spec = ir.Grid(tuple(bodies), tuple(specs), kind, (ctx.op,), ctx.label)
    return ir.tile_grid_p.bind(*inputs, spec=spec)


# ---------------------------------------------------------------------------------- the tile rules
def _mapped(ctx, eqn, invals):
    """Elementwise ops and ops with whole axes: one grid per region of the iteration space."""
    p = dict(eqn.params)
    if OPS.get(ctx.op) is not None and OPS[ctx.op].family == "elementwise":
        invals = _filled_on_core(invals, eqn.outvars[0].aval.shape)
    tensors = [x for x in invals if _is_tensor(x)]
    out_avals = [v.aval for v in eqn.outvars]
    if ctx.op in _WHOLE_AXES:
        space = tuple(tensors[0].shape) if ctx.op not in ("rms_norm", "layer_norm") else out_avals[0].shape
        whole = tuple(_WHOLE_AXES[ctx.op](p, len(space)))
    else:
        space, whole = out_avals[0].shape, ()
    row = _row_tile(ctx, tensors, space)
    dtypes = [x.dtype for x in tensors] + [a.dtype for a in out_avals]
    tile = row or vector_tile(ctx, space, dtypes, whole)
    if ctx.op in _LOOPED and ctx.config.vec is None and _loops_row(ctx, eqn, tensors[0]):
        rows = ctx.wide.setdefault(tuple(space), wide_rows(space, ctx.memory))   # the column-tiled ops of
        tile = (*tile[:-2], rows, space[-1])                                        # this shape take them too
    if ctx.op in STAGED_REDUCTIONS and not row and not ctx.row_loops:
        tile = _staged_rows(ctx, tile, whole, [x.dtype for x in tensors])
    if ctx.op in ("topk", "sort") and p["axis"] < len(space) - 1:   # sorted in the tile's transpose: one
        tile = tuple(t if d in (p["axis"], len(space) - 1) else 1 for d, t in enumerate(tile))  # matrix
    if ctx.op == "transpose" and ctx.config.vec is None and not row:    # a default tile: its leading dims
        tile = _transposable((1,) * (len(tile) - 2) + tuple(tile[-2:]), tuple(p["permutation"]))   # first
        ctx.met.setdefault((tuple(space), ctx.label), set()).add(tile)      # (the ops beside it take it too)
    elif ctx.op == "transpose":
        tile = _transposable(tile, tuple(p["permutation"]))
    out_dims = [_output_dims(ctx.op, p, a, space, whole) for a in out_avals]
    in_dims = _input_dims(ctx.op, p, tensors, space)

    def body(region, index, ins, outs):
        it, dims = iter(ins), iter(in_dims)
        tiles = [T.tload(next(it), index, _window(next(dims), x.shape, space, region)) if _is_tensor(x) else x
                 for x in invals]
        params = dict(p, shape=region.tile) if ctx.op == "expand" else p
        ys = T.compute(ctx.op, *tiles, **params)
        ys = ys if isinstance(ys, (list, tuple)) else [ys]
        return [T.tstore(o, y, index, mapped_window(dims, a.shape, region))
                for o, y, dims, a in zip(outs, ys, out_dims, out_avals)]

    outs = emit(ctx, "vector", regions(space, tile), tensors, out_avals, body)
    if ctx.op in ROW_REDUCTIONS and p["keepdims"]:
        row = tuple(1 if d in p["axes"] else t for d, t in enumerate(tile))
    if row:
        ctx.rows[outs[0]] = row
    return outs


def _filled_on_core(invals, shape):
    """An elementwise op's constant operands of one value throughout (``jnp.where``'s ``-inf`` fill, a
    ``zeros_like``) as that value, which the op's tiles take as a scalar: no GM tensor to read, where a
    tensor operand of the op's ``shape`` is left to give the tiles theirs."""
    def uniform(x):
        if not (isinstance(x, np.ndarray) and x.ndim and x.size > 1):
            return x
        bits = x.reshape(-1).view(f"u{x.dtype.itemsize}") if x.dtype.itemsize in (1, 2, 4, 8) else None
        return np.asarray(x.reshape(-1)[0]) if bits is not None and np.all(bits == bits[0]) else x
    out = [uniform(x) for x in invals]
    return out if any(_is_tensor(x) and tuple(np.shape(x)) == tuple(shape) for x in out) else list(invals)


def _staged_rows(ctx, tile, whole, dtypes) -> tuple:
    """The tile of a reduction along the last axis in the staged form (``row_loops`` off for its label)
    under the user's ``vec`` tile: its rows halved until the whole-row tile takes at most
    :func:`_whole_row_bytes` — a stage of its own, whose rows need not match the column-tiled ops around it
    (with row loops on they must, and the loop reads the rows in column tiles)."""
    if ctx.config.vec is None or len(tile) < 2 or len(tile) - 1 not in whole:
        return tile
    tile = list(tile)
    dtype = max(map(np.dtype, dtypes), key=lambda d: d.itemsize, default=np.dtype(np.float32))
    while aligned_bytes(tile, dtype, ctx.memory.align) > _whole_row_bytes(ctx.memory):
        d = next((d for d in range(len(tile) - 2, -1, -1) if d not in whole and tile[d] > 1), None)
        if d is None:
            break
        tile[d] = -(-tile[d] // 2)
    return tuple(tile)


def _whole_row_bytes(memory: CoreMemory) -> int:
    """The bytes a tile of whole rows that one reduction reads may take under the user's ``vec`` tile: a
    third of the UB less 1 KiB, as its reduction's tmp tile and what ptoas places beside it (as large, for
    ``trowmax`` of 2 048 columns) take the rest."""
    return (memory.ub - 1024) // 3


def _iota(ctx, eqn):
    """``pto.iota`` (a size known at run time): each vector tile makes its own indices, ``tci`` from
    its offset in the sequence (the grid index times the tile, plus the region's base)."""
    out = eqn.outvars[0].aval
    tile = vector_tile(ctx, out.shape, [out.dtype])

    def body(region, index, ins, outs):
        y = T.tci_p.bind(index[0], size=region.tile[0], step=region.stride[0], base=region.base[0])
        return [T.tstore(outs[0], y, index, mapped_window([0], out.shape, region))]

    return emit(ctx, "vector", regions(out.shape, tile), [], [out], body)


def _row_tile(ctx, tensors, space):
    """The tile of an elementwise op on R×1 results of a reduction (``rowform.py``): the reduction's
    row block, so that the op runs in the reduction's program; None for any other op."""
    if OPS.get(ctx.op) is None or OPS[ctx.op].family != "elementwise":
        return None
    tiles = {ctx.rows.get(x) for x in tensors if x in ctx.rows}
    if len(tiles) != 1 or any(tuple(x.shape) != tuple(space) for x in tensors):
        return None
    (tile,) = tiles
    return tile if len(tile) == len(space) else None


def _input_dims(op, p, tensors, space):
    """Per tensor operand: the iteration dim each of its dims follows (None: broadcast), or
    "broadcast" for the trailing-aligned NumPy rule."""
    if op == "transpose":
        return [[p["permutation"].index(j) for j in range(len(space))]]
    return ["broadcast"] * len(tensors)


def _window(dims, shape, space, region):
    return broadcast_window(shape, space, region) if dims == "broadcast" else mapped_window(dims, shape, region)


def _transposable(tile, perm) -> tuple:
    """An output tile of ``transpose`` by ``perm`` whose input tile a ``ttrans`` can permute: its axes
    longer than one kept in order (a relayout) or two of them swapped. Input axes are cut to 1, the
    outermost first, sparing the last one and the one that becomes last."""
    tile, last = list(tile), len(perm) - 1
    while True:
        size = {perm[j]: t for j, t in enumerate(tile)}            # input axis -> its tile length
        moved = [a for a in perm if size[a] > 1]
        if moved == sorted(moved) or (len(moved) == 2 and moved[0] > moved[1]):
            return tuple(tile)
        cut = min(a for a in moved if a not in (last, perm[last]))
        tile[perm.index(cut)] = 1


def _output_dims(op, p, aval, space, whole):
    """For each output dim: the iteration dim it follows, or None when it is taken whole."""
    if op in ("sum", "amax", "amin", "prod", "argmax", "argmin"):
        kept = [d for d in range(len(space)) if p["keepdims"] or d not in p["axes"]]
        return [None if d in p["axes"] else d for d in kept]
    if op in ("topk", "sort", "quantize"):
        return [None if d in whole else d for d in range(len(space))]
    if op == "merge_topk":                     # [..., lists, length] -> [..., k]
        return list(range(len(space) - 2)) + [None]
    lead = len(space) - len(aval.shape)
    return [lead + j for j in range(len(aval.shape))]


def _merged_matmul(ctx, eqn, invals):
    """Axis merging (PyPTO's 合轴): a batched ``matmul`` whose right operand is shared by the batch and
    whose M is below the cube tile's m is one matmul of M = batch x M, its operands and result
    reshaped (GM reinterpretations); None where that is not legal or gains nothing."""
    a, b, *bias = invals
    p = eqn.params
    out = eqn.outvars[0].aval
    if a.ndim < 3 or b.ndim != 2 or p["transpose_a"] or any(c.ndim > 1 and math.prod(c.shape[:-1]) != 1 for c in bias):
        return None
    big_m = a.shape[-2]
    m = (ctx.config.cube or (128,))[0]
    if big_m >= m:
        return None
    rows = math.prod(a.shape[:-1])
    flat = jax.ShapeDtypeStruct((rows, out.shape[-1]), out.dtype)
    (y,) = _matmul(ctx, p, flat, [ops.reshape(a, (rows, a.shape[-1])), b, *bias])
    return [ops.reshape(y, out.shape)]


def _row_bias(bias, out) -> bool:
    """Whether a matmul's ``bias`` is one row of its N columns (``(N,)``, ``(..., 1, N)``): what the
    cube adds from its bias table."""
    shape = np.shape(bias)
    return len(shape) > 0 and shape[-1] == out.shape[-1] and (len(shape) == 1 or shape[-2] == 1)


def _bias_after(a, b, bias, *, out_dtype, transpose_a, transpose_b):
    """``matmul`` with a bias that is not one row (an (M, N) or (M, 1) one): the product in the
    accumulator, the bias added on a vector core, the sum converted as the FIXPIPE converts."""
    acc = ACCUMULATOR[np.dtype(a.dtype)]
    y = ops.add(ops.matmul(a, b, out_dtype=acc, transpose_a=transpose_a, transpose_b=transpose_b), bias)
    return y if np.dtype(out_dtype) == acc else ops.cast(y, out_dtype, rounding="rint", saturate=True)


def _wide_weights(op, invals) -> bool:
    """Whether a norm's weights vary along a leading dim (per batch or row: ``jax.vmap`` of a norm with
    a batched weight): the norm's tile rule applies one weight row to all its rows."""
    return op in ("rms_norm", "layer_norm") and any(math.prod(np.shape(a)[:-1]) > 1 for a in invals[1:])


def _weights_after(op, x, *affine, eps, has_gamma=True, has_beta=False):
    """``rms_norm`` / ``layer_norm`` with weights of leading dims: the norm unweighted, then the weights
    elementwise (half precision in float32, rounded once, as the norm computes)."""
    half = np.dtype(x.dtype) != np.float32
    up = (lambda a: ops.cast(a, np.float32)) if half else (lambda a: a)
    y = ops.rms_norm(up(x), eps=eps) if op == "rms_norm" else ops.layer_norm(up(x), eps=eps)
    weights = iter(up(a) for a in affine)
    if has_gamma:                   # (rms_norm's only weight: it has one here)
        y = ops.mul(y, next(weights))
    if op == "layer_norm" and has_beta:
        y = ops.add(y, next(weights))
    return ops.cast(y, x.dtype) if half else y


def _matmul(ctx, p, out, invals):
    """The cube grid of ``matmul`` (params ``p``) with result aval ``out``."""
    a, b, *bias = invals
    ta, tb = p["transpose_a"], p["transpose_b"]
    *batch, big_m, big_n = out.shape
    big_k = a.shape[-2] if ta else a.shape[-1]
    m, k, n = ctx.config.cube or (128, 256 if a.dtype == np.int8 else 128, 128)
    fk = ctx.memory.fractal_k(a.dtype)
    if ctx.config.cube and k < big_k and k % fk:
        raise PtoArgumentError(f"pto.matmul{_at(ctx)}: cube tile k={k} must be a multiple of {fk} for "
                               f"{a.dtype.name} operands (fractal 16x{fk}x16)")
    m, k, n = min(m, big_m), min(k, big_k), min(n, big_n)
    space = tuple(out.shape)
    tile = (1,) * len(batch) + (m, n)
    acc_dtype = ACCUMULATOR[np.dtype(a.dtype)]
    rb = len(batch)
    kpos = len(space)  # the K loop counter is the index after the grid indices

    def operand_window(x, region, transposed, row_dim, kk_region):
        """a: (.., M, K) rows follow dim rb, K follows the K counter; b: (.., K, N) cols follow rb+1."""
        lead = rb - (x.ndim - 2)
        sizes, index, stride, base = [], [], [], []
        for j, s in enumerate(x.shape[:-2]):
            d = lead + j
            full = s == 1 and space[d] != 1
            sizes.append(1), index.append(-1 if full else d), stride.append(0 if full else 1)
            base.append(0 if full else region.base[d])
        kdim = (kk_region[0], kpos, kk_region[1], kk_region[2])  # size, index, stride, base
        mdim = (region.tile[row_dim], row_dim, region.stride[row_dim], region.base[row_dim])
        # A row-operand (a) is (M, K); a column operand (b) is (K, N).
        dims = [mdim, kdim] if row_dim == rb else [kdim, mdim]
        if transposed:
            dims.reverse()
        for size, i, st, bs in dims:
            sizes.append(size), index.append(i), stride.append(st), base.append(bs)
        return Window(tuple(sizes), tuple(index), tuple(stride), tuple(base))

    # K chunks: (size, stride, base, count) — the full chunks, then the tail chunk.
    k_parts = ([(k, k, 0, big_k // k)] if big_k // k else []) + ([(big_k % k, k, (big_k // k) * k, 1)] if big_k % k else [])

    def body(region, index, ins, outs):
        a_gm, b_gm, *bias_gm = ins[:2 + len(bias)]
        bias_tile = [T.tload(bias_gm[0], index, broadcast_window(bias[0].shape, space, region), "mat")] if bias else []

        def step(kk, acc, part):
            size, stride, base, _ = part
            kk_region = (size, stride, base)
            at = T.tmov(T.tload(a_gm, [*index, kk], operand_window(a, region, ta, rb, kk_region), "mat"), "left")
            bt = T.tmov(T.tload(b_gm, [*index, kk], operand_window(b, region, tb, rb + 1, kk_region), "mat"), "right")
            if acc is None:
                return T.tmatmul_p.bind(at, bt, *bias_tile, out_dtype=np.dtype(acc_dtype), transpose_a=ta,
                                        transpose_b=tb)
            return T.tmatmul_acc_p.bind(acc, at, bt, transpose_a=ta, transpose_b=tb)

        acc = None
        for part in k_parts:
            count = part[3]
            acc = step(jnp.int32(0), acc, part)
            if count > 1:
                acc = jax.lax.fori_loop(1, count, lambda i, c, part=part: step(i, c, part), acc)
        if np.dtype(out.dtype) != np.dtype(acc_dtype):
            acc = T.compute("cast", acc, dtype=np.dtype(out.dtype), rounding="rint", saturate=True)
        return [T.tstore(outs[0], acc, index, mapped_window(range(len(space)), out.shape, region))]

    return emit(ctx, "cube", regions(space, tile), [a, b, *bias], [out], body)


def _copy_grid(ctx, src, dst, dst_offsets, src_offsets=None, shape=None, fill=0):
    """Copy ``src[src_offsets : +shape]`` into ``dst`` at ``dst_offsets`` in vector tiles; ``dst`` is a
    tensor to update, or an aval for a new one filled with ``fill`` (None: the rest is copied later)."""
    shape = tuple(src.shape) if shape is None else tuple(shape)
    src_offsets = src_offsets or (0,) * len(shape)
    tile = vector_tile(ctx, shape, [src.dtype])
    dims = list(range(len(shape)))

    def body(region, index, ins, outs):
        t = T.tload(ins[0], index, shifted(mapped_window(dims, shape, region), src_offsets))
        return [T.tstore(outs[0], t, index, shifted(mapped_window(dims, shape, region), dst_offsets))]

    fresh = isinstance(dst, jax.ShapeDtypeStruct)
    (dst,) = emit(ctx, "vector", regions(shape, tile), [src], [jax.ShapeDtypeStruct(dst.shape, dst.dtype)], body,
                  None if fresh else [dst], fill)
    return dst


def _interleave_tile(ctx, space, dtype, k: int, scattered: bool = False):
    """The tile of the ``(..., n)`` side of an interleave by ``k``: the tile of the ``(..., n)`` ops beside it,
    its rows whole 32 bytes; by default no more leading rows than the ``(..., n * k)`` side's default tile,
    and those ops take it too (the shared tile of a shape, :func:`to_tile_level`), so that the ops on both
    sides join its program; ``scattered`` (``tinterleave``): a 2-byte dtype's below 2**15 elements at ``k``
    times its size (``tscatter`` takes indices of the data's width)."""
    step = ctx.memory.align // np.dtype(dtype).itemsize
    vec = ctx.config.vec
    if vec is not None and vec[-1] % step:       # a tile of fewer columns (a staged top-k's lists of 1): whole rows
        whole_rows = (*vec[:-1], -(-vec[-1] // step) * step)
        ctx = dataclasses.replace(ctx, config=dataclasses.replace(ctx.config, vec=whole_rows))
    tile = vector_tile(ctx, space, [dtype])
    wide_space, shared = (*space[:-1], space[-1] * k), ctx.config.vec is None and len(space) > 1
    if shared:
        tile = (*map(min, tile[:-1], vector_tile(ctx, wide_space, [dtype])[:-1]), tile[-1])
    tile = (*tile[:-1], max(step, tile[-1] // step * step))
    if scattered and np.dtype(dtype).itemsize == 2:
        tile = _at_most(tile, (2 ** 15 - 1) // k, step)
    if shared:                                                    # the ops on both sides take its rows
        ctx.met.setdefault((tuple(space), ctx.label), set()).add(tile)
        ctx.met.setdefault((wide_space, ctx.label), set()).add((*tile[:-1], tile[-1] * k))
    return tile


def _interleavable(ctx, dtype, n, k) -> bool:
    """Whether ``k`` streams of ``n`` columns interleave in UB: ``k`` of
    :data:`~ptojax.primitives.tile.DEINTERLEAVE_STEPS`, a dtype of 2 or 4 bytes (what the selection takes)
    and ``n`` columns of whole 32-byte rows (the selection moves one stream over the tile's rows)."""
    size = np.dtype(dtype).itemsize
    return (isinstance(n, int) and isinstance(k, int) and k in T.DEINTERLEAVE_STEPS and size in (2, 4)
            and n % (ctx.memory.align // size) == 0)


def _scaled(w: Window, k: int) -> Window:
    """Window ``w`` of a ``(..., n)`` tensor as the window of its ``(..., n * k)`` interleaved twin."""
    return Window((*w.shape[:-1], w.shape[-1] * k), w.index, (*w.stride[:-1], w.stride[-1] * k),
                  (*w.base[:-1], w.base[-1] * k))


def as_shape(reshaped: Memo, x, shape):
    """``x`` as ``shape`` (its elements in order; a GM reinterpretation): the tensor ``x`` was reshaped from
    where that has ``shape`` (the tensor a program stored, which the programs reading it can take tile for
    tile), else a reshape of that tensor, remembered in ``reshaped``."""
    origin = reshaped.get(x, x)
    if tuple(origin.shape) == tuple(shape):
        return origin
    out = reshape_p.bind(origin, new_shape=tuple(shape))
    reshaped[out] = origin
    return out


def _interleaved(ctx, pieces, out):
    """``jnp.stack(pieces, -1)`` of ``k`` ``(..., n)`` tensors (each a ``(..., n, 1)`` reshape; a scalar: that
    value throughout), a RoPE's rotated pairs: the ``(..., n * k)`` rows made in UB from the pieces' tiles
    (``tinterleave``), in the program of the ops that make the pieces. None where :func:`_interleavable`
    says no."""
    if len(out.shape) < 2 or not _interleavable(ctx, out.dtype, *out.shape[-2:]) or len(pieces) != out.shape[-1]:
        return None
    *lead, n, k = out.shape
    if any(np.ndim(x) and tuple(x.shape) != (*lead, n, 1) for x in pieces):     # (concat's pieces of 3 and 1)
        return None
    space, dims = (*lead, n), list(range(len(lead) + 1))
    sources = [as_shape(ctx.reshaped, x, space) for x in pieces if np.ndim(x)]

    def body(region, index, ins, outs):
        w, loaded = mapped_window(dims, space, region), iter(ins)
        tiles = [T.tload(next(loaded), index, w) if np.ndim(x) else T.compute("expand", x, shape=w.shape)
                 for x in pieces]
        return [T.tstore(outs[0], T.tinterleave_p.bind(*tiles), index, _scaled(w, k))]

    (y,) = emit(ctx, "vector", regions(space, _interleave_tile(ctx, space, out.dtype, k, scattered=True)), sources,
                [jax.ShapeDtypeStruct((*lead, n * k), out.dtype)], body)
    return as_shape(ctx.reshaped, y, out.shape)


def _spread(ctx, p, x, out):
    """``x`` of ``(..., n, 1)`` padded to ``(..., n, k)`` along its last axis with a constant (the transpose
    of ``x[..., j::k]``: :func:`~.windows.padded`): an interleave of ``x`` with fills (:func:`_interleaved`)."""
    *pads, (lo, hi) = p["pads"]
    if x.ndim < 2 or x.shape[-1] != 1 or any(a or b for a, b in pads):
        return None
    fill = np.asarray(p["value"], x.dtype)
    return _interleaved(ctx, [fill] * lo + [x] + [fill] * hi, out)


def _flat_rows(reshaped: Memo, op, invals, out):
    """The shape ``(..., n * k)`` an elementwise op on ``(..., n, k)`` tensors (``k * itemsize`` below 32 bytes:
    a RoPE's pairs, ``jax.grad``'s sum of two interleaves) computes in: where every tensor operand is a
    reshape of ``(..., n * k)`` rows, a GM reinterpretation, so that the op joins their program; else None."""
    shape = tuple(out.shape)
    if (OPS.get(op) is None or OPS[op].family != "elementwise" or len(shape) < 2
            or not all(isinstance(d, int) for d in shape) or not 1 < shape[-1] * np.dtype(out.dtype).itemsize < 32):
        return None
    flat = (*shape[:-2], shape[-2] * shape[-1])
    tensors = [x for x in invals if _is_tensor(x)]
    if tensors and all(tuple(x.shape) == shape and tuple(np.shape(reshaped.get(x))) == flat for x in tensors):
        return flat
    return None


def _deinterleaved(ctx, p, x, out):
    """A view of column ``j`` of a ``(..., n, k)`` tensor (``x[..., j::k]``, a RoPE's ``x.reshape(..., n,
    2)[..., j]``): the columns selected from tiles of whole ``k``-column groups of its ``(..., n * k)`` form in
    UB (``tdeinterleave``), in the tiles of the ``(..., n)`` ops that read them, so that it joins their
    program. None where :func:`_interleavable` says no."""
    if x.ndim < 2 or not _interleavable(ctx, x.dtype, *x.shape[-2:]):
        return None
    *lead, n, k = x.shape
    if tuple(out.shape) != (*lead, n, 1) or any(p["offsets"][:-1]) or tuple(p["valid_shape"]) != tuple(out.shape):
        return None
    space, dims = (*lead, n), list(range(len(lead) + 1))
    src = as_shape(ctx.reshaped, x, (*lead, n * k))

    def body(region, index, ins, outs):
        w = mapped_window(dims, space, region)
        y = T.tdeinterleave_p.bind(T.tload(ins[0], index, _scaled(w, k)), step=k, offset=p["offsets"][-1])
        return [T.tstore(outs[0], y, index, w)]

    (y,) = emit(ctx, "vector", regions(space, _interleave_tile(ctx, space, x.dtype, k)), [src],
                [jax.ShapeDtypeStruct(space, x.dtype)], body)
    return as_shape(ctx.reshaped, y, out.shape)


def _copies(ctx, eqn, invals):
    p = eqn.params
    out = eqn.outvars[0].aval
    fresh = jax.ShapeDtypeStruct(out.shape, out.dtype)
    if ctx.op == "view" and (picked := _deinterleaved(ctx, p, invals[0], out)) is not None:
        return [picked]
    if ctx.op == "concat" and p["axis"] == len(out.shape) - 1 and (made := _interleaved(ctx, invals, out)) is not None:
        return [made]
    if ctx.op == "pad" and (made := _spread(ctx, p, invals[0], out)) is not None:
        return [made]
    if ctx.op == "view":
        return [_copy_grid(ctx, invals[0], fresh, (0,) * len(out.shape), p["offsets"], p["valid_shape"])]
    if ctx.op == "assemble":
        return [_copy_grid(ctx, invals[0], invals[1], p["offsets"])]
    if ctx.op == "pad":
        return [_copy_grid(ctx, invals[0], fresh, tuple(lo for lo, _ in p["pads"]), fill=p["value"])]
    dst, start = fresh, 0  # concat: its pieces write all of it
    for x in invals:
        offsets = tuple(start if d == p["axis"] else 0 for d in range(len(out.shape)))
        dst = _copy_grid(ctx, x, dst, offsets, fill=None)
        start += x.shape[p["axis"]]
    return [dst]


def _index_tile(ctx, x, idx, axis) -> tuple[int, ...]:
    """The tile of indices one task of an indexed op streams: the ``vec`` setting, or by default as many as
    move about a default tile's bytes of rows (at least 32 bytes of indices)."""
    tile = vector_tile(ctx, tuple(idx.shape), [idx.dtype])
    if ctx.config.vec is None:
        row = int(np.prod(x.shape[:axis])) * int(np.prod(x.shape[axis + 1:])) * np.dtype(x.dtype).itemsize
        least = ctx.memory.align // np.dtype(idx.dtype).itemsize
        tile = _at_most(tile, max(1, ctx.memory.tile_bytes // max(1, row)), least)
    return tile


def _row_chunk(ctx, eqn, invals) -> int | None:
    """Where the rows one index tile of an indexed op moves (each index: its slab of ``x``, every leading
    position's row) would leave less than a default tile of the UB — a KV cache's 32 KiB pages, eight
    of them at the least index tile (32 bytes of int32) — the elements of the chunks its rows move in
    instead (``gathers.rows_of``: leading dims folded into the rows, each row as chunks read from the table
    reshaped, chunk indices made from the indices on the cores). Chunks are at most a default tile over the
    least index tile (by default) or half the UB over the ``vec`` setting's indices; None where the rows fit
    or no chunk does (a symbolic shape, int32 row numbers exceeded, no divisor of the row that small)."""
    x, idx, axis = invals[0], invals[1], eqn.params["axis"]
    pre, n, post = tuple(x.shape[:axis]), x.shape[axis], tuple(x.shape[axis + 1:])
    if not all(isinstance(d, int) for d in (*pre, n, *post, *idx.shape)):
        return None
    size = np.dtype(x.dtype).itemsize
    budget = stage_bytes(ctx.memory, ctx)
    moved = math.prod(_index_tile(ctx, x, idx, axis)) * math.prod(pre) * math.prod(post) * size
    if moved <= ctx.memory.ub - ctx.memory.tile_bytes:      # they fit beside a default tile: whole rows
        return None
    row = math.prod(post)
    if ctx.config.vec is None:
        cap = ctx.memory.tile_bytes // max(1, ctx.memory.align // np.dtype(idx.dtype).itemsize)
    else:                                   # the chunk indices' tile: the vec setting's last dim of them
        cap = budget // max(1, min(ctx.config.vec[-1], math.prod(pre) * math.prod(idx.shape) * row))
    chunk = row_chunk(row, size, cap, ctx.memory)
    if chunk * size > cap and not pre or math.prod(pre) * n * (row // chunk) > np.iinfo(np.int32).max:
        return None
    return chunk


def _padded_rows(ctx, x, axis: int) -> bool:
    """Whether the rows an indexed op moves along ``axis`` of ``x`` have dims past their first whose last
    one pads each tile row (a (64, 128, 1) table's rows (128, 1): 32 bytes a value; (33, 68, 2) float16:
    8x its bytes): moved as one dim instead (:func:`_flat_rows_moved`)."""
    post = tuple(x.shape[axis + 1:])
    return (len(post) >= 2 and all(isinstance(d, int) for d in post)
            and post[-1] * np.dtype(x.dtype).itemsize % ctx.memory.align != 0)


def _flat_rows_moved(x, *rest, op, axis, **params):
    """Indexed op ``op`` along ``axis`` on ``x`` (and its updates) with the dims of the rows it moves
    merged into one (a free reshape in GM), its result reshaped back."""
    rows = x.shape[axis + 1:]

    def flat(a):
        return ops.reshape(a, tuple(a.shape[:a.ndim - len(rows)]) + (math.prod(rows),))

    rest = list(rest)
    if len(rest) > 1:                                   # the updates: leading dims, the indices', the rows'
        rest[1] = flat(rest[1])
    y = op(flat(x), *rest, axis=axis, **params)
    return [ops.reshape(y, tuple(y.shape[:-1]) + tuple(rows))]


def _indexed(ctx, eqn, invals):
    """Stream the indices in tiles; rows move between GM and tiles with mgather / mscatter."""
    p = eqn.params
    axis = p["axis"]
    x, idx = invals[0], invals[1]
    out = eqn.outvars[0].aval
    space = tuple(idx.shape)
    pre, post = x.shape[:axis], x.shape[axis + 1:]
    tile = _index_tile(ctx, x, idx, axis)
    row_dims = [None] * len(pre) + list(range(len(space))) + [None] * len(post)
    full = tuple(pre) + space + tuple(post)

    gather = ctx.op == "gather"

    def body(region, index, ins, outs):
        it = T.tload(ins[gather], index, mapped_window(range(len(space)), space, region))
        rows_window = mapped_window(row_dims, full, region)
        if gather:
            return [T.tstore(outs[0], T.mgather_p.bind(ins[0], it, axis=axis), index, rows_window)]
        rows = T.tload(ins[1], index, rows_window)
        return [T.mscatter_p.bind(outs[0], it, rows, axis=axis, accumulate=ctx.op == "index_add",
                                  unique=bool(p.get("unique_indices", False)))]

    # gather reads x and writes a new tensor; index_add / scatter_update update x in place.
    inputs = [x, idx] if gather else [idx, invals[2]]
    return emit(ctx, "vector", regions(space, tile), inputs, [jax.ShapeDtypeStruct(out.shape, out.dtype)], body,
                None if gather else [x])


def _is_staged_topk(ctx, eqn, x) -> bool:
    """A ``topk`` along the last axis that is wider than a tile row or than its ``vec`` setting — or, of
    int32 (sorted by its 16-bit halves, in twice the tiles), than :data:`STAGED_TOPK_CHUNK` columns."""
    if ctx.op != "topk" or eqn.params["axis"] != x.ndim - 1:
        return False
    n = x.shape[-1]
    wide = STAGED_TOPK_CHUNK if np.dtype(x.dtype) == np.int32 else ctx.memory.max_cols
    return n > wide or bool(ctx.config.vec and ctx.config.vec[-1] < n)


STAGED_TOPK_CHUNK = 2048      # columns per partial top-k when the row is wider than a tile


def _sorts_whole(x) -> bool:
    """Whether a staged ``topk`` whose ``k`` is past :func:`~.topk.pass_k` sorts its row instead
    (:func:`~.topk.topk_by_sort`): a row one tile sorts, or an int32 one that sorts by halves (static rows)."""
    n = x.shape[-1]
    halves = np.dtype(x.dtype) == np.int32 and n > STAGED_INT32_SORT
    return n <= SORT_COLS and not (halves and (templated() or not all(isinstance(d, int) for d in x.shape)))


def _check_sort_row(ctx, eqn, x) -> None:
    """A ``sort`` along a last axis past :data:`SORT_COLS` columns, more than one tile sorts (a row's sort
    keeps it whole in the UB, whatever the ``vec`` tile): refused with what to do instead."""
    n = np.shape(x)[-1] if np.ndim(x) else 0             # (x may be a literal: where(True, x, 0.0))
    if ctx.op == "sort" and eqn.params["axis"] == np.ndim(x) - 1 and isinstance(n, int) and n > SORT_COLS:
        raise PtoCapacityError(
            f"pto.sort{_at(ctx)}: a {np.dtype(x.dtype).name} row of {n} columns (shape {tuple(x.shape)}) is longer "
            f"than the {SORT_COLS} columns one tile sorts (a row's sort keeps it whole in the UB, whatever the vec "
            f"tile): sort rows of at most {SORT_COLS} columns in the kernel, take the largest or smallest "
            f"k <= {ctx.memory.max_cols} with lax.top_k (staged in chunks however long the row), or sort outside "
            "the kernel (jnp.sort / jnp.argsort in the JAX code that calls it)")


def _sorts_by_halves(ctx, eqn, x) -> bool:
    """An int32 ``sort`` along the last axis of more than :data:`STAGED_INT32_SORT` columns: one tile's
    sort by 16-bit halves keeps the halves, keys and orders beside the float32 sort's buffers, which
    overfill the UB from about 2 800 columns (whatever the ``vec`` tile: a sort keeps its row whole), so
    it sorts as two whole-row float32 sorts and gathers (``topk.sort_int32_by_halves``)."""
    return (ctx.op == "sort" and eqn.params["axis"] == x.ndim - 1 and np.dtype(x.dtype) == np.int32
            and isinstance(x.shape[-1], int) and x.shape[-1] > STAGED_INT32_SORT)


def _is_int_sort_off_last(ctx, eqn, x) -> bool:
    return ctx.op in ("topk", "sort") and eqn.params["axis"] != x.ndim - 1 and np.dtype(x.dtype) == np.int32


def _sort_along_last(x, *, prim, k, axis, largest):
    """``topk`` / ``sort`` (``prim``) of ``x`` along ``axis`` as the same along the last axis of ``x``
    with ``axis`` moved last, the results moved back."""
    perm = [d for d in range(x.ndim) if d != axis] + [axis]
    back = [perm.index(d) for d in range(x.ndim)]
    return [ops.permute(y, back) for y in prim.bind(ops.permute(x, perm), k=k, axis=x.ndim - 1, largest=largest)]


def _staged_topk(ctx, eqn, invals):
    """``topk`` in stages (``topk.py``): the ``vec`` setting's last dim is the chunk (default
    :data:`STAGED_TOPK_CHUNK`), its other dims the rows of every stage's tiles."""
    x = invals[0]
    n = x.shape[-1]
    chunk = ctx.config.vec[-1] if ctx.config.vec and ctx.config.vec[-1] < n else STAGED_TOPK_CHUNK
    size = np.dtype(x.dtype).itemsize
    if chunk * size % ctx.memory.align:
        raise PtoArgumentError(f"pto.topk{_at(ctx)}: a staged top-k chunk of {chunk} x {size} bytes = {chunk * size} "
                               f"bytes must be a multiple of {ctx.memory.align} bytes")
    rows = vector_tile(ctx, x.shape, [x.dtype], whole=(x.ndim - 1,))[:-1]
    p = eqn.params
    own = ctx.config.vec is not None and len(ctx.config.vec) > 1

    def staged(a):
        return staged_topk(a, k=p["k"], largest=p["largest"], chunk=chunk, max_cols=ctx.memory.max_cols,
                           where=f"pto.topk{_at(ctx)}")

    def tail(shape):
        return (1,) * (len(shape) - len(rows) - 1) + (min(shape[-1], chunk),)

    if not own and rows:
        # Rows the user did not choose shrink (in every stage alike, so that stages still fuse) until
        # each stage's row of values, indices and results, double-buffered, takes at most half of the
        # UB: a merge of four k-lists per row is large at DeepSeek's k.
        stages = jax.make_jaxpr(staged)(jax.ShapeDtypeStruct(x.shape, x.dtype)).jaxpr.eqns
        per_row = max(math.prod(e.invars[0].aval.shape[len(rows):-1]) * tail(e.invars[0].aval.shape)[-1]
                      for e in stages if e.primitive.name != "pto.reshape") * (size + 4) * 2
        rows = _at_most(rows, max(1, stage_bytes(ctx.memory) // per_row), 1)

    def config(shape):
        return TileConfig(vec=rows + tail(shape))

    return _stages(ctx, staged, x, config)


def stage_bytes(memory: CoreMemory, ctx: _Context | None = None) -> int:
    """The bytes one tile holding a whole reduced axis (or a staged top-k row) may take: half the UB at
    the default tile size, less with a smaller ``memory.tile_bytes`` (a kernel whose text overfills the UB
    halves its *default* tiles) — but not for an op under a ``vec`` tile the user chose (``ctx``): how
    its reductions stage does not change with the default tiles' size."""
    if ctx is not None and ctx.config.vec is not None:
        return memory.ub // 2
    return min(memory.ub // 2, 3 * memory.tile_bytes)


_LOOPED = ("sum", "prod", "amax", "amin")     # the reductions a row loop accumulates (rowloop.COMBINE)


def _loops_row(ctx, eqn, x, op=None) -> bool:
    """Whether a last-axis reduction stays one whole-row grid however long the row, for partition's row
    loop (``rowloop.py``) to read it in column tiles: a ``sum`` / ``prod`` / ``amax`` / ``amin`` over the
    last axis under a ``vec`` tile the user chose that splits the row, with row loops on for its label.
    Partition loops over column chunks where no chain forms and the whole row does not fit (a tile row
    holds at most ``max_cols`` columns, so a longer row is never one tile). One without ``keepdims`` first
    becomes one with it (:func:`_kept_looped_row`): a row loop accumulates R×1 results. Under the default tiles,
    the same for a row past what a default tile holds whole (:func:`_default_row_limit`). ``op``: the
    reduction asked about, if not the eqn's."""
    if not (ctx.row_loops and (op or ctx.op) in _LOOPED and tuple(eqn.params["axes"]) == (x.ndim - 1,) and x.ndim >= 2):
        return False
    if ctx.config.vec is None:
        return not templated() and x.shape[-1] > _default_row_limit(ctx, x.dtype)
    return ctx.config.vec[-1] < x.shape[-1]


SEGMENT_TILES = 4   # default tile rows a segment of an arg-reduction's row spans at least: its loop's work
                    # then outweighs what its task's dispatch and the stage combining the segments add


def _looped_arg(ctx, eqn, x) -> int:
    """For an ``argmax`` / ``argmin`` whose extremum a row loop would read (:func:`_loops_row`: under a
    ``vec`` tile that splits the row, or over rows too long for one default tile): the segments of each
    row that ``reduce.first_extremum`` reduces side by side — the most that divide the row in aligned
    segments of at least :data:`SEGMENT_TILES` default tile rows and give the vector cores at most a block
    each (:data:`WIDE_ROW_BLOCKS`); else 0 (stages through GM)."""
    extremum = EXTREMUM.get(ctx.op)
    if extremum is None or x.dtype == np.bool_ or not _loops_row(ctx, eqn, x, extremum) \
            or ctx.config.vec is None and _staged_reduce_axis(ctx, eqn, x) is None:
        return 0
    rows, n = math.prod(x.shape[:-1]), x.shape[-1]
    step = max(1, ctx.memory.align // np.dtype(x.dtype).itemsize)
    most = max(1, min(WIDE_ROW_BLOCKS // rows, n // (SEGMENT_TILES * _default_row_limit(ctx, x.dtype))))
    return next(s for s in range(most, 0, -1) if s == 1 or n % s == 0 and (n // s) % step == 0)


def _widened_row_loop(ctx, eqn, x) -> bool:
    """A float16/bfloat16 ``sum`` / ``prod`` that a row loop reads (:func:`_loops_row`): it runs in
    float32 and is rounded once, as the staged form does, not rounded per column chunk."""
    return (ctx.op in ("sum", "prod") and np.dtype(x.dtype).name in ("float16", "bfloat16")
            and _loops_row(ctx, eqn, x))


WIDE_ROW_BLOCKS = 48     # row blocks a default row loop aims at: one per vector core of an A3 die


def wide_rows(space, memory: CoreMemory) -> int:
    """The rows of a default row loop's tiles over ``space`` (rows past a default tile's columns), for
    every op over that shape alike whatever its dtype (so that they fuse): as few as spread the rows over
    :data:`WIDE_ROW_BLOCKS` blocks at once (a row a task while there are fewer rows than vector cores), a
    power of two, at most a float32 default tile's rows of 2 048 columns (then more blocks, each longer)."""
    most = max(1, memory.tile_bytes // (4 * (1 << (memory.max_cols.bit_length() - 1))))
    per_block = -(-math.prod(space[:-1]) // WIDE_ROW_BLOCKS)
    return max(1, min(most, space[-2], 1 << (per_block - 1).bit_length()))


def _default_row_limit(ctx, dtype) -> int:
    """The most columns a default tile holds whole in one row."""
    return min(ctx.memory.max_cols, ctx.memory.tile_bytes // np.dtype(dtype).itemsize)


def _kept_looped_row(ctx, eqn, x) -> bool:
    """A last-axis reduction without ``keepdims`` that a row loop may read (:func:`_loops_row`): it
    reduces with ``keepdims`` (the R×1 result a row loop accumulates), then a reshape (free: a GM
    reinterpretation) drops the unit dim — one looping program per row block, fused with the column-tiled
    ops around it, as with ``keepdims``; and under a user's tile that holds its rows whole but is larger
    than the UB by itself (only a row loop over column chunks reads it). So too a reduction over unit axes
    only to a result of two dims or more, its tile's rows laid out as another tile's (33 x 13 from a
    33 x 13 x 1 tile)."""
    if ctx.op not in _LOOPED or eqn.params["keepdims"] or x.ndim < 2:
        return False
    axes = eqn.params["axes"]
    if x.ndim - len(axes) >= 2 and all(x.shape[a] == 1 for a in axes) or _loops_row(ctx, eqn, x):
        return True
    return (ctx.row_loops and ctx.config.vec is not None and tuple(axes) == (x.ndim - 1,)
            and aligned_bytes(vector_tile(ctx, x.shape, [x.dtype]), x.dtype, ctx.memory.align) > ctx.memory.ub)


def _staged_reduce_axis(ctx, eqn, x):
    """For a reduction (``reduce.py``'s ``OPS``) over one axis too long for one tile to hold whole
    (the last axis past ``max_cols`` columns or a default tile; another axis past ``max_rows`` rows or
    :func:`stage_bytes`): (axis, chunk limit, chunk step); else None — also for a last-axis reduction
    that a row loop reads in column tiles (:func:`_loops_row`)."""
    if ctx.op not in STAGED_REDUCTIONS or len(eqn.params["axes"]) != 1:
        return None
    (axis,) = eqn.params["axes"]
    n, size = x.shape[axis], np.dtype(x.dtype).itemsize
    if axis == x.ndim - 1:
        step = max(1, ctx.memory.align // size)
        if _loops_row(ctx, eqn, x):
            return None
        if ctx.config.vec is None:
            limit = _default_row_limit(ctx, x.dtype)
            return (axis, limit, step) if n > limit else None
        if n <= ctx.memory.max_cols:
            return None                         # the user's tile: past a tile row only, unless a row loop reads it
        rows = math.prod(ctx.config.vec[:-1])   # chunks of the user's rows in a whole-row tile's share of the UB
        limit = _whole_row_bytes(ctx.memory) // (rows * size) // step * step
        return axis, min(ctx.memory.max_cols, max(step, limit)), step
    tile = vector_tile(ctx, x.shape, [x.dtype], whole=(axis,))
    per_row = aligned_bytes(tile[:axis] + (1,) + tile[axis + 1:], x.dtype, ctx.memory.align)
    budget = min(stage_bytes(ctx.memory, ctx), column_stage_bytes(ctx.memory, ctx.op, x.dtype))
    limit = min(ctx.memory.max_rows // max(1, math.prod(tile[:-1]) // n), budget // max(1, per_row))
    if n > limit and limit < 2:                 # a stage of one slice would reduce nothing
        raise PtoCapacityError(f"pto.{ctx.op}{_at(ctx)}: a slice of reduced axis {axis} under vec tile "
                               f"{tile[:axis] + tile[axis + 1:]} takes {per_row} bytes; a stage of the reduction "
                               f"holds {budget} bytes, two slices at least: use a smaller vec tile")
    return (axis, limit, 1) if n > limit else None


# UB a reduction over a leading axis takes at once, in tiles as large as its source (the source among them),
# as selection emits it: the float arg-reductions' NaN pass, an integer sum's transpose and row-sum work
# tile, the float32 copies of float16 / bfloat16 and the int16 / int32 ones of int8 (bounded by a test of the selected text's plan)
_COLUMN_WORK = {"float32": {"amax": 2.25, "amin": 2.25, "argmax": 4.25, "argmin": 4.25},
                "float16": {"sum": 2.25, "prod": 2.25, "amax": 2.25, "amin": 2.25, "argmax": 4.25, "argmin": 4.25},
                "bfloat16": {"sum": 2.25, "prod": 2.25, "amax": 5, "amin": 5, "argmax": 7.25, "argmin": 7.25},
                "int32": {"sum": 3, "argmax": 3, "argmin": 3},
                "int8": {"sum": 12, "prod": 4.5, "amax": 3, "amin": 3, "argmax": 16, "argmin": 16}}


def column_stage_bytes(memory: CoreMemory, op: str, dtype) -> int:
    """The most bytes a stage of ``op`` (a reduction) over a leading axis may read at once: what leaves
    its work tiles (:data:`_COLUMN_WORK`, 1 where unlisted; 16, the most, for a dtype unlisted) and 1 KiB
    of small tiles within the UB."""
    work = _COLUMN_WORK.get(np.dtype(dtype).name)
    return int((memory.ub - 1024) / (16 if work is None else work.get(op, 1)))


def _split_reduce_axes(ctx, eqn, x) -> bool:
    """Whether a ``sum`` / ``prod`` / ``amax`` / ``amin`` over several axes keeps more whole than one tile
    holds (its last axis past ``max_cols`` columns, its rows past ``max_rows``, or its tile past
    :func:`stage_bytes`, as :func:`_staged_reduce_axis` stages one axis) or reduces axes that are not
    adjacent (unit dims aside): then it reduces one run of adjacent axes at a time (``reduce.py``'s
    ``reduce_axes``), each staged where it is too long."""
    axes = tuple(eqn.params["axes"]) if ctx.op in ROW_REDUCTIONS else ()
    if len(axes) < 2 or all(x.shape[a] == 1 for a in axes):
        return False
    reduced = [d in axes for d in range(x.ndim) if x.shape[d] != 1]
    if sum(r and (k == 0 or not reduced[k - 1]) for k, r in enumerate(reduced)) > 1:
        return True         # axes apart ((0, 2) of 4-D): one tile reduces one run of adjacent axes only
    tile = vector_tile(ctx, x.shape, [x.dtype], whole=axes)
    return ((x.ndim - 1 in axes and x.shape[-1] > ctx.memory.max_cols)
            or math.prod(tile[:-1]) > ctx.memory.max_rows
            or aligned_bytes(tile, x.dtype, ctx.memory.align) > stage_bytes(ctx.memory, ctx))


_SCAN_ACC = {"float16": np.float32, "bfloat16": np.float32, "int8": np.int16}   # what tcumsum adds in


def _scan_dtypes(dtype):
    """The dtype a staged ``cumsum`` of ``dtype`` scans in (float32 for low-precision floats) and the one
    its ``tcumsum`` adds in."""
    wide = np.dtype(np.float32) if np.dtype(dtype).name in ("float16", "bfloat16") else np.dtype(dtype)
    return wide, np.dtype(_SCAN_ACC.get(wide.name, wide))


def _scan_fits(ctx, rows: int, n: int, dtype) -> bool:
    """Whether a last-axis ``tcumsum`` of ``rows`` rows of ``n`` scans in one tile, as isel emits it: its
    transpose (the work tile, ``w``) within half the UB, and its peak as ptoas plans it within the UB less
    1 KiB: the source ``a`` in the scan's dtype, a transpose's tmp tile as large as its source, the work
    tile and the second one its doubling passes write — ``max(2a + w, a + 2w)`` — and where the tile's
    dtype is narrower, the tile itself and its widened copy (its rows padded as the narrow dtype's)."""
    memory, wide = ctx.memory, _scan_dtypes(dtype)[1]
    w = n * _column_bytes(ctx, rows, dtype)
    if n > memory.max_cols or w > memory.ub // 2:
        return False
    a = aligned_bytes((rows, n), wide, memory.align)
    narrow = aligned_bytes((rows, n), dtype, memory.align) + a if wide != np.dtype(dtype) else 0
    return narrow + max(2 * a + w, a + 2 * w) <= memory.ub - 1024


def _column_bytes(ctx, rows: int, dtype) -> int:
    """A last-axis ``tcumsum``'s work tile (the transpose of ``rows`` rows) per column of the scan."""
    return aligned_bytes((max(rows, 2),), _scan_dtypes(dtype)[1], ctx.memory.align)


def _slice_bytes(ctx, x, dtype, axis: int):
    """(UB bytes, matrix rows) per slice along leading ``axis`` of a ``cumsum`` tile of ``x`` in ``dtype``:
    the tile and its result, and its accumulator where that is wider."""
    tile = vector_tile(ctx, x.shape, [dtype], whole=(axis,))
    piece = tile[:axis] + (1,) + tile[axis + 1:]
    acc = _scan_dtypes(dtype)[1]
    per = aligned_bytes(piece, dtype, ctx.memory.align) * 2
    per += aligned_bytes(piece, acc, ctx.memory.align) if acc != np.dtype(dtype) else 0
    return per, max(1, math.prod(tile[:-1]) // x.shape[axis])


# The rows a default long-row scan loop takes at most: its passes cost alike for any row count up to a few
# hundred bytes, so more rows a block scan in fewer.
LOOPED_SCAN_ROWS = 64
SCAN_STAGES = {"4-byte": (20, 200_000), "narrower": (10, 120_000)}    # (:func:`_stages_rows`)
SCAN_SEGMENT = 2048     # the least a stage's segment of such a row spans (its loop's work outweighs its task)


def _stages_rows(rows: int, n: int, dtype) -> bool:
    """Whether a last-axis ``cumsum`` of ``rows`` rows of ``n`` (too long for one tile) stages, spreading
    each row over the cores, rather than looping over each row on one. On the A3 model a row loop costs
    about 1.8 ns a column; the stages about 20 us and 0.09 ns an entry spread over the cores (about twice
    that for 1- and 2-byte dtypes: float16 / bfloat16 widened first, int8 in more, narrower chunks): with
    ``(most, work)`` of :data:`SCAN_STAGES`, they stage where ``rows < most`` and ``n * (most - rows) >
    work`` (float32: 1 row past ~10 500 values, 8 past ~16 700, 15 past 40 000; 20 rows or more loop)."""
    most, work = SCAN_STAGES["4-byte" if np.dtype(dtype).itemsize >= 4 else "narrower"]
    return rows < most and n * (most - rows) > work


def _staged_scan_axis(ctx, eqn, x):
    """For a ``cumsum`` along an axis too long for one tile to scan whole: (axis, chunk limit, chunk step,
    the stages' tile setting); else None. Along the last axis the scan runs down the tile's transpose, a
    32-byte aligned row per column, within half the UB and ``max_cols`` columns (a few long rows
    (:func:`_stages_rows`) under the default tiles with row loops on: segments of the row spread over the
    vector cores, each scanned by a row loop); along another, the tile, its result and accumulator within
    the UB and ``max_rows`` rows. A stage takes :func:`stage_bytes`."""
    if ctx.op != "cumsum" or not x.ndim:
        return None
    (axis,) = eqn.params["axes"]
    n, dtype, memory = x.shape[axis], np.dtype(x.dtype), ctx.memory
    wide, acc = _scan_dtypes(dtype)
    if axis == x.ndim - 1:
        rows = math.prod(vector_tile(ctx, x.shape, [dtype], whole=(axis,))[:-1])
        if _scan_fits(ctx, rows, n, dtype):
            return None
        step = memory.align // min(dtype.itemsize, wide.itemsize)
        if ctx.config.vec is not None:              # the user's rows in every stage
            rows = math.prod(ctx.config.vec[:-1])
            limit = min(memory.max_cols, stage_bytes(memory) // _column_bytes(ctx, rows, wide))
            return axis, _at_least_two(ctx, limit, axis), step, lambda shape: ctx.config
        rows = math.prod(x.shape[:-1])
        if ctx.row_loops and _stages_rows(rows, n, dtype) and not templated():
            segments = min(-(-WIDE_ROW_BLOCKS // rows), -(-n // SCAN_SEGMENT))    # a few long rows: segments
            limit = -(-n // segments // step) * step     # over the cores, each a row loop's (_looped_scan)
            return axis, limit, step, lambda shape: TileConfig()
        limit = min(memory.max_cols, stage_bytes(memory) // memory.align)
        chunk = scan_chunk(n, limit, step)          # rows whose transpose keeps 32-byte rows, in a default tile
        rows = max(1, min(memory.align // acc.itemsize, memory.tile_bytes // (chunk * wide.itemsize)))
        return axis, limit, step, lambda shape: TileConfig(vec=(rows, chunk))
    per, rows = _slice_bytes(ctx, x, dtype, axis)
    if n * per <= memory.ub and n * rows <= memory.max_rows:
        return None
    per, rows = _slice_bytes(ctx, x, wide, axis)
    limit = min(memory.max_rows // rows, stage_bytes(memory) // per)
    if limit < 2 and ctx.config.vec is None:        # default tiles: a stage's tiles take fewer rows (_fit_whole)
        limit = min(memory.max_rows, stage_bytes(memory) // -(-per // rows))
    return axis, _at_least_two(ctx, limit, axis), 1, lambda shape: ctx.config


def _looped_scan(ctx, eqn, x):
    """For a ``cumsum`` along rows too long for one tile to scan whole, with row loops on for its label:
    (the tile of one program's row block, its rows whole; the columns of each chunk its loop scans);
    else None. Under the user's ``vec`` tile the block and chunk are its rows and columns; under the
    default tiles a power-of-two row count that spreads the rows over :data:`WIDE_ROW_BLOCKS` blocks
    (at most :data:`LOOPED_SCAN_ROWS`), chunks of a default tile's bytes — each within what
    :func:`_scan_fits` allows. A few long rows (:func:`_stages_rows`) stage instead."""
    (axis,) = eqn.params["axes"]
    if not ctx.row_loops or x.ndim < 2 or axis != x.ndim - 1 or templated():
        return None
    dtype, n = np.dtype(x.dtype), x.shape[-1]
    if _stages_rows(math.prod(x.shape[:-1]), n, dtype):
        return None
    if _scan_fits(ctx, math.prod(vector_tile(ctx, x.shape, [dtype], whole=(axis,))[:-1]), n, dtype):
        return None
    wide = _scan_dtypes(dtype)[0]
    step = ctx.memory.align // min(dtype.itemsize, wide.itemsize)
    if ctx.config.vec is not None:
        tile = vector_tile(ctx, x.shape, [dtype])
        cols = tile[-1]
    else:
        per_block = -(-math.prod(x.shape[:-1]) // WIDE_ROW_BLOCKS)
        rows = min(x.shape[-2], LOOPED_SCAN_ROWS, 1 << (per_block - 1).bit_length())
        tile = (1,) * (x.ndim - 2) + (rows, n)
        cols = min(ctx.memory.max_cols, ctx.memory.tile_bytes // (rows * wide.itemsize))
    rows, chunk = math.prod(tile[:-1]), min(cols, n) // step * step
    while chunk > step and not _scan_fits(ctx, rows, chunk, dtype):
        chunk = chunk // 2 // step * step
    if chunk < step or not _scan_fits(ctx, rows, chunk, dtype):
        return None
    return tuple(tile[:-1]) + (n,), chunk


def _scan_loop(ctx, eqn, invals, tile, chunk):
    """A long-row ``cumsum`` as one program per row block (:func:`_looped_scan`): a loop over the row's
    column chunks, each scanned (by doubling) from the sums before it (``tcumsum_carry``, an R×1 carry in
    the dtype the scan adds in), with no stage through GM (``reverse``: from the row's end)."""
    (x,) = invals
    reverse = eqn.params["reverse"]
    acc, n = _scan_dtypes(x.dtype)[1], x.shape[-1]
    cuts = column_cuts(n, chunk)
    zero = -0.0 if np.dtype(acc).kind == "f" else 0        # x + -0.0 is x, -0.0 included

    def body(region, index, ins, outs):
        (src,), (out,) = ins, outs
        col = len(index) - 1                                # the row's grid index: each chunk's
        carry = T.compute("expand", np.asarray(zero, acc), shape=region.tile[:-1] + (1,))
        for count, width, first in (reversed(cuts) if reverse else cuts):
            last = first + (count - 1) * width
            window = Window(region.tile[:-1] + (width,), tuple(range(col + 1)),
                            region.stride[:-1] + (-width if reverse else width,),
                            region.base[:-1] + (last if reverse else first,))

            def step(c, state, window=window):
                out, carry = state
                y, carry = T.tcumsum_carry_p.bind(T.tload(src, [*index[:-1], c], window), carry, reverse=reverse)
                return T.tstore(out, y, [*index[:-1], c], window), carry

            state = (out, carry)
            out, carry = step(np.int32(0), state) if count == 1 else jax.lax.fori_loop(0, count, step, state)
        return [out]

    return emit(ctx, "vector", regions(x.shape, tile), [x], [eqn.outvars[0].aval], body)


def _at_least_two(ctx, limit: int, axis: int) -> int:
    if limit < 2:                               # a chunk of one would scan nothing
        raise PtoCapacityError(f"pto.cumsum{_at(ctx)}: under vec tile {ctx.config.vec or 'default'} a stage of the "
                               f"scan along axis {axis} holds fewer than two of its entries: use a smaller vec tile")
    return limit


def _staged_scan(ctx, eqn, invals, axis, limit, step, config):
    """A ``cumsum`` along a long axis in stages (``reduce.py``): chunks scanned, then their carries added."""
    reverse = eqn.params["reverse"]
    return _stages(ctx, lambda a: staged_cumsum(a, axis=axis, reverse=reverse, limit=limit, step=step),
                   invals[0], config)


_COMPOSITES = ("softmax", "rms_norm", "layer_norm")
_QUANTIZE_COPIES = 4      # a row's float32 bytes that quantize's rule (isel/quant.py) holds at once, at most


def _as_reference(ctx, eqn, x) -> bool:
    """Whether a composite lowers as its reference's ops: softmax or quantize along other axes than the
    last alone (their instructions take the last), or a row-wise composite whose whole axes do not fit
    one tile — a row past ``max_cols`` columns, or the whole axes alone past :func:`stage_bytes` (a
    quantize row, or its rows under a ``vec`` tile that splits them with row loops on, past what its rule's
    copies of them leave room for)."""
    if ctx.op in ("softmax", "quantize") and x.ndim and tuple(eqn.params["axes"]) != (x.ndim - 1,):
        return True
    if ctx.op not in (*_COMPOSITES, "quantize"):
        return False
    whole = tuple(_WHOLE_AXES[ctx.op](eqn.params, x.ndim))
    row = tuple(n if d in whole else 1 for d, n in enumerate(x.shape))
    if ctx.op == "quantize":          # its rule holds the row in float32 three times, and q beside it
        vec = ctx.config.vec
        if vec is not None and ctx.row_loops and x.ndim >= 2 and vec[-1] < x.shape[-1]:    # a tile splitting the row
            row = vector_tile(ctx, x.shape, [x.dtype], whole=whole)
        return _QUANTIZE_COPIES * aligned_bytes(row, np.float32, ctx.memory.align) >= ctx.memory.ub
    return (x.ndim - 1 in whole and x.shape[-1] > ctx.memory.max_cols) or \
        aligned_bytes(row, np.float32, ctx.memory.align) > stage_bytes(ctx.memory, ctx) or \
        _overfull_split_rows(ctx, x, whole)


def _overfull_split_rows(ctx, x, whole) -> bool:
    """Whether a row-wise composite's whole rows under the user's ``vec`` tile that splits the row (row
    loops on) would take more than :func:`_whole_row_bytes` in float32, a float16 / bfloat16 copy beside
    them: then it lowers as its reference's ops, whose reductions loop over the row's column tiles."""
    vec = ctx.config.vec
    if vec is None or not ctx.row_loops or x.ndim < 2 or x.ndim - 1 not in whole or vec[-1] >= x.shape[-1]:
        return False
    tile = vector_tile(ctx, x.shape, [x.dtype], whole=tuple(whole))
    extra = aligned_bytes(tile, x.dtype, ctx.memory.align) if np.dtype(x.dtype) != np.float32 else 0
    return aligned_bytes(tile, np.float32, ctx.memory.align) + extra > _whole_row_bytes(ctx.memory)


def _staged_reduce(ctx, eqn, invals, axis, limit, step):
    """A reduction over a long axis in stages (``reduce.py``), every stage under the op's tile setting."""
    keepdims = eqn.params["keepdims"]
    return _stages(ctx, lambda a: staged_reduce(a, op=ctx.op, axis=axis, keepdims=keepdims, limit=limit, step=step),
                   invals[0], lambda shape: ctx.config)


def _stages(ctx, stages_fn, x, config):
    """Tile the pto ops of ``stages_fn(x)`` (a staged form of one op) one by one, each under
    ``config(its first operand's shape)``; reshapes stay GM reinterpretations."""
    stages = jax.make_jaxpr(stages_fn)(jax.ShapeDtypeStruct(x.shape, x.dtype))
    env = dict(zip(stages.jaxpr.constvars, stages.consts))
    env[stages.jaxpr.invars[0]] = x
    for inner in stages.jaxpr.eqns:
        args = [v.val if isinstance(v, Literal) else env[v] for v in inner.invars]
        op = inner.primitive.name[len("pto."):]
        if op == "reshape":
            outs = [inner.primitive.bind(*args, **inner.params)]
        else:
            sub = _Context(op, config(inner.invars[0].aval.shape), ctx.label, ctx.memory, ctx.rows, ctx.reshaped,
                           ctx.row_loops, ctx.wide)
            looped = op == "cumsum" and _looped_scan(sub, inner, args[0])
            outs = (_copies(sub, inner, args) if op in _COPIES else _scan_loop(sub, inner, args, *looped) if looped
                    else _mapped(sub, inner, args))
        env.update(zip(inner.outvars, outs))
    return [env[v] for v in stages.jaxpr.outvars]


def _rule(memory, tiles=None, seen=None, hand=None, used=None, loops=None, bare=None, wide=None, shared=None,
          met=None):
    """``tiles``: label -> TileConfig overriding the ``pj.tile`` setting of that label's ops
    (``"DEFAULT"``: under every op's own setting); ``seen`` collects the labels of the ops met, ``hand``
    those of hand-written grids (``pj.tiles.grid``: their tiles are the body's), ``used`` the (label,
    ``"vec"`` / ``"cube"``) tile kinds the ops met take, ``bare`` the kinds some op takes with no setting
    of its own (``pj.tile`` or its label's override: ``"DEFAULT"``'s applies); ``loops``: partition's
    ``row_loops`` (label -> bool, ``"DEFAULT"`` for the rest)."""
    tiles = dict(tiles or {})
    loops = dict(loops or {})
    default = tiles.pop("DEFAULT", TileConfig())
    seen = set() if seen is None else seen
    hand = set() if hand is None else hand
    used = set() if used is None else used
    bare = set() if bare is None else bare
    wide = {} if wide is None else wide
    shared = {} if shared is None else shared
    met = {} if met is None else met
    device = Memo()     # the values computed on a core (GM tensors); other 0-d values live on the host
    rows = Memo()       # R×1 value -> the tile of the row block it was reduced from
    reshaped = Memo()   # a reshape's result -> the tensor it reshapes

    def on_device(values):
        for v in values:
            device[v] = True
        return values

    def rule(eqn, invals, stack):
        with blame(eqn):                              # errors name the user's call and line
            return tile_eqn(eqn, invals, stack)

    def tile_eqn(eqn, invals, stack):
        name = eqn.primitive.name
        if name in CONTROL:
            return control(eqn, invals, stack, by_rule(rule))
        op = name[len("pto."):]
        host = (all(not v.aval.shape for v in eqn.outvars) and all(not np.shape(x) for x in invals)
                and not any(x in device for x in invals))
        if not name.startswith("pto.") or host:       # control scalars (loop counters, bounds) stay on the host
            out = eqn.primitive.bind(*invals, **eqn.params)
            outs = list(out) if eqn.primitive.multiple_results else [out]
            return on_device(outs) if any(x in device for x in invals) else outs
        if eqn.primitive is ir.tile_grid_p:            # hand-written tiles (pj.tiles.grid) pass through
            spec = eqn.params["spec"]
            if not spec.label:
                spec = dataclasses.replace(spec, label=read(stack)[1])
            hand.add(spec.label)
            return on_device(ir.tile_grid_p.bind(*invals, spec=spec))
        if op in ("reshape", "bitcast"):               # a GM reinterpretation: no tiles move
            if op == "bitcast":
                return on_device([eqn.primitive.bind(*invals, **eqn.params)])
            out = as_shape(reshaped, invals[0], eqn.params["new_shape"])
            return on_device([out]) if out in reshaped else [out]      # a new reshape, or the tensor itself
        config, label = read(stack)
        seen.add(label)
        kind = "cube" if op == "matmul" else "vec"
        used.add((label, kind))
        config = config.merged(tiles.get(label, TileConfig()))
        if getattr(config, kind) is None:
            bare.add(kind)
        config = default.merged(config)
        ctx = _Context(op, config, label, memory, rows, reshaped, loops.get(label, loops.get("DEFAULT", True)), wide,
                       shared, met)
        if all(0 in v.aval.shape for v in eqn.outvars):   # no element to compute (x[..., 64:] of 64 columns)
            return [np.zeros(v.aval.shape, v.aval.dtype) for v in eqn.outvars]
        if any(0 in np.shape(x) for x in invals) and op in ("sum", "prod", "matmul"):
            aval = eqn.outvars[0].aval                  # over no element: the identity (a K = 0 product: 0)
            if op != "matmul" or len(invals) == 2:
                return [np.full(aval.shape, int(op == "prod"), aval.dtype)]
            closed = jax.make_jaxpr(functools.partial(OPS[op].reference, **eqn.params))(      # + its bias
                *[jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in invals])
            tensor = to_tensor_level(closed)
            return interpret(tensor.jaxpr, tensor.consts, invals, rule, stack)
        if op in ("scatter_update", "index_add") and 0 in np.shape(invals[1]):
            return [invals[0]]                          # no row to write: the operand as it is
        if any(0 in np.shape(x) for x in invals):
            shapes = [tuple(np.shape(x)) for x in invals] + [v.aval.shape for v in eqn.outvars]
            raise PtoShapeError(f"pto.{op}{_at(ctx)}: zero-size operand or result (shapes {shapes}); a tile "
                                "covers at least one element")
        def rewritten(fn, operands, jnp_code=False):     # the op as other ops, tiled by this rule in turn
            closed = jax.make_jaxpr(fn)(*[jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in operands])
            closed = keep_rows(to_tensor_level(closed)) if jnp_code else closed   # as the kernel's own ops
            return interpret(closed.jaxpr, closed.consts, operands, rule, stack)

        flat = _flat_rows(reshaped, op, invals, eqn.outvars[0].aval)
        if flat is not None:                            # on the rows its operands were reshaped from
            outs = rewritten(lambda *a: [eqn.primitive.bind(*a, **eqn.params)], [as_shape(reshaped, x, flat)
                                                                                  if _is_tensor(x) else x for x in invals])
            return [as_shape(reshaped, y, eqn.outvars[0].aval.shape) for y in outs]
        if _wide_weights(op, invals):
            return rewritten(functools.partial(_weights_after, op, **eqn.params), invals)
        if op == "matmul" and len(invals) == 3 and not _row_bias(invals[2], eqn.outvars[0].aval):
            return rewritten(functools.partial(_bias_after, **eqn.params), invals)
        if op == "matmul":
            return on_device(_merged_matmul(ctx, eqn, invals) or _matmul(ctx, eqn.params, eqn.outvars[0].aval, invals))
        if op in _COPIES:
            return on_device(_copies(ctx, eqn, invals))
        if op == "iota":
            return on_device(_iota(ctx, eqn))
        if _is_staged_topk(ctx, eqn, invals[0]):
            k, most = eqn.params["k"], pass_k(invals[0].dtype)
            if most < k and _sorts_whole(invals[0]):     # merges of lists of k would overfill the UB
                return rewritten(functools.partial(topk_by_sort, k=k, largest=eqn.params["largest"]), invals[:1])
            if most < k <= ctx.memory.max_cols:     # ... and the row is too long to sort: in passes
                if templated() or not all(isinstance(d, int) for d in invals[0].shape):
                    raise PtoUnsupportedError(
                        f"pto.topk{_at(ctx)}: k={k} of a {invals[0].shape[-1]}-column row is selected in passes (one "
                        f"staged pass keeps at most {most} entries per row), whose scatters over the rows flattened "
                        f"differ with the row count: under a symbolic row count (polymorphic_shapes) take k <= "
                        f"{most}, or call the kernel without polymorphic_shapes (one lowering per row count)")
                return rewritten(functools.partial(topk_in_passes, k=k, largest=eqn.params["largest"], most=most),
                                 invals[:1])
            return on_device(_staged_topk(ctx, eqn, invals))
        if op in _INDEXED:
            if not hasattr(invals[1], "shape"):         # a literal index (gather(x, 1)): a 0-d array of it
                invals = [invals[0], np.asarray(invals[1], eqn.invars[1].aval.dtype), *invals[2:]]
            if _padded_rows(ctx, invals[0], eqn.params["axis"]):     # rows (128, 1) moved as (128,)
                return rewritten(functools.partial(_flat_rows_moved, op=getattr(ops, op), **eqn.params), invals)
            chunk = _row_chunk(ctx, eqn, invals)
            if chunk is None:
                return on_device(_indexed(ctx, eqn, invals))
            params = {k: v for k, v in eqn.params.items() if k != "axis"}   # rows too long: in chunks
            return rewritten(lambda x, *rest: [rows_of(getattr(ops, op), x, *rest, axis=eqn.params["axis"],
                                                       chunk=chunk, **params)], invals)
        _check_sort_row(ctx, eqn, invals[0])
        if _sorts_by_halves(ctx, eqn, invals[0]):    # a long int32 row: float32 sorts of its halves, gathers
            return rewritten(functools.partial(sort_int32_by_halves, largest=eqn.params["largest"]), invals[:1])
        if _is_int_sort_off_last(ctx, eqn, invals[0]):     # int32 sorts along a tile's rows only: moved last
            return rewritten(functools.partial(_sort_along_last, prim=eqn.primitive, **eqn.params), invals[:1])
        if _as_reference(ctx, eqn, invals[0]):      # its reference's ops: staged reductions, blocks of columns
            return rewritten(functools.partial(OPS[op].reference, **eqn.params), invals, jnp_code=True)
        if _split_reduce_axes(ctx, eqn, invals[0]):    # one run of adjacent axes at a time, each staged
            return rewritten(functools.partial(reduce_axes, op=op, **eqn.params), invals[:1])
        segments = _looped_arg(ctx, eqn, invals[0])
        if segments:                                   # the extremum, then the first index holding it
            return rewritten(functools.partial(first_extremum, op=op, segments=segments, **eqn.params), invals[:1])
        if _widened_row_loop(ctx, eqn, invals[0]):    # in float32, rounded once
            dtype = invals[0].dtype
            return rewritten(lambda a: ops.cast(eqn.primitive.bind(ops.cast(a, np.float32), **eqn.params), dtype),
                             invals[:1])
        if _kept_looped_row(ctx, eqn, invals[0]):        # R×1 for the row loop, then the unit dim dropped
            shape, kept = eqn.outvars[0].aval.shape, dict(eqn.params, keepdims=True)
            return rewritten(lambda a: ops.reshape(eqn.primitive.bind(a, **kept), shape), invals[:1])
        staged = _staged_reduce_axis(ctx, eqn, invals[0])
        if staged is not None:
            return on_device(_staged_reduce(ctx, eqn, invals, *staged))
        looped = ctx.op == "cumsum" and _looped_scan(ctx, eqn, invals[0])
        if looped:                                     # a long row: one program per row block loops over it
            return on_device(_scan_loop(ctx, eqn, invals, *looped))
        staged = _staged_scan_axis(ctx, eqn, invals[0])
        if staged is not None:
            return on_device(_staged_scan(ctx, eqn, invals, *staged))
        return on_device(_mapped(ctx, eqn, invals))
    return rule


def to_tile_level(tensor: ClosedJaxpr, memory: CoreMemory = ASCEND_CORE, tiles=None, labelled=None) -> ClosedJaxpr:
    """The Tile graph of a Tensor-level jaxpr; ``tiles`` maps labels to overriding TileConfigs.
    ``labelled``: the other per-label pass options (name -> their (label, value) pairs), whose labels
    must be the kernel's too."""
    seen: set = set()
    hand: set = set()
    used: set = set()
    loops = dict((labelled or {}).get("row_loops") or {})
    bare: set = set()
    wide: dict = {}         # shape -> rows of a default row loop over it (found as its reduction is tiled)
    met: dict = {}          # (shape, label) -> the default tiles over it
    out = retrace(keep_rows(tensor), _rule(memory, tiles, seen, hand, used, loops, bare, wide, met=met))
    # Again where needed: the ops before each such reduction on its rows too (one row loop), and the ops of
    # one shape and label on the smallest tile any of them took (f16 ops and their float32 sums fuse).
    shared = {key: tuple(map(min, zip(*tiles))) for key, tiles in met.items() if len(tiles) > 1}
    if wide or shared:
        out = retrace(keep_rows(tensor), _rule(memory, tiles, seen, hand, used, loops, bare, dict(wide), shared))
    for label, config in dict(tiles or {}).items():
        for kind in ("vec", "cube"):
            if label in seen and getattr(config, kind) is not None and (label, kind) not in used:
                takes = "cube tiles only (matmuls)" if kind == "vec" else "vec tiles only (no matmul)"
                raise PtoArgumentError(f"pto tiling: the tile override for {label!r} sets {kind}, but its ops take "
                                       f"{takes}; the override would change nothing")
            if label == "DEFAULT" and getattr(config, kind) is not None and kind not in bare:
                why = (f"every op that takes a {kind} tile has its own (pj.tile or its label's override)"
                       if any(k == kind for _, k in used) else "the kernel has no op the tile pass tiles"
                       if not used else "the kernel's ops take " + ("cube tiles only (matmuls)" if kind == "vec" else
                                                   "vec tiles only (no matmul)"))
                raise PtoArgumentError(f"pto tiling: the tile override for 'DEFAULT' sets {kind}, but {why}; the "
                                       "override would change nothing")
    for name, table in {"tiles": tiles, **(labelled or {})}.items():
        labels = seen if name == "tiles" else seen | hand      # a hand-written grid's tiles are its body's
        unmatched = sorted(set(dict(table or {})) - labels - {"DEFAULT"})
        if unmatched:
            what = "tile overrides" if name == "tiles" else f"{name} options"
            hint = (f" ({sorted(set(unmatched) & hand)} label hand-written grids, whose tiles are their bodies')"
                    if set(unmatched) & hand else "")
            raise PtoArgumentError(f"pto tiling: {what} for {unmatched} match no op's label; the labels in this "
                                   f"kernel are {sorted(l for l in labels if l)}{hint}")
    return ClosedJaxpr(live(out.jaxpr, only=("pto.reshape",)), out.consts)   # (the interleave rules' spares)
