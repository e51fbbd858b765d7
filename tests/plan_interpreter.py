"""A reference for tests: runs one of codegen's planned programs (``AscendKernel.kernels``, the plan
instruction selection prints as real PTO-AS) for one block instance on one simulated core.

A core owns byte buffers of the target's sizes (UB, L1, L0A, L0B, L0C); ``alloc_tile`` places a tile
at its planned address, and every instruction reads and writes those bytes in the hardware dtypes
(the per-instruction NumPy semantics in ``plan_semantics.py``). GM tensors are NumPy arrays, updated in
place by ``tstore``/``mscatter``. A window outside its tensor, a tile outside its buffer, operands whose
shapes disagree with the destination's valid region or an illegal dtype combination is a
:class:`PtoExecutionError` naming the program, instruction and values — never garbage.
"""
from __future__ import annotations

import math

import numpy as np

from ptojax.ascend import asm, isa
from ptojax.ascend.codegen import SCALAR_FORM
from plan_semantics import execute, mscatter_into
from ptojax.errors import PtoError, PtoExecutionError
from ptojax.lowering.memory import CoreMemory

_BASE = {v: k for k, v in SCALAR_FORM.items()}
_DTYPE_PARAMS = ("dtype", "out_dtype", "scale_dtype")


class Core:
    """One simulated core's local memories (every location, so AIC and AIV programs both run)."""

    def __init__(self, memory: CoreMemory):
        self.memory = memory
        self.buffers = {loc: np.zeros(memory.buffer(loc), np.uint8) for loc in ("vec", "mat", "left", "right", "acc")}


def statement_error(kernel: asm.Kernel, stmt, message: str, at: str = "") -> PtoExecutionError:
    text = stmt.text() if hasattr(stmt, "text") else str(stmt)
    return PtoExecutionError(f"pto run: program '{kernel.name}'{at}: {message} in `{text[:160]}`")


def alloc_error(stmt: asm.Alloc, capacity: int) -> str | None:
    """Why tile ``stmt`` does not fit its ``capacity``-byte buffer, or None."""
    t = stmt.type
    size = t.rows * t.cols * t.np_dtype.itemsize
    if stmt.addr < 0 or stmt.addr + size > capacity or stmt.addr % t.np_dtype.itemsize:
        return f"tile of {size} bytes at address {stmt.addr} does not fit the {capacity}-byte {t.loc} buffer"
    if t.v_row > t.rows or t.v_col > t.cols:
        return f"valid region {t.v_row}x{t.v_col} exceeds the tile {t.rows}x{t.cols}"
    return None


def view_error(gm: np.ndarray, view: asm.ViewType) -> str:
    return f"GM tensor {gm.dtype.name}{list(gm.shape)} does not match the view {view}"


def store_error(dtype, shape, window_dtype, window_shape) -> str:
    return f"tile {dtype.name}{list(shape)} does not match the window {window_dtype.name}{list(window_shape)}"


def results_error(results, n: int) -> str:
    return f"{len(results)} results for {n} destinations"


def window_error(offsets, sizes, shape) -> str:
    return f"window offsets {list(offsets)} sizes {list(sizes)} fall outside the tensor {list(shape)}"


def fill_error(tile: asm.TileBuf, dtype, shape, size, expected) -> str | None:
    """Why a result of ``dtype``, ``shape`` (``size`` elements) cannot fill ``tile``'s valid region
    (``expected`` elements), or None."""
    if dtype != tile.np_dtype:
        return f"result dtype {dtype.name} does not match the destination tile {tile.dtype}"
    if size != expected:
        return f"result of shape {list(shape)} does not fill the destination's valid region {tile.v_row}x{tile.v_col}"
    return None


class _PlacedTile:
    """A tile the program allocated at ``addr`` of a core buffer; ``array``: its view, once made."""

    __slots__ = ("name", "type", "addr", "array")

    def __init__(self, name, type_, addr):
        self.name, self.type, self.addr, self.array = name, type_, addr, None     # array: its view, once made


