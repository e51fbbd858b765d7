"""PTO kernels compiled to host code: one straight-line Python function per kernel.

The interpreter (``interpreter.py``) walks a kernel's statements at every block instance it runs:
it looks each statement up, resolves its operands by name, makes the windows' slices and the tiles'
views, and checks every value. For a kernel the backend compiled (verified when it was compiled),
:func:`host_kernel` does that walk once and prints a Python function: index arithmetic as Python
expressions, windows as slices, tile views made once per core, each compute instruction one call of
its NumPy semantics (``semantics.py``; where that semantics is one NumPy operation — float
arithmetic and math, a comparison, a select, a broadcast, a float matmul, cast or sum / max / min —
the operation inline, writing the destination). Checks whose outcome the kernel's text decides (a window
inside its tensor, a load of the tile's shape) are decided once. The function runs every grid point
of a task (or of several ready tasks) in one call. Running it is running the interpreter, bit for bit
and error for error (the same checks, the same messages; ``tests/test_hostcode.py``), without the
walk. ``HostKernel.source`` is the function's text.

A kernel the generator cannot take as a whole (an instruction without NumPy semantics, a tile that
does not fit its buffer) has no host code: the interpreter runs it and reports the error as it runs.
"""
from __future__ import annotations

import math
import re

import numpy as np

from ..errors import PtoError
from ..lowering.memory import CoreMemory
from . import asm
from .interpreter import (_BASE, Core, PtoExecutionError, alloc_error, fill_error, results_error, run,
                          semantic_params, statement_error, store_error, view_error, window_error)
from .semantics import (ACCUMULATOR, BF16, BOOL, EXACT_F32_TERMS, F16, F32, FLOAT, I8, I32, INT, SEMANTICS,
                        mscatter_into)


class HostKernel:
    """A kernel as a Python function of (a core's tile views, grid points, GM arrays)."""

    def __init__(self, kernel: asm.Kernel, source: str, namespace: dict, allocs: list):
        self.kernel, self.source, self.allocs = kernel, source, allocs
        exec(compile(source, f"<pto host code: {kernel.name}>", "exec"), namespace)   # noqa: S102 - our own text
        self.fn = namespace["run"]
        self.n_index = sum(t == "index" for _, t in kernel.params)
        self.n_ptr = len(kernel.params) - self.n_index

    def views(self, core: Core) -> tuple:
        """The kernel's tiles as views of ``core``'s buffers, made once per core."""
        views = core.views.get(self)
        if views is None:
            views = core.views[self] = tuple(_tile_view(core, t, addr) for _, t, addr in self.allocs)
        return views

    def __call__(self, core: Core, tiles, arrays) -> None:
        """Run the kernel at each grid point of ``tiles`` in turn, on ``core`` with GM ``arrays``."""
        if len(tiles[0]) != self.n_index or len(arrays) != self.n_ptr:   # the interpreter's message (or leniency)
            for index in tiles:
                run(self.kernel, index, arrays, core, verified=True)
            return
        self.fn(self.views(core), tiles, *arrays)


def _tile_view(core: Core, t: asm.TileBuf, addr: int) -> np.ndarray:
    raw = core.buffers[t.loc][addr:addr + t.rows * t.cols * t.np_dtype.itemsize]
    return raw.view(t.np_dtype).reshape(t.rows, t.cols)[:t.v_row, :t.v_col]


class _Errors:
    """The interpreter's errors, raised from host code by statement number."""

    def __init__(self, kernel: asm.Kernel, stmts: list):
        self.kernel, self.stmts = kernel, stmts

    def fail(self, k, message):
        raise statement_error(self.kernel, self.stmts[k], message)

    def view(self, k, gm):
        self.fail(k, view_error(gm, self.stmts[k].type))

    def window(self, k, offsets, sizes, shape):
        self.fail(k, window_error(offsets, sizes, shape))

    def store(self, k, src, dst):
        self.fail(k, store_error(src.dtype, src.shape, dst.dtype, dst.shape))

    def fill(self, k, j, value):
        value, tile = np.asarray(value), self.stmts[k].outs[j].type
        self.fail(k, fill_error(tile, value.dtype, value.shape, value.size, tile.v_row * tile.v_col))

    def compute(self, k, err):
        if isinstance(err, PtoError):
            raise err
        self.fail(k, f"{type(err).__name__}: {err}")

    def results(self, k, result, n):
        results = result if isinstance(result, (tuple, list)) else (result,)
        if len(results) != n:
            self.fail(k, results_error(results, n))
        return tuple(np.asarray(r) for r in results)


