"""The interpreter of the real PTO-AS text instruction selection prints (:mod:`ptojax.ascend.isel`,
``AscendKernel.pto()``): :func:`parse` (:mod:`ptojax.ascend.engine_parse`, the statements it reads
and the dataclasses it builds) and one walk of a function's statements for a batch of block indices
(points) at once.

``run(module, name, args, block_idx)`` executes one function for one block on host NumPy arrays
(the GM arguments, pointer parameters in order; ``tstore`` updates them in place) — a batch of one
point, the reference and the debugger; ``run_grid(..., blocks)`` runs block indices
``0 .. blocks-1`` in turn; :func:`ptojax.ascend.textbatch.run` runs many points in one walk. The
model, for each point:

* every ``alloc_tile`` owns a zeroed byte buffer of ``rows*cols*itemsize`` bytes; an ``addr`` is
  accepted and ignored (tiles never overlap here, so PTOAS-planned aliasing is not modelled);
* a ``vec`` tile is that buffer as a (rows, cols) array of its dtype, ``col_major`` meaning element
  (r, c) at ``c*rows + r``; ``treshape`` reinterprets the same bytes with the new type, so an R×1
  col_major alias of a 1×R row_major tile sees the same elements in order; it must start at a whole
  element of the new type (:func:`alias_offset_fault`), at a static offset or a run-time one;
* ``subset %t[r, c] sizes [R, C]`` is a window of ``t``'s buffer at (r, c) with ``t``'s pitch (a
  ``memref.subview``), inside ``t``'s rows and cols; its valid region is PTOAS's
  (:func:`~ptojax.ascend.engine_parse.subset_valid` of ``t``'s valid region at run time), its
  type the one PTOAS infers (``?`` where an offset is not a constant); of a ``vec`` tile it is whole
  rows or one row (row_major; whole columns or one column, col_major): PTOAS's C++ gives a subset
  the pitch of its own type, so a narrower window over several rows is refused;
* ``tgetval`` / ``tsetval`` read / write the element ``offset`` elements past the tile's first one
  (pto-isa's ``Tile::GetValue``: ``*(data + offset)``, whatever the layout), inside the tile's span;
  ``tscatter`` writes its source's elements at such offsets, keeping the rest of the destination;
  ``load_scalar`` reads element ``offset`` of a GM pointer;
* ``arith`` on ``index`` is on Python ints; on ``iN`` it wraps to N bits (a 0-d array of the
  dtype); ``cmpi`` gives an ``i1``; ``scf.if`` runs one of its blocks;
* cube tiles (mat/left/right/acc/bias) are plain row-major logical arrays: fractal layout is the
  hardware's business; ``tmov`` copies valid regions (an ``acc`` source converts, as FIXPIPE does);
* a tensor view is a strided view of the flat GM array (``strides = [1, R]`` with ``layout<dn>`` is
  the transpose); ``tload``/``tstore`` copy between a window and a tile's valid region (equal element
  counts; an ``acc`` tile's store rounds to the GM dtype to nearest; an ``atomicType = atomic_add``
  store adds to GM as ``tadd`` does);
* every other instruction is ``tile_semantics.SEMANTICS[mnemonic]`` on the valid regions (scalars
  0-d, ``out=`` the destinations' ``ShapeDtypeStruct``s), its results written into the
  destinations (tiles, or a ``vector`` output such as ``tmrgsort``'s executed counts, rebound);
  a user's instruction (``pj.tiles.register_op``, :data:`~ptojax.ascend.tile_semantics.USER`) may
  take a whole tensor view (a GM reader), and runs its NumPy semantics point by point where it has one.

The batch: every tile is a byte buffer with a leading point axis, ``(n, rows*cols*itemsize)``; an
index value is a Python int where the points agree, else one value per point (:class:`Each`); every
instruction is its semantics once for all points — ``tile_semantics.ON_NUMPY``'s NumPy function where
it has one (the sums' in-order folds; the matmuls NumPy computes exactly: no XLA compile), else its jaxpr vmapped over the points, evaluated on NumPy
where it is :func:`~ptojax.ascend.npeval.evaluable` (no XLA compile; NumPy computes every element
alike, so each point gets one point's bits; subnormals kept, as the simulator keeps them), else
jitted (batch sizes rounded up to a power of two, so a form compiles once per bucket; XLA:CPU
flushes subnormals there, so the elements of ``texp``/``tlog``/``trsqrt`` it may have flushed are
computed again in double on NumPy, as the simulator computes them), or, where an operand must be
concrete (it fixes a shape: ``tmrgsort``'s block length), point by point. GM is the NumPy arrays
themselves: a load reads a window per point, a store writes the points' windows in point order.
Control flow, loop bounds, tile shapes or views that differ between points stop the walk
(:class:`_Split`, naming the groups of points that agree); a walk may record a tape of its steps over
its tile buffers to run again (:mod:`ptojax.ascend.textbatch` decides which points walk together and
keeps the tapes).

Every fault is a :class:`PtoExecutionError` naming the function, the line and the instruction.
"""
from __future__ import annotations

import functools

import jax
import numpy as np

from .._jax import jaxpr_as_fun
from . import npeval
from .engine_parse import (DTYPES, Arith, Const, For, Function, If, Instr, Module, PtrType, Scalar, Stmt, Subset,
                           Tile, TileType, VectorType, View, ViewType, parse, subset_type, subset_valid)
from ..errors import PtoExecutionError
from .tile_semantics import ON_NUMPY, ON_NUMPY_BY_DATA, ON_NUMPY_IF, SEMANTICS, USER, zn

_ARITH = {"addi": lambda a, b: a + b, "subi": lambda a, b: a - b, "muli": lambda a, b: a * b,
          "divsi": lambda a, b: abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1),
          "remsi": lambda a, b: a - b * _ARITH["divsi"](a, b), "minsi": min, "maxsi": max}
_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def _bits(type_: str) -> int:
    return 64 if type_ == "index" else int(type_[1:])


def _typed(value: int, type_: str):
    """``value`` as an SSA value of ``type_``: a Python int for ``index``, else wrapped to N bits."""
    if type_ == "index":
        return value
    if type_ == "i1":
        return np.bool_(value & 1)
    w = _bits(type_)
    return np.asarray((value + 2 ** (w - 1)) % 2 ** w - 2 ** (w - 1), DTYPES[type_])


# ----------------------------------------------------------------------------------------- values
def _fits(sizes, dims) -> bool:
    """Run-time ``sizes`` agree with a view type's ``dims`` (``None``: a ``?`` dim, any size)."""
    return len(sizes) == len(dims) and all(d is None or n == d for n, d in zip(sizes, dims))


def scalar_arith(s: Arith, vals: list, error):
    """Arith statement ``s`` on the concrete ints ``vals``: its typed result (a bool for ``cmpi``, compared
    in the operands' width); ``error(s, message)`` makes the fault of a division by zero."""
    if s.op == "cmpi":
        if s.pred[0] == "u":
            w = _bits(s.type)
            vals = [v % 2 ** w for v in vals]
        return np.bool_(_CMP[s.pred.lstrip("su")](*vals))
    if s.op in ("divsi", "remsi") and vals[1] == 0:
        raise error(s, "division by zero")
    return _typed(vals[0] if s.op == "index_cast" else _ARITH[s.op](*vals), s.type)


