"""The selector: prints one block kernel as a real PTO-AS ``func.func``.

It walks codegen's statements: index arithmetic, views and loops print as they are (with the grid
position from ``pto.get_block_idx``), tile allocations in the real layouts, and every instruction
through its rule (:data:`~.rules.RULES`). Rules build on the helpers here: new tiles (:meth:`like`),
instructions in a dtype the vector unit computes in (:meth:`emit`), conversions, broadcasts, and
aliases that view a tile's bytes as another shape (``treshape``).
"""
from __future__ import annotations

import math
import re
import struct

import ml_dtypes
import numpy as np

from ...errors import PtoArgumentError, PtoCapacityError, PtoUnsupportedError
from ...lowering.origin import blame
from .. import asm, instructions, isa
from .cube import CubePlan, dn_partition, dn_view
from .rules import RULES

LEVELS = ("level2", "level3")
_KIND = {"AIV": "vector", "AIC": "cube"}
_ALIGN = {"vec": 32, "mat": 32, "left": 512, "right": 512, "acc": 512, "bias": 64}
_BIAS_TABLE = 1024                          # bytes of the cube's bias table (BT) on A2/A3
_WIDE = {"bf16": "f32", "i8": "i16"}        # A2/A3 vector arithmetic: no bf16, no i8
_MOVES = {"tload", "tstore", "tmov", "tcvt"}
_FLOATS = ("f32", "f16", "bf16")
# Instructions whose verifier wants the destination's storage apart from the sources' (PTOAS
# lib/PTO/IR/PTO.cpp): by arch, None for every arch.
_APART = {"trecip": ("a3",), "tprelu": ("a3",), "tands": None, "tors": None, "txors": None}
# Row reductions whose pto-isa header wants the source's and the destination's static rows equal
# (include/pto/cpu/TRowSum.hpp:57 ``static_assert(TileSrc::Rows == TileDst::Rows)``).
_SAME_ROWS = {"trowsum"}


def matrix(shape) -> tuple[int, int]:
    """A logical tile shape as the 2-D (rows, cols) a tile buffer holds."""
    shape = tuple(shape)
    return (math.prod(shape[:-1]), shape[-1]) if shape else (1, 1)


def _float_text(value: float, dtype: str) -> str:
    """An MLIR float literal; non-finite values as the bit pattern MLIR requires."""
    if math.isfinite(value):
        text = repr(float(value))
        return text.replace("e", ".0e") if "e" in text and "." not in text else text
    if dtype == "f16":
        return "0x" + np.float16(value).tobytes()[::-1].hex().upper()
    bits = struct.pack(">f", value).hex().upper()
    return "0x" + (bits[:4] if dtype == "bf16" else bits)


def _user(op: str) -> bool:
    """Whether ``op`` is a user's instruction (``pj.tiles.register_op``)."""
    return op in isa.TABLE and isa.TABLE[op].operands.startswith("user-defined")


def user_attrs(s: asm.Instr) -> str:
    """A user instruction's parameters as a trailing attribute dict (``{factor = 3.0 : f64}``), which
    the engine and the replay parse back: bools, ints, finite floats, strings and lists of them."""
    def spell(v, name):
        if isinstance(v, (bool, np.bool_)):
            return "true" if v else "false"
        if isinstance(v, (int, np.integer)):
            return f"{int(v)} : i64"
        if isinstance(v, (float, np.floating)) and math.isfinite(v):
            return f"{float(v)!r} : f64"
        if isinstance(v, str) and '"' not in v and "\n" not in v:
            return f'"{v}"'
        if isinstance(v, (tuple, list)):
            return "[" + ", ".join(spell(x, name) for x in v) + "]"
        raise PtoUnsupportedError(f"pto realize: pto.{s.op}: parameter {name}={v!r} cannot be written in PTO-AS "
                                  "(bools, ints, finite floats, strings and lists of them can)")
    params = [(k, v) for k, v in s.attrs if k not in ("shapes", "scalar_first")]    # codegen's own notes
    return " {" + ", ".join(f"{k} = {spell(v, k)}" for k, v in params) + "}" if params else ""


