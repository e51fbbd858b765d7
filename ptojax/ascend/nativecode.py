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
the call as host code, which raises the interpreter's error. A replay whose every step runs as native
code is one more Numba function, :class:`NativePlan`, that calls each step's kernel on its grid points
(``AscendBackend.fuse``; ``ptojax._xlacall`` lets XLA call it under ``jax.jit``).

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
        self.temp_cols: dict[str, int] = {}             # temp -> its row length (temps are flat, as tiles)
        self.loop: tuple | None = None                  # the region the loops being written run over
        self.collapsed = False                          # ... as one loop over its elements (_e)
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
        """A flat array of ``shape``'s elements, made once per call, indexed as a tile of that region."""
        name = f"_tmp{len(self.temps)}"
        self.temps.append(f"{name} = _np.empty({math.prod(shape)}, _np.{np.dtype(dtype).name})")
        self.temp_cols[name] = shape[-1]
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
        if self.collapsed:
            return f"{array}[{first} + _e]"
        names = iter(index for index, d in zip(("_i", "_j"), region) if d != 1)
        terms = [f"{next(names)} * {st}" for d, st in zip(shape, strides) if d != 1]
        return f"{array}[{' + '.join([first, *terms])}]"

    def dense(self, name: str, region) -> bool:
        """Whether tile, temp or window ``name``, read or written as ``region``, holds its elements one
        after another (element (i, j) at i * region's columns + j)."""
        if name in self.windows:
            _, _, shape, strides = self.windows[name]
            inner = [st for d, st in zip(shape, strides) if d != 1]
            return inner in ([], [1], [region[1], 1])
        return region[0] == 1 or self.row_length(name) == region[1]

    def row_length(self, name: str) -> int:
        return self.temp_cols[name] if name in self.temp_cols else self.tiles[name].cols

    # ------------------------------------------------------------------------------- elements
    def element(self, name: str, region=None) -> str:
        """Element (_i, _j) of the loops' region in tile or temp ``name`` (flat arrays, rows of
        ``row_length``) whose ``region`` (default: the loops') broadcasts to it."""
        var = name if name in self.temp_cols else self.var(name)
        if self.collapsed:
            return f"{var}[_e]"
        region = region or self.loop
        rows, cols = ("_i" if region[0] == self.loop[0] else "0"), ("_j" if region[1] == self.loop[1] else "0")
        return f"{var}[{rows} * {self.row_length(name)} + {cols}]" if rows != "0" else f"{var}[{cols}]"

    def loops(self, depth, region, names=None) -> int:
        """Loops over ``region``'s elements, (_i, _j); one loop (_e) where ``names`` (the tiles, temps and
        windows the loop reads and writes, all of ``region``) each hold the region's elements one after
        another: a long loop of unit stride vectorizes better than short rows."""
        self.loop = tuple(region)
        self.collapsed = names is not None and all(self.dense(n, region) for n in names)
        if self.collapsed:
            self.emit(depth, f"for _e in range({region[0] * region[1]}):")
            return depth + 1
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
        if other in self.tiles and shapes[other][0] != region:
            raise _Unsupported("a tmov between tiles of other regions")
        if other in self.windows and self.window_element(other, region) is None:
            raise _Unsupported("a window that is not its tile with unit axes")

        def source():
            return self.element(src) if src in self.tiles else self.window_element(src, region)

        if src in self.tiles and dst in self.tiles and self.overlap(src, dst):   # through a copy, as host code
            copy = self.temp(region, np.uint16 if src_dtype in _HALF else src_dtype)
            inner = self.loops(depth, region, (src, copy))
            self.emit(inner, f"{self.element(copy)} = {source()}")
            inner = self.loops(depth, region, (copy, dst))
            self.emit(inner, f"{self.element(dst)} = {self.element(copy)}")
            return
        inner = self.loops(depth, region, (src, dst))
        target = self.element(dst) if dst == tile else self.window_element(dst, region)
        self.emit(inner, f"{target} = {source()}")

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
        tiles = [o.name for o in operands if o.name in self.tiles]
        if any(self.overlap(name, stmt.outs[0].name) for name in tiles):
            raise _Unsupported(f"pto.{op} of overlapping tiles")
        same = [n for n in tiles if (self.tiles[n].v_row, self.tiles[n].v_col) == region]
        inner = self.loops(depth, region, [stmt.outs[0].name, *tiles] if len(same) == len(tiles) else None)
        for o in operands:
            t = self.tiles.get(o.name)
            if t is None:
                values.append(self.scalar(o, dtype))
            else:
                values.append(self.widened(self.element(o.name, (t.v_row, t.v_col)), t.np_dtype))
        value = form.format(*values)
        if out.np_dtype in INT:
            value = f"_np.{out.np_dtype.name}({value})"
        elif out.np_dtype != BOOL:
            value = self.stored(value, out.np_dtype)
        self.emit(inner, f"{self.element(stmt.outs[0].name)} = {value}")

    def broadcast(self, stmt, depth):
        """``texpand`` where host code assigns the tile (its region broadcasts to the destination's)."""
        out, src = self.tiles.get(stmt.outs[0].name), self.tiles.get(stmt.ins[0].name)
        if out is None or src is None or self.inline("texpand", stmt) is None \
                or not _broadcasts_to([(src.v_row, src.v_col)], out) or self.overlap(stmt.ins[0].name, stmt.outs[0].name):
            raise _Unsupported("a texpand host code does not assign")
        inner = self.loops(depth, (out.v_row, out.v_col))
        value = self.element(stmt.ins[0].name, (src.v_row, src.v_col))
        self.emit(inner, f"{self.element(stmt.outs[0].name)} = {value}")

    def convert(self, stmt, depth):
        src, out = self.tiles.get(stmt.ins[0].name), self.tiles.get(stmt.outs[0].name)
        params = semantic_params(stmt)
        if src is None or out is None or {src.np_dtype, out.np_dtype} - {F32, F16, BF16} \
                or params.get("rounding", "rint") != "rint" or (src.v_row, src.v_col) != (out.v_row, out.v_col) \
                or self.overlap(stmt.ins[0].name, stmt.outs[0].name) or set(params) - {"dtype", "rounding", "saturate"}:
            raise _Unsupported("a tcvt other than between floats, to nearest")
        inner = self.loops(depth, (out.v_row, out.v_col), (stmt.ins[0].name, stmt.outs[0].name))
        value = self.widened(self.element(stmt.ins[0].name), src.np_dtype)
        self.emit(inner, f"{self.element(stmt.outs[0].name)} = {self.stored(value, out.np_dtype)}")

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
        self.loops(depth, (rows, cols))
        self.emit(depth + 2, f"{row}[_j] = {self.widened(self.element(stmt.ins[0].name), src.np_dtype)}")
        at = f"_i * {out.cols}" if out.v_col == 1 else "_i"
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
            inner = self.loops(depth, (t.v_row, t.v_col), (name, copy))
            self.emit(inner, f"{self.element(copy)} = _f32({self.widened(self.element(name), t.np_dtype)})")
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
            shapes = [(self.tiles[n].v_row, self.tiles[n].v_col) for n in names[acc:]] + [(out.v_row, out.v_col)]
            a, b, c = (f"{w}.reshape({shape!r})" for w, shape in zip([*wide, product], shapes))
            self.emit(depth, "with _objmode():")
            self.emit(depth + 1, f"_matmul({a}, {b}, {c}, {params['transpose_a']}, {params['transpose_b']})")
        inner = self.loops(depth, (out.v_row, out.v_col), (product, out_name, *names[:acc]))
        value = self.element(product)
        if acc and out.np_dtype == I32:
            value = f"_np.int32({self.element(names[0])} + _np.int32({value}))"
        elif acc:
            value = self.stored(f"{self.element(names[0])} + {value}", out.np_dtype)
        elif out.np_dtype == I32:
            value = f"_np.int32({value})"
        else:
            value = self.stored(value, out.np_dtype)
        self.emit(inner, f"{self.element(out_name)} = {value}")

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
    if n <= 128:                                    # eight running sums, as NumPy's unrolled loop
        r0, r1, r2, r3 = x[lo], x[lo + 1], x[lo + 2], x[lo + 3]
        r4, r5, r6, r7 = x[lo + 4], x[lo + 5], x[lo + 6], x[lo + 7]
        i = 8
        while i < n - n % 8:
            k = lo + i
            r0, r1, r2, r3 = r0 + x[k], r1 + x[k + 1], r2 + x[k + 2], r3 + x[k + 3]
            r4, r5, r6, r7 = r4 + x[k + 4], r5 + x[k + 5], r6 + x[k + 6], r7 + x[k + 7]
            i += 8
        total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
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
        self.nogil = fn.targetoptions.get("nogil", False)   # no NumPy call made under the GIL
        self.points: dict = {}                          # grid points -> their array (a replay's repeat)

    def views(self, core) -> tuple:
        """The kernel's tiles as whole C-ordered buffers of ``core``, flat (float16 / bfloat16 as bits),
        made once per core; native code reads their valid regions."""
        views = core.views.get(self)
        if views is None:
            views = core.views[self] = tuple(
                core.buffers[t.loc][addr:addr + t.rows * t.cols * t.np_dtype.itemsize]
                .view(np.uint16 if t.np_dtype in _HALF else t.np_dtype)
                for _, t, addr in self.host.allocs)
        return views

    def __call__(self, core, tiles, arrays) -> None:
        args = _bits(arrays, self.dtypes, self.halves)
        if args is None:                                          # host code's checks and messages
            return self.host.fn(self.host.views(core), tiles, *arrays)
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