def alias_valid(shape, dtype, t: TileType, src: TileType | None = None):
    """The valid region of a ``treshape`` alias of type ``t`` (a ``?`` dim) over a source of type
    ``src`` whose valid region ``shape`` holds ``dtype`` elements: over a source of the same rows of the
    same bytes, its valid rows (columns) where ``t``'s are ``?``; else the same bytes (None where they
    do not fill whole lines)."""
    src_item, item = np.dtype(dtype).itemsize, DTYPES[t.dtype].itemsize
    size = shape[0] * shape[1] * src_item
    if src is not None and (src.rows, src.cols * src_item, src.blayout) == (t.rows, t.cols * item, t.blayout) and (
            t.v_col is not None or shape[1] * src_item % item == 0):
        return (shape[0] if t.v_row is None else t.v_row, shape[1] * src_item // item if t.v_col is None else t.v_col)
    known = t.v_col if t.v_row is None else t.v_row
    if known is None or size % item or (size // item) % max(known, 1):
        return None
    n = size // item // max(known, 1)
    return (n, known) if t.v_row is None else (known, n)


def alias_offset_fault(src: str, dtype: str, offset: int) -> str | None:
    """Why a ``treshape`` alias of ``dtype`` over tile ``src`` cannot start ``offset`` bytes into the
    buffer ``src`` views, or None: it starts at a whole element of ``dtype`` (pto-isa's ``treshape``
    takes ``src``'s data pointer as a pointer to ``dtype``, which must be aligned to it)."""
    item = DTYPES[dtype].itemsize
    if offset % item == 0:
        return None
    return (f"a treshape to {dtype} must start a multiple of {item} bytes ({dtype}'s size) into its tile's "
            f"buffer, but {src} starts at byte {offset}")


class Each:
    """A scalar SSA value that differs between the points: ``v``, one value per point ((n,) array)."""

    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


class Vec:
    """A ``vector`` SSA value (an instruction's result such as ``tmrgsort``'s counts): ``x``, (n, ...)."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x


def _error(func, stmt, message) -> PtoExecutionError:
    """The error of statement ``stmt`` (None: the function ``func`` itself), naming its function and line."""
    where = f"line {stmt.line}: " if stmt else f"line {func.line}: "
    text = f" in `{stmt.text[:160]}`" if stmt else ""
    return PtoExecutionError(f"pto engine: function '{func.name}' {where}{message}{text}")


class _Stale(Exception):
    """A value a tape's run depended on (read from GM or a tile) differs in this run."""


def _guard(expected, read, flats) -> None:
    """A tape's step: the values read here are those the recorded run read, else :class:`_Stale`."""
    if not (read(flats) == expected).all():
        raise _Stale()


class _Split(Exception):
    """The points disagree on control flow or a shape: ``key`` ((n, k) array) groups those that agree."""

    def __init__(self, key):
        super().__init__("split")
        self.key = key


def _scalar(values: np.ndarray, type_: str):
    """Per-point ``values`` of ``type_`` as one value (an int, a 0-d array) where they agree, else
    :class:`Each`."""
    first = values[0]
    if values.shape[0] == 1 or (values == first).all():
        if type_ == "index":
            return int(first)
        if type_ == "i1":
            return np.bool_(first)
        return np.asarray(first, DTYPES.get(type_, values.dtype))
    return Each(values)


def _wrap(v: np.ndarray, type_: str) -> np.ndarray:
    """int64 ``v`` wrapped to ``type_`` as :func:`_typed` wraps one value."""
    if type_ == "index":
        return v
    if type_ == "i1":
        return (v & 1).astype(np.bool_)
    return v.astype(DTYPES[type_])


def _div(a, b):
    return np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))


_NP_ARITH = {"addi": np.add, "subi": np.subtract, "muli": np.multiply, "divsi": _div,
             "remsi": lambda a, b: a - b * _div(a, b), "minsi": np.minimum, "maxsi": np.maximum}


# ------------------------------------------------------------------------------------------ storage
class _Tile:
    """A tile of the batch: its type over byte buffers ``buf`` ((n, bytes), shared with its aliases and
    subsets), element (r, c) at ``base + (r * pitch + c) * itemsize`` bytes (``col_major`` vec tiles:
    ``c * pitch + r``); ``base`` an int or one per point; ``shape`` the valid region."""

    __slots__ = ("type", "dtype", "col_major", "pitch", "base", "shape", "buf")

    def __init__(self, type_: TileType, buf, base=0, pitch=None, shape=None):
        self.type, self.dtype = type_, DTYPES[type_.dtype]
        self.col_major = type_.loc == "vec" and type_.blayout == "col_major"
        self.pitch = pitch or (type_.rows if self.col_major else type_.cols)
        self.base, self.shape, self.buf = base, shape or (type_.v_row, type_.v_col), buf

    def span(self) -> int:
        t = self.type
        major, minor = (t.cols, t.rows) if self.col_major else (t.rows, t.cols)
        return (major - 1) * self.pitch + minor

    def element(self, r: int, c: int) -> int:
        return c * self.pitch + r if self.col_major else r * self.pitch + c

    def _strides(self):
        item = self.dtype.itemsize
        return (item, self.pitch * item) if self.col_major else (self.pitch * item, item)

    def _index(self):
        """(n, rows*cols) element indices of the valid region into ``buf`` seen as the dtype."""
        item = self.dtype.itemsize
        r, c = np.meshgrid(np.arange(self.shape[0]), np.arange(self.shape[1]), indexing="ij")
        offs = (c * self.pitch + r if self.col_major else r * self.pitch + c).reshape(-1)
        return self.base[:, None] // item + offs[None, :]

    def read(self) -> np.ndarray:
        """The valid regions of all points, (n, rows, cols): a view where the base is shared."""
        n = self.buf.shape[0]
        if not isinstance(self.base, np.ndarray):
            return np.ndarray((n,) + self.shape, self.dtype, self.buf, self.base,
                              (self.buf.shape[1],) + self._strides())
        flat = self.buf.view(self.dtype)
        return flat[np.arange(n)[:, None], self._index()].reshape((n,) + self.shape)

    def write(self, value) -> None:
        n = self.buf.shape[0]
        if not isinstance(self.base, np.ndarray):
            self.read()[...] = value
            return
        flat = self.buf.view(self.dtype)
        flat[np.arange(n)[:, None], self._index()] = np.reshape(value, (n, -1))

    def reader(self):
        """A function giving :meth:`read`'s values when called (later: the buffer as it is then)."""
        if isinstance(self.base, np.ndarray):
            return self.read
        view = self.read()
        return lambda: view

    def writer(self):
        """A function doing :meth:`write` when called."""
        if isinstance(self.base, np.ndarray):
            return self.write
        view = self.read()
        return lambda value: view.__setitem__(Ellipsis, value)

    def cells(self, offset) -> tuple:
        """``Tile::GetValue``'s element ``offset`` past the first of each point: (points, elements)."""
        item = self.dtype.itemsize
        at = (self.base + np.asarray(offset) * item) // item
        flat = self.buf.view(self.dtype)
        return flat, np.broadcast_to(at, (self.buf.shape[0],))


