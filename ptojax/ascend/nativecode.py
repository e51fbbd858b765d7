"""Hot host code compiled to native code, with Numba.

Host code (``hostcode.py``) runs a kernel's compute instructions as NumPy calls: at small tiles the
calls' overhead, and on float16 NumPy's element-by-element conversions, are most of its time. A
kernel whose host code has run often (``hostcode.NATIVE_AFTER`` calls: a replayed plan, a training
loop) is printed once more, as a Numba function: its index arithmetic, window checks, loads, stores
and elementwise instructions as loops over the tiles' elements, float16 / bfloat16 held as their bits
and converted exactly (``halfbits.py``), float row sums in NumPy's own pairwise order, matrix
products through the BLAS call NumPy makes. It computes host code's bits: float arithmetic in
float32 rounded to the tile's dtype at the steps the semantics rounds, integers wrapping. The one
freedom is IEEE's own: which payload a NaN made from two NaNs carries (NumPy's vector loops pick it
by position; only its being NaN is defined). A check that fails (a window outside its tensor) reruns
the call as host code, which raises the interpreter's error.

The generator takes, where host code uses their inline NumPy form: float ``tadd``, ``tsub``, ``tmul``,
``tdiv``, ``tabs``, ``tneg``, ``tsqrt``, ``trsqrt``, ``trecip`` (and scalar forms); integer ``tadd``,
``tsub``, ``tmul``, ``tmax``, ``tmin``, ``tabs``, ``tneg``; comparisons; ``texpand``; ``tcvt`` between
floats; ``tsum`` over a tile's rows; ``tmatmul`` / ``tmatmul_acc``; ``tload`` / ``tstore`` / ``tmov``
of static windows. A kernel with any other instruction keeps its host code — float maxima and minima
among them (NumPy's vector and scalar loops order a signed zero differently), and the transcendental
functions (NumPy's own vector implementations).
"""
from __future__ import annotations

import ctypes
import functools
import glob
import math
import os
import re

import numba
import numpy as np
from numba import float32

from . import asm, halfbits
from .hostcode import HostKernel, _Unsupported, _Writer
from .inline import _broadcasts_to
from .interpreter import _BASE, semantic_params
from .semantics import BF16, BOOL, F16, F32, FLOAT, I32, INT

_HALF = {F16: ("_widen_f16", "_narrow_f16"), BF16: ("_widen_bf16", "_narrow_bf16")}
# Elementwise instructions as expressions of their operands' elements: floats widened to float32 (each
# step rounded to float32 as the semantics' NumPy steps round), integers as Numba's int64 (the store
# wraps them to the tile's dtype as NumPy's integer arithmetic wraps), comparisons of one dtype.
_FLOAT = {"tadd": "({0} + {1})", "tsub": "({0} - {1})", "tmul": "({0} * {1})", "tdiv": "({0} / {1})",
          "tabs": "abs({0})", "tneg": "(-{0})", "tsqrt": "_np.sqrt({0})", "trecip": "(_f32(1.0) / {0})",
          "trsqrt": "(_f32(1.0) / _f32(_np.sqrt({0})))"}
_INTEGER = {"tadd": "({0} + {1})", "tsub": "({0} - {1})", "tmul": "({0} * {1})", "tmax": "max({0}, {1})",
            "tmin": "min({0}, {1})", "tabs": "abs({0})", "tneg": "(-{0})"}
_COMPARE = {"teq": "==", "tne": "!=", "tlt": "<", "tle": "<=", "tgt": ">", "tge": ">="}