class Selector:
    """Selects the real instructions of one kernel and prints its ``func.func``."""

    def __init__(self, kernel: asm.Kernel, arch: str, level: str, memory):
        self.kernel, self.arch, self.level, self.memory = kernel, arch, level, memory
        self.lines: list[str] = []
        self.types: dict[str, object] = {}       # SSA name -> TileBuf / ViewType / scalar type text
        self.shapes: dict[str, tuple] = {}       # tile name -> logical shape (from codegen's shapes attrs)
        self.top: dict[str, int] = {}            # buffer -> high-water mark (level3)
        self.counter = 0
        self.consts: dict = {}
        self.renamed: dict[str, str] = {}        # codegen tile -> the tile that stands for it
        self.values: dict[str, object] = {}      # scalar constant -> its value
        self.masks: dict[str, str] = {}          # codegen's i1 tile -> its packed i8 mask tile
        self.mask_names: set[str] = set()
        self.const_lines: list[str] = []

    def fail(self, instr: asm.Instr, why: str):
        raise PtoUnsupportedError(f"pto realize: program '{self.kernel.name}': pto.{instr.op} {why} "
                                  f"(no real PTO form yet) in `{instr.text()[:160]}`")

    def fresh(self, prefix="r") -> str:
        """A new SSA name (``%x…``: codegen's names never start with x)."""
        self.counter += 1
        return f"%x{prefix}{self.counter}"

    def const(self, value, type_: str) -> str:
        key = (repr(value), type_)
        if key not in self.consts:
            name = self.fresh("k")
            text = _float_text(value, type_) if type_ in _FLOATS else str(int(value))
            self.consts[key] = name
            self.types[name], self.values[name] = type_, value
            if type_ not in _FLOATS or math.isfinite(value):               # see nonfinite()
                self.const_lines.append(f"{name} = arith.constant {text} : {type_}")
        return self.consts[key]

    def tile_type(self, t: asm.TileBuf) -> asm.TileBuf:
        """A codegen tile type as the real dialect spells it (left ``zz`` on A2/A3, right ``zn``, a
        predicate as bytes)."""
        if t.dtype == "i1":
            t = asm.TileBuf(t.loc, "i8", t.rows, t.cols, t.v_row, t.v_col, t.blayout, t.slayout, t.fractal, t.pad)
        if t.loc == "vec" and t.v_col == 1 and t.rows == t.v_row:
            return column(t.v_row, t.dtype)          # (its bytes fit in codegen's R-row allocation)
        if t.loc == "left":
            return asm.TileBuf(t.loc, t.dtype, t.rows, t.cols, t.v_row, t.v_col,
                               "row_major" if self.arch == "a3" else "col_major", "row_major", t.fractal, t.pad)
        if t.loc == "right":
            return asm.TileBuf(t.loc, t.dtype, t.rows, t.cols, t.v_row, t.v_col, "row_major", "col_major",
                               t.fractal, t.pad)
        return t

    def alloc(self, t: asm.TileBuf, name: str | None = None, addr: int | None = None) -> str:
        name = name or self.fresh("u")
        self.types[name] = t
        if self.level == "level2":
            self.lines.append(f"{name} = pto.alloc_tile : {t}")
            return name
        size = t.rows * t.cols * t.np_dtype.itemsize
        if addr is None:
            align = _ALIGN[t.loc]
            addr = -(-self.top.get(t.loc, 0) // align) * align
            capacity = _BIAS_TABLE if t.loc == "bias" else self.memory.buffer(t.loc)
            if addr + size > capacity:
                raise PtoCapacityError(
                    f"pto realize: program '{self.kernel.name}': a {size}-byte {t.loc} tile that instruction "
                    f"selection adds does not fit above the planned {addr} of {capacity} bytes (level3); "
                    "print at level2 and let PTOAS plan memory")
        self.top[t.loc] = max(self.top.get(t.loc, 0), addr + size)
        self.lines.append(f"{name} = pto.alloc_tile addr = {self.const(addr, 'i64')} : {t}")
        return name

    def like(self, src: str, dtype: str | None = None, rows=None, cols=None) -> str:
        """A new vec tile shaped like ``src`` (or ``rows`` × ``cols`` valid)."""
        t = self.types[src]
        return self.alloc(vec_tile(rows or t.v_row, cols or t.v_col, dtype or t.dtype))

    def emit(self, op: str, ins, outs, attrs: dict | None = None):
        """Emit a compute instruction, in a dtype the vector unit computes in: ``bf16`` tiles through
        ``f32``, ``i8`` through ``i16`` (``tcvt`` in and out), as A2/A3 code must."""
        accepts = instructions.TABLE[op].dtypes_for(self.arch) if op in instructions.TABLE else ()
        narrow = [n for n in list(ins) + list(outs) if self.narrow(n) and self.types[n].dtype not in accepts]
        if op in _MOVES or not narrow:
            return self.print(op, ins, outs, attrs)
        wide = {n: _wider(self.types[n].dtype, accepts) for n in narrow}
        roles = (*(instructions.TABLE[op].roles(len(ins)) if op in instructions.TABLE else ()), *[None] * len(ins))
        wide_ins = [self.rescalar(n, wide) if n not in narrow     # a tmp tile holds nothing: a wide one of its own
                    else self.like(n, dtype=wide[n]) if role == "tmp" else self.widen(n, wide[n])
                    for n, role in zip(ins, roles)]
        wide_outs = [self.like(n, dtype=wide[n]) if n in narrow else n for n in outs]
        self.print(op, wide_ins, wide_outs, attrs)
        for narrow, wide in zip(outs, wide_outs):
            if wide != narrow:
                self.convert(wide, narrow, "RINT", saturate=False)

    def rescalar(self, name, wide: dict):
        """A narrow scalar operand as a constant of the dtype its tiles are widened to."""
        t = self.types[name]
        if isinstance(t, str) and t in _WIDE and name in self.values:
            return self.const(self.values[name], next((w for w in wide.values()), _WIDE[t]))
        return name

    def narrow(self, name) -> bool:
        t = self.types[name]
        return isinstance(t, asm.TileBuf) and t.loc == "vec" and t.dtype in _WIDE and name not in self.mask_names

    def widen(self, name, dtype: str | None = None) -> str:
        """``name`` converted to a wider dtype (``dtype``, else its default: ``f32`` / ``i16``)."""
        wide = self.like(name, dtype=dtype or _WIDE[self.types[name].dtype])
        self.convert(name, wide, "RINT")
        return wide

    def convert(self, src, dst, rmode, saturate=None):
        """``tcvt`` between tiles of one valid shape; a tile of another row pitch is copied first
        (``tcvt`` wants equal physical shapes); columns through their rows."""
        src, dst = self.row(src), self.row(dst)
        ts, td = self.types[src], self.types[dst]
        attrs = {"rmode": rmode}
        if saturate is not None:
            attrs["sat_mode"] = "ON" if saturate else "OFF"
        if (ts.rows, ts.cols) == (td.rows, td.cols):
            return self.print("tcvt", [src], [dst], attrs)
        cols = max(ts.cols, td.cols)
        if ts.cols < cols:
            wide = self.alloc(asm.TileBuf("vec", ts.dtype, ts.rows, cols, ts.v_row, ts.v_col))
            self.repitch(src, wide)
            return self.print("tcvt", [wide], [dst], attrs)
        wide = self.alloc(asm.TileBuf("vec", td.dtype, td.rows, cols, td.v_row, td.v_col))
        self.print("tcvt", [src], [wide], attrs)
        self.repitch(wide, dst)

    def repitch(self, src, dst):
        """Copy a tile into one of another row pitch (same dtype and valid shape): ``tmuls`` by 1 (exact,
        keeps -0.0 and NaN); integers on ``i32``/``i16`` views (A2/A3 have no i8 multiply), ``bf16`` (nor a
        bf16 one) through ``f32`` — no view of float bits as integers, which pto-isa's CPU ``treshape``
        refuses (TReshape.hpp:43)."""
        src, dst = self.row(src), self.row(dst)
        ts, td = self.types[src], self.types[dst]
        if ts.dtype == "bf16":
            wide = self.widen(src)
            narrow = self.alloc(asm.TileBuf(td.loc, "f32", td.rows, td.cols, td.v_row, td.v_col))
            self.repitch(wide, narrow)
            return self.convert(narrow, dst, "RINT")
        if ts.dtype not in _FLOATS:                                  # integers: as i32 / i16
            item = ts.np_dtype.itemsize
            bits, scale = {4: "i32", 2: "i16", 1: "i16"}[item], 2 if item == 1 else 1
            if ts.dtype != bits:
                src, dst = (self.reshape(n, asm.TileBuf(t.loc, bits, t.rows, t.cols // scale, t.v_row,
                                                        -(-t.v_col // scale))) for n, t in ((src, ts), (dst, td)))
        self.print("tmuls", [src, self.const(1, self.types[src].dtype)], [dst])

    def print(self, op: str, ins, outs, attrs: dict | None = None):
        """One instruction as the real dialect spells it (:func:`~ptojax.ascend.instructions.text`);
        a user-defined instruction in the same operands-then-types form. A ``tmov`` of a tile onto itself
        does nothing and prints nothing."""
        if op == "tmov" and ins[0] == outs[0]:
            return None
        if op == "ttrans" and any(is_column(self.types[n]) for n in (ins[0], outs[0])):
            return self.copy(ins[0], outs[0])                         # a column's transpose: its row
        if not op.startswith("trow") and op not in ("tload", "tstore", "tmov") and not _user(op):
            ins = [self.row(n) for n in ins]       # columns: elementwise on their rows (a user's op: as loaded)
            outs = [self.row(n) for n in outs]
        if op in _SAME_ROWS and is_column(self.types[outs[0]]) and (
                self.types[outs[0]].rows != self.types[ins[0]].rows):
            return self.row_reduce_rows(op, ins, outs[0], attrs)
        if op in _APART and (_APART[op] is None or self.arch in _APART[op]):
            shared = [n for n in outs if n in ins]
            if shared:                                                # into a tile of its own, then back
                apart = {n: self.like(n) for n in shared}
                self.print(op, ins, [apart.get(n, n) for n in outs], attrs)
                for n in shared:
                    self.copy(apart[n], n)
                return None
        special = [n for n in ins if self.types[n] in _FLOATS and not math.isfinite(self.values.get(n, 0.0))]
        if special:
            return self.nonfinite(op, ins, outs, attrs, special[0])
        ins_t = [(n, str(self.types[n])) for n in ins]
        outs_t = [(n, str(self.types[n])) for n in outs]
        if op in instructions.TABLE:
            return self.lines.append(instructions.text(op, ins_t, outs_t, attrs))
        self.lines.append(f"pto.{op} ins({', '.join(ins)} : {', '.join(t for _, t in ins_t)}) "
                          f"outs({', '.join(outs)} : {', '.join(t for _, t in outs_t)}){attrs or ''}")

    def row_reduce_rows(self, op, ins, out: str, attrs):
        """Row reduction ``op`` of ``ins[0]`` into ``out`` whose static rows differ from the source's (a
        column padded to 32 bytes, a tail tile's exact rows): into a row-major (ND) tile of the
        source's static rows, a value at the start of each 32-byte row, then its ``ttrans`` into
        ``out``'s ``1×R`` row."""
        ts, to = self.types[ins[0]], self.types[out]
        work = self.alloc(asm.TileBuf("vec", to.dtype, ts.rows, 32 // to.np_dtype.itemsize, ts.v_row, 1))
        self.print(op, ins, [work], attrs)
        self.print("ttrans", [work, self.like(work)], [self.row(out)])

    def nonfinite(self, op, ins, outs, attrs, scalar):
        """An instruction whose scalar operand is ±inf or NaN, without that constant: ptoas writes such a
        float as ``-Inf.0f`` in its C++, which no compiler takes. The value is made in a tile — the
        largest finite value doubled overflows to ±inf (round to nearest), ``inf * 0`` is NaN, negated by
        ``tneg`` (the vendor simulator's x86 makes the negative default NaN; jnp.nan, a fill's NaN, is
        positive, as the jitted replay's) — and the tile form does the op."""
        value, dtype = self.values[scalar], self.types[scalar]
        if op == "texpands":
            largest = float(ml_dtypes.finfo(asm.DTYPES[dtype]).max)     # np.finfo knows no bfloat16
            self.print("texpands", [self.const(largest if value > 0 or math.isnan(value) else -largest, dtype)], outs)
            self.print("tmuls", [outs[0], self.const(2.0, dtype)], outs)
            if math.isnan(value):
                self.print("tmuls", [outs[0], self.const(0.0, dtype)], outs)
                self.print("tneg", outs, outs)
            return None
        tile = next(n for n in ins if isinstance(self.types[n], asm.TileBuf))
        filled = self.like(tile, dtype=dtype)
        self.print("texpands", [scalar], [filled])
        base = {"tadds": "tadd", "tsubs": "tsub", "tmuls": "tmul", "tdivs": "tdiv", "tmaxs": "tmax", "tmins": "tmin",
                "tcmps": "tcmp", "tfmods": "tfmod"}.get(op)
        if base is None:
            raise PtoUnsupportedError(f"pto realize: program '{self.kernel.name}': pto.{op} with a non-finite scalar")
        self.print(base, [filled if n == scalar else n for n in ins], outs, attrs)

    def reshape(self, src: str, t: asm.TileBuf) -> str:
        """``treshape``: the same bytes as another tile type (an SSA alias, no data movement)."""
        name = self.fresh("a")
        self.types[name] = t
        self.lines.append(f"{name} = pto.treshape {src} : {self.types[src]} -> {t}")
        return name

    def run(self, symbol: str) -> str:
        self.cube = CubePlan(self.kernel.body)
        self.uses = _uses(self.kernel.body)
        self.block_index([n for n, t in self.kernel.params if t == "index"])
        self.body(deferred(self.kernel.body))
        return self.function(symbol)

    def function(self, symbol: str) -> str:
        """The ``func.func`` text around the printed lines: pointer parameters, the kernel kind."""
        k = self.kernel
        params = [f"{name}: {type_.replace('<i1>', '<i8>')}" for name, type_ in k.params if type_ != "index"]
        head = [f"func.func @{symbol}({', '.join(params)}) "
                f"attributes {{pto.kernel_kind = #pto.kernel_kind<{_KIND[k.core]}>}} {{"]
        return "\n".join(head + ["  " + line for line in self.const_lines + self.lines] + ["  return", "}"])

    def block_index(self, names, flat: str | None = None):
        """Grid indices ``names`` of the row-major position ``flat`` (default: ``pto.get_block_idx``),
        delinearised over the kernel's grid."""
        grid = tuple(self.kernel.grid) + (1,) * (len(names) - len(self.kernel.grid))
        if not names:
            return
        if flat is None:
            bid, flat = self.fresh("bid"), self.fresh("b")
            self.lines += [f"{bid} = pto.get_block_idx", f"{flat} = arith.index_cast {bid} : i64 to index"]
        for d, name in enumerate(names):
            inner, value = math.prod(grid[d + 1:]), flat
            if grid[d] == 1:
                self.lines.append(f"{name} = arith.constant 0 : index")
                continue
            if inner > 1:
                value = name if d == 0 else self.fresh("b")
                self.lines.append(f"{value} = arith.divsi {flat}, {self.const(inner, 'index')} : index")
            if d > 0:
                self.lines.append(f"{name} = arith.remsi {value}, {self.const(grid[d], 'index')} : index")
            elif value != name:
                self.lines.append(f"{name} = arith.addi {flat}, {self.const(0, 'index')} : index")

    def body(self, stmts, indent=""):
        for s in stmts:
            kind = type(s)
            if kind is asm.Const:
                if s.type == "index":
                    self.lines.append(s.text())
                    self.types[s.name] = "index"
                else:
                    self.types[s.name], self.values[s.name] = s.type, s.value
                    if s.type not in _FLOATS or math.isfinite(s.value):   # see nonfinite()
                        self.lines.append(f"{s.name} = arith.constant {_scalar_text(s.value, s.type)} : {s.type}")
            elif kind is asm.Arith:
                self.lines.append(s.text())
            elif kind is asm.MakeView:
                if not s.shape:                                         # a scalar: one element
                    one = (self.const(1, "index"),)
                    s = asm.MakeView(s.name, s.ptr, s.type, one, one)
                s = asm.MakeView(s.name, s.ptr, _bytes(s.type), s.shape, s.strides)
                self.lines.append(s.text())
                self.types[s.name] = s.type
                if s.name in self.cube.dn_views:
                    dn_view(self, s)
            elif kind is asm.PartitionView:
                s = asm.PartitionView(s.name, s.view, s.offsets or (self.const(0, "index"),),
                                      s.sizes or (self.const(1, "index"),), _bytes(s.source), _bytes(s.type))
                if s.name in self.cube.transposed_windows:
                    dn_partition(self, s)
                else:
                    self.lines.append(s.text())
                self.types[s.name] = s.type
            elif kind is asm.Alloc:
                t = self.tile_type(self.cube.types.get(s.name, s.type))
                self.alloc(t, s.name, s.addr if t == self.tile_type(s.type) else None)
            elif kind is asm.For:
                self.lines.append(f"scf.for {s.var} = {s.lower} to {s.upper} step {s.step} {{")
                outer, self.lines = self.lines, []
                self.body(s.body)
                inner, self.lines = self.lines, outer
                self.lines += ["  " + line for line in inner] + ["}"]
            else:
                self.instr(s)

    def shape(self, instr: asm.Instr, i: int, name: str):
        """The logical shape of ``instr``'s ``i``-th tile operand (codegen's ``shapes``, else 2-D)."""
        shapes = instr.attr("shapes")
        if shapes is not None and i < len(shapes):
            return tuple(shapes[i])
        t = self.types[name]
        return (t.v_row, t.v_col) if isinstance(t, asm.TileBuf) else ()

    def instr(self, s: asm.Instr):
        op = s.op
        ins = [self.renamed.get(o.name, o.name) for o in s.ins]
        outs = [o.name for o in s.outs]
        selected = RULES.get(op)
        with blame(s.source, live=False):            # an error names the user's call and line
            if selected is not None:
                return selected(self, s, ins, outs)
            if _user(op):
                return self.print(op, ins, outs, user_attrs(s))     # as written, its parameters too: not real PTO
            self.fail(s, "has no selection")

    def expand(self, s, name, src, dst) -> str:
        """Broadcast tile ``name`` (valid ``src``) to a new ``dst``-shaped tile."""
        t = self.types[name]
        if src == (1, 1) and dst[1] == 1:            # a value to a column: the row of the column, filled
            out = self.like(name, rows=dst[0], cols=1)
            self.print("trowexpand", [self.as_cell(name, t)], [self.row(out)])
            return out
        if src == (1, 1) and dst[0] > 1 and dst[1] > 1:
            name = self.expand(s, name, src, (dst[0], 1))
            src, t = (dst[0], 1), self.types[name]
        out = self.like(name, rows=dst[0], cols=dst[1])
        if src == (dst[0], 1):
            self.emit("trowexpand", [self.as_rows(name, t, src)], [out])
        elif src == (1, dst[1]):
            self.emit("tcolexpand", [name], [out])
        else:
            self.fail(s, f"broadcasting {list(src)} to {list(dst)}")
        return out

    def subset(self, name: str, row, rows: int, col=0, cols: int | None = None) -> str:
        """``pto.subset``: the ``rows`` × ``cols`` window of tile ``name`` at (``row``, ``col``) — ints, or
        index SSA names (an alias, no data movement) — typed as PTOAS infers it: each valid dim is
        ``min(size, parent valid - offset % parent valid)`` (0 for an empty parent), ``?`` at an offset
        that is not a constant."""
        t = self.types[name]
        cols = t.cols if cols is None else cols

        def valid(offset, size, parent):
            offset = self.values.get(offset, offset) if isinstance(offset, str) else offset
            if isinstance(offset, str) or parent == "?":
                return "?"
            return min(size, parent - int(offset) % parent) if parent > 0 else 0

        sub = self.fresh("s")
        self.types[sub] = asm.TileBuf(t.loc, t.dtype, rows, cols, valid(row, rows, t.v_row), valid(col, cols, t.v_col),
                                      t.blayout, t.slayout, t.fractal, t.pad)
        at = [o if isinstance(o, str) else self.const(int(o), "index") for o in (row, col)]
        self.lines.append(f"{sub} = pto.subset {name}[{at[0]}, {at[1]}] sizes [{rows}, {cols}] : {t}")
        return sub

    def copy(self, src: str, dst: str):
        """Copy tile ``src`` into ``dst`` (the same elements): ``tmov`` between tiles of one shape, a
        ``ttrans`` between a row and a column, else an alias when the bytes agree."""
        if is_column(self.types[src]) != is_column(self.types[dst]):
            src, dst = self.row(src), self.row(dst)
        ts, td = self.types[src], self.types[dst]
        if (ts.v_row, ts.v_col) == (td.v_row, td.v_col):
            if (ts.rows, ts.cols) == (td.rows, td.cols):
                return self.print("tmov", [src], [dst])
            return self.repitch(src, dst)
        if (ts.v_row, ts.v_col) == (td.v_col, td.v_row) and 1 in (ts.v_row, ts.v_col):
            return self.emit("ttrans", [src, self.like(src)], [dst])
        if ts.rows * ts.cols == td.rows * td.cols and ts.v_row * ts.v_col == td.v_row * td.v_col:
            return self.copy(src, self.reshape(dst, asm.TileBuf(td.loc, td.dtype, ts.rows, ts.cols, ts.v_row,
                                                                 ts.v_col)))
        raise PtoUnsupportedError(f"pto realize: program '{self.kernel.name}': no copy of a {ts.v_row}x{ts.v_col} "
                                  f"tile into a {td.v_row}x{td.v_col} one")

    def row(self, name):
        """A column tile's ``1×R`` row view (an alias); any other operand as it is."""
        t = self.types[name]
        return self.reshape(name, row_view(t)) if is_column(t) else name

    def as_rows(self, name, t, shape):
        """A tile whose valid region is ``shape`` (``R×1``) as a column operand of ``trowexpand*``."""
        return self.as_column(name, t, shape[0])

    def as_column(self, name, t, rows) -> str:
        """Tile ``name`` as an ``R×1`` column: itself, or a column alias of its ``1×R`` bytes."""
        if is_column(t) and t.v_row == rows:
            return name
        if t.v_row == 1 and t.v_col == rows and t.cols == column(rows, t.dtype).rows:
            return self.reshape(name, column(rows, t.dtype))
        if t.rows * t.cols * t.np_dtype.itemsize == column(rows, t.dtype).rows * t.np_dtype.itemsize:
            return self.reshape(name, column(rows, t.dtype))
        raise PtoUnsupportedError(f"pto realize: program '{self.kernel.name}': a {t.v_row}x{t.v_col} tile is no "
                                  f"{rows}-row column")

    def as_cell(self, name, t) -> str:
        return self.as_column(name, t, 1)


    def mask_for(self, name, t, mask: bool = False) -> str:
        """The packed ``ui8`` mask tile standing for codegen's ``i1`` tile ``name``: the mask of a compare
        over tiles of type ``t`` (or, ``mask=True``, of the same type as mask ``t``)."""
        if not mask:                            # A2/A3 pack a bit per element, in rows a multiple of 32
            rows, cols = mask_shape(t.v_row, t.v_col) if self.arch == "a3" else (t.rows, t.cols)   # bytes long
            pitch = -(-cols // 32) * 32 if self.arch == "a3" else cols      # (pto-isa's Tile static_asserts
            t = asm.TileBuf("vec", "ui8", rows, pitch, rows, cols)          # it); A5's: the compare's shape
        mask = self.alloc(t)
        self.masks[name] = mask
        self.mask_names.add(mask)
        return mask


def deferred(stmts) -> list:
    """Codegen's statements with each tile allocation moved down to just before the first statement
    (an instruction, or a loop around one) that uses the tile; an unused one stays where it was.

    Codegen allocates every tile up front. PTOAS's memory plan (level2) counts a tile allocated
    before an ``scf.for`` as live from the loop's start when the loop or a statement after it uses the
    tile, so tiles allocated up front and first used after a program's first loop — a row loop's
    next loops and tail chunks — would all take their space from that loop on."""
    first = {}
    for k, s in enumerate(stmts):
        for name in _tiles_of(s):
            first.setdefault(name, k)
    moved = {}
    for s in stmts:
        if isinstance(s, asm.Alloc) and s.name in first:
            moved.setdefault(first[s.name], []).append(s)
    out = []
    for k, s in enumerate(stmts):
        if not (isinstance(s, asm.Alloc) and s.name in first):
            out += moved.get(k, []) + [s]
    return out


def _tiles_of(stmt):
    """The names a statement (a loop: its body) reads or writes."""
    if isinstance(stmt, asm.Instr):
        return [o.name for o in (*stmt.ins, *stmt.outs)]
    if isinstance(stmt, asm.For):
        return [name for s in stmt.body for name in _tiles_of(s)]
    return []


def _wider(dtype: str, accepts) -> str:
    """The narrowest dtype wider than ``dtype`` that an instruction accepting ``accepts`` takes."""
    for wide in {"bf16": ("f32",), "i8": ("i16", "i32", "f16", "f32")}[dtype]:
        if not accepts or wide in accepts:
            return wide
    return _WIDE[dtype]


def _bytes(t: asm.ViewType) -> asm.ViewType:
    """A GM view as the real dialect takes it: booleans as bytes (``i8``: no ``i1`` tensors), a scalar
    as one element (ptoas prints a rank-0 view as a bare pointer, which pto-isa's TSTORE / TLOAD do not
    take: ``'layout' is not a member of 'float*'``)."""
    return asm.ViewType(t.shape or (1,), "i8" if t.dtype == "i1" else t.dtype, t.partition)


def _uses(body, uses=None) -> dict:
    """Codegen name -> the mnemonics of the instructions that read it (``tsel`` for its condition; the
    values it selects between are read as ``tsel value``: a predicate there is read as bytes)."""
    uses = {} if uses is None else uses
    for stmt in body:
        if isinstance(stmt, asm.For):
            _uses(stmt.body, uses)
        elif isinstance(stmt, asm.Instr):
            for i, o in enumerate(stmt.ins):
                uses.setdefault(o.name, set()).add("tsel value" if stmt.op == "tsel" and i else stmt.op)
    return uses


def _scalar_text(value, type_):
    if type_ in ("f32", "f16", "bf16"):
        return _float_text(float(value), type_)
    return str(int(value))          # i1 too: `arith.constant true : i1` is not MLIR (`1 : i1` is)


def vec_tile(rows: int, cols: int, dtype: str) -> asm.TileBuf:
    """A UB tile with a ``rows`` × ``cols`` valid region: row-major, its row pitch padded to 32 bytes;
    one column (a value per row) as a column-major ``R×1`` tile (:func:`column`)."""
    if cols == 1:
        return column(rows, dtype)
    item = asm.DTYPES[dtype].itemsize
    pitch = -(-cols * item // 32) * 32 // item
    return asm.TileBuf("vec", dtype, rows, pitch, rows, cols)


def column(rows: int, dtype: str) -> asm.TileBuf:
    """A value per row: the column-major ``R×1`` tile the row reductions write and the row expansions
    (``trowexpand*``) read — pto-isa reads a row-major ``R×1`` operand as a whole 32-byte block per
    row. Its bytes are the ``1×R`` row (:func:`row_view`), where the elementwise instructions work."""
    item = asm.DTYPES[dtype].itemsize
    return asm.TileBuf("vec", dtype, -(-rows * item // 32) * 32 // item, 1, rows, 1, "col_major", "none_box")


def is_column(t) -> bool:
    return isinstance(t, asm.TileBuf) and t.loc == "vec" and t.blayout == "col_major" and t.cols == 1


def row_view(t: asm.TileBuf) -> asm.TileBuf:
    """Column tile ``t``'s bytes as the ``1×R`` row-major tile they also are."""
    return asm.TileBuf("vec", t.dtype, 1, t.rows, 1, t.v_row)


def mask_shape(rows: int, cols: int) -> tuple[int, int]:
    """The ``i8`` tile a ``tcmp`` over ``rows`` × ``cols`` writes on A2/A3: one bit per element."""
    return rows, -(-cols // 8)


def symbols(kernels, tasks=None) -> list[str]:
    """Each kernel's function name in the module: its program name as an identifier, made unique;
    then, with ``tasks`` (tiles per task of each kernel), the name of each task function
    (:mod:`.task`: kernels whose tasks take more than one grid point), ``<name>_tasks<n>``."""
    out = []
    bases = [re.sub(r"^(?=[0-9])", "_", re.sub(r"[^A-Za-z0-9_]", "_", kernel.name)) for kernel in kernels]
    bases += [f"{base}_tasks{n}" for base, n in zip(bases, tasks or ()) if n > 1]
    for base in bases:
        name = base
        while name in out:
            name = f"{base}_{len(out)}"
        out.append(name)
    return out


def module(kernels, *, arch: str = "a3", level: str = "level2", memory=None, tasks=None) -> str:
    """The real PTO-AS module of a kernel's block programs: one ``func.func`` per grid point of each,
    then, with ``tasks`` (tiles per task of each kernel), a task function for each kernel whose tasks
    take more than one grid point (:mod:`.task`), in :func:`symbols`' order."""
    from .task import task_function

    if level not in LEVELS:
        raise PtoArgumentError(f"pto realize: level {level!r} is not one of {LEVELS}")
    names = symbols(kernels, tasks)
    funcs = [Selector(kernel, arch, level, memory).run(symbol) for kernel, symbol in zip(kernels, names)]
    grouped = [(kernel, n) for kernel, n in zip(kernels, tasks or ()) if n > 1]
    funcs += [task_function(kernel, symbol, n, arch=arch, level=level, memory=memory)
              for (kernel, n), symbol in zip(grouped, names[len(kernels):])]
    body = "\n".join("  " + line for f in funcs for line in f.splitlines())
    return f'module attributes {{pto.target_arch = "{arch}"}} {{\n{body}\n}}\n'
