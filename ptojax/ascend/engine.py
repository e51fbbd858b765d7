"""An eager engine for the real PTO-AS text instruction selection prints (:mod:`ptojax.ascend.isel`,
``AscendKernel.pto()``): :func:`parse` (:mod:`ptojax.ascend.engine_parse`, the statements it reads
and the dataclasses it builds) and an interpreter.

``run(module, name, args, block_idx)`` executes one function for one block on host NumPy arrays
(the GM arguments, pointer parameters in order; ``tstore`` updates them in place);
``run_grid(..., blocks)`` runs block indices ``0 .. blocks-1`` in turn. The model:

* every ``alloc_tile`` owns a zeroed byte buffer of ``rows*cols*itemsize`` bytes; an ``addr`` is
  accepted and ignored (tiles never overlap here, so PTOAS-planned aliasing is not modelled);
* a ``vec`` tile is that buffer as a (rows, cols) array of its dtype, ``col_major`` meaning element
  (r, c) at ``c*rows + r``; ``treshape`` reinterprets the same bytes with the new type, so an R×1
  col_major alias of a 1×R row_major tile sees the same elements in order;
* ``subset %t[r, c] sizes [R, C]`` is a window of ``t``'s buffer at (r, c) with ``t``'s pitch (a
  ``memref.subview``), inside ``t``'s rows and cols; its valid region is PTOAS's
  (:func:`~ptojax.ascend.engine_parse.subset_valid` of ``t``'s valid region at run time), its
  type the one PTOAS infers (``?`` where an offset is not a constant);
* ``tgetval`` / ``tsetval`` read / write the element ``offset`` elements past the tile's first one
  (pto-isa's ``Tile::GetValue``: ``*(data + offset)``, whatever the layout), inside the tile's span;
  ``load_scalar`` reads element ``offset`` of a GM pointer;
* ``arith`` on ``index`` is on Python ints; on ``iN`` it wraps to N bits (a 0-d array of the
  dtype); ``cmpi`` gives an ``i1``; ``scf.if`` runs one of its blocks;
* cube tiles (mat/left/right/acc/bias) are plain row-major logical arrays: fractal layout is the
  hardware's business; ``tmov`` copies valid regions (an ``acc`` source converts, as FIXPIPE does);
* a tensor view is a strided NumPy view of the flat GM array (``strides = [1, R]`` with
  ``layout<dn>`` is the transpose); ``tload``/``tstore`` copy between a window and a tile's valid
  region (equal element counts; an ``acc`` tile's store rounds to the GM dtype to nearest; an
  ``atomicType = atomic_add`` store adds to GM as ``tadd`` does);
* every other instruction is ``tile_semantics.SEMANTICS[mnemonic]`` on the valid regions (scalars
  0-d, ``out=`` the destinations' ``ShapeDtypeStruct``s), its results written into the
  destinations (tiles, or a ``vector`` output such as ``tmrgsort``'s executed counts, rebound).

Every fault is a :class:`PtoExecutionError` naming the function, the line and the instruction.
"""
from __future__ import annotations

import functools

import jax
import numpy as np

from . import npeval
from .engine_parse import (DTYPES, Arith, Const, For, Function, If, Instr, Module, PtrType, Scalar, Stmt, Subset,
                           Tile, TileType, VectorType, View, ViewType, parse, subset_type, subset_valid)
from .interpreter import PtoExecutionError
from .tile_semantics import SEMANTICS

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


# ------------------------------------------------------------------------------------ interpreter
def _fits(sizes, dims) -> bool:
    """Run-time ``sizes`` agree with a view type's ``dims`` (``None``: a ``?`` dim, any size)."""
    return len(sizes) == len(dims) and all(d is None or n == d for n, d in zip(sizes, dims))