class _NativeWriter(_Writer):
    """Host code's writer, printing Numba's subset of Python: failed checks return their statement
    number, every tile is a 2-D array (float16 / bfloat16 ones of their bits), elementwise
    instructions are loops."""

    def __init__(self, kernel: asm.Kernel, memory):
        super().__init__(kernel, memory)
        self.ns.update(_widen_f16=halfbits.widen_f16, _narrow_f16=halfbits.narrow_f16, _objmode=numba.objmode,
                       _widen_bf16=halfbits.widen_bf16, _narrow_bf16=halfbits.narrow_bf16,
                       _pairwise=pairwise_sum, _matmul=_matmul, _sgemm=_sgemm(), _f32=np.float32)
        self.temps: list[str] = []                      # arrays made once per call
        self.flat: dict[str, tuple] = {}                # view -> (its flat array, shape, strides)
        self.windows: dict[str, tuple] = {}             # window -> (flat array, first element, shape, strides)
        self.memory_of: dict[str, tuple] = {}           # tile -> (buffer, first byte, end byte)
        self.ptr_dtypes = {name: np.dtype(asm.DTYPES[asm.ptr_dtype(t)]) for name, t in kernel.params
                           if asm.ptr_dtype(t)}

    def alloc(self, stmt):
        super().alloc(stmt)
        t = stmt.type
        self.memory_of[stmt.name] = (t.loc, stmt.addr, stmt.addr + t.rows * t.cols * t.np_dtype.itemsize)

    def share(self, a: str, b: str) -> bool:
        """Whether tiles ``a`` and ``b`` share bytes."""
        (la, sa, ea), (lb, sb, eb) = self.memory_of[a], self.memory_of[b]
        return la == lb and sa < eb and sb < ea

    def overlap(self, a: str, b: str) -> bool:
        """Whether tiles ``a`` and ``b`` share bytes without being one tile (element (i, j) of each is
        then the same bytes: an elementwise instruction may read one and write the other)."""
        return self.share(a, b) and not (self.memory_of[a] == self.memory_of[b] and self.tiles[a] == self.tiles[b])

    def temp(self, shape, dtype) -> str:
        name = f"_tmp{len(self.temps)}"
        self.temps.append(f"{name} = _np.empty({tuple(shape)!r}, _np.{np.dtype(dtype).name})")
        return name

    def error(self, k) -> str:
        return f"return {k}"

    # ------------------------------------------------------------------------------------- views
    # A GM view is its array, flat; a window is its first element's offset in that array: elements are
    # read at computed offsets, which keeps the loops' inner stride one (they vectorize).
    def make_view(self, stmt, depth):
        k = self.number(stmt)
        dims = [self.literal(s) for s in stmt.shape]
        if not dims or None in dims:
            raise _Unsupported("a view of a dynamic or scalar shape")
        if self.ptr_dtypes.get(stmt.ptr) != asm.DTYPES[stmt.type.dtype]:
            raise _Unsupported("a view of another dtype than its pointer's")
        gm = self.var(stmt.ptr)
        self.emit(depth, f"if {gm}.size != {math.prod(dims)}: {self.error(k)}")
        self.emit(depth, f"{self.define(stmt.name)} = {gm}.ravel()")
        strides = [math.prod(dims[i + 1:]) for i in range(len(dims))]
        self.flat[stmt.name] = (self.var(stmt.name), tuple(dims), tuple(strides))
        self.static[stmt.name] = (tuple(dims), asm.DTYPES[stmt.type.dtype])

    def partition(self, stmt, depth):
        known, view = self.static.get(stmt.view), self.flat.get(stmt.view)
        sizes = [self.literal(s) for s in stmt.sizes]
        if known is None or view is None or not stmt.source.shape or None in sizes:
            raise _Unsupported("a window of a dynamic shape")
        k = self.number(stmt)
        bad = self.window_bounds(stmt, known[0])
        if bad:
            self.emit(depth, f"if {' or '.join(bad)}: {self.error(k)}")
        array, _, strides = view
        first = " + ".join(f"{self.var(o)} * {st}" for o, st in zip(stmt.offsets, strides))
        self.emit(depth, f"{self.define(stmt.name)} = {first}")
        self.windows[stmt.name] = (array, self.var(stmt.name), tuple(sizes), strides)
        self.static[stmt.name] = (tuple(sizes), known[1])

    def window_element(self, name: str, region) -> str | None:
        """Element (_i, _j) of a tile of ``region`` in window ``name`` holding the same elements (the tile
        with unit axes added or removed), or None."""
        array, first, shape, strides = self.windows[name]
        if [d for d in shape if d != 1] != [d for d in region if d != 1]:
            return None
        names = iter(index for index, d in zip(("_i", "_j"), region) if d != 1)
        terms = [f"{next(names)} * {st}" for d, st in zip(shape, strides) if d != 1]
        return f"{array}[{' + '.join([first, *terms])}]"

    # ------------------------------------------------------------------------------- elements
    def element(self, name: str, region, out) -> str:
        """Element (_i, _j) of region ``out`` read from tile ``name``, whose ``region`` broadcasts to it."""
        rows, cols = ("_i" if region[0] == out[0] else "0"), ("_j" if region[1] == out[1] else "0")
        return f"{self.var(name)}[{rows}, {cols}]"

    def loops(self, depth, region) -> int:
        self.emit(depth, f"for _i in range({region[0]}):")
        self.emit(depth + 1, f"for _j in range({region[1]}):")
        return depth + 2

    def widened(self, expr: str, dtype) -> str:
        return f"{_HALF[dtype][0]}({expr})" if dtype in _HALF else expr

    def stored(self, expr: str, dtype) -> str:
        """A float32 value as ``dtype``'s element (float16 / bfloat16: its bits, rounded once)."""
        return f"{_HALF[dtype][1]}(_f32({expr}))" if dtype in _HALF else f"_f32({expr})"

    def scalar(self, operand, dtype) -> str:
        """A constant operand of ``dtype`` (as host code takes it), widened as its tiles are."""
        expr = self.var(operand.name)
        value = self.ns.get(expr)
        if not expr.startswith("_C") or np.asarray(value).dtype != dtype:
            raise _Unsupported(f"{operand.name}: a scalar operand of another dtype")
        if dtype in INT:
            return self.const(np.int64(value), "S")
        return self.const(np.float32(np.asarray(value).astype(F32)), "S")

    # ------------------------------------------------------------------------------- instructions
    def instr(self, stmt: asm.Instr, depth):
        k, op = self.number(stmt), _BASE.get(stmt.op, stmt.op)
        if op in ("tload", "tstore", "tmov"):
            self.move(k, stmt, depth)
        elif op in _FLOAT or op in _INTEGER or op in _COMPARE:
            self.elementwise(op, stmt, depth)
        elif op == "texpand":
            self.broadcast(stmt, depth)
        elif op == "tcvt":
            self.convert(stmt, depth)
        elif op == "tsum":
            self.row_sums(stmt, depth)
        elif op in ("tmatmul", "tmatmul_acc"):
            self.matmul_call(op, stmt, depth)
        else:
            raise _Unsupported(f"pto.{op} has no native form")

    def move(self, k, stmt, depth):
        """``tload`` / ``tstore`` / ``tmov``: element copies between a tile and a window or a tile of one
        dtype and size (host code's checks are decided here, or the kernel keeps its host code)."""
        src, dst = stmt.ins[0].name, stmt.outs[0].name
        shapes = {}
        for name in (src, dst):
            if name in self.tiles:
                t = self.tiles[name]
                shapes[name] = ((t.v_row, t.v_col), t.np_dtype)
            elif name in self.windows:
                shapes[name] = self.static[name]
            else:
                raise _Unsupported(f"{name}: a window of a dynamic shape")
        (src_shape, src_dtype), (dst_shape, dst_dtype) = shapes[src], shapes[dst]
        if src_dtype != dst_dtype or math.prod(src_shape) != math.prod(dst_shape) or \
                not (src in self.tiles or dst in self.tiles):
            raise _Unsupported("a move host code checks as it runs")
        tile, other = (dst, src) if dst in self.tiles else (src, dst)
        region = shapes[tile][0]
        if src == dst:
            return
        if other in self.tiles:                         # tile to tile, of one region
            if shapes[other][0] != region:
                raise _Unsupported("a tmov between tiles of other regions")
            at = f"{self.var(other)}[_i, _j]"
        else:
            at = self.window_element(other, region)
            if at is None:
                raise _Unsupported("a window that is not its tile with unit axes")
        if src in self.tiles and dst in self.tiles and self.overlap(src, dst):   # through a copy, as host code
            copy = self.temp(region, np.uint16 if src_dtype in _HALF else src_dtype)
            inner = self.loops(depth, region)
            self.emit(inner, f"{copy}[_i, _j] = {at}")
            inner = self.loops(depth, region)
            self.emit(inner, f"{self.var(dst)}[_i, _j] = {copy}[_i, _j]")
            return
        inner = self.loops(depth, region)
        if dst == tile:
            self.emit(inner, f"{self.var(dst)}[_i, _j] = {at}")
        else:
            self.emit(inner, f"{at} = {self.var(tile)}[_i, _j]")

    def elementwise(self, op, stmt, depth):
        """An elementwise instruction whose host code is its inline NumPy form (operands of one dtype,
        tiles or constants, whose regions broadcast to the destination's): one loop over its elements."""
        out, operands = self.tiles.get(stmt.outs[0].name), stmt.ins
        if out is None or len(stmt.outs) != 1 or self.inline(op, stmt) is None:
            raise _Unsupported(f"pto.{op} with these operands")
        dtype = self.dtype_of(operands[0])
        if op in _COMPARE:
            form = "({0} %s {1})" % _COMPARE[op]
        elif dtype in INT:
            form = _INTEGER.get(op)
        else:
            form = _FLOAT.get(op)
        if form is None or dtype not in FLOAT + INT or len(operands) != len(set(re.findall(r"\{\d\}", form))):
            raise _Unsupported(f"pto.{op} on {dtype}")
        region, values = (out.v_row, out.v_col), []
        for o in operands:
            t = self.tiles.get(o.name)
            if t is None:
                values.append(self.scalar(o, dtype))
            elif self.overlap(o.name, stmt.outs[0].name):
                raise _Unsupported(f"pto.{op} of overlapping tiles")
            else:
                values.append(self.widened(self.element(o.name, (t.v_row, t.v_col), region), t.np_dtype))
        value = form.format(*values)
        inner = self.loops(depth, region)
        if out.np_dtype in INT:
            value = f"_np.{out.np_dtype.name}({value})"
        elif out.np_dtype != BOOL:
            value = self.stored(value, out.np_dtype)
        self.emit(inner, f"{self.var(stmt.outs[0].name)}[_i, _j] = {value}")

    def broadcast(self, stmt, depth):
        """``texpand`` where host code assigns the tile (its region broadcasts to the destination's)."""
        out, src = self.tiles.get(stmt.outs[0].name), self.tiles.get(stmt.ins[0].name)
        if out is None or src is None or self.inline("texpand", stmt) is None \
                or not _broadcasts_to([(src.v_row, src.v_col)], out) or self.overlap(stmt.ins[0].name, stmt.outs[0].name):
            raise _Unsupported("a texpand host code does not assign")
        inner = self.loops(depth, (out.v_row, out.v_col))
        value = self.element(stmt.ins[0].name, (src.v_row, src.v_col), (out.v_row, out.v_col))
        self.emit(inner, f"{self.var(stmt.outs[0].name)}[_i, _j] = {value}")

    def convert(self, stmt, depth):
        src, out = self.tiles.get(stmt.ins[0].name), self.tiles.get(stmt.outs[0].name)
        params = semantic_params(stmt)
        if src is None or out is None or {src.np_dtype, out.np_dtype} - {F32, F16, BF16} \
                or params.get("rounding", "rint") != "rint" or (src.v_row, src.v_col) != (out.v_row, out.v_col) \
                or self.overlap(stmt.ins[0].name, stmt.outs[0].name) or set(params) - {"dtype", "rounding", "saturate"}:
            raise _Unsupported("a tcvt other than between floats, to nearest")
        inner = self.loops(depth, (out.v_row, out.v_col))
        value = self.widened(f"{self.var(stmt.ins[0].name)}[_i, _j]", src.np_dtype)
        self.emit(inner, f"{self.var(stmt.outs[0].name)}[_i, _j] = {self.stored(value, out.np_dtype)}")

    def row_sums(self, stmt, depth):
        """``tsum`` over a tile's rows (its last axis): each row widened to float32, NumPy's pairwise sum
        added to NumPy's zero start, rounded to the tile's dtype."""
        src, out = self.tiles.get(stmt.ins[0].name), self.tiles.get(stmt.outs[0].name)
        params, shapes = semantic_params(stmt), stmt.attr("shapes")
        if src is None or out is None or src.np_dtype not in (F32, F16, BF16) or out.np_dtype != src.np_dtype \
                or set(params) != {"axes", "keepdims"} or (shapes and tuple(shapes[0]) != (src.v_row, src.v_col)) \
                or self.share(stmt.ins[0].name, stmt.outs[0].name):
            raise _Unsupported("a tsum of this form")
        rows, cols = src.v_row, src.v_col
        if tuple(a % 2 for a in params["axes"]) != (1,) or out.v_row * out.v_col != rows or 1 not in (out.v_row, out.v_col):
            raise _Unsupported("a tsum over other axes")
        row = self.temp((cols,), F32)
        self.emit(depth, f"for _i in range({rows}):")
        self.emit(depth + 1, f"for _j in range({cols}):")
        self.emit(depth + 2, f"{row}[_j] = {self.widened(f'{self.var(stmt.ins[0].name)}[_i, _j]', src.np_dtype)}")
        at = "_i, 0" if out.v_col == 1 else "0, _i"
        total = f"_np.float32(0.0) + _pairwise({row}, 0, {cols})"
        self.emit(depth + 1, f"{self.var(stmt.outs[0].name)}[{at}] = {self.stored(total, out.np_dtype)}")

    def matmul_call(self, op, stmt, depth):
        """The matrix product as host code's inline form computes it: both tiles widened to float32 in
        their own layout (transposed as views, so NumPy makes the same BLAS call), one NumPy product,
        then rounded to the destination or added to the accumulator, here."""
        if self.inline(op, stmt) is None:               # host code's form decides what is exact
            raise _Unsupported(f"pto.{op} without an inline form")
        params, acc = semantic_params(stmt), op == "tmatmul_acc"
        names = [o.name for o in stmt.ins]
        out_name = stmt.outs[0].name
        out = self.tiles[out_name]
        if any(self.overlap(n, out_name) for n in names):
            raise _Unsupported(f"pto.{op} on overlapping tiles")
        wide = []
        for name in names[acc:]:
            t = self.tiles[name]
            copy = self.temp((t.v_row, t.v_col), F32)
            inner = self.loops(depth, (t.v_row, t.v_col))
            self.emit(inner, f"{copy}[_i, _j] = _f32({self.widened(f'{self.var(name)}[_i, _j]', t.np_dtype)})")
            wide.append(copy)
        product = self.temp((out.v_row, out.v_col), F32)
        (rows_a, cols_a), (_, cols_b) = ((self.tiles[n].v_row, self.tiles[n].v_col) for n in names[acc:])
        k = rows_a if params["transpose_a"] else cols_a
        if _sgemm() is not None and out.v_row > 1 and out.v_col > 1:     # NumPy's gemm call (not gemv)
            ta, tb = (_TRANS if params[t] else _NO_TRANS for t in ("transpose_a", "transpose_b"))
            self.emit(depth, f"_sgemm({_ROW_MAJOR}, {ta}, {tb}, {out.v_row}, {out.v_col}, {k}, _f32(1.0), "
                             f"{wide[0]}.ctypes, {cols_a}, {wide[1]}.ctypes, {cols_b}, _f32(0.0), {product}.ctypes, "
                             f"{out.v_col})")
        else:
            self.emit(depth, "with _objmode():")
            self.emit(depth + 1, f"_matmul({wide[0]}, {wide[1]}, {product}, {params['transpose_a']}, "
                                 f"{params['transpose_b']})")
        inner = self.loops(depth, (out.v_row, out.v_col))
        value = f"{product}[_i, _j]"
        if acc and out.np_dtype == I32:
            value = f"_np.int32({self.var(names[0])}[_i, _j] + _np.int32({value}))"
        elif acc:
            value = self.stored(f"{self.var(names[0])}[_i, _j] + {value}", out.np_dtype)
        elif out.np_dtype == I32:
            value = f"_np.int32({value})"
        else:
            value = self.stored(value, out.np_dtype)
        self.emit(inner, f"{self.var(out_name)}[_i, _j] = {value}")

    # ------------------------------------------------------------------------------------ write
    def write(self) -> str:
        index = [name for name, t in self.kernel.params if t == "index"]
        ptrs = [self.define(name) for name, t in self.kernel.params if t != "index"]
        points = [self.define(name) for name in index]
        self.body(self.kernel.body, 2)
        tiles = [py for py, _, _ in self.allocs]
        head = [f"def run(_tiles, {', '.join(tiles + ptrs)}):"]
        head += [f"    {line}" for line in self.temps]
        head.append("    for _k in range(_tiles.shape[0]):")
        head += [f"        {p} = _tiles[_k, {n}]" for n, p in enumerate(points)]
        return "\n".join(head + self.lines + ["    return -1"]) + "\n"