def _bits(arrays, dtypes, halves) -> list | None:
    """``arrays`` as native code takes them (float16 / bfloat16 as their bits), or None where one is not
    of its ``dtypes`` or not C-contiguous."""
    args = []
    for a, dtype, half in zip(arrays, dtypes, halves):
        if a.dtype != dtype or not a.flags.c_contiguous:
            return None
        args.append(a.view(np.uint16) if half else a)
    return args


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


class NativePlan:
    """A replay's native kernels as one Numba function of the plan's GM arrays: called with the arrays
    by buffer id, returns -1, the number of the call whose checks failed, or None where an array is
    not of the dtype its kernel reads or not C-contiguous, or Numba does not compile for them (never
    again then). ``fn(points, views, *arrays)`` takes the arrays of buffers ``used`` (float16 /
    bfloat16 as bits, ``dtypes``), every call's grid points and the tiles of a core (``views``)."""

    def __init__(self, source: str, fn, used: tuple, dtypes: dict, points: tuple, kernels: list, core, nogil: bool):
        self.source, self.fn, self.used, self.points, self.kernels = source, fn, used, points, kernels
        self.nogil = nogil
        self.dtypes = tuple(dtypes[i] for i in used)
        self.halves = tuple(dt in _HALF for dt in self.dtypes)
        self.views = self.views_of(core)

    def views_of(self, core) -> tuple:
        """The tiles of every call on ``core``, in the order ``fn`` takes them."""
        return tuple(view for native in self.kernels for view in native.views(core))

    def storage(self, k: int) -> np.dtype:
        """The dtype ``fn`` reads argument ``k`` (buffer ``used[k]``) as."""
        return np.dtype(np.uint16) if self.halves[k] else self.dtypes[k]

    def __call__(self, arrays) -> int | None:
        args = None if self.fn is None else _bits([arrays[i] for i in self.used], self.dtypes, self.halves)
        if args is None:
            return None
        try:
            return self.fn(self.points, self.views, *args)
        except numba.core.errors.NumbaError:
            self.fn = None
            return None