@functools.lru_cache(maxsize=1024)
def _offsets(shape: tuple, strides: tuple) -> np.ndarray:
    """Element offsets of a window of ``shape`` with ``strides`` from its first element."""
    grid = np.indices(shape, dtype=np.int64)
    return sum((g * s for g, s in zip(grid, strides)), np.zeros(shape, np.int64))


def _distinct(shape, strides) -> bool:
    """Whether an array of ``shape`` with element ``strides`` gives distinct elements distinct
    addresses: each stride, smallest first, at least the extent of those below it."""
    dims = sorted((st, d) for st, d in zip(strides, shape) if d > 1)
    reach = 1
    for st, d in dims:
        if st < reach:
            return False
        reach = st * d
    return True


class _Gm:
    """A tensor view of pointer parameter ``param`` (a flat GM array ``flat`` of this run): element
    ``offset + sum(i * strides)`` (``offset``: an int or one per point); a window's ``starts``: its
    offsets per dim where they differ between points."""

    __slots__ = ("param", "flat", "offset", "shape", "strides", "starts")

    def __init__(self, param, flat, offset, shape, strides, starts=None):
        self.param, self.flat, self.offset = param, flat, offset
        self.shape, self.strides, self.starts = tuple(shape), tuple(strides), starts

    @property
    def dtype(self):
        return self.flat.dtype

    def one(self, flat, offset: int) -> np.ndarray:
        """The window at element ``offset`` of ``flat``: a (writable) view."""
        item = flat.itemsize
        return np.ndarray(self.shape, flat.dtype, flat, offset * item, tuple(s * item for s in self.strides))

    def _grid(self, n: int):
        """(first offset, (n1, n2), (step1, step2)) where point ``i * n2 + j``'s offset is ``first +
        i * step1 + j * step2`` (steps >= 0: evenly spaced points are one row; a matmul operand's
        windows step along a row of points and between rows), else None."""
        off = self.offset
        if n < 2:
            return int(off[0]), (1, n), (0, 0)
        step = np.diff(off)
        change = np.flatnonzero(step != step[0])
        n2 = int(change[0]) + 1 if change.size else n
        if n % n2:
            return None
        n1 = n // n2
        steps = (int(off[n2] - off[0]) if n1 > 1 else 0, int(step[0]))
        if min(steps) < 0 or not np.array_equal(
                off, (off[0] + steps[0] * np.arange(n1)[:, None] + steps[1] * np.arange(n2)).reshape(-1)):
            return None
        return int(off[0]), (n1, n2), steps

    def _grid_view(self, flat, first, dims, steps):
        """The points' windows in ``flat`` as a (n1, n2, *shape) view (:meth:`_grid`)."""
        item = flat.itemsize
        strides = tuple(s * item for s in (*steps, *self.strides))
        return np.ndarray(dims + self.shape, flat.dtype, flat, first * item, strides)

    def _index(self) -> np.ndarray:
        return self.offset.reshape((-1,) + (1,) * len(self.shape)) + _offsets(self.shape, self.strides)

    def _disjoint(self) -> bool:
        """Whether no element is in two points' windows: boxes of the view that do not meet, the view's
        strides giving distinct elements distinct addresses."""
        if self.starts is None or len(self.starts) > 256:
            return False
        if not _distinct(self.shape, self.strides):
            return False
        apart = np.zeros((len(self.starts),) * 2, bool)
        for d, size in enumerate(self.shape):
            col = self.starts[:, d]
            apart |= np.abs(col[:, None] - col[None, :]) >= size
        np.fill_diagonal(apart, True)
        return bool(apart.all())

    def _detached(self) -> "_Gm":
        """The view without this run's array: what a tape's step keeps (the run's inputs are let go)."""
        return _Gm(self.param, None, self.offset, self.shape, self.strides, self.starts)

    def loader(self, n: int):
        """A function of a flat GM array: the points' windows, (n, *shape)."""
        view = self._detached()
        if not isinstance(self.offset, np.ndarray):
            offset, shape = self.offset, (n,) + self.shape
            return lambda flat: np.broadcast_to(view.one(flat, offset), shape)
        grid = self._grid(n)
        if grid is not None:           # a view (evenly spaced points), or one copy of the windows
            return lambda flat: view._grid_view(flat, *grid).reshape((n,) + self.shape)
        idx = self._index()
        return lambda flat: flat[idx]

    def storer(self, n: int):
        """A function of a flat GM array and the points' windows ``values`` ((n, *shape)) writing them
        in point order (a later point's element wins)."""
        view = self._detached()
        if not isinstance(self.offset, np.ndarray):
            offset = self.offset
            return lambda flat, values: view.one(flat, offset).__setitem__(Ellipsis, values[-1])
        grid = self._grid(n)
        if grid is not None and _distinct((*grid[1], *self.shape), (*grid[2], *self.strides)):
            dims = grid[1] + self.shape
            return lambda flat, values: view._grid_view(flat, *grid).__setitem__(Ellipsis, values.reshape(dims))
        idx = self._index()
        if self._disjoint():
            return lambda flat, values: flat.__setitem__(idx, values)

        def each(flat, values):
            for p in range(n):
                flat[idx[p]] = values[p]
        return each


# ------------------------------------------------------------------------------- instruction plans
_PLANS: dict = {}      # (mnemonic, attributes, out, operand shapes and dtypes, x64) -> (how it runs, what runs)


def _plan(fn, args, out, attrs) -> tuple:
    """How an instruction runs: its semantics traced once to a jaxpr — on NumPy where every operation
    of it is one NumPy computes as XLA does (:mod:`~ptojax.ascend.npeval`, no compile), else as one
    jitted call; where an integer scalar operand must be concrete (it fixes a shape: ``tmrgsort``'s
    block length), jitted per value of it; else eagerly."""
    bound = functools.partial(fn, out=out, **dict(attrs))
    try:
        closed, shapes = jax.make_jaxpr(bound, return_shape=True)(*args)
    except TypeError:
        static = tuple(i for i, a in enumerate(args) if np.ndim(a) == 0 and np.asarray(a).dtype.kind in "iu")
        return ("static", (static, jax.jit(bound, static_argnums=static))) if static else ("eager", fn)
    if npeval.evaluable(closed.jaxpr):
        return "numpy", (npeval.evaluator(closed.jaxpr, closed.consts), jax.tree.structure(shapes))
    return "jit", jax.jit(bound)


def _on_numpy(op: str, args, out) -> bool:
    """Whether ``op`` on ``args`` runs its NumPy function (``tile_semantics.ON_NUMPY``, where its
    ``ON_NUMPY_IF`` condition, if any, holds)."""
    return op in ON_NUMPY and (op not in ON_NUMPY_IF or ON_NUMPY_IF[op](*args, out=out))


