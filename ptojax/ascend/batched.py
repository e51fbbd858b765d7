"""Batched execution: one PTO kernel at many grid points at once, one NumPy call per instruction.

Block instances of one block call run the same program on the same GM tensors at different grid
points. :func:`run_batch` executes the kernel once for ``n`` grid points: every core-local buffer
gets a leading lane axis (``n`` byte buffers of the program's extent, so tiles keep their addresses
and dtypes), index arithmetic is carried per lane, a window whose offsets differ per lane is
loaded and stored for all lanes at once, row by row, and each compute instruction
runs once on the stacked tiles. The results are those of :func:`ptojax.ascend.interpreter.run` at
each grid point in turn, bit for bit (tests/test_batched.py checks every instruction), but for the
payload of a NaN computed from two NaNs (NumPy's vector loops take the first operand's in their body,
the second's in their remainder, and a batch's loops run longer): the instances must be independent —
the runtime batches only tasks that are ready together.

Instructions whose NumPy semantics do not take a leading lane axis (indexed scatters, gathers from
tiles, user-defined instructions) run lane by lane inside the batch. Errors are the interpreter's
:class:`~ptojax.ascend.interpreter.PtoExecutionError`, naming the program, the instruction and the
first failing grid point.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from . import asm, isa
from ..lowering.memory import CoreMemory
from .interpreter import (_BASE, _Runner, bind, compute_into, semantic_params, statement_error,
                          store_error, window_error)
from .semantics import mscatter_into

# How an instruction's params change when its operands gain a leading lane axis.
_SHIFT_AXES = {"tsum", "tprod", "tamax", "tamin", "tcumsum", "tsoftmax", "tquant", "targmax", "targmin"}
_SHIFT_AXIS = {"ttopk", "tsort", "tconcat"}
_ELEMENTWISE = {  # each result element from the same elements of the operands: any memory layout will do
    "tadd", "tsub", "tmul", "tmax", "tmin", "tdiv", "tpow", "tfmod", "texp", "tlog", "tsqrt", "trsqrt", "trecip", "ttanh",
    "tsigmoid", "tsilu", "tround", "tgelu", "tabs", "tneg", "trelu", "tclip", "teq", "tne", "tlt", "tle", "tgt",
    "tge", "tlogical_and", "tlogical_or", "tlogical_not", "tand", "tor", "txor", "tnot", "tshl", "tshr", "tsel", "tcvt", "tdequant"}
_LANE_SAFE = _ELEMENTWISE | {"tmatmul", "tmatmul_acc", "tmrgsort", "trms_norm", "tlayer_norm"}  # take leading axes


def _lane_params(op: str, params: dict, rank: int, n: int) -> dict | None:
    """``params`` for tile operands of rank ``rank`` with a leading axis of ``n`` lanes, or None if the
    instruction must run lane by lane."""
    if op in _LANE_SAFE:
        return params
    p = dict(params)
    if op in _SHIFT_AXES:
        p["axes"] = tuple(a % rank + 1 for a in p["axes"])
    elif op in _SHIFT_AXIS:
        p["axis"] = p["axis"] % rank + 1
    elif op == "treshape":
        p["new_shape"] = (n,) + tuple(p["new_shape"])
    elif op == "texpand":
        p["shape"] = (n,) + tuple(p["shape"])
    elif op == "ttrans":
        p["permutation"] = (0,) + tuple(a + 1 for a in p["permutation"])
    elif op == "tview":
        p.update(shape=(n,) + tuple(p["shape"]), offsets=(0,) + tuple(p["offsets"]),
                 valid_shape=(n,) + tuple(p["valid_shape"]))
    elif op == "tassemble":
        p["offsets"] = (0,) + tuple(p["offsets"])
    elif op == "tpad":
        p["pads"] = ((0, 0),) + tuple(tuple(x) for x in p["pads"])
    else:
        return None
    return p


def execute_lanes(name: str, args, laned, params: dict, n: int):
    """Instruction ``name`` on ``n`` lanes: ``args[i]`` has a leading lane axis where ``laned[i]``,
    else (a scalar, a GM tensor) it is shared by every lane. One NumPy call when the instruction's
    semantics take the lane axis, else one call per lane; the results have the lane axis."""
    rank = max((a.ndim - 1 for a, t in zip(args, laned) if t), default=0)
    if name == "texpand":                               # broadcasting may add leading axes
        rank = max(rank, len(params["shape"]))
    shared_scalars = all(t or np.ndim(a) == 0 for a, t in zip(args, laned))
    lane_params = _lane_params(name, params, rank, n) if shared_scalars else None
    if lane_params is not None:                         # lanes first, then NumPy's broadcasting of the rest
        args = [a.reshape(a.shape[:1] + (1,) * (rank + 1 - a.ndim) + a.shape[1:]) if t else a
                for a, t in zip(args, laned)]
        return isa.execute(name, *args, **lane_params)
    results = [isa.execute(name, *[a[i] if t else a for a, t in zip(args, laned)], **params) for i in range(n)]
    return tuple(np.stack(r) for r in zip(*results)) if isinstance(results[0], tuple) else np.stack(results)


class Lanes:
    """An index value that differs per lane (an ``int64`` array of the lane count)."""

    __slots__ = ("values",)

    def __init__(self, values):
        self.values = values


def _arith(op, a, b):
    va = a.values if isinstance(a, Lanes) else a
    vb = b.values if isinstance(b, Lanes) else b
    out = va + vb if op == "addi" else va * vb
    return Lanes(out) if isinstance(out, np.ndarray) else out


_SLICE_ROWS = 256     # windows of this many rows or more move lane by lane (one strided copy each is cheaper)


def row_starts(sizes, strides) -> np.ndarray:
    """Where each row of a window of ``sizes`` starts, in elements from the window's first, in a tensor of
    element ``strides`` (the last dim is the row)."""
    if len(sizes) < 2:
        return np.zeros(1, np.int64)
    return np.indices(sizes[:-1], dtype=np.int64).reshape(len(sizes) - 1, -1).T @ np.asarray(strides[:-1], np.int64)


class _Window:
    """A GM window whose offsets differ per lane: ``offsets`` is an ``[n, rank]`` array.

    Lanes move by rows: the window's innermost extent is contiguous in GM, so a strided view whose
    row ``k`` starts at element ``k`` of the tensor, indexed by every lane's row starts, reads or
    writes all lanes in one NumPy call. Windows of many rows move lane by lane, by slicing."""

    __slots__ = ("view", "offsets", "sizes")

    def __init__(self, view, offsets, sizes):
        self.view, self.offsets, self.sizes = view, offsets, sizes

    def _rows(self):
        view, sizes = self.view, self.sizes
        if not sizes or not view.flags.c_contiguous or math.prod(sizes[:-1]) >= _SLICE_ROWS:
            return None, None
        step = np.asarray(view.strides, np.int64) // view.itemsize
        starts = (self.offsets @ step)[:, None] + row_starts(sizes, step)[None, :]  # [lanes, rows]
        flat = view.reshape(-1)
        rows = np.lib.stride_tricks.as_strided(flat, (flat.size - sizes[-1] + 1, sizes[-1]),
                                               (view.itemsize, view.itemsize))
        return rows, starts

    def _slices(self, lane):
        return tuple(slice(o, o + s) for o, s in zip(self.offsets[lane].tolist(), self.sizes))

    def load(self):
        """Every lane's window: ``[n, *sizes]``."""
        rows, starts = self._rows()
        if rows is None:
            return np.stack([self.view[self._slices(i)] for i in range(len(self.offsets))])
        return rows[starts].reshape((len(self.offsets),) + tuple(self.sizes))

    def store(self, value):
        rows, starts = self._rows()
        if rows is None:
            value = value.reshape((len(self.offsets),) + tuple(self.sizes))
            for i in range(len(self.offsets)):
                self.view[self._slices(i)] = value[i]
        else:
            rows[starts] = value.reshape(starts.shape + (self.sizes[-1],))


