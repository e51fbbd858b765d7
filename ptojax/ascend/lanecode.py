"""PTO kernels compiled to lane code: host code over many grid points at once.

Host code (``hostcode.py``) runs a kernel's grid points one after another: a NumPy call per instruction
and grid point. Lane code runs ``n`` independent grid points (ready block instances of one block call)
in one pass: every tile has a leading lane axis, index values that depend on the grid point are
``int64`` arrays of the lanes, a window whose offsets differ per lane moves every lane's rows in one
gather or scatter (lane by lane, by slicing, for windows of many rows), and each compute instruction
is one NumPy call on the stacked tiles — its inline form (``inline.py``) or its semantics over lanes
(:func:`~ptojax.ascend.batched.execute_lanes`). Where every read of a tile reads that tile's own last
write (no bytes reinterpreted through another tile), a tile is a variable holding its lanes' values and
an instruction binds it a new array; otherwise tiles are views of ``n`` copies of the core's buffers.
The results are the interpreter's at each grid point in turn, bit for bit, but for the payload of a
NaN computed from two NaNs (as in ``batched.py``).

The writer takes a kernel only where that holds by construction: loop bounds, view shapes and window
sizes the same on every lane, stores to windows that differ per lane, no indexed gathers or scatters;
others run on host code. A check that fails stops the lane run (``LaneFailure``); the runtime then
runs the batch's tasks one by one, which raises the interpreter's error for the failing task.
"""
from __future__ import annotations

import math
import re
import threading

import numpy as np

from ..lowering.memory import CoreMemory
from . import asm
from .batched import _SLICE_ROWS, _lane_buffer, execute_lanes, extents, row_starts
from .hostcode import HostKernel, _Unsupported, _Writer
from .interpreter import alloc_error, semantic_params


class LaneFailure(Exception):
    """A lane run failed a check: the runtime reruns the batch task by task to name the error."""


class _Fail:
    """Lane code's error hooks (host code's ``_E``): each stops the lane run."""

    def __getattr__(self, check):
        def fail(*args):
            raise LaneFailure(f"the {check} check")
        return fail


def _fresh(value, dtype, shape) -> np.ndarray:
    """A new array of ``dtype`` and ``shape`` holding ``value`` as the assignment to a tile leaves it (it
    casts and broadcasts)."""
    out = np.empty(shape, dtype)
    out[...] = value
    return out


def _reg(value, dtype, shape) -> np.ndarray:
    """A register tile's new value: ``value`` itself where it is a C-ordered array of ``dtype`` and
    ``shape`` (no register is written in place; C order, as the interpreter reads a tile, so that sums and
    products take its order), else :func:`_fresh`."""
    if type(value) is np.ndarray and value.dtype == dtype and value.shape == shape and value.flags.c_contiguous:
        return value
    return _fresh(value, dtype, shape)


def _load_slices(window) -> np.ndarray:
    """Every lane's window ``(view, per-dim offset arrays, sizes)``, lane by lane: ``[lanes, *sizes]``."""
    view, offsets, sizes = window
    return np.stack([view[tuple(slice(o, o + s) for o, s in zip(point, sizes))] for point in zip(*offsets)])


def _store_slices(window, value) -> None:
    view, offsets, sizes = window
    value = value.reshape((len(offsets[0]),) + sizes)
    for lane, point in enumerate(zip(*offsets)):
        view[tuple(slice(o, o + s) for o, s in zip(point, sizes))] = value[lane]


def _rows(view: np.ndarray, width: int) -> np.ndarray:
    """``view``'s elements as overlapping rows: row ``k`` is flat elements ``k .. k + width - 1``."""
    if not view.flags.c_contiguous:
        raise LaneFailure("a GM view that is not contiguous")   # (make_view reshapes GM arrays: never)
    flat = view.reshape(-1)
    return np.ndarray((flat.size - width + 1, width), flat.dtype, flat, 0, (flat.itemsize, flat.itemsize))


