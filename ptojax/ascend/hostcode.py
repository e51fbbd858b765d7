"""PTO kernels compiled to host code: one straight-line Python function per kernel.

The interpreter (``interpreter.py``) walks a kernel's statements at every block instance it runs:
it looks each statement up, resolves its operands by name, makes the windows' slices and the tiles'
views, and checks every value. For a kernel the backend compiled (verified when it was compiled),
:func:`host_kernel` does that walk once and prints a Python function: index arithmetic as Python
expressions, windows as slices, tile views made once per core, each compute instruction one call of
its NumPy semantics (``semantics.py``) or, where that semantics is a NumPy operation or two, those
operations inline (``inline.py``). Checks whose outcome the kernel's text decides (a window inside
its tensor, a load of the tile's shape) are decided once. The function runs every grid point
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
from .inline import InlineForms
from .semantics import SEMANTICS, mscatter_into



class HostKernel:
    """A kernel as a Python function of (a core's tile views, grid points, GM arrays)."""

    def __init__(self, kernel: asm.Kernel, source: str, namespace: dict, allocs: list, memory: CoreMemory):
        self.kernel, self.source, self.allocs, self.memory = kernel, source, allocs, memory
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


class _Unsupported(Exception):
    """The generator does not take this kernel: the interpreter runs it."""


class _Writer(InlineForms):
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

    def shape(self, dims) -> str:
        """A tile value's shape as an expression (lane code puts the lane count first)."""
        return repr(tuple(dims))

    def size(self, elements: int) -> str:
        """A tile value's element count as an expression."""
        return str(elements)

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
                self.arith(stmt, depth)
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

    def arith(self, stmt: asm.Arith, depth):
        op = "+" if stmt.op == "addi" else "*"
        self.emit(depth, f"{self.define(stmt.name)} = {self.var(stmt.lhs)} {op} {self.var(stmt.rhs)}")

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
            if stmt.view in self.static:
                self.static[stmt.name] = self.static[stmt.view]
            return
        known = self.static.get(stmt.view)
        bad = self.window_bounds(stmt, known[0] if known else None)
        if bad:
            where = f"[{', '.join(offsets)}], [{', '.join(sizes)}], {view}.shape"
            self.emit(depth, f"if {' or '.join(bad)}: _E.window({k}, {where})")
        self.emit(depth, f"{name} = {view}[{', '.join(f'{o}:{o} + {s}' for o, s in zip(offsets, sizes))}]")
        dims = [self.literal(s) for s in stmt.sizes]
        if known and None not in dims:
            self.static[stmt.name] = (tuple(dims), known[1])

    def window_bounds(self, stmt, dims) -> list:
        """The conditions under which window ``stmt`` falls outside its view (of shape ``dims``, where
        known now): one per axis whose bounds are not known to hold now."""
        bad = []
        for i, (o, s) in enumerate(zip(stmt.offsets, stmt.sizes)):
            lo, n, dim = self.literal(o), self.literal(s), dims[i] if dims else None
            if None in (lo, n, dim) or lo < 0 or lo + n > dim:          # (a window inside, known now: no test)
                end = dim if dim is not None else f"{self.var(stmt.view)}.shape[{i}]"
                bad.append(f"{self.var(o)} < 0 or {self.var(o)} + {self.var(s)} > {end}")
        return bad

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
                return f"{expr}.copy().reshape({self.shape(shape)})"
            return f"{expr}.copy()"
        return expr if expr.startswith("_C") else f"_asarray({expr})"

    def fill(self, k, j, operand, value, depth, known=None):
        """Write ``value`` to tile ``operand`` (result ``j`` of statement ``k``), checked as the interpreter
        does; ``known``: the value's (shape, dtype) if known now."""
        t = self.tiles.get(operand.name)
        if t is None:
            raise _Unsupported(f"{operand.name} is not a tile")
        dtype = self.const(t.np_dtype, "D")
        if known and known[1] == t.np_dtype and math.prod(known[0]) == t.v_row * t.v_col:
            if known[0] == (t.v_row, t.v_col):
                self.emit(depth, self.assign(operand.name, value))
                return
        else:
            size = self.size(t.v_row * t.v_col)
            self.emit(depth, f"if {value}.dtype != {dtype} or {value}.size != {size}: _E.fill({k}, {j}, {value})")
        self.emit(depth, self.assign(operand.name, f"{value}.reshape({self.shape((t.v_row, t.v_col))})"))

    def assign(self, name: str, value: str) -> str:
        """The line that writes expression ``value`` to tile ``name``'s valid region."""
        return f"{self.var(name)}[...] = {value}"

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

    def compute(self, k, stmt: asm.Instr, depth):
        name = _BASE.get(stmt.op, stmt.op)
        if name not in SEMANTICS:
            raise _Unsupported(f"pto.{name} has no NumPy semantics")
        line = self.inline(name, stmt)
        if line is not None:
            self.emit(depth, line)
            return
        shapes = iter(stmt.attr("shapes") or ())
        args = [self.operand(o, next(shapes, None) if stmt.attr("shapes") and o.name in self.tiles else None)
                for o in stmt.ins]
        self.call(k, stmt, name, args, depth)

    def call(self, k, stmt: asm.Instr, name: str, args: list, depth):
        """A call of the instruction's semantics ``name`` on operand expressions ``args``, its results
        written to the destinations."""
        params = semantic_params(stmt)
        params = f", **{self.const(params, 'P')}" if params else ""
        call = f"{self.const(SEMANTICS[name], 'F')}({', '.join(args)}{params})"
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
    return HostKernel(kernel, source, writer.ns, writer.allocs, memory)


__all__ = ["HostKernel", "PtoExecutionError", "host_kernel"]
