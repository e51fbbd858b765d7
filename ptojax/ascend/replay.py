"""The replay: the parsed real PTO-AS functions of a kernel, walked once as JAX code.

:class:`Walk` traces one function of the module (:mod:`~ptojax.ascend.engine_parse`) for a batch
of ``n`` grid points at once: every tile is a jnp array with a leading point axis, every
instruction is ``tile_semantics.SEMANTICS[mnemonic]`` (the table the eager engine runs) vmapped over
the points — jitted and kept per instruction form, so a form is traced once however often it recurs —
GM tensors are flat jnp arrays. The model is the engine's (:mod:`~ptojax.ascend.engine`),
written functionally:

* an ``alloc_tile`` is a root: a zeroed ``(n, rows*cols)`` array of its dtype (:func:`storage`);
  ``treshape`` and ``subset`` are views (root, dtype, first element, pitch, layout, valid shape)
  whose reads and writes go through the root (``bitcast`` where the dtype differs); a ``treshape``
  must start at a whole element of its dtype, as in the engine, at a loop counter's offset too (an
  alias into a wider dtype unrolls the loop, so that each offset is checked);
* index values are Python ints where every point agrees, NumPy arrays (one value per point) where
  they follow from the block index and constants, else traced ``int32`` values with known bounds
  (a loop counter, a value read from a tile) — see :class:`Ix`;
* ``tload`` / ``tstore`` windows with static element indices become slices and reshapes
  (:mod:`~ptojax.ascend.strided`), else runs of consecutive elements: a dynamic slice where the
  points agree, one gather or scatter window per run where they differ;
* tiles and GM tensors of floats narrower than 32 bits are held as their bits (:func:`storage`);
* a user's instruction (``pj.tiles.register_op``) reads a whole tensor view as its GM operand; its
  NumPy semantics, where it has one, is called back on the host (``jax.pure_callback``);
* ``scf.for`` is a ``lax.fori_loop`` over the tiles (unrolled where it is short, where its body
  stores into GM of a batch, or where a shape in it depends on the counter); ``scf.if`` on a traced
  condition runs both blocks, each writing tiles only for the points it runs for (one point:
  ``lax.cond``).

Grid points of a batch share the GM arrays as they were before the batch; their stores are applied
after it in point order (an ``atomic_add`` store adds as ``tadd`` does). Where that is not the
engine's in-order semantics — a function that reads a GM tensor it also writes, stores through an
index read from data, or stores under a per-point condition — :class:`Serial` is raised and the
caller runs the points one at a time (:mod:`~ptojax.ascend.replay_graph`).

Every float result but a 32-bit one of an add, a subtraction or a max/min, and but one of a sort, a
merge, a gather, a select, a transpose or a broadcast (bits moved: index words among them), passes a
select on ``isnan`` (the identity, a NaN's quiet bit set): XLA's code generator would otherwise contract a product
with a later add into one fma, where the engine rounds each instruction. Two instruction families take
a form over the whole batch (:data:`_WHOLE`): a row or column max/min is the plain reduction, which
XLA vectorizes, where that equals the simulator's scan (no NaN, no zero extreme); a row sum or
product folds chunks of points, one loop trip each, so that their moved copies stay in the cache.
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .engine import _ARITH, _CMP, _bits, _fits, _typed, alias_offset_fault, alias_valid, scalar_arith
from .engine_parse import (DTYPES, Arith, Const, For, Function, If, Instr, PtrType, Scalar, Stmt, Subset, Tile,
                           TileType, View, ViewType, subset_valid)
from ..errors import PtoExecutionError
from .strided import apply_store, gather, plain_store, scatter
from .tile_semantics import SEMANTICS, USER, zn

UNROLL = 1          # loop trips (and serial grid points) unrolled rather than run as a fori_loop
UNROLL_MAX = 256    # the most trips unrolled where a fori_loop cannot do (stores of a batch, shapes per trip)


class Serial(Exception):
    """The grid points of a batch interact (or store where only one point can): run them one by one."""


class Unroll(Exception):
    """A shape depends on a loop counter: unroll the loop."""


# ------------------------------------------------------------------------------------ index values
@dataclasses.dataclass(frozen=True, eq=False)
class Ix:
    """An integer (``index``/``iN``/``i1``) value that differs between points or is traced: ``np``, one
    value per point known at trace time, or ``x``, traced (n,) with bounds ``lo``..``hi`` (None: unknown)."""

    type: str
    np: np.ndarray | None = None
    x: object = None
    lo: int | None = None
    hi: int | None = None

    def traced(self, n: int):
        if self.x is not None:
            return jnp.broadcast_to(self.x, (n,))
        dt = jnp.bool_ if self.type == "i1" else jnp.int32
        return jnp.asarray(self.np.astype(dt))

    def bounds(self):
        if self.np is not None:
            return int(self.np.min()), int(self.np.max())
        return self.lo, self.hi


def _known(values: np.ndarray, type_: str):
    """Per-point values as an int where they agree, else an :class:`Ix`."""
    if np.all(values == values.flat[0]):
        v = values.flat[0]
        return bool(v) if type_ == "i1" else _typed(int(v), type_)
    return Ix(type_, np=values)


def _wrap_np(v: np.ndarray, type_: str) -> np.ndarray:
    if type_ == "index":
        return v.astype(np.int64)
    if type_ == "i1":
        return (v & 1).astype(bool)
    w = _bits(type_)
    return (v.astype(np.int64) + 2 ** (w - 1)) % 2 ** w - 2 ** (w - 1)


def _wrap_jnp(x, type_: str):
    if type_ == "i1":
        return (x & 1).astype(jnp.bool_) if x.dtype != jnp.bool_ else x
    if type_ in ("i8", "i16"):
        return x.astype(DTYPES[type_]).astype(jnp.int32)
    return x.astype(jnp.int32)


def _np_div(a, b):
    """C's truncating division on int64 arrays."""
    return np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))


_NP_ARITH = {"addi": np.add, "subi": np.subtract, "muli": np.multiply, "divsi": _np_div,
             "remsi": lambda a, b: a - b * _np_div(a, b), "minsi": np.minimum, "maxsi": np.maximum}
_JNP_ARITH = {"addi": jnp.add, "subi": jnp.subtract, "muli": jnp.multiply, "divsi": lax.div, "remsi": lax.rem,
              "minsi": jnp.minimum, "maxsi": jnp.maximum}
_JNP_CMP = {"eq": jnp.equal, "ne": jnp.not_equal, "lt": jnp.less, "le": jnp.less_equal, "gt": jnp.greater,
            "ge": jnp.greater_equal}