def run(kernel: asm.Kernel, index, args, core: Core, *, verified: bool = False) -> None:
    """Execute ``kernel`` at grid point ``index`` with GM arrays ``args`` (pointer params, in order).
    ``verified``: the kernel passed :func:`~ptojax.ascend.isa.verify`, so its instructions are not
    checked again as they run."""
    _Runner(kernel, core, bind(kernel, [int(i) for i in index], args), verified).block(kernel.body)


def bind(kernel: asm.Kernel, indices, args) -> dict:
    """``kernel``'s parameters by name: its grid index parameters bound to ``indices``, its pointer
    parameters to the GM arrays ``args``, in order."""
    env, indices, args = {}, iter(indices), iter(args)
    for name, ptype in kernel.params:
        env[name] = next(indices if ptype == "index" else args, None)
        if env[name] is None:
            wanted = f"{len(kernel.grid)} grid indices" if ptype == "index" else f"a GM tensor for {name}"
            raise PtoExecutionError(f"pto run: program '{kernel.name}' expects {wanted}")
    return env


class _Runner:
    """Walks a kernel's statements on one core."""

    def __init__(self, kernel, core, env, verified=False):
        self.kernel, self.core, self.env, self.verified = kernel, core, env, verified

    def fail(self, stmt, message):
        raise statement_error(self.kernel, stmt, message)

    def block(self, body):
        env = self.env
        for stmt in body:
            kind = type(stmt)                           # (exact types: cheaper than isinstance chains)
            if kind is asm.Arith:
                env[stmt.name] = self.arith(stmt.op, env[stmt.lhs], env[stmt.rhs])
            elif kind is asm.Const:
                env[stmt.name] = stmt.value if stmt.type == "index" else np.asarray(stmt.value, asm.DTYPES[stmt.type])
            elif kind is asm.PartitionView:
                self.partition(stmt)
            elif kind is asm.Alloc:
                self.alloc(stmt)
            elif kind is asm.MakeView:
                self.make_view(stmt)
            elif kind is asm.For:
                for k in range(*(self.index(stmt, env[b], "loop bound") for b in (stmt.lower, stmt.upper, stmt.step))):
                    env[stmt.var] = k
                    self.block(stmt.body)
            else:
                if not self.verified:                   # kernels compiled by the backend were verified
                    isa.check(stmt, self.kernel.name)
                self.instr(stmt)

    @staticmethod
    def arith(op, a, b):
        return a + b if op == "addi" else a * b

    def index(self, stmt, value, what):
        """An index value a statement needs as one number (a loop bound, a view or window size)."""
        return value

    # ------------------------------------------------------------------------------------- memory
    def make_view(self, stmt):
        gm = self.env[stmt.ptr]
        shape = tuple(self.index(stmt, self.env[s], "view shape") for s in stmt.shape)
        if gm.dtype != asm.DTYPES[stmt.type.dtype] or gm.size != math.prod(shape):
            self.fail(stmt, view_error(gm, stmt.type))
        self.env[stmt.name] = gm.reshape(shape)

    def partition(self, stmt):
        view = self.env[stmt.view]
        offsets = [self.env[o] for o in stmt.offsets]
        sizes = [self.env[s] for s in stmt.sizes]
        if any(o < 0 or o + s > n for o, s, n in zip(offsets, sizes, view.shape)):
            self.fail(stmt, window_error(offsets, sizes, view.shape))
        self.env[stmt.name] = view[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))] if view.ndim else view[...]

    def alloc(self, stmt):
        message = alloc_error(stmt, self.capacity(stmt.type.loc))
        if message:
            self.fail(stmt, message)
        self.env[stmt.name] = self.new_tile(stmt)

    def capacity(self, loc: str) -> int:
        return self.core.buffers[loc].size

    def new_tile(self, stmt):
        return _PlacedTile(stmt.name, stmt.type, stmt.addr)

    def view(self, tile: _PlacedTile) -> np.ndarray:
        if tile.array is None:
            t = tile.type
            raw = self.core.buffers[t.loc][tile.addr:tile.addr + t.rows * t.cols * t.np_dtype.itemsize]
            tile.array = raw.view(t.np_dtype).reshape(t.rows, t.cols)[:t.v_row, :t.v_col]
        return tile.array

    def read(self, operand, shape=None):
        value = self.env[operand.name]
        if isinstance(value, _PlacedTile):
            arr = self.view(value).copy()
            return arr.reshape(shape) if shape is not None else arr
        return value

    def write(self, stmt, operand, value):
        tile = self.env[operand.name]
        dst = self.view(tile)
        value = np.asarray(value)
        self.check_fill(stmt, tile, value.dtype, value.shape, value.size, dst.size)
        dst[...] = value.reshape(dst.shape)

    def check_fill(self, stmt, tile, dtype, shape, size, expected):
        """A result of ``dtype``, ``shape`` (``size`` elements) must fill ``tile``'s valid region."""
        message = fill_error(tile.type, dtype, shape, size, expected)
        if message:
            self.fail(stmt, message)

    # ------------------------------------------------------------------------------- instructions
    def instr(self, stmt: asm.Instr):
        op = stmt.op
        if op == "tload":
            src = self.env[stmt.ins[0].name]
            self.write(stmt, stmt.outs[0], src)
        elif op == "tstore":
            dst = self.env[stmt.outs[0].name]
            src = self.read(stmt.ins[0])
            if src.dtype != dst.dtype or src.size != dst.size:
                self.fail(stmt, store_error(src.dtype, src.shape, dst.dtype, dst.shape))
            dst[...] = src.reshape(dst.shape)
        elif op == "tmov":
            self.write(stmt, stmt.outs[0], self.read(stmt.ins[0]))
        elif op == "mgather":
            gm = self.env[stmt.ins[0].name]
            (idx_shape,) = stmt.attr("shapes")
            self.write(stmt, stmt.outs[0], execute("mgather", gm, self.read(stmt.ins[1], idx_shape),
                                                       axis=stmt.attr("axis")))
        elif op == "mscatter":
            gm = self.env[stmt.outs[0].name]
            idx_shape, rows_shape = stmt.attr("shapes")
            mscatter_into(gm, self.read(stmt.ins[0], idx_shape), self.read(stmt.ins[1], rows_shape),
                          axis=stmt.attr("axis"), accumulate=stmt.attr("accumulate"))
        else:
            self.compute(stmt)

    def compute(self, stmt: asm.Instr):
        params = semantic_params(stmt)
        shapes = stmt.attr("shapes")

        def call():
            it = iter(shapes or ())
            args = [self.read(o, next(it, None) if shapes and isinstance(o.type, asm.TileBuf) else None)
                    for o in stmt.ins]
            return execute(_BASE.get(stmt.op, stmt.op), *args, **params)

        compute_into(self, stmt, call)


def semantic_params(stmt: asm.Instr) -> dict:
    """An instruction's attributes as its NumPy semantics take them (dtype names as dtypes; the
    operand shapes and the scalar's side are the runner's business)."""
    return {k: (asm.DTYPES[v] if k in _DTYPE_PARAMS else v) for k, v in stmt.attrs
            if k not in ("shapes", "scalar_first")}


def compute_into(runner, stmt: asm.Instr, call) -> None:
    """Run ``call()`` (an instruction's semantics) and write its result(s) to ``stmt``'s destinations
    with ``runner.write``; a NumPy failure becomes ``runner.fail`` naming the instruction."""
    try:
        result = call()
    except PtoError:
        raise
    except Exception as err:  # noqa: BLE001 - report the instruction, not a NumPy traceback
        runner.fail(stmt, f"{type(err).__name__}: {err}")
    results = result if isinstance(result, (tuple, list)) else (result,)
    if len(results) != len(stmt.outs):
        runner.fail(stmt, results_error(results, len(stmt.outs)))
    for operand, value in zip(stmt.outs, results):
        runner.write(stmt, operand, value)