def _apply(op: str, fn, args, out, attrs):
    """``fn(*args, out=out, **attrs)`` as :func:`_plan` decided for these operand shapes."""
    if _on_numpy(op, args, out):
        return ON_NUMPY[op](*args, out=out, **dict(attrs))
    try:
        key = (op, tuple(attrs), out, tuple((a.shape, a.dtype) for a in args), jax.config.read("jax_enable_x64"))
        plan = _PLANS.get(key)
    except TypeError:                              # an unhashable attribute: eagerly
        key, plan = None, ("eager", fn)
    if plan is None:
        plan = _PLANS[key] = _plan(fn, args, out, attrs)
    kind, run = plan
    if kind == "numpy":
        evaluate, tree = run
        return jax.tree.unflatten(tree, evaluate(args))
    if kind == "jit":
        return run(*args)
    if kind == "static":
        static, jitted = run
        try:
            return jitted(*(int(a) if i in static else a for i, a in enumerate(args)))
        except TypeError:                          # another operand must be concrete too: eagerly
            _PLANS[key] = ("eager", fn)
    return fn(*args, out=out, **dict(attrs))


_FORMS: dict = {}   # (instruction, operand axes, shapes and dtypes, destinations, x64) -> (instruction, out, [plan])
_VPLANS: dict = {}  # (mnemonic, attributes, out, operand point axes, shapes and dtypes, x64) -> plan, for every module


def _vplanned(op, fn, args, axes, out, attrs, asked=True):
    """:func:`_vplan` of an instruction form, kept for every instruction of that form in any module
    (``asked``: or its NumPy form where its ``ON_NUMPY_IF`` condition holds)."""
    if USER.get(op) is not None:                   # a user's NumPy semantics: on the host, point by point
        return "host", USER[op]
    if asked and _on_numpy(op, args, out):         # all points at once on NumPy
        return "numpy-op", ON_NUMPY[op]
    try:
        key = (op, attrs, out, axes, tuple((a.shape, a.dtype) for a in args), jax.config.read("jax_enable_x64"))
        found = _VPLANS.get(key)
    except TypeError:                              # an unhashable attribute
        return _vplan(op, fn, args, axes, out, attrs)
    if found is None:
        found = _VPLANS[key] = _vplan(op, fn, args, axes, out, attrs)
    return found


def _bucket(n: int) -> int:
    """The point count a jitted instruction runs for: ``n`` rounded up to a power of two, so a form
    compiles once for every batch size of a bucket."""
    return 1 << (n - 1).bit_length()


def _vplan(op, fn, args, axes, out, attrs):
    """How an instruction runs for all points: the semantics vmapped over the points, on NumPy where
    that jaxpr is :func:`~ptojax.ascend.npeval.evaluable` (NumPy computes every element alike), else
    jitted; where an operand must be concrete, point by point (:func:`_apply`)."""
    one = tuple((a.shape[1:] if ax == 0 else a.shape, a.dtype) for a, ax in zip(args, axes))
    form = (op, attrs, out, axes, one, jax.config.read("jax_enable_x64"))
    try:
        if form in _JITTED:                        # known for another batch size: not traced again
            return "jit", _jitted(op, attrs, out, axes)
    except TypeError:                              # an unhashable attribute
        form = None
    bound = jax.vmap(functools.partial(fn, out=out, **dict(attrs)), in_axes=axes)
    try:
        closed, shapes = jax.make_jaxpr(bound, return_shape=True)(*args)
    except TypeError:                              # an operand must be concrete: point by point
        return "points", None
    if npeval.evaluable(closed.jaxpr):
        return "numpy", (npeval.evaluator(closed.jaxpr, closed.consts), jax.tree.structure(shapes))
    if form is not None:
        _JITTED.add(form)
    if _bucket(len(args[axes.index(0)])) == len(args[axes.index(0)]):     # the traced jaxpr is the one to jit
        traced, tree = jaxpr_as_fun(closed), jax.tree.structure(shapes)
        return "jit", jax.jit(lambda *operands: jax.tree.unflatten(tree, traced(*operands)))
    return "jit", _jitted(op, attrs, out, axes) if form is not None else jax.jit(bound)


_JITTED: set = set()   # instruction forms (all but the batch size) that run jitted


def forget(op: str) -> None:
    """Drop what is kept of instruction ``op`` (a user's, unregistered): its plans, and the parsed
    modules whose instructions they hang on, so that an instruction of that name registered again runs."""
    for table in (_PLANS, _VPLANS):
        for key in [k for k in table if k[0] == op]:
            del table[key]
    _JITTED.difference_update([f for f in _JITTED if f[0] == op])
    for key in [k for k, form in _FORMS.items() if form[0].op == op]:
        del _FORMS[key]
    _jitted.cache_clear()
    parse.cache_clear()


@functools.lru_cache(maxsize=4096)
def _jitted(op, attrs, out, axes):
    """The semantics of an instruction form vmapped and jitted: one per form, whatever the batch
    (XLA compiles it per operand shapes: per bucket of :func:`_bucket`)."""
    return jax.jit(jax.vmap(functools.partial(SEMANTICS[op], out=out, **dict(attrs)), in_axes=axes))


def _vapply(plan, op, fn, args, axes, out, attrs, n):
    """The instruction's results for all points, as ``plan`` (:func:`_vplanned`) runs it; an instruction
    whose NumPy form is chosen by its operands' values (``ON_NUMPY_BY_DATA``: a float32 matmul whose fma
    chain may be subnormal) asks on every run, the plan being made for other data."""
    if op in ON_NUMPY_BY_DATA:
        if _on_numpy(op, args, out):
            return ON_NUMPY[op](*args, out=out, **dict(attrs))
        if plan[0] == "numpy-op":
            plan = _vplanned(op, fn, args, axes, out, attrs, asked=False)
    kind, run_ = plan
    if kind == "numpy":
        evaluate, tree = run_
        return evaluate(args)[0] if tree.num_leaves == 1 and tree.num_nodes == 1 else \
            jax.tree.unflatten(tree, evaluate(args))
    if kind == "numpy-op":
        return run_(*args, out=out, **dict(attrs))
    if kind == "host":
        results = [run_(*(a[p] if ax == 0 else a for a, ax in zip(args, axes)), out=out, **dict(attrs))
                   for p in range(n)]
        return jax.tree.map(lambda *rs: np.stack(rs), *results)
    if kind == "jit":
        pad = _bucket(n) - n                       # more points: copies of the last, dropped after
        padded = [np.concatenate([a, np.repeat(a[-1:], pad, axis=0)]) if ax == 0 and pad else a
                  for a, ax in zip(args, axes)]
        return jax.tree.map(lambda r: np.asarray(r)[:n], run_(*padded))
    results = [_apply(op, fn, [a[p] if ax == 0 else a for a, ax in zip(args, axes)], out, attrs)
               for p in range(n)]
    return jax.tree.map(lambda *rs: np.stack([np.asarray(r) for r in rs]), *results)


def _flat(type_: PtrType, arg: np.ndarray) -> np.ndarray:
    """A pointer argument as the flat GM array the text sees (booleans are bytes: i1 prints as i8)."""
    return (arg.view(np.int8) if type_.dtype == "i8" and arg.dtype == np.bool_ else arg).reshape(-1)