_LANES = threading.local()   # per thread: location -> lane buffers, grown on demand and kept for later batches


def _lane_buffer(loc: str, n: int, extent: int) -> np.ndarray:
    """``n`` lanes of ``extent`` bytes of core buffer ``loc`` (reused: fresh pages cost more than the work)."""
    pool = _LANES.__dict__
    buf = pool.get(loc)
    if buf is None or buf.shape[0] < n or buf.shape[1] < extent:
        rows, cols = (n, extent) if buf is None else (max(n, buf.shape[0]), max(extent, buf.shape[1]))
        buf = pool[loc] = np.zeros((rows, cols), np.uint8)
    return buf[:n, :extent]


def extents(kernel: asm.Kernel) -> dict[str, int]:
    """Bytes of each core-local buffer the kernel's tiles reach (its highest tile end per location)."""
    out: dict[str, int] = {}

    def walk(body):
        for stmt in body:
            if isinstance(stmt, asm.For):
                walk(stmt.body)
            elif isinstance(stmt, asm.Alloc):
                t = stmt.type
                end = stmt.addr + t.rows * t.cols * t.np_dtype.itemsize
                out[t.loc] = max(out.get(t.loc, 0), end)
    walk(kernel.body)
    return out


def run_batch(kernel: asm.Kernel, indices, args, memory: CoreMemory, extent: dict[str, int], *,
              verified: bool = False) -> None:
    """Execute ``kernel`` at every grid point of ``indices`` (a list of tuples) on GM arrays ``args``;
    ``memory`` gives the buffer capacities, ``extent`` the bytes the kernel uses (:func:`extents`);
    ``verified`` as for :func:`~ptojax.ascend.interpreter.run`."""
    n = len(indices)
    grid = np.asarray(indices, dtype=np.int64).reshape(n, -1)
    env = bind(kernel, [int(c[0]) if (c == c[0]).all() else Lanes(c) for c in grid.T], args)
    buffers = {loc: _lane_buffer(loc, n, size) for loc, size in extent.items()}
    _LaneRunner(kernel, n, grid, env, buffers, memory, verified).block(kernel.body)