@numba.njit(nogil=True)
def pairwise_sum(x, lo, n):
    """``x[lo:lo + n]``'s float32 sum in NumPy's pairwise order (``np.add.reduce`` adds it to 0)."""
    if n < 8:
        total = float32(0.0)
        for i in range(n):
            total += x[lo + i]
        return total
    if n <= 128:
        r = x[lo:lo + 8].copy()
        i = 8
        while i < n - n % 8:
            for j in range(8):
                r[j] += x[lo + i + j]
            i += 8
        total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            total += x[lo + i]
            i += 1
        return total
    half = n // 2
    half -= half % 8
    return pairwise_sum(x, lo, half) + pairwise_sum(x, lo + half, n - half)


_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112     # CBLAS's enums


@functools.cache
def _sgemm():
    """NumPy's own ``cblas_sgemm`` (the scipy-openblas64 of NumPy's wheels), which ``np.matmul`` calls for
    a float32 matrix product, or None where it is not found (native code then calls ``np.matmul``)."""
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas64_*.so")
    for path in glob.glob(libs):
        try:
            fn = ctypes.CDLL(path).scipy_cblas_sgemm64_
        except (OSError, AttributeError):
            continue
        i, n, f, p = ctypes.c_int, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
        fn.argtypes, fn.restype = [i, i, i, n, n, n, f, p, n, p, n, f, p, n], None
        return fn
    return None