def native_plan(calls, core) -> NativePlan | None:
    """``calls`` — (native kernel, grid points, buffer ids of its GM arrays) in order — as one Numba
    function running them on ``core`` (:class:`NativePlan`), or None where a call's arguments are not
    its kernel's or two calls read one buffer as different dtypes."""
    dtypes, points, lines, first = {}, [], [], 0
    for n, (native, tiles, ids) in enumerate(calls):
        if len(ids) != native.host.n_ptr or any(len(index) != native.host.n_index for index in tiles):
            return None                                 # the interpreter's message (HostKernel.__call__)
        for i, dtype in zip(ids, native.dtypes):
            if dtypes.setdefault(i, dtype) != dtype:
                return None
        points.append(np.array(tiles, np.int64).reshape(len(tiles), native.host.n_index))
        tile_args = [f"_views[{k}]" for k in range(first, first + len(native.host.allocs))]
        first += len(native.host.allocs)
        lines.append(f"    if _k{n}(_points[{n}], {', '.join(tile_args + [f'b{i}' for i in ids])}) >= 0: return {n}")
    used = tuple(sorted(dtypes))
    source = "\n".join([f"def run(_points, _views, {', '.join(f'b{i}' for i in used)}):", *lines, "    return -1", ""])
    ns = {f"_k{n}": native.fn for n, (native, _, _) in enumerate(calls)}
    exec(compile(source, "<pto native plan>", "exec"), ns)   # noqa: S102 - our own text
    nogil = all(native.nogil for native, _, _ in calls)
    fn = numba.njit(nogil=nogil, error_model="numpy")(ns["run"])
    return NativePlan(source, fn, used, dtypes, tuple(points), [native for native, _, _ in calls], core, nogil)


__all__ = ["NativeKernel", "NativePlan", "native_kernel", "native_plan", "pairwise_sum"]