class _LaneTile:
    """A tile buffer; ``value``: its lanes' valid region while the lane buffer's bytes lag behind."""

    __slots__ = ("type", "addr", "end", "value", "array")

    def __init__(self, type_, addr):
        self.type, self.addr, self.value, self.array = type_, addr, None, None     # array: its lanes' view
        self.end = addr + type_.rows * type_.cols * type_.np_dtype.itemsize


class _LaneRunner(_Runner):
    """One kernel run over ``n`` lanes. A written tile keeps its result as an array
    (``_LaneTile.value``) and reaches the lane buffer's bytes only when a tile sharing bytes with it is
    read or written: most tiles are never reinterpreted, so most writes cost nothing."""

    def __init__(self, kernel, n, grid, env, buffers, memory, verified=False):
        super().__init__(kernel, None, env, verified)
        self.n, self.grid, self.buffers, self.memory = n, grid, buffers, memory
        self.pending: list[_LaneTile] = []          # tiles whose value the lane buffer does not hold yet

    def fail(self, stmt, message, lane=None):
        at = "" if lane is None else f" at grid point {tuple(self.grid[lane].tolist())}"
        raise statement_error(self.kernel, stmt, message, at)

    arith = staticmethod(_arith)

    def index(self, stmt, value, what):
        if isinstance(value, Lanes):
            values = value.values
            if (values == values[0]).all():
                return int(values[0])
            self.fail(stmt, f"the {what} differs between the batched grid points ({values[:4].tolist()} ...)")
        return value

    # ------------------------------------------------------------------------------------- memory
    def partition(self, stmt):
        view = self.env[stmt.view]
        offsets = [self.env[o] for o in stmt.offsets]
        sizes = [self.index(stmt, self.env[s], "window size") for s in stmt.sizes]
        if not any(isinstance(o, Lanes) for o in offsets):
            if any(o < 0 or o + s > d for o, s, d in zip(offsets, sizes, view.shape)):
                self.fail(stmt, window_error(offsets, sizes, view.shape))
            self.env[stmt.name] = view[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))] if view.ndim else view[...]
            return
        table = np.stack([o.values if isinstance(o, Lanes) else np.full(self.n, o, np.int64) for o in offsets], axis=1)
        bad = ((table < 0) | (table + np.asarray(sizes) > np.asarray(view.shape))).any(axis=1)
        if bad.any():
            lane = int(np.argmax(bad))
            self.fail(stmt, window_error(table[lane].tolist(), sizes, view.shape), lane)
        self.env[stmt.name] = _Window(view, table, sizes)

    def capacity(self, loc: str) -> int:
        return self.memory.buffer(loc)

    def new_tile(self, stmt):
        return _LaneTile(stmt.type, stmt.addr)

    def view(self, tile: _LaneTile) -> np.ndarray:
        if tile.array is None:
            t = tile.type
            raw = self.buffers[t.loc][:, tile.addr:tile.addr + t.rows * t.cols * t.np_dtype.itemsize]
            tile.array = raw.view(t.np_dtype).reshape(self.n, t.rows, t.cols)[:, :t.v_row, :t.v_col]
        return tile.array

    def flush(self, tile: _LaneTile) -> None:
        """Bring the lane buffer up to date for every byte ``tile`` covers (other tiles' values)."""
        for other in [p for p in self.pending if p is not tile and p.type.loc == tile.type.loc
                      and p.addr < tile.end and tile.addr < p.end]:
            self.view(other)[...] = other.value
            other.value = None
            self.pending.remove(other)

    def read(self, operand, shape=None, copy=True):
        """A tile's lanes: its value, a view of the lane buffer, or (``copy``) a contiguous array —
        NumPy's summation order follows the layout."""
        value = self.env[operand.name]
        if isinstance(value, _LaneTile):
            if value.value is not None:
                arr = np.ascontiguousarray(value.value) if copy else value.value
            else:
                self.flush(value)
                arr = self.view(value).copy() if copy else self.view(value)
            return arr.reshape((self.n,) + tuple(shape)) if shape is not None else arr
        return value

    def write(self, stmt, operand, value):
        tile = self.env[operand.name]
        t = tile.type
        value = np.asarray(value)
        self.check_fill(stmt, tile, value.dtype, value.shape[1:], value.size, self.n * t.v_row * t.v_col)
        self.flush(tile)
        if tile.value is None:
            self.pending.append(tile)
        tile.value = value.reshape(self.n, t.v_row, t.v_col)

    # ------------------------------------------------------------------------------- instructions
    def instr(self, stmt: asm.Instr):
        op = stmt.op
        if op == "tload":
            src = self.env[stmt.ins[0].name]
            value = src.load() if isinstance(src, _Window) else np.broadcast_to(src, (self.n,) + src.shape)
            self.write(stmt, stmt.outs[0], value)
        elif op == "tstore":
            dst = self.env[stmt.outs[0].name]
            src = self.read(stmt.ins[0], copy=False)
            if isinstance(dst, _Window):
                if src.dtype != dst.view.dtype or src.size != self.n * math.prod(dst.sizes):
                    self.fail(stmt, store_error(src.dtype, src.shape[1:], dst.view.dtype, dst.sizes))
                dst.store(src)
            else:
                if src.dtype != dst.dtype or src.size != self.n * dst.size:
                    self.fail(stmt, store_error(src.dtype, src.shape[1:], dst.dtype, dst.shape))
                if self.n > 1:
                    self.fail(stmt, "batched grid points store to the same window; they are not independent")
                dst[...] = src.reshape(dst.shape)
        elif op == "tmov":
            self.write(stmt, stmt.outs[0], self.read(stmt.ins[0]))     # a value, or a copy of the bytes
        elif op == "mgather":
            gm = self.env[stmt.ins[0].name]
            (idx_shape,) = stmt.attr("shapes")
            axis = stmt.attr("axis")
            out = isa.execute("mgather", gm, self.read(stmt.ins[1], idx_shape), axis=axis)
            self.write(stmt, stmt.outs[0], np.moveaxis(out, axis, 0))
        elif op == "mscatter":
            gm = self.env[stmt.outs[0].name]
            idx_shape, rows_shape = stmt.attr("shapes")
            idx, rows = self.read(stmt.ins[0], idx_shape), self.read(stmt.ins[1], rows_shape)
            for lane in range(self.n):                   # in grid order, as one instance after another
                mscatter_into(gm, idx[lane], rows[lane], axis=stmt.attr("axis"), accumulate=stmt.attr("accumulate"))
        else:
            self.compute(stmt)

    def compute(self, stmt: asm.Instr):
        params = semantic_params(stmt)
        shapes = stmt.attr("shapes")
        it = iter(shapes or ())
        args, lane_axis = [], []
        name = _BASE.get(stmt.op, stmt.op)
        for operand in stmt.ins:
            is_tile = isinstance(operand.type, asm.TileBuf)
            args.append(self.read(operand, next(it, None) if shapes and is_tile else None,
                                  copy=name not in _ELEMENTWISE))
            lane_axis.append(is_tile)
        compute_into(self, stmt, lambda: execute_lanes(name, args, lane_axis, params, self.n))