def _matmul(a, b, out, transpose_a, transpose_b):
    """``out[...] = a @ b`` (transposed views as asked), as host code's ``np.matmul`` call."""
    np.matmul(a.swapaxes(-1, -2) if transpose_a else a, b.swapaxes(-1, -2) if transpose_b else b, out=out)


class NativeKernel:
    """A kernel's host code as a Numba function; called as :class:`HostKernel` is."""

    def __init__(self, host: HostKernel, source: str, fn, dtypes: tuple):
        self.host, self.source, self.fn, self.dtypes = host, source, fn, dtypes
        self.halves = tuple(dt in _HALF for dt in dtypes)
        self.points: dict = {}                          # grid points -> their array (a replay's repeat)

    def views(self, core) -> tuple:
        """The kernel's tiles as whole C-ordered buffers of ``core`` (float16 / bfloat16 as bits), made
        once per core; native code reads their valid regions."""
        views = core.views.get(self)
        if views is None:
            views = core.views[self] = tuple(
                core.buffers[t.loc][addr:addr + t.rows * t.cols * t.np_dtype.itemsize]
                .view(np.uint16 if t.np_dtype in _HALF else t.np_dtype).reshape(t.rows, t.cols)
                for _, t, addr in self.host.allocs)
        return views

    def __call__(self, core, tiles, arrays) -> None:
        args = []
        for a, dtype, half in zip(arrays, self.dtypes, self.halves):
            if a.dtype != dtype or not a.flags.c_contiguous:      # host code's checks and messages
                return self.host.fn(self.host.views(core), tiles, *arrays)
            args.append(a.view(np.uint16) if half else a)
        key = tuple(tiles)
        points = self.points.get(key)
        if points is None:
            if len(self.points) > 64:
                self.points.clear()
            points = self.points[key] = np.array(tiles, np.int64).reshape(len(tiles), self.host.n_index)
        try:
            failed = self.fn(points, *self.views(core), *args) >= 0
        except numba.core.errors.NumbaError as err:              # arguments it does not compile for:
            self.host.native, self.host.native_error = False, err   # host code from now on
            return self.host.fn(self.host.views(core), tiles, *arrays)
        if failed:                                                # a failed check: host code raises
            self.host.fn(self.host.views(core), tiles, *arrays)
            raise AssertionError(f"native code of {self.host.kernel.name} failed a check host code passed")


def native_kernel(host: HostKernel) -> NativeKernel | None:
    """``host``'s kernel as native code, or None where the generator does not take it."""
    kernel = host.kernel
    writer = _NativeWriter(kernel, host.memory)
    dtypes = [writer.ptr_dtypes.get(name) for name, text in kernel.params if text != "index"]
    if any(dtype is None for dtype in dtypes):
        return None
    try:
        source = writer.write()
    except _Unsupported:
        return None
    exec(compile(source, f"<pto native code: {kernel.name}>", "exec"), writer.ns)   # noqa: S102 - our own text
    fn = numba.njit(nogil="_objmode" not in source, error_model="numpy")(writer.ns["run"])   # IEEE division
    return NativeKernel(host, source, fn, tuple(dtypes))


__all__ = ["NativeKernel", "native_kernel", "pairwise_sum"]