# Instructions whose float32 semantics is exactly this NumPy ufunc. On float16 / bfloat16 their
# semantics is the ufunc on the operands widened to float32, rounded once to the destination's dtype
# (NumPy's own float16 loops are not that: they pick other NaN payloads).
_UFUNCS = {"tadd": "add", "tsub": "subtract", "tmul": "multiply", "tdiv": "divide", "tmax": "maximum",
           "tmin": "minimum", "texp": "exp", "tlog": "log", "tsqrt": "sqrt", "ttanh": "tanh", "tround": "rint",
           "tabs": "absolute", "tneg": "negative", "tpow": "power"}
_INTEGER_UFUNCS = {"tadd", "tsub", "tmul", "tmax", "tmin", "tabs", "tneg"}   # on integers too: they wrap alike
# Float instructions whose semantics is this NumPy expression of their float32 operands ({0}, {1}, ...:
# the semantics' own steps, in its order), rounded once to the destination's dtype.
_EXPRESSIONS = {
    "trsqrt": "_np.float32(1) / _np.sqrt({0})", "trecip": "_np.float32(1) / {0}",
    "tsigmoid": "_np.float32(1) / (_np.float32(1) + _np.exp(-{0}))",
    "tsilu": "_np.multiply({0}, _np.float32(1) / (_np.float32(1) + _np.exp(-{0})))",
    "trelu": "_np.maximum({0}, _np.float32(0))", "tclip": "_np.minimum(_np.maximum({0}, {1}), {2})",
}
_ARITY = {name: len(set(re.findall(r"\{\d\}", text))) for name, text in _EXPRESSIONS.items()}
_REDUCE = {"tsum": "add", "tamax": "maximum", "tamin": "minimum"}     # float semantics: the ufunc's reduce
_COMPARE = {"teq": "equal", "tne": "not_equal", "tlt": "less", "tle": "less_equal", "tgt": "greater",
            "tge": "greater_equal"}


def _squeezed(shape) -> tuple:
    """``shape`` without its leading 1s: shapes equal so broadcast alike, right-aligned."""
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


class _Unsupported(Exception):
    """The generator does not take this kernel: the interpreter runs it."""