# ----------------------------------------------------------------------------------------- the walk
class _Run:
    """One function of the module run for the block indices ``blocks`` together (one walk of its
    statements); ``tape``, a list, records the walk's steps (functions of the flat GM arrays) to run
    it again, ``guarded``: values read from data are checked there (:class:`_Stale`), else reading
    one stops the recording."""

    def __init__(self, func: Function, args, blocks: np.ndarray, tape: list | None = None, guarded=False):
        self.func, self.blocks, self.n, self.env = func, blocks, len(blocks), {}
        self.x64 = jax.config.read("jax_enable_x64")   # the semantics trace to other jaxprs under x64
        self.params, self.tape, self.guarded, self.read_data = {}, tape, guarded, False
        if len(args) != len(func.params):
            raise self.error(None, f"expects {len(func.params)} arguments ({[n for n, _ in func.params]}), "
                                   f"got {len(args)}")
        for (name, type_), arg in zip(func.params, args):
            if isinstance(type_, PtrType):
                if not isinstance(arg, np.ndarray) or _flat(type_, arg).dtype != DTYPES[type_.dtype] \
                        or not arg.flags.c_contiguous:
                    raise self.error(None, f"argument {name}: {type_.dtype} pointer needs a C-contiguous "
                                           f"{type_.dtype} array, got {getattr(arg, 'dtype', type(arg).__name__)}")
                self.env[name] = _flat(type_, arg)
                self.params[name] = len(self.params)
            else:
                self.env[name] = int(arg) if type_ == "index" else np.asarray(arg, DTYPES[type_])

    def error(self, stmt, message):
        return _error(self.func, stmt, message)

    def get(self, stmt, name):
        if isinstance(name, int):
            return name
        try:
            return self.env[name]
        except KeyError:
            raise self.error(stmt, f"{name} is not defined") from None

    def index(self, stmt, name):
        """An index operand: an int, or :class:`Each` (int64 per point)."""
        value = self.get(stmt, name)
        if type(value) is int:
            return value
        if isinstance(value, Each):
            if value.v.dtype.kind not in "iub":
                raise self.error(stmt, f"{name} is not an index")
            return value
        if isinstance(value, (_Tile, _Gm, Vec)) or np.ndim(value):
            raise self.error(stmt, f"{name} is not an index")
        return int(value)

    def uniform(self, values):
        """``values`` (ints or :class:`Each`) as ints, or split the batch by them."""
        if not any(isinstance(v, Each) for v in values):
            return values
        raise _Split(np.stack([v.v.astype(np.int64) if isinstance(v, Each) else np.full(self.n, v, np.int64)
                               for v in values], axis=1))

    def block(self, body):
        for stmt in body:
            if type(stmt) is Stmt:
                return True
            if self.DISPATCH[type(stmt)](self, stmt):
                return True
        return False

    # -- scalars
    def const(self, s: Const):
        if isinstance(s.value, np.ndarray):
            self.env[s.result] = s.value.copy()
        else:
            self.env[s.result] = s.value if s.type == "index" else np.asarray(s.value, DTYPES.get(s.type, np.int64))

    def arith(self, s: Arith):
        if s.op == "get_block_idx":
            self.env[s.result] = _scalar(self.blocks, s.type) if s.type == "index" else \
                _scalar(_wrap(self.blocks, s.type), s.type)
            return
        vals = [self.index(s, o) for o in s.operands]
        if not any(isinstance(v, Each) for v in vals):
            self.env[s.result] = scalar_arith(s, vals, self.error)
            return
        arrs = [v.v.astype(np.int64) if isinstance(v, Each) else np.full(self.n, v, np.int64) for v in vals]
        if s.op == "cmpi":
            if s.pred[0] == "u":
                w = _bits(s.type)
                arrs = [a.astype(np.uint64) if w == 64 else a & (2 ** w - 1) for a in arrs]
            self.env[s.result] = _scalar(_CMP[s.pred.lstrip("su")](*arrs), "i1")
            return
        if s.op in ("divsi", "remsi") and (arrs[1] == 0).any():
            raise self.error(s, "division by zero")
        res = arrs[0] if s.op == "index_cast" else _NP_ARITH[s.op](*arrs)
        self.env[s.result] = _scalar(_wrap(res, s.type), s.type)

    def if_(self, s: If):
        cond = self.get(s, s.cond)
        if isinstance(cond, Each):
            if cond.v.dtype != np.bool_:
                raise self.error(s, f"condition {s.cond} is not an i1")
            raise _Split(cond.v[:, None].astype(np.int64))
        if isinstance(cond, (_Tile, _Gm, Vec)) or np.ndim(cond) or np.asarray(cond).dtype != np.bool_:
            raise self.error(s, f"condition {s.cond} is not an i1")
        return self.block(s.then if bool(cond) else s.orelse)

    def for_(self, s: For):
        lo, hi, step = self.uniform([self.index(s, v) for v in (s.lo, s.hi, s.step)])
        if step <= 0:
            raise self.error(s, f"loop step {step} is not positive")
        for k in range(lo, hi, step):
            self.env[s.var] = k
            if self.block(s.body):
                return True
        return False

    def scalar(self, s: Scalar):
        self.read_data = True
        if not self.guarded:                       # a value read from data: the next run may differ
            self.tape = None
        offset = self.index(s, s.offset)
        if s.op == "load_scalar":
            ptr = self.get(s, s.src)
            if not isinstance(s.src_type, PtrType) or s.src_type.dtype != s.type or not (
                    s.src in dict(self.func.params) and isinstance(ptr, np.ndarray) and ptr.dtype == DTYPES[s.type]):
                raise self.error(s, f"{s.src} is not a {s.type} pointer parameter")
            at = offset.v if isinstance(offset, Each) else np.full(self.n, offset, np.int64)
            if at.min() < 0 or at.max() >= ptr.size:
                bad = int(at[(at < 0) | (at >= ptr.size)][0])
                raise self.error(s, f"offset {bad} is outside the {ptr.size}-element tensor")
            values, k = ptr[at], self.params[s.src]
            self.env[s.result] = _scalar(values, s.type)
            self.record(functools.partial(_guard, values.copy(), lambda flats: flats[k][at]))
            return
        tile = self.get(s, s.src)
        if not isinstance(tile, _Tile):
            raise self.error(s, f"{s.src} is not a tile")
        flat, at = self.cell(s, tile, s.src_type, offset, s.type)
        where = (np.arange(self.n), at)
        values = flat[where]
        self.env[s.result] = _scalar(values, s.type)
        self.record(functools.partial(_guard, values.copy(), lambda flats: flat[where]))

    def cell(self, s, tile: _Tile, declared, offset, dtype: str):
        if tile.type != declared:
            raise self.error(s, f"the tile is {tile.type} but the instruction says {declared}")
        if tile.type.loc != "vec" or tile.type.dtype != dtype:
            raise self.error(s, f"needs a vec tile of {dtype}, got a {tile.type.loc} tile of {tile.type.dtype}")
        off = offset.v if isinstance(offset, Each) else np.asarray([offset])
        bad = off[(off < 0) | (off >= tile.span())]
        if bad.size:
            raise self.error(s, f"offset {int(bad[0])} is outside the tile's {tile.span()} elements")
        return tile.cells(offset.v if isinstance(offset, Each) else offset)

    # -- views and tiles
    def view(self, s: View):
        src = self.get(s, s.src)
        a, b = [self.index(s, v) for v in s.a], [self.index(s, v) for v in s.b]
        if s.op == "make_tensor_view":
            if s.src not in self.params:
                raise self.error(s, f"{s.src} is not a pointer parameter")
            a, b = self.uniform(a), self.uniform(b)
            if src.dtype != DTYPES[s.type.dtype] or not _fits(a, s.type.shape) or len(b) != len(a):
                raise self.error(s, f"shape {a} strides {b} over a {src.dtype.name} pointer do not match {s.type}")
            reach = sum((n - 1) * st for n, st in zip(a, b)) if all(a) else -1
            if min(b, default=0) < 0 or reach >= src.size:
                raise self.error(s, f"view shape {a} strides {b} reaches past the {src.size}-element tensor")
            self.env[s.result] = _Gm(self.params[s.src], src, 0, a, b)
            return
        if not isinstance(src, _Gm):
            raise self.error(s, f"{s.src} is not a tensor view")
        b = self.uniform(b)
        if len(a) != len(src.shape) or len(b) != len(src.shape):
            raise self.error(s, f"window offsets {a} sizes {b} fall outside the tensor {list(src.shape)}")
        offset, starts = src.offset, None
        if any(isinstance(o, Each) for o in a):
            starts = np.stack([o.v if isinstance(o, Each) else np.full(self.n, o, np.int64) for o in a], axis=1)
        for o, n, d, st in zip(a, b, src.shape, src.strides):
            lo, hi = (int(o.v.min()), int(o.v.max())) if isinstance(o, Each) else (o, o)
            if lo < 0 or n < 0 or hi + n > d:
                bad = int(o.v[(o.v < 0) | (o.v + n > d)][0]) if isinstance(o, Each) else o
                raise self.error(s, f"window offsets {[bad if x is o else x for x in a]} sizes {b} fall outside "
                                    f"the tensor {list(src.shape)}")
            offset = offset + (o.v if isinstance(o, Each) else o) * st
        if not _fits(b, s.type.shape):
            raise self.error(s, f"window sizes {b} do not match {s.type}")
        if isinstance(offset, np.ndarray) and (offset == offset[0]).all():
            offset, starts = int(offset[0]), None
        self.env[s.result] = _Gm(src.param, src.flat, offset, b, src.strides,
                                 starts if not isinstance(src.offset, np.ndarray) else None)

    def tile(self, s: Tile):
        t, buf, base, shape = s.type, None, 0, None
        if (s.src is None or s.valid) and (t.v_row is None or t.v_col is None):     # (an alias: set_validshape's)
            valid = s.valid or (None, None)
            if any(d is None and v is None for v, d in zip(valid, (t.v_row, t.v_col))):
                raise self.error(s, "a dynamic (?) valid dim needs its valid_row / valid_col operand")
            dims = [self.index(s, v) if d is None else d for v, d in zip(valid, (t.v_row, t.v_col))]
            shape = tuple(self.uniform(dims))
        elif s.src is not None and (t.v_row is None or t.v_col is None):
            src = self.get(s, s.src)
            if not isinstance(src, _Tile):
                raise self.error(s, f"{s.src} is not a tile")
            shape = alias_valid(src.shape, src.dtype, t, src.type)
            if shape is None:
                raise self.error(s, f"cannot reshape the {src.shape[0]}x{src.shape[1]} valid region to {t}")
        v_row, v_col = shape or (t.v_row, t.v_col)
        if not (0 <= v_row <= t.rows and 0 <= v_col <= t.cols):
            raise self.error(s, f"valid region {v_row}x{v_col} exceeds the tile {t.rows}x{t.cols}")
        size = t.rows * t.cols * DTYPES[t.dtype].itemsize
        if s.src is not None:
            src = self.get(s, s.src)
            if not isinstance(src, _Tile):
                raise self.error(s, f"{s.src} is not a tile")
            buf, base = src.buf, src.base
            contiguous = src.type.rows == 1 if not src.col_major else src.type.cols == 1
            if src.pitch != (src.type.rows if src.col_major else src.type.cols) and not contiguous:
                raise self.error(s, f"{s.src} is a strided window (pitch {src.pitch}); it has no one byte layout")
            for at in np.unique(base) if isinstance(base, np.ndarray) else (base,):
                fault = alias_offset_fault(s.src, t.dtype, int(at))
                if fault:
                    raise self.error(s, fault)
            top = int(np.max(base)) if isinstance(base, np.ndarray) else base
            if top + size > buf.shape[1]:
                raise self.error(s, f"{t.rows}x{t.cols} {t.dtype} does not fit the "
                                    f"{buf.shape[1] - top}-byte tile {s.src}")
        else:
            buf = np.zeros((self.n, size), np.uint8)
            self.record(lambda flats, buf=buf: buf.fill(0))
        self.env[s.result] = _Tile(t, buf, base, shape=shape)

    def subset(self, s: Subset):
        src = self.get(s, s.src)
        if not isinstance(src, _Tile):
            raise self.error(s, f"{s.src} is not a tile")
        if src.type != s.src_type:
            raise self.error(s, f"{s.src} is {src.type} but the subset says {s.src_type}")
        (r, c), (rows, cols) = [self.index(s, o) for o in s.offsets], s.sizes
        pt = src.type
        if pt.loc == "vec" and (rows > 1 and cols != pt.cols if pt.blayout == "row_major" else
                                cols > 1 and rows != pt.rows):
            raise self.error(s, f"a {rows}x{cols} subset of the {pt.rows}x{pt.cols} {pt.blayout} vec tile {s.src}: "
                                "PTOAS emits a subset as a tile of its own pitch, so a window narrower than its "
                                "parent's rows (columns) must be one row (column)")
        if isinstance(r, Each) or isinstance(c, Each):
            rv = r.v if isinstance(r, Each) else np.full(self.n, r, np.int64)
            cv = c.v if isinstance(c, Each) else np.full(self.n, c, np.int64)
            bad = (rv < 0) | (cv < 0) | (rv + rows > src.type.rows) | (cv + cols > src.type.cols)
            if bad.any():
                p = int(np.argmax(bad))
                raise self.error(s, f"rows {rv[p]}..{rv[p] + rows} cols {cv[p]}..{cv[p] + cols} fall outside the "
                                    f"{src.type.rows}x{src.type.cols} tile {s.src}")
            shapes = np.stack([[subset_valid(int(x), rows, src.shape[0]) for x in rv],
                               [subset_valid(int(y), cols, src.shape[1]) for y in cv]], axis=1)
            if not (shapes == shapes[0]).all():
                raise _Split(np.stack([rv, cv], axis=1))
            shape = tuple(int(v) for v in shapes[0])
            el = cv * src.pitch + rv if src.col_major else rv * src.pitch + cv
            base = src.base + el * src.dtype.itemsize
        else:
            if r < 0 or c < 0 or r + rows > src.type.rows or c + cols > src.type.cols:
                raise self.error(s, f"rows {r}..{r + rows} cols {c}..{c + cols} fall outside the "
                                    f"{src.type.rows}x{src.type.cols} tile {s.src}")
            shape = (subset_valid(r, rows, src.shape[0]), subset_valid(c, cols, src.shape[1]))
            base = src.base + src.element(r, c) * src.dtype.itemsize
        self.env[s.result] = _Tile(s.type, src.buf, base, src.pitch, shape)

    # -- instructions
    def record(self, step) -> None:
        """Add ``step`` (a function of the flat GM arrays) to the tape, if one is being recorded."""
        if self.tape is not None:
            self.tape.append(step)

    def instr(self, s: Instr):
        ins, outs = [self.get(s, n) for n in s.ins], [self.get(s, n) for n in s.outs]
        for name, value, declared in zip(s.ins + s.outs, ins + outs, s.in_types + s.out_types):
            if isinstance(value, _Tile) and value.type is not declared and value.type != declared or isinstance(
                    declared, ViewType) and (not isinstance(value, _Gm) or not _fits(value.shape, declared.shape)):
                raise self.error(s, f"{name} is {getattr(value, 'type', getattr(value, 'shape', value))} "
                                    f"but the instruction says {declared}")
        if s.op == "tload":
            return self.copy(s, ins[0], outs[0], load=True)
        if s.op == "tstore":
            return self.copy(s, outs[0], ins[0], load=False)
        if s.op == "tmov":
            if not all(isinstance(v, _Tile) for v in ins + outs):
                raise self.error(s, "operands must be tiles")
            src, dst = ins[0], outs[0]
            self.put(s, dst, self.converted(s, src, dst.dtype, src.read()))
            if self.tape is not None:
                read, write, dtype = src.reader(), dst.writer(), dst.dtype
                self.tape.append(lambda flats: write(read().astype(dtype)))
            return
        if s.op == "tsetval":
            if len(ins) != 2 or len(outs) != 1 or len(s.out_types) != 1:
                raise self.error(s, "takes (offset, value) and one tile")
            if not isinstance(outs[0], _Tile):
                raise self.error(s, "operands must be tiles")
            tile = outs[0]
            flat, at = self.cell(s, tile, s.out_types[0], self.index(s, s.ins[0]), tile.type.dtype)
            value = ins[1]
            if isinstance(value, (_Tile, _Gm, Vec)) or (not isinstance(value, Each) and np.ndim(value)):
                raise self.error(s, f"{s.ins[1]} is not a scalar")
            where = (np.arange(self.n), at)
            value = (value.v if isinstance(value, Each) else np.asarray(value)).astype(tile.dtype)
            flat[where] = value
            self.record(lambda flats: flat.__setitem__(where, value))
            return
        if s.op == "tscatter":
            return self.scatter(s, ins, outs)
        fn = SEMANTICS.get(s.op)
        if fn is None:
            raise self.error(s, f"no semantics for pto.{s.op}")
        for name, value in zip(s.outs, outs):
            if not isinstance(value, (_Tile, Vec)) and not (isinstance(value, np.ndarray) and value.ndim):
                raise self.error(s, f"destination {name} is neither a tile nor a vector")
        args, axes = [], []
        for v in ins:
            if isinstance(v, _Tile):
                args.append(v.read()), axes.append(0)
            elif isinstance(v, (Each, Vec)):
                args.append(v.v if isinstance(v, Each) else v.x), axes.append(0)
            elif isinstance(v, _Gm) and s.op in USER:     # a user's GM reader: the tensor as it is now
                shared = not isinstance(v.offset, np.ndarray)
                args.append(v.one(v.flat, v.offset) if shared else v.loader(self.n)(v.flat))
                axes.append(None if shared else 0)
            elif isinstance(v, _Gm):
                raise self.error(s, "a tensor view is not an operand")
            else:
                args.append(np.asarray(v)), axes.append(None)
        shapes = tuple((d.shape, d.dtype) if isinstance(d, _Tile) else (d.x.shape[1:], d.x.dtype) if isinstance(d, Vec)
                       else (d.shape, d.dtype) for d in outs)
        if 0 not in axes and any(isinstance(v, _Gm) for v in ins):    # GM differs between runs of a tape
            axes = [0 if isinstance(v, _Gm) else a for v, a in zip(ins, axes)]
            args = [np.broadcast_to(a, (self.n,) + a.shape) if isinstance(v, _Gm) else a for v, a in zip(ins, args)]
        axes, attrs = tuple(axes), s.attrs
        if s.op in USER:                            # a user's op sees the values of transposed L1 tiles
            attrs += (("zn", tuple(isinstance(v, _Tile) and zn(v.type) for v in ins + outs)),)
        key = (id(s), axes, tuple((a.shape, a.dtype) for a in args), shapes, self.x64)
        form = _FORMS.get(key)
        if form is None or form[0] is not s:
            specs = [jax.ShapeDtypeStruct(*shape) for shape in shapes]
            if len(_FORMS) > 1 << 16:              # it keeps the instructions alive: bounded
                _FORMS.clear()
            form = _FORMS[key] = (s, specs[0] if len(specs) == 1 else tuple(specs), [None])
        _, out, plan = form
        try:
            if 0 in axes:
                if plan[0] is None:
                    plan[0] = _vplanned(s.op, fn, args, axes, out, attrs)
                res = _vapply(plan[0], s.op, fn, args, axes, out, attrs, self.n)
            else:                                   # the same for every point: once
                res = jax.tree.map(lambda r: np.broadcast_to(np.asarray(r), (self.n,) + np.shape(r)),
                                   _apply(s.op, fn, args, out, attrs))
        except Exception as err:                   # noqa: BLE001 - a user's semantics may raise anything
            if s.op not in USER and not isinstance(err, (TypeError, ValueError, IndexError, KeyError)):
                raise
            raise self.error(s, f"pto.{s.op} failed: {type(err).__name__}: {err}") from err
        res = res if isinstance(res, tuple) else (res,)
        if len(res) != len(outs):
            raise self.error(s, f"{len(res)} results for {len(outs)} destinations")
        for name, d, r, (shape, dtype) in zip(s.outs, outs, res, shapes):
            r = np.asarray(r)
            if isinstance(d, _Tile):
                self.put(s, d, r)
            elif r.shape[1:] != shape or r.dtype != dtype:
                raise self.error(s, f"result {r.dtype.name}{list(r.shape[1:])} does not fit {name}, "
                                    f"{np.dtype(dtype).name}{list(shape)}")
            else:
                self.env[name] = Vec(r.copy())
                self.tape = None                   # vectors are rebound, not kept in buffers: no tape
        if self.tape is not None:
            self.tape.append(self.replay_instr(s, fn, ins, args, axes, out, plan, outs, attrs))

    def scatter(self, s, ins, outs):
        """``tscatter``: element (i, j) of the source's storage, over the indices' valid region (past the
        source's valid rows too, as pto-isa reads ``src`` at ``(i, j)``), into element ``indexes[i, j]`` of
        the destination's storage (counted from its first element, whatever the layout: pto-isa's
        ``dst.data()[index]``); the rest of the destination is kept. An index outside the destination's
        span, or indices past the source's static shape, are an error."""
        if len(ins) != 2 or len(outs) != 1 or not all(isinstance(t, _Tile) for t in (*ins, *outs)):
            raise self.error(s, "takes a source and an index tile and writes one tile")
        (src, at), (dst,) = ins, outs
        if src.dtype != dst.dtype or at.dtype.kind != "i" or src.col_major:
            raise self.error(s, f"scatters {src.dtype.name} by {at.dtype.name} into {dst.dtype.name}")
        rows, cols = at.shape
        if src.type.rows < rows or src.type.cols < cols:
            raise self.error(s, f"the indices' valid region {[rows, cols]} reaches past the source's "
                                f"{[src.type.rows, src.type.cols]} tile")
        source = _Tile(src.type, src.buf, src.base, src.pitch, (rows, cols)).reader()
        positions, n = at.reader(), self.n

        def step(_flats=None):
            index = np.asarray(positions()).reshape(n, -1).astype(np.int64)
            bad = index[(index < 0) | (index >= dst.span())]
            if bad.size:
                raise self.error(s, f"index {int(bad[0])} is outside the destination's {dst.span()} elements")
            flat, first = dst.cells(0)
            values = np.asarray(source()).reshape(n, -1)
            flat[np.arange(n)[:, None], first[:, None] + index] = values
        step()
        self.record(step)

    def replay_instr(self, s, fn, ins, args, axes, out, plan, outs, attrs):
        """The tape's step for a semantics instruction: its operands read and its results written
        through views of the tiles' buffers."""
        readers = [(lambda flats, r=v.reader(): r()) if isinstance(v, _Tile) else
                   (lambda flats, v=v._detached(): v.one(flats[v.param], v.offset)) if isinstance(v, _Gm) and ax is None else
                   (lambda flats, p=v.param, load=v.loader(self.n): load(flats[p])) if isinstance(v, _Gm) else
                   (lambda flats, a=a: a) for v, a, ax in zip(ins, args, axes)]
        writers = [d.writer() for d in outs]
        op, n = s.op, self.n
        if 0 not in axes:                          # constant operands: the results are too
            done = [np.array(d.read()) for d in outs]
            return lambda flats: [w(r) for w, r in zip(writers, done)]
        single = len(outs) == 1

        def step(flats):
            res = _vapply(plan[0], op, fn, [r(flats) for r in readers], axes, out, attrs, n)
            if single:
                writers[0](np.asarray(res[0] if isinstance(res, tuple) else res))
            else:
                for w, r in zip(writers, res):
                    w(np.asarray(r))
        if op not in USER:
            return step
        func = self.func

        def user_step(flats):                      # a user's semantics may raise anything: named as by run()
            try:
                step(flats)
            except Exception as err:               # noqa: BLE001
                raise _error(func, s, f"pto.{op} failed: {type(err).__name__}: {err}") from err
        return user_step

    def converted(self, s, src: _Tile, dtype, value):
        if src.dtype != dtype and src.type.loc != "acc":
            raise self.error(s, f"dtype {src.dtype.name} does not match {np.dtype(dtype).name}")
        return value.astype(dtype)

    def put(self, s, dst: _Tile, value):
        if value.shape[1:] != tuple(dst.shape) or value.dtype != dst.dtype:
            raise self.error(s, f"result {value.dtype.name}{list(value.shape[1:])} does not fit the destination's "
                                f"valid region {dst.dtype.name}{list(dst.shape)}")
        dst.write(value)

    def copy(self, s, window, tile, load: bool):
        if not isinstance(window, _Gm) or not isinstance(tile, _Tile):
            raise self.error(s, "needs a partition view and a tile")
        size = int(np.prod(window.shape))
        if size != tile.shape[0] * tile.shape[1]:
            raise self.error(s, f"window {list(window.shape)} and valid region {list(tile.shape)} "
                                "hold different numbers of elements")
        if tile.col_major and (window.shape[-2] if len(window.shape) > 1 else 1) != tile.shape[0]:
            raise self.error(s, f"a col_major tile's {tile.shape[0]} valid rows must be the window's "
                                f"second-to-last dim (pto-isa moves a column-major tile's rows along it), but the "
                                f"window is {list(window.shape)}")
        atomic = dict(s.attrs).get("atomicType", "atomic_none")
        n, k = self.n, window.param
        if load:
            if window.dtype != tile.dtype or atomic != "atomic_none":
                raise self.error(s, f"GM {window.dtype.name} does not match the tile's {tile.dtype.name}"
                                 if atomic == "atomic_none" else f"a load has no {atomic}")
            load_, shape = window.loader(n), (n,) + tile.shape
            tile.write(load_(window.flat).reshape(shape))
            if self.tape is not None:
                write = tile.writer()
                self.tape.append(lambda flats: write(load_(flats[k]).reshape(shape)))
            return
        value = self.converted(s, tile, window.dtype, tile.read())
        if atomic == "atomic_add":                 # GM += tile point after point, as tadd rounds
            store = functools.partial(_add_into, window, np.broadcast_to(window.offset, (n,)))
        elif atomic != "atomic_none":
            raise self.error(s, f"unknown atomicType {atomic!r}")
        else:
            store = window.storer(n)
        read, dtype, shape = tile.reader(), window.dtype, (n,) + window.shape
        store(window.flat, value.reshape(shape))
        self.record(lambda flats: store(flats[k], read().astype(dtype).reshape(shape)))