def _interval(op, a, b):
    """Bounds of ``op`` on bounded operands, or (None, None)."""
    (alo, ahi), (blo, bhi) = a, b
    if None in (alo, ahi, blo, bhi):
        return None, None
    if op in ("addi", "subi", "muli", "minsi", "maxsi"):
        f = _ARITH[op]
        ends = [f(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        return min(ends), max(ends)
    if op == "divsi" and blo == bhi and blo > 0 and alo >= 0:
        return alo // blo, ahi // blo
    if op == "remsi" and blo == bhi and blo > 0 and alo >= 0:
        return (alo % blo, ahi % blo) if alo // blo == ahi // blo else (0, blo - 1)
    return None, None


def _bounds(v):
    return (int(v), int(v)) if not isinstance(v, Ix) else v.bounds()


# -------------------------------------------------------------------------------------- tiles
@dataclasses.dataclass(frozen=True)
class TileView:
    """A tile of the walk: ``root``'s storage seen as ``type`` from element ``base`` (of ``dtype``)
    with ``pitch`` elements per major line; ``shape``: the valid region (static)."""

    type: TileType
    root: int
    base: object          # int or Ix (elements of this view's dtype from the root's first)
    pitch: int
    shape: tuple

    @property
    def dtype(self):
        return DTYPES[self.type.dtype]

    @property
    def col_major(self):
        return self.type.loc == "vec" and self.type.blayout == "col_major"

    def element(self, r: int, c: int) -> int:
        return c * self.pitch + r if self.col_major else r * self.pitch + c

    def span(self) -> int:
        t = self.type
        major, minor = (t.cols, t.rows) if self.col_major else (t.rows, t.cols)
        return (major - 1) * self.pitch + minor

    def offsets(self) -> np.ndarray:
        """Element offsets of the valid region from ``base`` (row-major (r, c) order)."""
        r, c = np.meshgrid(np.arange(self.shape[0]), np.arange(self.shape[1]), indexing="ij")
        return (c * self.pitch + r) if self.col_major else (r * self.pitch + c)


@dataclasses.dataclass(frozen=True)
class GmView:
    """A tensor view of GM parameter ``key``: element ``offset + sum(i * strides)``."""

    key: int
    dtype: np.dtype
    offset: object        # int or Ix
    shape: tuple
    strides: tuple

    def offsets(self) -> np.ndarray:
        grid = np.indices(self.shape, dtype=np.int64) if self.shape else np.zeros((0,), np.int64)
        return sum((g * s for g, s in zip(grid, self.strides)), np.zeros(self.shape, np.int64))


@dataclasses.dataclass(frozen=True, eq=False)
class Batched:
    """A non-index value per point: a traced (n, ...) array (a scalar read from a tile, a vector)."""

    x: object


# ------------------------------------------------------------------------------------ storage
def reinterpret(x, dtype):
    """The bytes of ``x`` ((n, L) array; any shape where the itemsizes agree) as ``dtype``
    ((n, L * itemsize / dtype's itemsize))."""
    src, dst = np.dtype(x.dtype), np.dtype(dtype)
    if src == dst:
        return x
    if src.itemsize == dst.itemsize:
        return lax.bitcast_convert_type(x, dst)
    n = x.shape[0]
    if src.itemsize > dst.itemsize:             # one bitcast and a reshape, no uint8 bytes in between
        return lax.bitcast_convert_type(x, dst).reshape(n, -1)
    return lax.bitcast_convert_type(x.reshape(n, -1, dst.itemsize // src.itemsize), dst)


def storage(dtype) -> np.dtype:
    """The dtype a tile or GM tensor of ``dtype`` is held in: a float narrower than 32 bits as the
    unsigned integers of its bits (XLA:CPU converts such an array to float32 and back around every
    update of a part of it, two passes over all of it), any other as itself."""
    dt = np.dtype(dtype)
    if jnp.issubdtype(dt, jnp.floating) and dt.itemsize < 4:
        return np.dtype(f"u{dt.itemsize}")
    return dt


def _held(x):
    """``x`` (any shape) in its :func:`storage` dtype."""
    return reinterpret(x, storage(x.dtype))


def store_held(flat, idx: np.ndarray, values, atomic: bool, plain: bool = False):
    """:func:`~ptojax.ascend.strided.apply_store` on a GM tensor in its :func:`storage` dtype,
    ``values`` in the tensor's own (an ``atomic_add`` adds in it)."""
    if not atomic or flat.dtype == values.dtype:
        return apply_store(flat, idx, reinterpret(_held(values), flat.dtype), atomic, plain)   # (a bitcast view's bits)
    return _held(apply_store(reinterpret(flat, values.dtype), idx, values, atomic, plain))


# Instructions whose 32-bit float results need no guard (:func:`_rounded`): neither a product XLA could
# contract into an fma nor a value its simplifier rewrites together with a later instruction.
_PLAIN = frozenset({"tadd", "tsub", "tadds", "tsubs", "tmax", "tmin", "tmaxs", "tmins", "tabs", "tneg", "trelu",
                    "trowsum", "tcolsum", "trowmax", "trowmin", "tcolmax", "tcolmin", "texpands"}
                   | {f"t{side}expand{op}" for side in ("row", "col") for op in ("add", "sub", "max", "min")})
# Instructions that move bits, computing nothing: their float results of any width pass unguarded, NaN
# payloads and all (their sources are guarded results already) — a sort's (value, u32 index) structs hold
# index words (-1 past the data) that read as NaN; a select, a transpose, a broadcast move values as they are.
_MOVES = frozenset({"tsort32", "tmrgsort", "tgather", "tsel", "tmov", "ttrans", "tconcat", "trowexpand", "tcolexpand"})


def _rounded(x, op: str = ""):
    """``x`` as it is (a NaN with its quiet bit set: sign and payload kept), but no longer a product that
    XLA's code generator could contract with a later add into one fma, nor a 16-bit float XLA could keep
    in float32, nor an operand its simplifier could rewrite with the next instruction's (``exp(a) *
    exp(b)``): the eager engine rounds every instruction's result. One compare and select per element, left out for the
    32-bit results of ``op`` in :data:`_PLAIN` (it keeps XLA from vectorizing some loops) and for the
    results of :data:`_MOVES`."""
    if not jnp.issubdtype(x.dtype, jnp.floating) or (op in _PLAIN and np.dtype(x.dtype).itemsize >= 4) or (
            op in _MOVES):
        return x
    bits = jnp.dtype(f"uint{8 * np.dtype(x.dtype).itemsize}")
    quiet = np.asarray(1 << (jnp.finfo(x.dtype).nmant - 1), bits)    # a quiet NaN's bit: it keeps its bits
    return jnp.where(jnp.isnan(x), lax.bitcast_convert_type(lax.bitcast_convert_type(x, bits) | quiet, x.dtype), x)


def varying_axes(x) -> frozenset:
    """The ``shard_map`` mesh axes ``x`` varies over (none outside one)."""
    aval = jax.typeof(x)
    manual = getattr(aval, "manual_axis_type", None)
    return frozenset(getattr(manual, "varying", None) or getattr(aval, "vma", None) or ())


def vary(tree, axes: frozenset):
    """``tree`` with every leaf varying over the ``shard_map`` mesh ``axes`` (``lax.pcast``)."""
    if not axes:
        return tree

    def one(x):
        missing = tuple(sorted(axes - varying_axes(x)))
        return lax.pcast(x, missing, to="varying") if missing else x
    return jax.tree.map(one, tree)


def _runs(offs: np.ndarray):
    """The element offsets ``offs`` (flattened) as runs of consecutive elements: (their first elements,
    the run length)."""
    flat = offs.reshape(-1)
    if flat.size == 0:
        return flat[:0], 1
    width = offs.shape[-1] if offs.ndim else 1
    rows = flat.reshape(-1, width)
    if not np.array_equal(rows, rows[:, :1] + np.arange(width)):
        return flat, 1
    if np.all(np.diff(rows[:, 0]) == width):
        return rows[:1, 0], flat.size
    return rows[:, 0], width


_WINDOW = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,))
_WINDOW_SET = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(),
                                          scatter_dims_to_operand_dims=(0,))
_CLIP = lax.GatherScatterMode.CLIP


def _starts(base, offs: np.ndarray):
    """The runs of element offsets ``base + offs`` for a per-point ``base`` (:class:`Ix`): their
    first elements ((k, runs) int32: k = 1 where the points agree, else one row per point), the run
    length."""
    first, width = _runs(offs)
    return _raw(base).reshape(-1)[:, None].astype(jnp.int32) + jnp.asarray(first.astype(np.int32))[None, :], width


def _per_point(fn, store, at, *rest):
    """``fn(row, first elements, *rest)`` for every point: ``store`` (n, L) one row per point or (L,)
    shared, ``at`` one row of first elements per point or one for all, ``rest`` per point."""
    axes = (0 if store.ndim == 2 else None, 0 if at.shape[0] > 1 else None) + (0,) * len(rest)
    if axes == (None, None):
        return fn(store, at[0])[None]
    return jax.vmap(fn, in_axes=axes)(store, at if axes[1] == 0 else at[0], *rest)


def _take(store, base, offs: np.ndarray, n: int):
    """The elements ``base + offs`` of each point's row of ``store`` ((n, L)), or of ``store`` ((L,)),
    for a per-point ``base`` (:class:`Ix`): (n, *offs.shape), read as runs of consecutive elements."""
    at, width = _starts(base, offs)
    if at.shape == (1, 1):                       # one run, the same for every point
        out = lax.dynamic_slice(store, (0,) * (store.ndim - 1) + (at[0, 0],), store.shape[:-1] + (width,))
    else:
        out = _per_point(lambda row, a: lax.gather(row, a[:, None], _WINDOW, (width,), mode=_CLIP), store, at)
    return jnp.broadcast_to(out.reshape((-1,) + offs.shape), (n,) + offs.shape)


def _set(store, base, offs: np.ndarray, values, plain: bool = False):
    """``store`` ((n, L), or (L,) for one point) with the elements ``base + offs`` set to ``values``
    ((n, *offs.shape)) for a per-point ``base`` (:class:`Ix`), written as runs of consecutive elements."""
    at, width = _starts(base, offs)
    if plain:                                    # one point's (store (L,)): :func:`plain_store`
        return plain_store(store, (at[:1, :, None] + jnp.arange(width, dtype=jnp.int32)).reshape(-1), values)
    rows = values.astype(store.dtype).reshape(values.shape[0], -1, width)
    if at.shape == (1, 1):
        start = (0,) * (store.ndim - 1) + (at[0, 0],)
        return lax.dynamic_update_slice(store, rows.reshape(store.shape[:-1] + (width,)), start)
    out = _per_point(lambda row, a, v: lax.scatter(row, a[:, None], v, _WINDOW_SET, mode=_CLIP), store, at, rows)
    return out.reshape(store.shape)


def _add_ix(a, b):
    """``a + b`` for index values (ints or :class:`Ix`)."""
    if not isinstance(a, Ix) and not isinstance(b, Ix):
        return int(a) + int(b)
    if all(not isinstance(v, Ix) or v.np is not None for v in (a, b)):
        return _known((a.np if isinstance(a, Ix) else int(a)) + (b.np if isinstance(b, Ix) else int(b)), "index")
    (alo, ahi), (blo, bhi) = _bounds(a), _bounds(b)
    lo = None if None in (alo, blo) else alo + blo
    hi = None if None in (ahi, bhi) else ahi + bhi
    return Ix("index", x=_raw(a) + _raw(b), lo=lo, hi=hi)


def _raw(v):
    """An index value as a traced int32 array: (n,), (1,) where the points agree, or a scalar."""
    if not isinstance(v, Ix):
        return jnp.int32(int(v))
    return v.x if v.x is not None else jnp.asarray(v.np.astype(np.int32))


def _scale_ix(a, k: int):
    if not isinstance(a, Ix):
        return int(a) * k
    if a.np is not None:
        return _known(a.np * k, "index")
    lo, hi = a.bounds()
    ends = None if None in (lo, hi) else sorted((lo * k, hi * k))
    return Ix("index", x=a.x * k, lo=ends and ends[0], hi=ends and ends[1])


# ------------------------------------------------------------------------------------ instructions
def _form(op: str, attrs: tuple, out: tuple, static: tuple):
    """``SEMANTICS[op]`` of one instruction form: its operands those of ``static`` that are None, the
    others fixed (dtype, shape, bytes); ``out``: the destinations' (shape, dtype)."""
    fn, specs = SEMANTICS[op], [jax.ShapeDtypeStruct(shape, dt) for shape, dt in out]
    fixed = [None if v is None else np.frombuffer(v[2], v[0]).reshape(v[1]).copy() for v in static]
    kwargs = dict(attrs, out=specs[0] if len(specs) == 1 else tuple(specs))

    def call(*operands):
        it = iter(operands)
        return fn(*(next(it) if v is None else v for v in fixed), **kwargs)
    return call


def _first_extreme(op: str, vmapped, out: tuple):
    """``vmapped`` (a row/column max or min of the points) led by the plain reduction: the simulator's
    scan keeps the first of equal values and skips NaN, which a reduction of the whole batch matches
    but where an extreme is NaN (a NaN in the line) or zero (the first zero's sign): then, for the
    whole batch, the scan's exact form. XLA vectorizes the plain reduction; not the exact form's."""
    largest, axis = op.endswith("max"), 2 if op.startswith("trow") else 1
    dtype = out[0][1]

    def fn(x, *tmp):
        if not jnp.issubdtype(x.dtype, jnp.floating):
            return vmapped(x, *tmp)
        m = (jnp.max if largest else jnp.min)(x, axis=axis, keepdims=True)
        return lax.cond(jnp.any(jnp.isnan(m) | (m == 0)), lambda: vmapped(x, *tmp), lambda: m.astype(dtype))
    return fn


CHUNK_BYTES = 1 << 17    # the points of a row fold per loop trip: their moved copies stay in the cache


def _in_chunks(op: str, vmapped, out: tuple):
    """``vmapped`` (a row sum or product of the points, which moves every point's tile to fold it along
    its rows) over chunks of :data:`CHUNK_BYTES` of points, one loop trip each: for the whole batch at
    once the moved copy would go through memory."""
    def fn(*xs):
        n, size = xs[0].shape[0], int(np.prod(xs[0].shape[1:])) * np.dtype(xs[0].dtype).itemsize
        per = max(1, CHUNK_BYTES // max(size, 1))
        if not jnp.issubdtype(xs[0].dtype, jnp.floating) or n < 2 * per:
            return vmapped(*xs)
        whole = n // per * per
        parts = tuple(x[:whole].reshape((n // per, per) + x.shape[1:]) for x in xs)
        head = lax.map(lambda part: vmapped(*part), parts)
        head = head.reshape((whole,) + head.shape[2:])
        return head if whole == n else jnp.concatenate([head, vmapped(*(x[whole:] for x in xs))])
    return fn


_WHOLE = {**{op: _first_extreme for op in ("trowmax", "trowmin", "tcolmax", "tcolmin")},   # forms over the batch
          **{op: _in_chunks for op in ("trowsum", "trowprod")}}


@functools.lru_cache(maxsize=4096)
def _batched(op: str, attrs: tuple, out: tuple, static: tuple):
    """:func:`_form` vmapped over the grid points (or its whole-batch form, :data:`_WHOLE`) and jitted:
    each instruction form is traced once per operand shape, however often the replays of a process
    execute it (a cache hit under a trace)."""
    fn = jax.vmap(_form(op, attrs, out, static))
    if op in _WHOLE and static[0] is None:
        fn = _WHOLE[op](op, fn, out)
    return jax.jit(fn)


def forget(op: str) -> None:
    """Drop the traced instruction forms (a user's instruction ``op`` unregistered)."""
    _batched.cache_clear()


# ----------------------------------------------------------------------------------------- walk
def _small(body: tuple, most: int = 8) -> bool:
    """Whether ``body`` is a few instructions, no loop and no atomic store: cheaper evaluated under a
    mask and selected than as a ``lax.cond`` (each a call of its own in every trip of a rolled loop)."""
    count = 0
    for s in body:
        if isinstance(s, For) or (isinstance(s, If) and not _small(s.then + s.orelse, most - count)) or (
                isinstance(s, Instr) and dict(s.attrs).get("atomicType", "atomic_none") != "atomic_none"):
            return False
        count += 1
    return count <= most


class Walk:
    """One function of the module traced for ``n`` grid points (see the module docstring).

    ``gm``: GM key -> flat jnp array; ``keys``: the GM key of each pointer parameter; ``block``: the
    points' block indices (an int, a NumPy array, or a traced :class:`Ix`); ``serial``: the points'
    stores go straight into ``gm`` (else they are collected in ``stores``); ``scalars``: the values of
    the ``index`` parameters (a dynamic module's ``%dyn_m``), by name."""

    def __init__(self, func: Function, gm: dict, keys, block, n: int, serial: bool, scalars=None,
                 pristine=frozenset()):
        self.func, self.gm, self.n, self.serial = func, dict(gm), n, serial
        self.pristine, self.given = pristine, dict(gm)  # GM tensors still kernel inputs (plain_store where read)
        self.env, self.roots, self.stores = {}, {}, []
        self.mask, self.scoped = None, {}   # the points a branch runs for; root -> the mask it was allocated under
        self.loaded, self.stored = set(), set()
        self.block_idx, self.axes = block, frozenset()
        scalars = scalars or {}
        pointers = [(name, type_) for name, type_ in func.params if name not in scalars]
        if len(keys) != len(pointers):
            raise self.error(None, f"expects {len(pointers)} arguments, got {len(keys)}")
        for (name, type_), key in zip(pointers, keys):
            if not isinstance(type_, PtrType):
                raise self.error(None, f"parameter {name}: {type_} (the replay takes pointer parameters only)")
            self.env[name] = ("gm", key, DTYPES[type_.dtype])
        self.env.update({name: int(v) for name, v in scalars.items()})

    def error(self, stmt, message):
        where = f"line {stmt.line}: " if stmt else f"line {self.func.line}: "
        text = f" in `{stmt.text[:160]}`" if stmt else ""
        return PtoExecutionError(f"pto replay: function '{self.func.name}' {where}{message}{text}")

    def get(self, stmt, name):
        if isinstance(name, int):
            return name
        if name not in self.env:
            raise self.error(stmt, f"{name} is not defined")
        return self.env[name]

    def index(self, stmt, name):
        v = self.get(stmt, name)
        if isinstance(v, Ix):
            return v
        if isinstance(v, (TileView, GmView, Batched, tuple)) or np.ndim(v):
            raise self.error(stmt, f"{name} is not an index")
        return int(v)

    def run(self):
        self.block(self.func.body)
        return self

    def block(self, body):
        for stmt in body:
            if type(stmt) is Stmt:
                return
            self.DISPATCH[type(stmt)](self, stmt)

    # -- scalars
    def const(self, s: Const):
        if isinstance(s.value, np.ndarray):
            self.env[s.result] = s.value
        else:
            self.env[s.result] = s.value if s.type == "index" else np.asarray(s.value, DTYPES.get(s.type, np.int64))

    def arith(self, s: Arith):
        if s.op == "get_block_idx":
            b = self.block_idx
            self.env[s.result] = b if isinstance(b, Ix) else _known(np.asarray(b, np.int64).reshape(-1), "i64")
            return
        vals = [self.index(s, o) for o in s.operands]
        if not any(isinstance(v, Ix) for v in vals):
            self.env[s.result] = scalar_arith(s, vals, self.error)
            return
        if all(not isinstance(v, Ix) or v.np is not None for v in vals):
            arrs = [v.np.astype(np.int64) if isinstance(v, Ix) else np.full(self.n, v, np.int64) for v in vals]
            if s.op == "cmpi":
                if s.pred[0] == "u":
                    arrs = [a % 2 ** _bits(s.type) for a in arrs]
                self.env[s.result] = _known(_CMP[s.pred.lstrip("su")](*arrs), "i1")
                return
            if s.op in ("divsi", "remsi") and np.any(arrs[1] == 0):
                raise self.error(s, "division by zero")
            res = arrs[0] if s.op == "index_cast" else _NP_ARITH[s.op](*arrs)
            self.env[s.result] = _known(_wrap_np(res, s.type), s.type)
            return
        xs = [v.traced(self.n) if isinstance(v, Ix) else jnp.int32(v) for v in vals]
        if s.op == "cmpi":
            w = _bits(s.type)
            if s.pred[0] == "u":
                xs = [x.astype(jnp.uint32) if w >= 32 else (x & (2 ** w - 1)) for x in xs]
            self.env[s.result] = Ix("i1", x=_JNP_CMP[s.pred.lstrip("su")](*xs), lo=0, hi=1)
            return
        if s.op == "index_cast":
            lo, hi = _bounds(vals[0])
            self.env[s.result] = Ix(s.type, x=_wrap_jnp(xs[0], s.type), lo=lo, hi=hi)
            return
        lo, hi = _interval(s.op, *(_bounds(v) for v in vals))
        self.env[s.result] = Ix(s.type, x=_wrap_jnp(_JNP_ARITH[s.op](*xs), s.type), lo=lo, hi=hi)

    def scalar(self, s: Scalar):
        offset = self.index(s, s.offset)
        if s.op == "load_scalar":
            src = self.get(s, s.src)
            if not (isinstance(src, tuple) and src[0] == "gm" and src[2] == DTYPES[s.type]):
                raise self.error(s, f"{s.src} is not a {s.type} pointer parameter")
            value = self.gm_read(s, src[1], src[2], offset, np.zeros((1,), np.int64))[:, 0]
        else:
            tile = self.tile(s, s.src)
            if tile.type != s.src_type or tile.type.dtype != s.type:
                raise self.error(s, f"the tile is {tile.type} but the instruction says {s.src_type}")
            value = self.cell(s, tile, offset)
        dt = DTYPES[s.type]
        self.env[s.result] = Ix(s.type, x=value.astype(jnp.int32)) if dt.kind in "iu" and dt.itemsize <= 4 \
            else Batched(value)

    # -- control flow
    def carried(self, body) -> list:
        """Names bound before ``body`` that its instructions rebind (vector results)."""
        out = []
        for stmt in body:
            if isinstance(stmt, Instr):
                out += [n for n in stmt.outs if n in self.env and (isinstance(self.env[n], Batched) or (
                    isinstance(self.env[n], np.ndarray) and self.env[n].ndim))]
            elif isinstance(stmt, For):
                out += self.carried(stmt.body)
            elif isinstance(stmt, If):
                out += self.carried(stmt.then) + self.carried(stmt.orelse)
        return sorted(set(out))

    def state(self, names, roots=None):
        """(tiles, GM where serial, rebound values); ``roots``: only these tiles (those bound before)."""
        gm = self.gm if self.serial else {}
        values = {k: self.env[k].x if isinstance(self.env[k], Batched) else
                  jnp.broadcast_to(self.env[k], (self.n,) + self.env[k].shape) for k in names}
        return {k: v for k, v in self.roots.items() if roots is None or k in roots}, dict(gm), values

    def restore(self, state, names, env):
        roots, gm, carried = state
        self.roots = dict(roots)
        if self.serial:
            self.gm = dict(gm)
        self.env = dict(env)
        self.env.update({k: Batched(v) for k, v in carried.items()})

    def varying(self) -> frozenset:
        """The mesh axes (``shard_map``) any value of the walk varies over: a loop's or a cond's state
        must vary over all of them on entry and exit alike."""
        values = [*self.gm.values(), *self.roots.values(), *(v.x for v in self.env.values()
                                                             if isinstance(v, (Ix, Batched)) and v.x is not None)]
        values += [] if self.mask is None else [self.mask]
        return frozenset().union(*(varying_axes(x) for x in values))

    def functional(self, body, names, env):
        """``body`` as a function of the state (tiles, GM where serial, rebound values)."""
        def fn(state, bind=None):
            self.restore(state, names, env)
            if bind is not None:
                self.env[bind[0]] = bind[1]
            stores = len(self.stores)
            roots = set(self.roots)
            self.block(body)
            if len(self.stores) != stores:
                raise Unroll()
            return vary(self.state(names, roots), self.axes)
        return fn

    def for_(self, s: For):
        lo, hi, step = (self.index(s, v) for v in (s.lo, s.hi, s.step))
        if any(isinstance(v, Ix) for v in (lo, hi, step)):
            raise Serial() if self.n > 1 else self.error(s, "a loop bound that is read from data")
        if step <= 0:
            raise self.error(s, f"loop step {step} is not positive")
        trips = len(range(lo, hi, step))
        if trips > UNROLL:
            names, env = self.carried(s.body), dict(self.env)
            self.axes = self.varying()
            before = vary(self.state(names), self.axes)
            fn = self.functional(s.body, names, env)
            var = lambda k: Ix("index", x=jnp.broadcast_to(lo + k * step, (1,)).astype(jnp.int32),  # noqa: E731
                               lo=lo, hi=lo + (trips - 1) * step)
            try:
                after = lax.fori_loop(0, trips, lambda k, st: fn(st, (s.var, var(k))), before)
            except Unroll:
                self.restore(before, names, env)
                if trips > UNROLL_MAX:
                    raise self.error(s, f"{trips} trips whose shapes or stores differ (at most {UNROLL_MAX})")
            else:
                self.restore(after, names, env)
                return
        for k in range(lo, hi, step):
            self.env[s.var] = k
            self.block(s.body)

    def if_(self, s: If):
        cond = self.get(s, s.cond)
        if not isinstance(cond, Ix):
            if np.ndim(cond) or np.asarray(cond).dtype != np.bool_:
                raise self.error(s, f"condition {s.cond} is not an i1")
            self.block(s.then if bool(cond) else s.orelse)
            return
        names, env = self.carried(s.then) + self.carried(s.orelse), dict(self.env)
        names = sorted(set(names))
        pred = cond.traced(self.n)
        if self.n == 1 and not _small(s.then + s.orelse):
            self.axes = self.varying()
            before = vary(self.state(names), self.axes)
            then, orelse = self.functional(s.then, names, env), self.functional(s.orelse, names, env)
            try:
                after = lax.cond(pred[0], then, orelse, before)
            except Unroll:
                raise (Unroll() if self.serial else Serial()) from None   # a store under a condition of a batch
            self.restore(after, names, env)
            return
        outer, values = self.mask, []
        try:
            for body, mask in ((s.then, pred), (s.orelse, ~pred)):
                self.env, self.mask = dict(env), mask if outer is None else outer & mask
                self.block(body)
                values.append(self.state(names, ())[2])
        except Unroll:
            raise (Unroll() if self.serial else Serial()) from None   # a shape under a per-point condition
        finally:
            self.mask = outer
        self.env = env
        self.env.update({k: Batched(jnp.where(pred.reshape((-1,) + (1,) * (a.ndim - 1)), a, values[1][k]))
                         for k, a in values[0].items()})

    # -- views and tiles
    def view(self, s: View):
        src = self.get(s, s.src)
        if s.op == "make_tensor_view":
            if not (isinstance(src, tuple) and src[0] == "gm"):
                raise self.error(s, f"{s.src} is not a pointer parameter")
            a, b = [self.index(s, v) for v in s.a], [self.index(s, v) for v in s.b]
            if any(isinstance(v, Ix) for v in a + b):
                raise self.error(s, "a tensor view whose shape or strides are read from data")
            if src[2] != DTYPES[s.type.dtype] or not _fits(a, s.type.shape) or len(b) != len(a):
                raise self.error(s, f"shape {a} strides {b} over a {src[2].name} pointer do not match {s.type}")
            size = self.gm[src[1]].shape[0]
            reach = sum((n - 1) * st for n, st in zip(a, b)) if all(a) else -1
            if min(b, default=0) < 0 or reach >= size:
                raise self.error(s, f"view shape {a} strides {b} reaches past the {size}-element tensor")
            self.env[s.result] = GmView(src[1], src[2], 0, tuple(a), tuple(b))
            return
        if not isinstance(src, GmView):
            raise self.error(s, f"{s.src} is not a tensor view")
        offs, sizes = [self.index(s, v) for v in s.a], [self.index(s, v) for v in s.b]
        if any(isinstance(v, Ix) for v in sizes) or len(offs) != len(src.shape) or len(sizes) != len(src.shape):
            raise self.error(s, "a window needs static sizes, one offset and size per dim")
        for o, n, d in zip(offs, sizes, src.shape):
            lo, hi = _bounds(o)
            if (lo is not None and lo < 0) or (hi is not None and hi + n > d) or n < 0:
                raise self.error(s, f"window offsets {offs} sizes {sizes} fall outside the tensor {list(src.shape)}")
        if not _fits(sizes, s.type.shape):
            raise self.error(s, f"window sizes {sizes} do not match {s.type}")
        offset = src.offset
        for o, st in zip(offs, src.strides):
            offset = _add_ix(offset, _scale_ix(o, st))
        self.env[s.result] = GmView(src.key, src.dtype, offset, tuple(sizes), src.strides)

    def tile(self, s, name) -> TileView:
        v = self.get(s, name)
        if not isinstance(v, TileView):
            raise self.error(s, f"{name} is not a tile")
        return v

    def valid(self, s: Tile) -> tuple:
        """The valid region of an ``alloc_tile``: the type's, a ``?`` dim from its operand (static here)
        or, for an alias, from the source's bytes."""
        t = s.type
        if t.v_row is not None and t.v_col is not None:
            return t.v_row, t.v_col
        if s.src is None or s.valid:                         # (an alias: set_validshape's)
            ops = s.valid or (None, None)
            if any(d is None and v is None for v, d in zip(ops, (t.v_row, t.v_col))):
                raise self.error(s, "a dynamic (?) valid dim needs its valid_row / valid_col operand")
            dims = tuple(self.index(s, v) if d is None else d for v, d in zip(ops, (t.v_row, t.v_col)))
            if any(isinstance(d, Ix) for d in dims):
                raise self.error(s, "a valid region that differs between grid points or is read from data")
            return dims
        src = self.tile(s, s.src)
        shape = alias_valid(src.shape, src.dtype, t, src.type)
        if shape is None:
            raise self.error(s, f"cannot reshape the {src.shape[0]}x{src.shape[1]} valid region to {t}")
        return shape

    def alloc(self, s: Tile):
        t = s.type
        v_row, v_col = self.valid(s)
        if not (0 <= v_row <= t.rows and 0 <= v_col <= t.cols):
            raise self.error(s, f"valid region {v_row}x{v_col} exceeds the tile {t.rows}x{t.cols}")
        pitch = t.rows if t.loc == "vec" and t.blayout == "col_major" else t.cols
        if s.src is None:
            root = len(self.roots)
            while root in self.roots:
                root += 1
            self.roots[root] = jnp.zeros((self.n, t.rows * t.cols), storage(DTYPES[t.dtype]))
            self.scoped[root] = self.mask
            self.env[s.result] = TileView(t, root, 0, pitch, (v_row, v_col))
            return
        src = self.tile(s, s.src)
        contiguous = src.type.rows == 1 if not src.col_major else src.type.cols == 1
        if src.pitch != (src.type.rows if src.col_major else src.type.cols) and not contiguous:
            raise self.error(s, f"{s.src} is a strided window (pitch {src.pitch}); it has no one byte layout")
        old, new = src.dtype.itemsize, DTYPES[t.dtype].itemsize
        base = _scale_ix(src.base, old)                      # bytes into the root
        lo, hi = _bounds(base)
        if isinstance(base, Ix) and base.np is None:         # traced: a loop counter's (a serial point's)
            if lo is None or hi is None:
                raise self.error(s, f"{s.src} starts at an unbounded offset read from data")
            if old % new:                                    # a whole element of the wider dtype or not,
                raise Unroll()                               # by the counter's value: unroll the loop
            at = _scale_ix(src.base, old // new)
        else:
            for b in np.unique(base.np) if isinstance(base, Ix) else (base,):
                fault = alias_offset_fault(s.src, t.dtype, int(b))
                if fault:
                    raise self.error(s, fault)
            at = _known(base.np // new, "index") if isinstance(base, Ix) else base // new
        root_bytes = self.roots[src.root].shape[1] * np.dtype(self.roots[src.root].dtype).itemsize
        if hi + t.rows * t.cols * new > root_bytes:
            raise self.error(s, f"{t.rows}x{t.cols} {t.dtype} does not fit the {root_bytes - hi}-byte tile {s.src}")
        self.env[s.result] = TileView(t, src.root, at, pitch, (v_row, v_col))

    def subset(self, s: Subset):
        src = self.tile(s, s.src)
        if src.type != s.src_type:
            raise self.error(s, f"{s.src} is {src.type} but the subset says {s.src_type}")
        (r, c), (rows, cols) = [self.index(s, o) for o in s.offsets], s.sizes
        shape = []
        for o, size, parent, dim, what in ((r, rows, src.shape[0], src.type.rows, "rows"),
                                           (c, cols, src.shape[1], src.type.cols, "cols")):
            lo, hi = _bounds(o)
            if (lo is not None and lo < 0) or (hi is not None and hi + size > dim):
                raise self.error(s, f"{what} {lo}..{hi}+{size} fall outside the {src.type.rows}x{src.type.cols} "
                                    f"tile {s.src}")
            if isinstance(o, Ix) and o.np is not None:
                valid = {subset_valid(int(v), size, parent) for v in np.unique(o.np)}
            elif isinstance(o, Ix):
                if lo is None or hi is None or hi - lo > 4096:
                    raise Unroll()
                valid = {subset_valid(v, size, parent) for v in range(lo, hi + 1)}
            else:
                valid = {subset_valid(o, size, parent)}
            if len(valid) != 1:
                if isinstance(o, Ix) and o.np is not None:
                    raise Serial()
                raise Unroll()
            shape.append(valid.pop())
        base = _add_ix(src.base, _add_ix(_scale_ix(r, src.pitch if not src.col_major else 1),
                                         _scale_ix(c, 1 if not src.col_major else src.pitch)))
        self.env[s.result] = TileView(s.type, src.root, base, src.pitch, tuple(shape))

    # -- tile storage
    def whole(self, v: TileView) -> bool:
        """Whether ``v`` is its root's storage as allocated (row-major, every element valid)."""
        root = self.roots[v.root]
        return (v.base == 0 and not v.col_major and root.dtype == storage(v.dtype) and v.pitch == v.type.cols
                and tuple(v.shape) == (v.type.rows, v.type.cols) and root.shape[1] == v.type.rows * v.type.cols)

    def read(self, v: TileView, held: bool = False):
        """The valid region of ``v``: (n, rows, cols); ``held``: in its :func:`storage` dtype."""
        if self.whole(v):
            x = self.roots[v.root].reshape((self.n,) + v.shape)
        else:
            store = reinterpret(self.roots[v.root], storage(v.dtype))
            offs = v.offsets()
            x = _take(store, v.base, offs, self.n) if isinstance(v.base, Ix) else gather(store, v.base + offs)
        return x if held else reinterpret(x, v.dtype)

    def put(self, s, v: TileView, value):
        value = jnp.asarray(value)
        if value.shape != (self.n,) + tuple(v.shape) or value.dtype != v.dtype:
            raise self.error(s, f"result {np.dtype(value.dtype).name}{list(value.shape[1:])} does not fit the "
                                f"destination's valid region {v.dtype.name}{list(v.shape)}")
        value = _held(value)
        if self.masked(v):
            value = jnp.where(self.mask.reshape(-1, 1, 1), value, self.read(v, held=True))
        if self.whole(v):
            self.roots[v.root] = value.reshape(self.n, -1)
            return
        root = self.roots[v.root]
        store = reinterpret(root, value.dtype)
        offs = v.offsets()
        if isinstance(v.base, Ix):
            store = _set(store, v.base, offs, value)
        else:
            store = scatter(store, v.base + offs, value)
        self.roots[v.root] = reinterpret(store, root.dtype)

    def masked(self, v: TileView) -> bool:
        """Whether a write to ``v`` must keep the old values of the points a branch does not run for
        (not where ``v``'s tile was allocated in that branch)."""
        return self.mask is not None and self.scoped.get(v.root) is not self.mask

    def cell(self, s, tile: TileView, offset, held: bool = False):
        """``tgetval``'s element ``offset`` past the tile's first: (n,)."""
        lo, hi = _bounds(offset)
        if (lo is not None and lo < 0) or (hi is not None and hi >= tile.span()):
            raise self.error(s, f"offset {offset} is outside the tile's {tile.span()} elements")
        store = reinterpret(self.roots[tile.root], storage(tile.dtype))
        at = _add_ix(tile.base, offset)
        x = _take(store, at, np.zeros(1, np.int64), self.n)[:, 0] if isinstance(at, Ix) else store[:, at]
        return x if held else reinterpret(x, tile.dtype)

    def set_cell(self, s, tile: TileView, offset, value):
        lo, hi = _bounds(offset)
        if (lo is not None and lo < 0) or (hi is not None and hi >= tile.span()):
            raise self.error(s, f"offset {offset} is outside the tile's {tile.span()} elements")
        root = self.roots[tile.root]
        store = reinterpret(root, storage(tile.dtype))
        at = _add_ix(tile.base, offset)
        value = _held(jnp.broadcast_to(jnp.asarray(value).astype(tile.dtype), (self.n,)))
        if self.masked(tile):
            value = jnp.where(self.mask, value, self.cell(s, tile, offset, held=True))
        if isinstance(at, Ix):
            store = _set(store, at, np.zeros(1, np.int64), value[:, None])
        else:
            store = store.at[:, at].set(value)
        self.roots[tile.root] = reinterpret(store, root.dtype)

    def scatter(self, s, src: TileView, at: TileView, dst: TileView):
        """``tscatter`` as the interpreter runs it (``engine._Run.scatter``); an index
        outside the destination's span writes nothing here (the interpreter names it)."""
        rows, cols = at.shape
        if (src.dtype != dst.dtype or at.dtype.kind != "i" or src.col_major or src.type.rows < rows
                or src.type.cols < cols):
            raise self.error(s, f"scatters {src.dtype.name}{list(src.shape)} by {at.dtype.name}{list(at.shape)} "
                                f"into {dst.dtype.name}")
        index = self.read(at).astype(jnp.int32).reshape(self.n, -1)
        values = self.read(dataclasses.replace(src, shape=(rows, cols)), held=True).reshape(self.n, -1)
        root = self.roots[dst.root]
        store = reinterpret(root, storage(dst.dtype))
        first = jnp.reshape(jnp.broadcast_to(_raw(dst.base), (self.n,)), (-1, 1))
        where = jnp.where((index >= 0) & (index < dst.span()), first + index, store.shape[1])
        if self.masked(dst):
            kept = jnp.take_along_axis(store, jnp.minimum(where, store.shape[1] - 1), axis=1)
            values = jnp.where(self.mask[:, None], values, kept)
        store = jax.vmap(lambda row, w, v: row.at[w].set(v, mode="drop"))(store, where, values)
        self.roots[dst.root] = reinterpret(store, root.dtype)

    # -- GM
    def gm_index(self, offset, offs: np.ndarray):
        """Static (n, *offs.shape) element indices, or None where ``offset`` is traced."""
        if isinstance(offset, Ix):
            if offset.np is None:
                return None
            return offset.np.reshape((-1,) + (1,) * offs.ndim) + offs
        return np.broadcast_to(offset + offs, (self.n,) + offs.shape)

    def gm_read(self, s, key, dtype, offset, offs: np.ndarray):
        """The elements ``offset + offs`` of GM tensor ``key`` (of ``dtype``): (n, *offs.shape)."""
        if not self.serial and key in self.stored:
            raise Serial()
        self.loaded.add(key)
        flat = self.gm[key]
        if not isinstance(offset, Ix):
            x = jnp.broadcast_to(gather(flat, offset + offs), (self.n,) + offs.shape)
        else:
            idx = self.gm_index(offset, offs)
            x = gather(flat, idx) if idx is not None else _take(flat, offset, offs, self.n)
        return reinterpret(x, dtype)

    def gm_write(self, s, key, offset, offs: np.ndarray, value, atomic: bool):
        idx = self.gm_index(offset, offs)
        if not self.serial:
            if idx is None or key in self.loaded or self.mask is not None:
                raise Serial()
            self.stored.add(key)
            self.stores.append((key, idx, value, atomic))
            return
        flat, plain = self.gm[key], key in self.pristine and self.reads(key)
        self.pristine = self.pristine - {key}
        if self.mask is not None:   # one point under a condition (not atomic: see _small): its own values
            old = gather(flat, idx) if idx is not None else _take(flat, offset, offs, self.n)
            value = jnp.where(self.mask.reshape((-1,) + (1,) * offs.ndim), value, reinterpret(old, value.dtype))
        if idx is not None:
            self.gm[key] = store_held(flat, idx, value, atomic, plain)
            return
        if atomic:
            value = SEMANTICS["tadd"](reinterpret(_take(flat, offset, offs, self.n), value.dtype), value)
        self.gm[key] = _set(flat, offset, offs, reinterpret(_held(value), flat.dtype), plain)

    def reads(self, key) -> bool:
        """Whether the walk read GM tensor ``key``'s given value (under its key or another's)."""
        return any(self.given[k] is self.given[key] for k in self.loaded)

    def instr(self, s: Instr):
        ins, outs = [self.get(s, n) for n in s.ins], [self.get(s, n) for n in s.outs]
        for name, value, declared in zip(s.ins + s.outs, ins + outs, s.in_types + s.out_types):
            if isinstance(value, TileView) and value.type != declared or isinstance(declared, ViewType) and (
                    not isinstance(value, GmView) or not _fits(value.shape, declared.shape)):
                raise self.error(s, f"{name} is {getattr(value, 'type', getattr(value, 'shape', value))} "
                                    f"but the instruction says {declared}")
        if s.op in ("tload", "tstore"):
            return self.copy(s, ins[0] if s.op == "tload" else outs[0], outs[0] if s.op == "tload" else ins[0],
                             s.op == "tload")
        if s.op == "tmov":
            src, dst = ins[0], outs[0]
            if not isinstance(src, TileView) or not isinstance(dst, TileView):
                raise self.error(s, "operands must be tiles")
            return self.put(s, dst, self.converted(s, src, dst.dtype, self.read(src)))
        if s.op == "tsetval":
            if len(ins) != 2 or len(outs) != 1 or not isinstance(outs[0], TileView):
                raise self.error(s, "takes (offset, value) and one tile")
            if outs[0].type != s.out_types[0] or outs[0].type.loc != "vec":
                raise self.error(s, f"needs a vec tile, got {outs[0].type}")
            value = ins[1].x if isinstance(ins[1], Batched) else (
                ins[1].traced(self.n) if isinstance(ins[1], Ix) else np.asarray(ins[1]))
            return self.set_cell(s, outs[0], self.index(s, s.ins[0]), value)
        if s.op == "tscatter":
            if len(ins) != 2 or len(outs) != 1 or not all(isinstance(t, TileView) for t in (*ins, *outs)):
                raise self.error(s, "takes a source and an index tile and writes one tile")
            return self.scatter(s, *ins, outs[0])
        if s.op not in SEMANTICS:
            raise self.error(s, f"no semantics for pto.{s.op}")
        args, axes = [], []
        for name, v, declared in zip(s.ins, ins, s.in_types or (None,) * len(ins)):
            if isinstance(v, TileView):
                args.append(self.read(v)), axes.append(0)
            elif isinstance(v, Batched):
                args.append(v.x), axes.append(0)
            elif isinstance(v, Ix):
                dt = DTYPES.get(v.type, np.dtype(np.int32))
                args.append(v.traced(self.n).astype(np.int32 if dt.itemsize > 4 else dt)), axes.append(0)
            elif isinstance(v, GmView) and s.op in USER:    # a user's GM reader: the tensor per point
                args.append(self.gm_read(s, v.key, v.dtype, v.offset, v.offsets())), axes.append(0)
            elif isinstance(v, (GmView, tuple)):
                raise self.error(s, f"{name} is not a tile or a scalar")
            elif jnp.issubdtype(np.asarray(v).dtype, jnp.floating):   # per point: vmap would broadcast it after
                args.append(jnp.broadcast_to(np.asarray(v), (self.n,))), axes.append(0)   # _div's barrier
            else:
                args.append(np.asarray(v)), axes.append(None)
        specs = []
        for name, d, declared in zip(s.outs, outs, s.out_types):
            if isinstance(d, TileView):
                specs.append((tuple(d.shape), d.dtype))
            elif isinstance(d, Batched) or isinstance(d, np.ndarray) and d.ndim:
                x = d.x if isinstance(d, Batched) else d
                shape = x.shape[1:] if isinstance(d, Batched) else x.shape
                specs.append((tuple(shape), np.dtype(x.dtype)))
            else:
                raise self.error(s, f"destination {name} is neither a tile nor a vector")
        out, attrs = tuple(specs), s.attrs
        if s.op in USER:                            # a user's op sees the values of transposed L1 tiles
            attrs += (("zn", tuple(isinstance(v, TileView) and zn(v.type) for v in ins + outs)),
                      ("where", f"function '{self.func.name}' line {s.line}"))
        try:
            if any(a == 0 for a in axes):
                static = tuple(None if a == 0 else (np.dtype(x.dtype), np.shape(x), np.asarray(x).tobytes())
                               for a, x in zip(axes, args))
                res = _batched(s.op, attrs, out, static)(*(x for a, x in zip(axes, args) if a == 0))
            else:
                call = _form(s.op, attrs, out, tuple((None,) * len(args)))
                res = jax.tree.map(lambda r: jnp.broadcast_to(r, (self.n,) + jnp.shape(r)), call(*args))
        except (TypeError, ValueError, IndexError, KeyError) as err:
            raise self.error(s, f"pto.{s.op} failed: {type(err).__name__}: {err}") from err
        res = res if isinstance(res, tuple) else (res,)
        res = tuple(_rounded(r, s.op) for r in res)
        if len(res) != len(outs):
            raise self.error(s, f"{len(res)} results for {len(outs)} destinations")
        for name, d, r in zip(s.outs, outs, res):
            if isinstance(d, TileView):
                self.put(s, d, r)
            else:
                self.env[name] = Batched(jnp.asarray(r))

    def converted(self, s, src: TileView, dtype, value):
        if src.dtype != dtype and src.type.loc != "acc":
            raise self.error(s, f"dtype {src.dtype.name} does not match {np.dtype(dtype).name}")
        return value.astype(dtype)

    def copy(self, s, window, tile, load: bool):
        if not isinstance(window, GmView) or not isinstance(tile, TileView):
            raise self.error(s, "needs a partition view and a tile")
        size = int(np.prod(window.shape))
        if size != tile.shape[0] * tile.shape[1]:
            raise self.error(s, f"window {list(window.shape)} and valid region {list(tile.shape)} "
                                "hold different numbers of elements")
        atomic = dict(s.attrs).get("atomicType", "atomic_none")
        if atomic not in ("atomic_none", "atomic_add") or (load and atomic != "atomic_none"):
            raise self.error(s, f"unknown atomicType {atomic!r}" if not load else f"a load has no {atomic}")
        offs = window.offsets()
        if load:
            if window.dtype != tile.dtype:
                raise self.error(s, f"GM {window.dtype.name} does not match the tile's {tile.dtype.name}")
            value = self.gm_read(s, window.key, window.dtype, window.offset, offs)
            return self.put(s, tile, value.reshape((self.n,) + tile.shape))
        value = self.converted(s, tile, window.dtype, self.read(tile)).reshape((self.n,) + window.shape)
        self.gm_write(s, window.key, window.offset, offs, value, atomic == "atomic_add")


Walk.DISPATCH = {Const: Walk.const, Arith: Walk.arith, View: Walk.view, Tile: Walk.alloc, Subset: Walk.subset,
                 Scalar: Walk.scalar, For: Walk.for_, If: Walk.if_, Instr: Walk.instr}


__all__ = ["Batched", "GmView", "Ix", "Serial", "TileView", "UNROLL", "Unroll", "Walk", "reinterpret", "storage",
           "store_held", "vary", "varying_axes"]