class _Plan:
    """What lane code needs to know of a kernel before writing it: ``varying`` (SSA names whose value
    differs per lane), ``windows`` (partitions whose offsets do), ``affine`` (index values as
    ``(coefficients of the grid indices, constant)``, where they are that), ``widths`` (view -> the row
    lengths of its per-lane windows) and ``registers`` (whether its tiles can be variables: every read of
    a tile reads its own last write). Raises ``_Unsupported`` where lane code cannot run the kernel."""

    def __init__(self, kernel: asm.Kernel):
        index = [name for name, t in kernel.params if t == "index"]
        self.varying, self.windows, self.widths = set(index), set(), {}
        self.affine = {name: (tuple(int(i == j) for j in range(len(index))), 0) for i, name in enumerate(index)}
        self.zero = (0,) * len(index)
        self.walk(kernel.body)
        self.bytes: dict = {}                            # tile -> (location, first byte, end)
        self.registers = self.reads_own_writes(kernel.body, frozenset()) is not None

    def arith(self, stmt: asm.Arith):
        if {stmt.lhs, stmt.rhs} & self.varying:
            self.varying.add(stmt.name)
        a, b = self.affine.get(stmt.lhs), self.affine.get(stmt.rhs)
        if a is None or b is None:
            return
        if stmt.op == "addi":
            self.affine[stmt.name] = (tuple(x + y for x, y in zip(a[0], b[0])), a[1] + b[1])
        elif a[0] == self.zero or b[0] == self.zero:     # a product with a constant
            (coefs, c), k = (b, a[1]) if a[0] == self.zero else (a, b[1])
            self.affine[stmt.name] = (tuple(k * x for x in coefs), k * c)

    def walk(self, body):
        for stmt in body:
            kind = type(stmt)
            if kind is asm.Const and stmt.type == "index":
                self.affine[stmt.name] = (self.zero, int(stmt.value))
            elif kind is asm.Arith:
                self.arith(stmt)
            elif kind is asm.For:
                if {stmt.lower, stmt.upper, stmt.step} & self.varying:
                    raise _Unsupported("loop bounds differ per lane")
                self.walk(stmt.body)
            elif kind is asm.MakeView and set(stmt.shape) & self.varying:
                raise _Unsupported("a view shape differs per lane")
            elif kind is asm.PartitionView:
                if set(stmt.sizes) & self.varying or stmt.view in self.windows:
                    raise _Unsupported("a window size differs per lane")
                if set(stmt.offsets) & self.varying:
                    self.windows.add(stmt.name)
                    self.widths.setdefault(stmt.view, set()).add(stmt.sizes[-1])
            elif kind is asm.Instr:
                self.instr(stmt)

    def reads_own_writes(self, body, valid: frozenset) -> frozenset | None:
        """The tiles whose bytes hold their own last write after ``body`` (``valid`` before it), or None if
        an instruction reads a tile that does not (never written, or overwritten through another tile
        sharing its bytes). Loops: a second pass over the body sees every later iteration's state."""
        for stmt in body:
            kind = type(stmt)
            if kind is asm.Alloc:
                t = stmt.type
                self.bytes[stmt.name] = (t.loc, stmt.addr, stmt.addr + t.rows * t.cols * t.np_dtype.itemsize)
            elif kind is asm.For:
                once = self.reads_own_writes(stmt.body, valid)
                again = once if once is None else self.reads_own_writes(stmt.body, once)
                if again is None:
                    return None
                valid = valid & again                   # the loop may also run no iteration
            elif kind is asm.Instr:
                if any(o.name in self.bytes and o.name not in valid for o in stmt.ins):
                    return None
                for o in stmt.outs:
                    if o.name in self.bytes:
                        loc, lo, hi = self.bytes[o.name]
                        valid = frozenset(v for v in valid if not (self.bytes[v][0] == loc and self.bytes[v][1] < hi
                                                                   and lo < self.bytes[v][2])) | {o.name}
        return valid

    def instr(self, stmt: asm.Instr):
        if stmt.op in ("mgather", "mscatter"):
            raise _Unsupported("indexed GM access")
        if stmt.op == "tstore" and stmt.outs[0].name not in self.windows:
            raise _Unsupported("every lane stores to one window")
        windows = [o.name for o in (*stmt.ins, *stmt.outs) if o.name in self.windows]
        if (windows and stmt.op not in ("tload", "tstore")) or any(o.name in self.varying for o in stmt.ins):
            raise _Unsupported("a per-lane value as an instruction operand")