def alias_valid(shape, dtype, t: TileType):
    """The valid region of a ``treshape`` alias of type ``t`` (a ``?`` dim) over a source whose valid
    region ``shape`` holds ``dtype`` elements: the same bytes (None where they do not fill whole lines)."""
    size, item = shape[0] * shape[1] * np.dtype(dtype).itemsize, DTYPES[t.dtype].itemsize
    known = t.v_col if t.v_row is None else t.v_row
    if known is None or size % item or (size // item) % max(known, 1):
        return None
    n = size // item // max(known, 1)
    return (n, known) if t.v_row is None else (known, n)


class _ByteTile:
    """A tile: its type over a byte buffer it may share with its ``treshape`` aliases and subsets —
    element (r, c) at ``base + (r * pitch + c) * itemsize`` bytes (``col_major`` vec tiles:
    ``c * pitch + r``); ``shape`` is the valid region at run time (the type may say ``?``)."""

    def __init__(self, type_: TileType, buf=None, base: int = 0, pitch: int | None = None, shape=None):
        self.type, self.dtype = type_, DTYPES[type_.dtype]
        self.col_major = type_.loc == "vec" and type_.blayout == "col_major"
        self.pitch = pitch or (type_.rows if self.col_major else type_.cols)
        self.base, self.shape = base, shape or (type_.v_row, type_.v_col)
        self.buf = np.zeros(type_.rows * type_.cols * self.dtype.itemsize, np.uint8) if buf is None else buf

    def span(self) -> int:
        """Elements from the first to one past the last of the tile's rows x cols."""
        t = self.type
        major, minor = (t.cols, t.rows) if self.col_major else (t.rows, t.cols)
        return (major - 1) * self.pitch + minor

    def element(self, r: int, c: int) -> int:
        """The element offset of (r, c) from the tile's first element."""
        return c * self.pitch + r if self.col_major else r * self.pitch + c

    def valid(self) -> np.ndarray:
        item = self.dtype.itemsize
        strides = (item, self.pitch * item) if self.col_major else (self.pitch * item, item)
        return np.ndarray(self.shape, self.dtype, self.buf, self.base, strides)

    def cell(self, offset: int) -> np.ndarray:
        """Element ``offset`` past the first (``Tile::GetValue`` / ``SetValue``), as a 1-element view."""
        return np.ndarray((1,), self.dtype, self.buf, self.base + offset * self.dtype.itemsize)


class _Run:
    def __init__(self, func: Function, args, block_idx: int):
        self.func, self.block_idx, self.env = func, block_idx, {}
        if len(args) != len(func.params):
            raise self.error(None, f"expects {len(func.params)} arguments ({[n for n, _ in func.params]}), "
                                   f"got {len(args)}")
        for (name, type_), arg in zip(func.params, args):
            if isinstance(type_, PtrType):
                if type_.dtype == "i8" and isinstance(arg, np.ndarray) and arg.dtype == np.bool_:
                    arg = arg.view(np.int8)            # booleans are bytes in GM: selection prints i1 as i8
                if not isinstance(arg, np.ndarray) or arg.dtype != DTYPES[type_.dtype] or not arg.flags.c_contiguous:
                    raise self.error(None, f"argument {name}: {type_.dtype} pointer needs a C-contiguous "
                                           f"{type_.dtype} array, got {getattr(arg, 'dtype', type(arg).__name__)}")
                self.env[name] = arg.reshape(-1)
            else:
                self.env[name] = int(arg) if type_ == "index" else np.asarray(arg, DTYPES[type_])

    def error(self, stmt, message):
        where = f"line {stmt.line}: " if stmt else f"line {self.func.line}: "
        text = f" in `{stmt.text[:160]}`" if stmt else ""
        return PtoExecutionError(f"pto engine: function '{self.func.name}' {where}{message}{text}")

    def get(self, stmt, name, kind=None):
        if isinstance(name, int):
            value = name
        elif name not in self.env:
            raise self.error(stmt, f"{name} is not defined")
        else:
            value = self.env[name]
        if kind is int:
            if isinstance(value, _ByteTile) or np.ndim(value):
                raise self.error(stmt, f"{name} is not an index")
            return int(value)
        if kind is not None and not isinstance(value, kind):
            raise self.error(stmt, f"{name} is not a {'tile' if kind is _ByteTile else 'tensor view'}")
        return value

    def block(self, body):
        for stmt in body:
            if type(stmt) is Stmt:                # return
                return
            self.DISPATCH[type(stmt)](self, stmt)

    def const(self, s: Const):
        if isinstance(s.value, np.ndarray):
            self.env[s.result] = s.value.copy()
        else:
            self.env[s.result] = s.value if s.type == "index" else np.asarray(s.value, DTYPES.get(s.type, np.int64))

    def arith(self, s: Arith):
        if s.op == "get_block_idx":
            self.env[s.result] = _typed(self.block_idx, s.type)
            return
        vals = [self.get(s, o, int) for o in s.operands]
        if s.op == "cmpi":                         # signed or unsigned in the operands' width
            w = _bits(s.type)
            if s.pred[0] == "u":
                vals = [v % 2 ** w for v in vals]
            self.env[s.result] = np.bool_(_CMP[s.pred.lstrip("su")](*vals))
            return
        if s.op in ("divsi", "remsi") and vals[1] == 0:
            raise self.error(s, "division by zero")
        self.env[s.result] = _typed(vals[0] if s.op == "index_cast" else _ARITH[s.op](*vals), s.type)

    def if_(self, s: If):
        cond = self.get(s, s.cond)
        if isinstance(cond, _ByteTile) or np.ndim(cond) or np.asarray(cond).dtype != np.bool_:
            raise self.error(s, f"condition {s.cond} is not an i1")
        self.block(s.then if bool(cond) else s.orelse)

    def scalar(self, s: Scalar):
        offset = self.get(s, s.offset, int)
        if s.op == "load_scalar":
            ptr = self.get(s, s.src)
            if not isinstance(s.src_type, PtrType) or s.src_type.dtype != s.type or not (
                    s.src in dict(self.func.params) and isinstance(ptr, np.ndarray) and ptr.dtype == DTYPES[s.type]):
                raise self.error(s, f"{s.src} is not a {s.type} pointer parameter")
            if not 0 <= offset < ptr.size:
                raise self.error(s, f"offset {offset} is outside the {ptr.size}-element tensor")
            self.env[s.result] = np.asarray(ptr[offset]).copy()
            return
        self.env[s.result] = np.asarray(self.cell(s, self.get(s, s.src, _ByteTile), s.src_type, offset, s.type)[0])

    def cell(self, s, tile: _ByteTile, declared, offset: int, dtype: str):
        """``tgetval`` / ``tsetval``'s element of ``tile``: checked, as a 1-element view."""
        if tile.type != declared:
            raise self.error(s, f"the tile is {tile.type} but the instruction says {declared}")
        if tile.type.loc != "vec" or tile.type.dtype != dtype:
            raise self.error(s, f"needs a vec tile of {dtype}, got a {tile.type.loc} tile of {tile.type.dtype}")
        if not 0 <= offset < tile.span():
            raise self.error(s, f"offset {offset} is outside the tile's {tile.span()} elements")
        return tile.cell(offset)

    def view(self, s: View):
        src = self.get(s, s.src, np.ndarray)
        a, b = [self.get(s, v, int) for v in s.a], [self.get(s, v, int) for v in s.b]
        if s.op == "make_tensor_view":         # a strided view of the flat GM array (dn: the transpose)
            if src.dtype != DTYPES[s.type.dtype] or not _fits(a, s.type.shape) or len(b) != len(a):
                raise self.error(s, f"shape {a} strides {b} over a {src.dtype.name} pointer do not match {s.type}")
            reach = sum((n - 1) * st for n, st in zip(a, b)) if all(a) else -1
            if min(b, default=0) < 0 or reach >= src.size:
                raise self.error(s, f"view shape {a} strides {b} reaches past the {src.size}-element tensor")
            self.env[s.result] = np.lib.stride_tricks.as_strided(src, a, [st * src.itemsize for st in b])
            return
        if len(a) != src.ndim or len(b) != src.ndim or any(
                o < 0 or n < 0 or o + n > d for o, n, d in zip(a, b, src.shape)):
            raise self.error(s, f"window offsets {a} sizes {b} fall outside the tensor {list(src.shape)}")
        if not _fits(b, s.type.shape):
            raise self.error(s, f"window sizes {b} do not match {s.type}")
        self.env[s.result] = src[tuple(slice(o, o + n) for o, n in zip(a, b)) or ...]   # 0-d: still a view

    def tile(self, s: Tile):
        t, buf, base, shape = s.type, None, 0, None
        if s.src is None and (t.v_row is None or t.v_col is None):
            valid = s.valid or (None, None)
            if any(d is None and v is None for v, d in zip(valid, (t.v_row, t.v_col))):
                raise self.error(s, "a dynamic (?) valid dim needs its valid_row / valid_col operand")
            shape = tuple(self.get(s, v, int) if d is None else d for v, d in zip(valid, (t.v_row, t.v_col)))
        elif s.src is not None and (t.v_row is None or t.v_col is None):   # an alias keeps the source's bytes
            src = self.get(s, s.src, _ByteTile)
            shape = alias_valid(src.shape, src.dtype, t)
            if shape is None:
                raise self.error(s, f"cannot reshape the {src.shape[0]}x{src.shape[1]} valid region to {t}")
        v_row, v_col = shape or (t.v_row, t.v_col)
        if not (0 <= v_row <= t.rows and 0 <= v_col <= t.cols):
            raise self.error(s, f"valid region {v_row}x{v_col} exceeds the tile {t.rows}x{t.cols}")
        if s.src is not None:
            src = self.get(s, s.src, _ByteTile)
            buf, base, size = src.buf, src.base, t.rows * t.cols * DTYPES[t.dtype].itemsize
            contiguous = src.type.rows == 1 if not src.col_major else src.type.cols == 1
            if src.pitch != (src.type.rows if src.col_major else src.type.cols) and not contiguous:
                raise self.error(s, f"{s.src} is a strided window (pitch {src.pitch}); it has no one byte layout")
            if base + size > buf.size:
                raise self.error(s, f"{t.rows}x{t.cols} {t.dtype} does not fit the "
                                    f"{buf.size - base}-byte tile {s.src}")
        self.env[s.result] = _ByteTile(t, buf, base, shape=shape)

    def subset(self, s: Subset):
        src = self.get(s, s.src, _ByteTile)
        if src.type != s.src_type:
            raise self.error(s, f"{s.src} is {src.type} but the subset says {s.src_type}")
        (r, c), (rows, cols) = [self.get(s, o, int) for o in s.offsets], s.sizes
        if r < 0 or c < 0 or r + rows > src.type.rows or c + cols > src.type.cols:
            raise self.error(s, f"rows {r}..{r + rows} cols {c}..{c + cols} fall outside the "
                                f"{src.type.rows}x{src.type.cols} tile {s.src}")
        shape = (subset_valid(r, rows, src.shape[0]), subset_valid(c, cols, src.shape[1]))
        base = src.base + src.element(r, c) * src.dtype.itemsize
        self.env[s.result] = _ByteTile(s.type, src.buf, base, src.pitch, shape)

    def for_(self, s: For):
        lo, hi, step = (self.get(s, v, int) for v in (s.lo, s.hi, s.step))
        if step <= 0:
            raise self.error(s, f"loop step {step} is not positive")
        for k in range(lo, hi, step):
            self.env[s.var] = k
            self.block(s.body)

    def instr(self, s: Instr):
        ins, outs = [self.get(s, n) for n in s.ins], [self.get(s, n) for n in s.outs]
        for name, value, declared in zip(s.ins + s.outs, ins + outs, s.in_types + s.out_types):
            if isinstance(value, _ByteTile) and value.type != declared or isinstance(declared, ViewType) and (
                    not isinstance(value, np.ndarray) or not _fits(value.shape, declared.shape)):
                raise self.error(s, f"{name} is {getattr(value, 'type', getattr(value, 'shape', value))} "
                                    f"but the instruction says {declared}")
        if s.op == "tload":
            return self.copy(s, ins[0], outs[0], window_from=True)
        if s.op == "tstore":
            return self.copy(s, outs[0], ins[0], window_from=False)
        if s.op == "tmov":
            src, dst = self.tiles(s, ins + outs)
            return self.put(s, dst, self.converted(s, src, dst.dtype, src.valid()))
        if s.op == "tsetval":                      # tsetval ins(%offset, %value : index, T) outs(%tile : T)
            if len(ins) != 2 or len(outs) != 1 or len(s.out_types) != 1:
                raise self.error(s, "takes (offset, value) and one tile")
            tile, = self.tiles(s, outs)
            cell = self.cell(s, tile, s.out_types[0], self.get(s, s.ins[0], int), tile.type.dtype)
            if isinstance(ins[1], _ByteTile) or np.ndim(ins[1]):
                raise self.error(s, f"{s.ins[1]} is not a scalar")
            cell[0] = np.asarray(ins[1]).astype(tile.dtype)
            return
        fn = SEMANTICS.get(s.op)
        if fn is None:
            raise self.error(s, f"no semantics for pto.{s.op}")
        for name, value in zip(s.outs, outs):
            if not isinstance(value, _ByteTile) and not (isinstance(value, np.ndarray) and value.ndim):
                raise self.error(s, f"destination {name} is neither a tile nor a vector")
        args = [np.array(v.valid()) if isinstance(v, _ByteTile) else np.asarray(v) for v in ins]
        specs = [jax.ShapeDtypeStruct(d.valid().shape if isinstance(d, _ByteTile) else d.shape, d.dtype) for d in outs]
        try:
            res = _apply(s.op, fn, args, specs[0] if len(specs) == 1 else tuple(specs), s.attrs)
        except (TypeError, ValueError, IndexError, KeyError) as err:
            raise self.error(s, f"pto.{s.op} failed: {type(err).__name__}: {err}") from err
        res = res if isinstance(res, tuple) else (res,)
        if len(res) != len(outs):
            raise self.error(s, f"{len(res)} results for {len(outs)} destinations")
        for name, d, r in zip(s.outs, outs, res):
            r = np.asarray(r)
            if isinstance(d, _ByteTile):
                self.put(s, d, r)
            elif r.shape != d.shape or r.dtype != d.dtype:
                raise self.error(s, f"result {r.dtype.name}{list(r.shape)} does not fit {name}, "
                                    f"{d.dtype.name}{list(d.shape)}")
            else:
                self.env[name] = r.copy()          # a vector SSA value: rebound, never written through

    def tiles(self, s, values):
        if not all(isinstance(v, _ByteTile) for v in values):
            raise self.error(s, "operands must be tiles")
        return values

    def converted(self, s, src: _ByteTile, dtype, value):
        if src.dtype != dtype and src.type.loc != "acc":
            raise self.error(s, f"dtype {src.dtype.name} does not match {np.dtype(dtype).name}")
        return value.astype(dtype)                  # acc (FIXPIPE): round to nearest

    def put(self, s, dst: _ByteTile, value):
        region = dst.valid()
        if value.shape != region.shape or value.dtype != dst.dtype:
            raise self.error(s, f"result {value.dtype.name}{list(value.shape)} does not fit the destination's "
                                f"valid region {dst.dtype.name}{list(region.shape)}")
        region[...] = value

    def copy(self, s, window, tile, window_from: bool):
        if not isinstance(window, np.ndarray) or not isinstance(tile, _ByteTile):
            raise self.error(s, "needs a partition view and a tile")
        region = tile.valid()
        if window.size != region.size:
            raise self.error(s, f"window {list(window.shape)} and valid region {list(region.shape)} "
                                "hold different numbers of elements")
        atomic = dict(s.attrs).get("atomicType", "atomic_none")
        if window_from:
            if window.dtype != tile.dtype or atomic != "atomic_none":
                raise self.error(s, f"GM {window.dtype.name} does not match the tile's {tile.dtype.name}"
                                 if atomic == "atomic_none" else f"a load has no {atomic}")
            region[...] = window.reshape(region.shape)
            return
        value = self.converted(s, tile, window.dtype, region).reshape(window.shape)
        if atomic == "atomic_add":                 # GM += tile, in the GM dtype as the vector add rounds
            value = np.asarray(_apply("tadd", SEMANTICS["tadd"], [np.array(window), value], None, ()))
        elif atomic != "atomic_none":
            raise self.error(s, f"unknown atomicType {atomic!r}")
        window[...] = value


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


def _apply(op: str, fn, args, out, attrs):
    """``fn(*args, out=out, **attrs)`` as :func:`_plan` decided for these operand shapes."""
    try:
        key = (op, tuple(attrs), out, tuple((a.shape, a.dtype) for a in args),
               jax.config.read("jax_enable_x64"))   # x64: texp/tlog/trsqrt in double (another plan)
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


_Run.DISPATCH = {Const: _Run.const, Arith: _Run.arith, View: _Run.view, Tile: _Run.tile, Subset: _Run.subset,
                 Scalar: _Run.scalar, For: _Run.for_, If: _Run.if_, Instr: _Run.instr}


def run(module, function_name: str, args: list, block_idx: int = 0) -> list:
    """Run ``function_name`` of ``module`` (text or :class:`Module`) for one block on NumPy GM
    ``args`` (pointer parameters in order); ``tstore`` writes into them. Returns ``args``."""
    module = parse(module) if isinstance(module, str) else module
    runner = _Run(module.function(function_name), args, block_idx)
    runner.block(runner.func.body)
    return args


def run_grid(module, function_name: str, args: list, blocks: int) -> list:
    """:func:`run` for block indices ``0 .. blocks-1`` in order."""
    module = parse(module) if isinstance(module, str) else module
    for b in range(blocks):
        run(module, function_name, args, b)
    return args


__all__ = ["Arith", "Const", "For", "Function", "If", "Instr", "Module", "PtrType", "Scalar", "Stmt", "Subset", "Tile",
           "TileType", "VectorType", "View", "ViewType", "parse", "run", "run_grid", "subset_type", "subset_valid"]