def _add_into(window: _Gm, offsets, flat, values) -> None:
    """An ``atomic_add`` store: GM += each point's values in point order, as ``tadd`` rounds."""
    for p, offset in enumerate(offsets):
        target = window.one(flat, int(offset))
        target[...] = np.asarray(_apply("tadd", SEMANTICS["tadd"], [np.array(target), values[p]], None, ()))


_Run.DISPATCH = {Const: _Run.const, Arith: _Run.arith, View: _Run.view, Tile: _Run.tile,
                   Subset: _Run.subset, Scalar: _Run.scalar, For: _Run.for_, If: _Run.if_,
                   Instr: _Run.instr}


def run(module, function_name: str, args: list, block_idx: int = 0) -> list:
    """Run ``function_name`` of ``module`` (text or :class:`Module`) for one block on NumPy GM
    ``args`` (pointer parameters in order); ``tstore`` writes into them. Returns ``args``."""
    module = parse(module) if isinstance(module, str) else module
    func = module.function(function_name)
    _Run(func, args, np.array([block_idx], np.int64)).block(func.body)
    return args


def run_grid(module, function_name: str, args: list, blocks: int) -> list:
    """:func:`run` for block indices ``0 .. blocks-1`` in order."""
    module = parse(module) if isinstance(module, str) else module
    for b in range(blocks):
        run(module, function_name, args, b)
    return args


__all__ = ["Arith", "Const", "Each", "For", "Function", "If", "Instr", "Module", "PtrType", "Scalar", "Stmt", "Subset",
           "Tile", "TileType", "Vec", "VectorType", "View", "ViewType", "parse", "run", "run_grid", "subset_type",
           "subset_valid"]