class _LaneWriter(_Writer):
    nan_layout = False   # a batch's vector loops run longer than one instance's: its NaN + NaN payloads may differ

    def __init__(self, kernel: asm.Kernel, memory: CoreMemory):
        super().__init__(kernel, memory)
        self.plan = _Plan(kernel)
        self.windows = self.plan.windows
        self.rows: dict = {}                            # (view, row length) -> its rows view's name
        self.grid_checked = False                       # whether the function checks the grid points
        self.sliced: set = set()                        # per-lane windows moved by slicing
        self.owned: set = set()                         # registers whose array no other register or GM shares
        self.last: dict = {}                            # register -> the top-level statement that uses it last
        self.top, self.top_index = None, -1             # the top-level statement being written
        self.ns.update(_rows=_rows, _X=execute_lanes, _reg=_reg, _fresh=_fresh, _load_slices=_load_slices,
                       _store_slices=_store_slices)

    def shape(self, dims) -> str:
        return f"(_n, {', '.join(map(str, dims))})"

    # Register tiles (where every read of a tile reads its own last write: ``_Plan.registers``): a tile is a
    # variable holding its lanes' values, an instruction binds a new array to it — no lane buffers.
    def alloc(self, stmt):
        if not self.plan.registers:
            return super().alloc(stmt)
        if alloc_error(stmt, self.memory.buffer(stmt.type.loc)):
            raise _Unsupported("a tile outside its buffer")
        self.define(stmt.name)
        self.tiles[stmt.name] = stmt.type

    def assign(self, name: str, value: str, fresh: bool = False) -> str:
        if not self.plan.registers:
            return super().assign(name, value)
        t = self.tiles[name]
        if fresh or value.startswith(_FRESH):           # a new array: the register owns it
            self.owned.add(name)
        else:                                           # it may hold (a view of) another register's array
            self.owned.difference_update([name, *re.findall(r"\bv_\w+", value)])
        return f"{self.var(name)} = {'_fresh' if fresh else '_reg'}({value}, {self.const(t.np_dtype, 'D')}, " \
               f"{self.shape((t.v_row, t.v_col))})"

    def set_tile(self, stmt: asm.Instr, value: str, in_place: bool = False, reuse=()) -> str:
        if not self.plan.registers:
            return super().set_tile(stmt, value, in_place)
        for name in reuse:                              # an operand's array that dies here takes the result
            if name in self.owned and stmt is self.top and self.last.get(name) == self.top_index:
                self.owned.add(stmt.outs[0].name)
                return f"{self.var(stmt.outs[0].name)} = {value[:-1]}, out={self.var(name)})"
        return self.assign(stmt.outs[0].name, value)

    def size(self, elements: int) -> str:
        return f"_n * {elements}"

    def axes(self, axes: tuple) -> tuple:
        return tuple(a + 1 if a >= 0 else a for a in axes)

    def arith(self, stmt: asm.Arith, depth):
        """Index arithmetic; a per-lane value affine in the grid indices is an expression of them, written
        where it is used (windows use their affine form: most such values are never written)."""
        form = self.plan.affine.get(stmt.name)
        if stmt.name not in self.plan.varying or form is None:
            return super().arith(stmt, depth)
        self.names[stmt.name] = f"(_G.dot({self.const(np.asarray(form[0], np.int64), 'L')}) + {form[1]})"

    def make_view(self, stmt, depth):
        super().make_view(stmt, depth)
        for width in sorted(self.plan.widths.get(stmt.name, ())):
            name = self.rows[(stmt.name, width)] = f"_r{len(self.rows)}"
            self.emit(depth, f"{name} = _rows({self.var(stmt.name)}, {self.var(width)})")

    def partition(self, stmt, depth):
        """A window whose offsets differ per lane: (the tensor's rows view, every lane's row starts), so
        that ``rows[starts]`` is every lane's window. Its bounds are checked for the whole grid now where
        its offsets are affine in the grid indices (the grid points are checked once per run), else per lane."""
        if stmt.name not in self.windows:
            return super().partition(stmt, depth)
        known, sizes = self.static.get(stmt.view), [self.literal(s) for s in stmt.sizes]
        rows = self.rows.get((stmt.view, stmt.sizes[-1]))
        if known is None or None in sizes or rows is None:
            raise _Unsupported("a per-lane window of a view of unknown shape")
        shape, forms = known[0], [self.plan.affine.get(o) for o in stmt.offsets]
        strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
        lead = row_starts(sizes, strides)
        affine = None not in forms and self.inside(forms, sizes, shape)
        if not affine:
            offsets = [self.var(o) for o in stmt.offsets]
            outside = [f"({o} < 0) | ({o} + {s} > {d})" for o, s, d in zip(offsets, sizes, shape)]
            self.emit(depth, f"if _np.any({' | '.join(outside)}): _E.window()")
        self.static[stmt.name] = (tuple(sizes), known[1])
        if len(lead) >= _SLICE_ROWS:                    # many rows a lane: its window by slicing, lane by lane
            self.sliced.add(stmt.name)
            offsets = [self.var(o) for o in stmt.offsets]
            self.emit(depth, f"{self.define(stmt.name)} = ({self.var(stmt.view)}, _np.broadcast_arrays("
                             f"{', '.join(offsets)}), {tuple(sizes)})")
            return
        if affine:
            coefs = np.asarray([f[0] for f in forms], np.int64).T @ np.asarray(strides, np.int64)
            const = sum(f[1] * s for f, s in zip(forms, strides))
            starts = f"_np.add.outer(_G.dot({self.const(coefs, 'L')}), {self.const(lead + const, 'L')})"
        else:
            start = " + ".join(f"{o} * {s}" for o, s in zip(offsets, strides))
            starts = f"_np.add.outer({start}, {self.const(lead, 'L')})"
        self.emit(depth, f"{self.define(stmt.name)} = ({rows}, {starts})")

    def inside(self, forms, sizes, shape) -> bool:
        """Whether affine offsets ``forms`` put the window inside ``shape`` at every point of the grid."""
        if len(self.kernel.grid) != len(self.plan.zero):
            return False
        for (coefs, const), size, dim in zip(forms, sizes, shape):
            lo = const + sum(min(0, c * (g - 1)) for c, g in zip(coefs, self.kernel.grid))
            hi = const + sum(max(0, c * (g - 1)) for c, g in zip(coefs, self.kernel.grid))
            if lo < 0 or hi + size > dim:
                return False
        self.grid_checked = True
        return True

    def instr(self, stmt: asm.Instr, depth):
        if stmt.op == "tload" and stmt.ins[0].name not in self.windows:
            return self.shared_load(stmt, depth)
        window = stmt.ins[0].name if stmt.op == "tload" else stmt.outs[0].name if stmt.op == "tstore" else None
        if window not in self.windows:
            return super().instr(stmt, depth)
        k, (sizes, dtype) = self.number(stmt), self.static[window]
        w, rows = self.var(window), (math.prod(sizes[:-1]), sizes[-1])
        sliced = window in self.sliced
        if stmt.op == "tload":          # every lane's window: [lanes, rows, row length] (or [lanes, *sizes])
            value, shape = (f"_load_slices({w})", sizes) if sliced else (f"{w}[0][{w}[1]]", rows)
            self.fill(k, 0, stmt.outs[0], value, depth, (shape, dtype))
            if self.plan.registers:
                self.owned.add(stmt.outs[0].name)       # (a gather's new array)
            return
        tile = self.tiles.get(stmt.ins[0].name)
        if tile is None or tile.np_dtype != dtype or tile.v_row * tile.v_col != math.prod(sizes):
            raise _Unsupported("a store the interpreter reports")
        if sliced:
            self.emit(depth, f"_store_slices({w}, {self.var(stmt.ins[0].name)})")
        else:
            self.emit(depth, f"{w}[0][{w}[1]] = {self.var(stmt.ins[0].name)}.reshape({self.shape(rows)})")

    def shared_load(self, stmt, depth):
        """A load of one window into every lane."""
        known, tile = self.static.get(stmt.ins[0].name), self.tiles.get(stmt.outs[0].name)
        if known is None or tile is None or known[1] != tile.np_dtype or math.prod(known[0]) != tile.v_row * tile.v_col:
            raise _Unsupported("a load the interpreter reports")
        value = f"{self.var(stmt.ins[0].name)}.reshape((1, {tile.v_row}, {tile.v_col}))"
        self.emit(depth, self.assign(stmt.outs[0].name, value, fresh=True))     # (a register never views GM)

    def call(self, k, stmt: asm.Instr, name: str, args: list, depth):
        """The semantics over the lanes (:func:`~ptojax.ascend.batched.execute_lanes`): tile operands have
        the lane axis, the others are shared."""
        laned = tuple(o.name in self.tiles for o in stmt.ins)
        params = self.const(semantic_params(stmt), "P")
        self.emit(depth, f"r = _X({name!r}, [{', '.join(args)}], {laned}, {params}, _n)")
        results = [f"r[{j}]" for j in range(len(stmt.outs))] if len(stmt.outs) > 1 else ["r"]
        if len(stmt.outs) > 1:
            self.emit(depth, f"if len(r) != {len(stmt.outs)}: _E.results()")
        for j, (operand, value) in enumerate(zip(stmt.outs, results)):
            self.fill(k, j, operand, value, depth)

    def write(self) -> str:
        index = [self.define(name) for name, t in self.kernel.params if t == "index"]
        ptrs = [self.define(name) for name, t in self.kernel.params if t != "index"]
        for i, name in enumerate(index):
            self.emit(2, f"{name} = _G[:, {i}]")
        last = self.last                                # register -> the top-level statement that uses it last
        if self.plan.registers:
            for i, stmt in enumerate(self.kernel.body):
                last.update(dict.fromkeys(_tiles_used(stmt), i))
        for i, stmt in enumerate(self.kernel.body):
            self.top, self.top_index = stmt, i
            self.body([stmt], 2)
            dead = [self.var(t) for t, at in last.items() if at == i and t in self.tiles]
            if dead:                                    # let NumPy reuse its memory (warm in cache)
                self.emit(2, f"{' = '.join(dead)} = None")
        if self.grid_checked:                           # windows checked for the grid: the points are in it
            grid = self.const(np.asarray(self.kernel.grid, np.int64), "L")
            self.lines.insert(0, f"        if ((_G < 0) | (_G >= {grid})).any(): _E.grid()")
        head = [f"def run(_T, _n, _G, {', '.join(ptrs)}):"]
        if self.allocs:
            head.append(f"    {', '.join(py for py, _, _ in self.allocs)}, = _T")
        head.append("    with _np.errstate(all='ignore'):")
        return "\n".join(head + self.lines) + "\n"