class _Writer:
    def __init__(self, kernel: asm.Kernel, memory: CoreMemory):
        self.kernel, self.memory = kernel, memory
        self.lines: list[str] = []
        self.stmts: list = []                           # statement number -> statement (for errors)
        self.names: dict[str, str] = {}                 # SSA name -> Python expression
        self.tiles: dict[str, asm.TileBuf] = {}         # SSA name -> its tile type
        self.static: dict[str, tuple] = {}              # SSA name of a view -> (shape, dtype) known now
        self.allocs: list = []
        self.ns = {"_np": np, "_nd": np.ndarray, "_asarray": np.asarray, "_scatter": mscatter_into}

    def const(self, value, stem="K") -> str:
        name = f"_{stem}{len(self.ns)}"
        self.ns[name] = value
        return name

    def var(self, name: str) -> str:
        if name not in self.names:
            raise _Unsupported(f"{name} is used before it is defined")
        return self.names[name]

    def define(self, name: str) -> str:
        py = "v_" + re.sub(r"\W", "_", name.lstrip("%"))
        self.names[name] = py
        return py

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def number(self, stmt) -> int:
        self.stmts.append(stmt)
        return len(self.stmts) - 1

    # ------------------------------------------------------------------------------------- walk
    def body(self, body, depth):
        for stmt in body:
            kind = type(stmt)
            if kind is asm.Arith:
                op = "+" if stmt.op == "addi" else "*"
                self.emit(depth, f"{self.define(stmt.name)} = {self.var(stmt.lhs)} {op} {self.var(stmt.rhs)}")
            elif kind is asm.Const:
                value = stmt.value if stmt.type == "index" else np.asarray(stmt.value, asm.DTYPES[stmt.type])
                self.names[stmt.name] = repr(value) if stmt.type == "index" else self.const(value, "C")
            elif kind is asm.MakeView:
                self.make_view(stmt, depth)
            elif kind is asm.PartitionView:
                self.partition(stmt, depth)
            elif kind is asm.Alloc:
                self.alloc(stmt)
            elif kind is asm.For:
                bounds = ", ".join(self.var(b) for b in (stmt.lower, stmt.upper, stmt.step))
                self.emit(depth, f"for {self.define(stmt.var)} in range({bounds}):")
                self.body(stmt.body, depth + 1)
                self.emit(depth + 1, "pass")
            else:
                self.instr(stmt, depth)

    def literal(self, name):
        """An index value known now (a constant), or None."""
        expr = self.var(name)
        return int(expr) if expr.lstrip("-").isdigit() else None

    def make_view(self, stmt, depth):
        k = self.number(stmt)
        gm, shape = self.var(stmt.ptr), [self.var(s) for s in stmt.shape]
        dtype = self.const(asm.DTYPES[stmt.type.dtype], "D")
        size = " * ".join(shape) or "1"
        self.emit(depth, f"if {gm}.dtype != {dtype} or {gm}.size != {size}: _E.view({k}, {gm})")
        self.emit(depth, f"{self.define(stmt.name)} = {gm}.reshape(({', '.join(shape)}{',' if shape else ''}))")
        dims = [self.literal(s) for s in stmt.shape]
        if None not in dims:
            self.static[stmt.name] = (tuple(dims), asm.DTYPES[stmt.type.dtype])

    def partition(self, stmt, depth):
        k = self.number(stmt)
        view = self.var(stmt.view)
        offsets, sizes = [self.var(o) for o in stmt.offsets], [self.var(s) for s in stmt.sizes]
        name = self.define(stmt.name)
        if not stmt.source.shape:
            self.emit(depth, f"{name} = {view}[...]")
            return
        known = self.static.get(stmt.view)
        bad = []
        for i, (o, s) in enumerate(zip(stmt.offsets, stmt.sizes)):
            lo, n, dim = self.literal(o), self.literal(s), known[0][i] if known else None
            if None in (lo, n, dim) or lo < 0 or lo + n > dim:          # (a window inside, known now: no test)
                end = dim if dim is not None else f"{view}.shape[{i}]"
                bad.append(f"{self.var(o)} < 0 or {self.var(o)} + {self.var(s)} > {end}")
        if bad:
            where = f"[{', '.join(offsets)}], [{', '.join(sizes)}], {view}.shape"
            self.emit(depth, f"if {' or '.join(bad)}: _E.window({k}, {where})")
        self.emit(depth, f"{name} = {view}[{', '.join(f'{o}:{o} + {s}' for o, s in zip(offsets, sizes))}]")
        dims = [self.literal(s) for s in stmt.sizes]
        if known and None not in dims:
            self.static[stmt.name] = (tuple(dims), known[1])

    def alloc(self, stmt):
        if alloc_error(stmt, self.memory.buffer(stmt.type.loc)):
            raise _Unsupported("a tile outside its buffer")          # the interpreter reports it as it runs
        if stmt.name not in self.names:
            self.allocs.append((self.define(stmt.name), stmt.type, stmt.addr))
        self.tiles[stmt.name] = stmt.type

    # ------------------------------------------------------------------------------- instructions
    def operand(self, operand, shape=None) -> str:
        """An operand as an expression: a copy of a tile's valid region, as the interpreter reads it
        (NumPy's loops, and so a NaN + NaN's payload or a sum's order, follow the layout; reshaped to
        ``shape``), a scalar or a GM window (as an array)."""
        expr = self.var(operand.name)
        if operand.name in self.tiles:
            t = self.tiles[operand.name]
            if shape is not None and tuple(shape) != (t.v_row, t.v_col):
                return f"{expr}.copy().reshape({tuple(shape)})"
            return f"{expr}.copy()"
        return expr if expr.startswith("_C") else f"_asarray({expr})"

    def fill(self, k, j, operand, value, depth, known=None):
        """Write ``value`` to tile ``operand`` (result ``j`` of statement ``k``), checked as the interpreter
        does; ``known``: the value's (shape, dtype) if known now."""
        t = self.tiles.get(operand.name)
        if t is None:
            raise _Unsupported(f"{operand.name} is not a tile")
        dst, dtype = self.var(operand.name), self.const(t.np_dtype, "D")
        if known and known[1] == t.np_dtype and math.prod(known[0]) == t.v_row * t.v_col:
            if known[0] == (t.v_row, t.v_col):
                self.emit(depth, f"{dst}[...] = {value}")
                return
        else:
            size = t.v_row * t.v_col
            self.emit(depth, f"if {value}.dtype != {dtype} or {value}.size != {size}: _E.fill({k}, {j}, {value})")
        self.emit(depth, f"{dst}[...] = {value}.reshape({t.v_row}, {t.v_col})")

    def instr(self, stmt: asm.Instr, depth):
        k, op = self.number(stmt), stmt.op
        if op == "tload":
            self.fill(k, 0, stmt.outs[0], self.var(stmt.ins[0].name), depth, self.static.get(stmt.ins[0].name))
        elif op == "tmov":
            src = self.tiles.get(stmt.ins[0].name)
            known = ((src.v_row, src.v_col), src.np_dtype) if src else None
            self.fill(k, 0, stmt.outs[0], self.operand(stmt.ins[0]), depth, known)
        elif op == "tstore":
            src, dst = self.operand(stmt.ins[0]), self.var(stmt.outs[0].name)
            tile, window = self.tiles.get(stmt.ins[0].name), self.static.get(stmt.outs[0].name)
            if not (tile and window and tile.np_dtype == window[1] and tile.v_row * tile.v_col == math.prod(window[0])):
                check = f"{src}.dtype != {dst}.dtype or {src}.size != {dst}.size"
                self.emit(depth, f"if {check}: _E.store({k}, {src}, {dst})")
            elif window[0] == (tile.v_row, tile.v_col):
                self.emit(depth, f"{dst}[...] = {src}")
                return
            self.emit(depth, f"{dst}[...] = {src}.reshape({dst}.shape)")
        elif op == "mscatter":
            idx_shape, rows_shape = stmt.attr("shapes")
            self.emit(depth, f"_scatter({self.var(stmt.outs[0].name)}, {self.operand(stmt.ins[0], idx_shape)}, "
                             f"{self.operand(stmt.ins[1], rows_shape)}, axis={stmt.attr('axis')!r}, "
                             f"accumulate={stmt.attr('accumulate')!r})")
        else:
            self.compute(k, stmt, depth)

    def regions_broadcast(self, stmt: asm.Instr) -> bool:
        """Whether the instruction's tile operands broadcast as their regions do: each logical shape
        (the ``shapes`` attribute) is its region's but for leading 1s, or all are one shape over regions
        of one shape and size (nothing broadcasts: an elementwise result is the same either way)."""
        shapes, tiles = stmt.attr("shapes"), [self.tiles[o.name] for o in stmt.ins if o.name in self.tiles]
        if not shapes:
            return True
        regions = [(t.v_row, t.v_col) for t in tiles]
        return len(shapes) == len(tiles) and (
            all(_squeezed(s) == _squeezed(r) for s, r in zip(shapes, regions))
            or (len(set(map(tuple, shapes))) == 1 and len(set(regions)) == 1
                and math.prod(shapes[0]) == math.prod(regions[0])))

    def dtype_of(self, operand):
        """An operand's dtype where it is a tile or a constant, else None."""
        tile, expr = self.tiles.get(operand.name), self.var(operand.name)
        if tile is not None:
            return tile.np_dtype
        return self.ns[expr].dtype if expr.startswith("_C") else None

    def operands(self, stmt: asm.Instr, ins, dtype, out, widen=True, copy=True) -> list | None:
        """Expressions of operands ``ins`` (tiles or constants, all of ``dtype``) whose regions broadcast
        to ``out``'s as their logical shapes do, None where any is not so: float16 / bfloat16 tiles widened
        to float32 as the semantics does (if ``widen``), others copied as the interpreter reads them (if
        ``copy``: NumPy's loops follow the layout, and with them the payload of a NaN + NaN)."""
        if dtype is None or not self.regions_broadcast(stmt):
            return None
        widen, args, shapes = widen and dtype in (F16, BF16), [], []
        for o in ins:
            if self.dtype_of(o) != dtype:
                return None
            expr = self.var(o.name)
            if o.name in self.tiles:
                shapes.append((self.tiles[o.name].v_row, self.tiles[o.name].v_col))
                args.append(f"{expr}.astype(_np.float32)" if widen else f"{expr}.copy()" if copy else expr)
            else:
                args.append(self.const(self.ns[expr].astype(F32), "C") if widen else expr)
        try:
            return args if np.broadcast_shapes(*shapes) == (out.v_row, out.v_col) else None
        except ValueError:
            return None

    def ufunc(self, name, stmt: asm.Instr) -> str | None:
        """The instruction as one NumPy ufunc into its destination (or the few of ``_EXPRESSIONS``), where
        that is its semantics bit for bit: operands (tiles or constants) of the destination's dtype whose
        regions broadcast to its region; float32 and integers (``_INTEGER_UFUNCS``) in place, float16 /
        bfloat16 widened and rounded as the semantics does (the assignment casts as ``astype`` does)."""
        out = self.tiles.get(stmt.outs[0].name)
        arity = getattr(np, _UFUNCS[name]).nin if name in _UFUNCS else _ARITY.get(name)
        dtypes = FLOAT + INT if name in _INTEGER_UFUNCS else FLOAT
        if arity != len(stmt.ins) or len(stmt.outs) != 1 or out is None or semantic_params(stmt) \
                or out.np_dtype not in dtypes:
            return None
        args = self.operands(stmt, stmt.ins, out.np_dtype, out, copy=out.np_dtype not in INT)
        dst = self.var(stmt.outs[0].name)
        if args is None:
            return None
        if name in _EXPRESSIONS:
            return f"{dst}[...] = {_EXPRESSIONS[name].format(*args)}"
        if out.np_dtype in INT:                         # integers: no NaN, in place
            return f"_np.{_UFUNCS[name]}({', '.join(args)}, out={dst})"
        return f"{dst}[...] = _np.{_UFUNCS[name]}({', '.join(args)})"

    def compare(self, name, stmt: asm.Instr) -> str | None:
        """A comparison of two operands of one dtype as its semantics' ufunc (float16 / bfloat16
        widened) into a bool tile."""
        out = self.tiles.get(stmt.outs[0].name)
        if name not in _COMPARE or len(stmt.ins) != 2 or len(stmt.outs) != 1 or out is None or out.np_dtype != BOOL:
            return None
        args = self.operands(stmt, stmt.ins, self.dtype_of(stmt.ins[0]), out, copy=False)   # no arithmetic
        return None if args is None else f"_np.{_COMPARE[name]}({', '.join(args)}, out={self.var(stmt.outs[0].name)})"

    def where(self, name, stmt: asm.Instr) -> str | None:
        """``tsel`` of a tile condition and values of the destination's dtype: ``np.where``."""
        out = self.tiles.get(stmt.outs[0].name)
        if name != "tsel" or len(stmt.ins) != 3 or len(stmt.outs) != 1 or out is None \
                or stmt.ins[0].name not in self.tiles:
            return None
        cond = self.tiles[stmt.ins[0].name]
        values = self.operands(stmt, stmt.ins[1:], out.np_dtype, out, widen=False, copy=False)
        try:
            if values is None or np.broadcast_shapes((cond.v_row, cond.v_col), (out.v_row, out.v_col)) != (
                    out.v_row, out.v_col):
                return None
        except ValueError:
            return None
        return f"{self.var(stmt.outs[0].name)}[...] = _np.where({self.var(stmt.ins[0].name)}, {', '.join(values)})"

    def expand(self, name, stmt: asm.Instr) -> str | None:
        """``texpand`` of a tile whose region broadcasts to the destination's as its logical shape does to
        the ``shape`` attribute: the assignment."""
        out, src, shapes = self.tiles.get(stmt.outs[0].name), self.tiles.get(stmt.ins[0].name), stmt.attr("shapes")
        if name != "texpand" or len(stmt.ins) != 1 or out is None or src is None:
            return None
        shape, logical = tuple(semantic_params(stmt).get("shape", ())), tuple(shapes[0]) if shapes else None
        try:                                            # np.broadcast_to(logical, shape) is valid
            valid = logical is None or len(logical) <= len(shape) and np.broadcast_shapes(logical, shape) == shape
        except ValueError:
            valid = False
        if not valid or _squeezed(shape) != _squeezed((out.v_row, out.v_col)) \
                or (logical and _squeezed(logical) != _squeezed((src.v_row, src.v_col))):   # it broadcasts
            return None
        value = self.operands(stmt, stmt.ins, out.np_dtype, out, widen=False, copy=False)
        return None if value is None else f"{self.var(stmt.outs[0].name)}[...] = {value[0]}"

    def matmul(self, name, stmt: asm.Instr) -> str | None:
        """A ``tmatmul`` without bias, or a ``tmatmul_acc``, as the semantics' own steps: both tiles
        (transposed as asked) widened to float32, one BLAS product (int8 ones where every partial sum is
        exact: K <= 1024), then rounded to the destination's dtype by the assignment, or added to the
        float32 / int32 accumulator. Logical shapes may add leading 1s to the tiles' matrices (a batch of
        one: the same BLAS call)."""
        params, shapes, acc = semantic_params(stmt), stmt.attr("shapes"), name == "tmatmul_acc"
        if name not in ("tmatmul", "tmatmul_acc") or len(stmt.ins) != 2 + acc \
                or set(params) != {"transpose_a", "transpose_b", *(() if acc else ("out_dtype",))}:
            return None
        out, *ins = (self.tiles.get(o.name) for o in (stmt.outs[0], *stmt.ins))
        if out is None or None in ins or ins[-2].np_dtype != ins[-1].np_dtype:
            return None
        a, b, accumulator = ins[-2], ins[-1], ACCUMULATOR.get(ins[-1].np_dtype)
        if accumulator is None or out.np_dtype != (accumulator if acc else params["out_dtype"]):
            return None
        if acc and (ins[0].np_dtype != accumulator or (ins[0].v_row, ins[0].v_col) != (out.v_row, out.v_col)):
            return None
        if shapes and (len(shapes) != len(ins) or not all(        # a batch of one of the tiles' matrices
                len(s) >= 2 and math.prod(s[:-2]) == 1 and tuple(s[-2:]) == (t.v_row, t.v_col)
                for s, t in zip(shapes, ins))):
            return None
        (m, k), (k2, n) = ((a.v_col, a.v_row) if params["transpose_a"] else (a.v_row, a.v_col),
                           (b.v_col, b.v_row) if params["transpose_b"] else (b.v_row, b.v_col))
        if k != k2 or (m, n) != (out.v_row, out.v_col) or (a.np_dtype == I8 and k > EXACT_F32_TERMS):
            return None
        *first, lhs, rhs = (self.var(o.name) for o in stmt.ins)
        lhs, rhs = lhs + ".T" * params["transpose_a"], rhs + ".T" * params["transpose_b"]
        product, dst = f"_np.matmul({lhs}.astype(_np.float32), {rhs}.astype(_np.float32))", self.var(stmt.outs[0].name)
        if not acc:
            return f"{dst}[...] = {product}"
        if accumulator == I32:                          # integers: no NaN, in place
            return f"_np.add({first[0]}, {product}.astype(_np.int32), out={dst})"
        return f"{dst}[...] = _np.add({first[0]}.copy(), {product})"

    def cast(self, name, stmt: asm.Instr) -> str | None:
        """A ``tcvt`` to a float dtype from a float or an integer one as its semantics' steps: the
        assignment converts (float16 and bfloat16 to each other through float32, which holds both exactly)."""
        if name != "tcvt" or not self.regions_broadcast(stmt):
            return None
        src, out = self.tiles.get(stmt.ins[0].name), self.tiles.get(stmt.outs[0].name)
        if src is None or out is None or src.np_dtype not in FLOAT + INT or out.np_dtype not in FLOAT \
                or (src.v_row, src.v_col) != (out.v_row, out.v_col):
            return None
        value = self.var(stmt.ins[0].name)
        if {src.np_dtype, out.np_dtype} == {F16, BF16}:
            value += ".astype(_np.float32)"
        return f"{self.var(stmt.outs[0].name)}[...] = {value}"

    def reduce(self, name, stmt: asm.Instr) -> str | None:
        """A float ``tsum`` / ``tamax`` / ``tamin`` as its semantics' steps: a float32 copy of the tile (in
        its own layout, so the summation order is the semantics'), the ufunc's reduce, the assignment
        rounding to the tile's dtype."""
        if name not in _REDUCE or len(stmt.ins) != 1 or len(stmt.outs) != 1:
            return None
        src, out = self.tiles.get(stmt.ins[0].name), self.tiles.get(stmt.outs[0].name)
        if src is None or out is None or src.np_dtype not in FLOAT or out.np_dtype != src.np_dtype:
            return None
        params, shapes = semantic_params(stmt), stmt.attr("shapes") or ((src.v_row, src.v_col),)
        if set(params) != {"axes", "keepdims"} or math.prod(shapes[0]) != src.v_row * src.v_col:
            return None
        axes, keepdims = tuple(params["axes"]), bool(params["keepdims"])
        try:
            result = np.add.reduce(np.zeros(shapes[0], F32), axis=axes, keepdims=keepdims).shape
        except (ValueError, TypeError, IndexError):     # the semantics call reports it as the interpreter does
            return None
        if math.prod(result) != out.v_row * out.v_col:
            return None
        x = self.var(stmt.ins[0].name) + (".copy()" if src.np_dtype == F32 else ".astype(_np.float32)")
        if tuple(shapes[0]) != (src.v_row, src.v_col):
            x += f".reshape({tuple(shapes[0])})"
        dtype = ", dtype=_np.float32" if name == "tsum" else ""
        value = f"_np.{_REDUCE[name]}.reduce({x}, axis={axes}{dtype}, keepdims={keepdims})"
        if result != (out.v_row, out.v_col):
            value = f"_np.reshape({value}, ({out.v_row}, {out.v_col}))"
        return f"{self.var(stmt.outs[0].name)}[...] = {value}"

    def compute(self, k, stmt: asm.Instr, depth):
        name = _BASE.get(stmt.op, stmt.op)
        fn = SEMANTICS.get(name)
        if fn is None:
            raise _Unsupported(f"pto.{name} has no NumPy semantics")
        for inline in (self.ufunc, self.compare, self.where, self.expand, self.matmul, self.cast, self.reduce):
            line = inline(name, stmt)
            if line is not None:
                self.emit(depth, line)
                return
        shapes = iter(stmt.attr("shapes") or ())
        args = [self.operand(o, next(shapes, None) if stmt.attr("shapes") and o.name in self.tiles else None)
                for o in stmt.ins]
        params = semantic_params(stmt)
        call = f"{self.const(fn, 'F')}({', '.join(args)}{', **' + self.const(params, 'P') if params else ''})"
        self.emit(depth, "try:")
        self.emit(depth + 1, f"r = {call}")
        self.emit(depth, "except Exception as err:")
        self.emit(depth + 1, f"_E.compute({k}, err)")
        if len(stmt.outs) == 1:
            self.emit(depth, f"if type(r) is not _nd: (r,) = _E.results({k}, r, 1)")
            self.fill(k, 0, stmt.outs[0], "r", depth)
            return
        self.emit(depth, f"r = _E.results({k}, r, {len(stmt.outs)})")
        for j, operand in enumerate(stmt.outs):
            self.fill(k, j, operand, f"r[{j}]", depth)

    def write(self) -> str:
        """The function: statements that do not depend on the grid point (the leading views and
        constants) once, then the rest for each grid point of ``_tiles``."""
        index = [name for name, t in self.kernel.params if t == "index"]
        ptrs = [self.define(name) for name, t in self.kernel.params if t != "index"]
        points = [self.define(name) for name in index]
        body, split = self.kernel.body, 0
        while split < len(body) and (type(body[split]) in (asm.Const, asm.Alloc) or (
                type(body[split]) is asm.MakeView and not set(body[split].shape) & set(index))):
            split += 1
        self.body(body[:split], 2)
        self.emit(2, f"for {', '.join(points) + ',' if points else '_'} in _tiles:")
        self.body(body[split:], 3)
        self.emit(3, "pass")
        head = [f"def run(_T, _tiles, {', '.join(ptrs)}):"]
        if self.allocs:
            head.append(f"    {', '.join(py for py, _, _ in self.allocs)}, = _T")
        head.append("    with _np.errstate(all='ignore'):")
        return "\n".join(head + self.lines) + "\n"


def host_kernel(kernel: asm.Kernel, memory: CoreMemory) -> HostKernel | None:
    """``kernel`` (verified: :func:`~ptojax.ascend.isa.verify`) as host code, or None where the
    interpreter must run it (see the module docstring)."""
    writer = _Writer(kernel, memory)
    try:
        source = writer.write()
    except _Unsupported:
        return None
    writer.ns["_E"] = _Errors(kernel, writer.stmts)
    return HostKernel(kernel, source, writer.ns, writer.allocs)


__all__ = ["HostKernel", "PtoExecutionError", "host_kernel"]