# Register values that are new arrays: NumPy calls that allocate their result, and window loads.
_FRESH = tuple(f"_np.{f}(" for f in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "exp", "log",
                                      "sqrt", "tanh", "rint", "absolute", "negative", "power", "where", "matmul")) \
    + ("_load_slices(",)


def _tiles_used(stmt) -> set:
    """The operand names of ``stmt``'s instructions (of its body's, for a loop)."""
    if isinstance(stmt, asm.For):
        return set().union(*map(_tiles_used, stmt.body))
    return {o.name for o in (*stmt.ins, *stmt.outs)} if isinstance(stmt, asm.Instr) else set()


class LaneKernel:
    """A kernel as a Python function of (lane tile views, the lane count, the grid points, GM arrays)."""

    def __init__(self, kernel: asm.Kernel, source: str, namespace: dict, allocs: list):
        self.kernel, self.source, self.allocs = kernel, source, allocs
        exec(compile(source, f"<pto lane code: {kernel.name}>", "exec"), namespace)   # noqa: S102 - our own text
        self.fn = namespace["run"]
        self.extent = extents(kernel) if allocs else {}     # (register tiles: no lane buffers)
        self._views = threading.local()     # per thread: (lanes, its buffers' ids) and the tile views

    def __call__(self, tiles, arrays) -> None:
        """Run the kernel at the grid points ``tiles`` (independent of each other) as lanes."""
        n = len(tiles)
        self.fn(self.views(n), n, np.asarray(tiles, np.int64).reshape(n, -1), *arrays)

    def views(self, n: int) -> tuple:
        """The tiles of ``n`` lanes: views of this thread's lane buffers, kept while those stay the same."""
        buffers = [_lane_buffer(loc, n, size) for loc, size in self.extent.items()]
        key = (n, *(id(b.base) for b in buffers))
        kept = getattr(self._views, "kept", None)
        if kept is None or kept[0] != key:
            at = dict(zip(self.extent, buffers))
            kept = self._views.kept = (key, tuple(_lane_view(at[t.loc], t, addr, n) for _, t, addr in self.allocs))
        return kept[1]


def _lane_view(buffer: np.ndarray, t: asm.TileBuf, addr: int, n: int) -> np.ndarray:
    raw = buffer[:, addr:addr + t.rows * t.cols * t.np_dtype.itemsize]
    return raw.view(t.np_dtype).reshape(n, t.rows, t.cols)[:, :t.v_row, :t.v_col]


def lane_kernel(host: HostKernel | None, memory: CoreMemory) -> LaneKernel | None:
    """The lane code of a kernel with host code ``host``, or None where the kernel runs on host code."""
    if host is None:
        return None
    try:
        writer = _LaneWriter(host.kernel, memory)
        source = writer.write()
    except _Unsupported:
        return None
    writer.ns["_E"] = _Fail()
    return LaneKernel(host.kernel, source, writer.ns, writer.allocs)


__all__ = ["LaneKernel", "lane_kernel"]
