"""An eager engine for the real PTO-AS text instruction selection prints (:mod:`ptojax.ascend.isel`,
``AscendKernel.pto()``): a parser and an interpreter.

``parse(text)`` reads the subset selection emits — ``module { func.func @f(%arg0: !pto.ptr<f32>, ...)
attributes {pto.kernel_kind = ...} { ... } }`` with ``arith.constant/addi/subi/muli/divsi/remsi/
index_cast``, ``pto.get_block_idx``, ``pto.make_tensor_view``, ``pto.partition_view``,
``pto.alloc_tile``, ``pto.treshape``, ``scf.for`` and every destination-passing instruction
``pto.<op> ins(%a, %b {attrs} : T0, T1) outs(%d : T2) {attrs}`` — into frozen dataclasses. Malformed
text is a :class:`PtoAsmError` with line and column.

``run(module, name, args, block_idx)`` executes one function for one block on host NumPy arrays
(the GM arguments, pointer parameters in order; ``tstore`` updates them in place);
``run_grid(..., blocks)`` runs block indices ``0 .. blocks-1`` in turn. The model:

* every ``alloc_tile`` owns a zeroed byte buffer of ``rows*cols*itemsize`` bytes; an ``addr`` is
  accepted and ignored (tiles never overlap here, so PTOAS-planned aliasing is not modelled);
* a ``vec`` tile is that buffer as a (rows, cols) array of its dtype, ``col_major`` meaning element
  (r, c) at ``c*rows + r``; ``treshape`` reinterprets the same bytes with the new type, so an R×1
  col_major alias of a 1×R row_major tile sees the same elements in order;
* cube tiles (mat/left/right/acc/bias) are plain row-major logical arrays: fractal layout is the
  hardware's business; ``tmov`` copies valid regions (an ``acc`` source converts, as FIXPIPE does);
* a tensor view is a strided NumPy view of the flat GM array (``strides = [1, R]`` with
  ``layout<dn>`` is the transpose); ``tload``/``tstore`` copy between a window and a tile's valid
  region (equal element counts; an ``acc`` tile's store rounds to the GM dtype to nearest);
* every other instruction is ``tile_semantics.SEMANTICS[mnemonic]`` on the valid regions (scalars
  0-d, ``out=`` the destination's ``ShapeDtypeStruct``), its result written into the destination.

Every fault is a :class:`PtoExecutionError` naming the function, the line and the instruction.
"""
from __future__ import annotations

import dataclasses
import re

import jax
import numpy as np

from .asm import DTYPES, PtoAsmError
from .interpreter import PtoExecutionError
from .tile_semantics import SEMANTICS

_ARITH = {"addi": lambda a, b: a + b, "subi": lambda a, b: a - b, "muli": lambda a, b: a * b,
          "divsi": lambda a, b: abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1),
          "remsi": lambda a, b: a - b * _ARITH["divsi"](a, b)}
_HEX_INT = {"f32": np.uint32, "f16": np.uint16, "bf16": np.uint16}


# ------------------------------------------------------------------------------------------ model
@dataclasses.dataclass(frozen=True)
class TileType:
    """``!pto.tile_buf<...>``."""
    loc: str
    dtype: str
    rows: int
    cols: int
    v_row: int
    v_col: int
    blayout: str = "row_major"
    slayout: str = "none_box"
    fractal: int = 512
    pad: int = 0


@dataclasses.dataclass(frozen=True)
class ViewType:
    """``!pto.tensor_view<AxBxdt>`` or (``partition``) ``!pto.partition_tensor_view<...>``."""
    shape: tuple[int, ...]
    dtype: str
    partition: bool = False


@dataclasses.dataclass(frozen=True)
class PtrType:
    dtype: str


@dataclasses.dataclass(frozen=True)
class Stmt:
    line: int            # 1-based source line, and its text (for error messages)
    text: str


@dataclasses.dataclass(frozen=True)
class Const(Stmt):
    result: str
    value: object        # int, float or bool
    type: str


@dataclasses.dataclass(frozen=True)
class Arith(Stmt):
    result: str
    op: str              # addi subi muli divsi remsi index_cast get_block_idx
    operands: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class View(Stmt):
    """``make_tensor_view %ptr, shape = a, strides = b`` or ``partition_view %view, offsets = a, sizes = b``."""
    result: str
    op: str
    src: str
    a: tuple
    b: tuple
    attrs: tuple
    type: ViewType


@dataclasses.dataclass(frozen=True)
class Tile(Stmt):
    """``alloc_tile [addr = %a]`` (``src`` None) or ``treshape %src`` (an alias of ``src``'s bytes)."""
    result: str
    src: str | None
    addr: str | int | None
    type: TileType


@dataclasses.dataclass(frozen=True)
class For(Stmt):
    var: str
    lo: str
    hi: str
    step: str
    body: tuple


@dataclasses.dataclass(frozen=True)
class Instr(Stmt):
    op: str
    ins: tuple[str, ...]
    in_types: tuple
    outs: tuple[str, ...]
    out_types: tuple
    attrs: tuple[tuple[str, object], ...]


@dataclasses.dataclass(frozen=True)
class Function:
    name: str
    params: tuple[tuple[str, object], ...]
    attrs: tuple
    body: tuple
    line: int


@dataclasses.dataclass(frozen=True)
class Module:
    attrs: tuple
    functions: tuple[Function, ...]

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise PtoExecutionError(f"pto engine: no function '{name}' in the module "
                                f"(has {[f.name for f in self.functions]})")


# ----------------------------------------------------------------------------------------- parser
_TOKEN = re.compile(r"""(?P<ws>\s+|//[^\n]*)|(?P<type>[!#][A-Za-z_][\w.]*)|(?P<ssa>%[\w.$]+)|(?P<sym>@[\w.$]+)
    |(?P<str>"[^"\n]*")|(?P<num>-?0x[0-9A-Fa-f]+|-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|(?P<word>[A-Za-z_][\w.]*)
    |(?P<punct>->|[(){}\[\],:=<>])""", re.VERBOSE)


class _Parser:
    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.toks, pos, line, start = [], 0, 1, 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m:
                self.fail((line, pos - start + 1), f"unexpected character {text[pos]!r}")
            kind, value, end = m.lastgroup, m.group(), m.end()
            if kind in ("type", "word") and text[end:end + 1] == "<":
                depth = 0                            # a parametric type/attribute: take the balanced <...>
                while end < len(text) and text[end] != "\n":
                    depth += {"<": 1, ">": -1}.get(text[end], 0)
                    end += 1
                    if depth == 0:
                        break
                if depth:
                    self.fail((line, pos - start + 1), "unbalanced '<' in a type")
                kind, value = "type", text[pos:end]
            if kind != "ws":
                self.toks.append((kind, value, line, pos - start + 1))
            for i in [i for i, ch in enumerate(value) if ch == "\n"]:
                line, start = line + 1, pos + i + 1
            pos = end
        self.i = 0

    def fail(self, at, message):
        line, col = at
        src = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        raise PtoAsmError(f"pto-as:{line}:{col}: {message}: {src!r}")

    def peek(self, k=0):
        j = self.i + k
        if j < len(self.toks):
            return self.toks[j]
        last = self.toks[-1] if self.toks else (None, "", 1, 0)
        return (None, None, last[2], last[3] + len(last[1]))

    def next(self, kind=None, value=None):
        tok = self.peek()
        if tok[0] is None or (kind and tok[0] != kind) or (value is not None and tok[1] != value):
            self.fail(tok[2:], f"expected {value or kind!r}, found {tok[1]!r}" if tok[0] else
                      f"expected {value or kind!r} at end of input")
        self.i += 1
        return tok[1]

    def expect(self, *values):
        for value in values:
            self.next(value=value)

    def accept(self, value):
        if self.peek()[1] == value and self.peek()[0] != "str":
            self.i += 1
            return True
        return False

    def listed(self, item, close):
        out = []
        if not self.accept(close):
            out.append(item())
            while self.accept(","):
                out.append(item())
            self.next(value=close)
        return tuple(out)

    # -- types and attributes
    def type(self):
        kind, text, line, col = self.peek()
        self.next()
        m = re.fullmatch(r"!pto\.(partition_)?tensor_view<((?:\d+x)*)(\w+)>", text or "")
        if m:
            return ViewType(tuple(int(d) for d in m.group(2).split("x") if d), m.group(3), bool(m.group(1)))
        m = re.fullmatch(r"!pto\.ptr<(\w+)>", text or "")
        if m:
            return PtrType(m.group(1))
        m = re.fullmatch(r"!pto\.tile_buf<(.*)>", text or "")
        if m:
            try:
                f = dict(p.strip().split("=", 1) for p in m.group(1).split(","))
                t = TileType(f["loc"], f["dtype"], *(int(f[k]) for k in ("rows", "cols", "v_row", "v_col")),
                             f.get("blayout", "row_major"), f.get("slayout", "none_box"),
                             int(f.get("fractal", 512)), int(f.get("pad", 0)))
            except (KeyError, ValueError) as err:
                self.fail((line, col), f"malformed tile type ({err})")
            if t.dtype not in DTYPES:
                self.fail((line, col), f"unknown dtype {t.dtype!r}")
            return t
        if kind == "word" or (kind == "type" and not text.startswith(("!", "#"))):
            return text
        self.fail((line, col), f"expected a type, found {text!r}")

    def attr_value(self):
        kind, text, line, col = self.peek()
        self.next()
        if kind == "type" and text.startswith("#"):
            inner = text[text.index("<") + 1:-1].split()
            value = inner[-1] if inner else ""
        elif kind == "num":
            value = int(text, 0) if re.fullmatch(r"-?(0x)?[0-9A-Fa-f]+", text) else float(text)
        elif kind == "str":
            value = text[1:-1]
        elif text in ("true", "false"):
            value = text == "true"
        else:
            self.fail((line, col), f"bad attribute value {text!r}")
        if self.peek()[1] == ":" and self.peek(1)[0] == "word" and self.peek(2)[1] in (",", "}"):
            self.next(), self.next()              # a typed literal: `3 : i32`
        return value

    def attrs(self):
        self.next(value="{")

        def item():
            name = self.next("word")
            self.expect("=")
            return name, self.attr_value()
        return self.listed(item, "}")

    def operand(self):
        kind, text, line, col = self.peek()
        if kind == "num" and "." not in text:
            self.next()
            return int(text, 0)
        return self.next("ssa")

    # -- structure
    def module(self) -> Module:
        self.expect("module")
        attrs = self.attrs() if self.accept("attributes") else ()
        self.expect("{")
        funcs = []
        while not self.accept("}"):
            funcs.append(self.function())
        if self.peek()[0] is not None:
            self.fail(self.peek()[2:], f"unexpected {self.peek()[1]!r} after the module")
        return Module(attrs, tuple(funcs))

    def function(self) -> Function:
        line = self.peek()[2]
        self.expect("func.func")
        name = self.next("sym")[1:]
        self.expect("(")

        def param():
            pname = self.next("ssa")
            self.expect(":")
            return pname, self.type()
        params = self.listed(param, ")")
        attrs = self.attrs() if self.accept("attributes") else ()
        return Function(name, params, attrs, self.block(), line)

    def block(self):
        self.expect("{")
        body = []
        while not self.accept("}"):
            body.append(self.statement())
        return tuple(body)

    def statement(self):
        kind, text, line, col = self.peek()
        at = dict(line=line, text=self.lines[line - 1].strip())
        if text == "return":
            self.next()
            return Stmt(**at)
        if text == "scf.for":
            self.next()
            var = self.next("ssa")
            self.expect("=")
            lo = self.operand()
            self.expect("to")
            hi = self.operand()
            self.expect("step")
            return For(**at, var=var, lo=lo, hi=hi, step=self.operand(), body=self.block())
        if kind == "word" and text.startswith("pto."):
            return self.instr(at)
        result = self.next("ssa")
        self.expect("=")
        _, op, oline, ocol = self.peek()
        self.next("word")
        if op == "arith.constant":
            vkind, vtext, vline, vcol = self.peek()
            self.next()
            self.expect(":")
            type_ = self.type()
            return Const(**at, result=result, value=self.literal(vkind, vtext, type_, (vline, vcol)), type=type_)
        if op in ("arith." + k for k in _ARITH):
            a = self.operand()
            self.expect(",")
            b = self.operand()
            self.expect(":")
            self.type()
            return Arith(**at, result=result, op=op[6:], operands=(a, b))
        if op == "arith.index_cast":
            a = self.operand()
            self.expect(":"), self.type(), self.expect("to"), self.type()
            return Arith(**at, result=result, op="index_cast", operands=(a,))
        if op == "pto.get_block_idx":
            if self.accept(":"):
                self.type()
            return Arith(**at, result=result, op="get_block_idx", operands=())
        if op in ("pto.make_tensor_view", "pto.partition_view"):
            src = self.next("ssa")
            lists = []
            for key in (("shape", "strides") if op == "pto.make_tensor_view" else ("offsets", "sizes")):
                self.expect(",", key, "=", "[")
                lists.append(self.listed(self.operand, "]"))
            attrs = self.attrs() if self.peek()[1] == "{" else ()
            self.expect(":")
            type_ = self.type()
            if op == "pto.partition_view":
                self.expect("->")
                type_ = self.type()
            return View(**at, result=result, op=op[4:], src=src, a=lists[0], b=lists[1], attrs=attrs, type=type_)
        if op == "pto.alloc_tile":
            addr = None
            if self.accept("addr"):
                self.expect("=")
                addr = self.operand()
            self.expect(":")
            return Tile(**at, result=result, src=None, addr=addr, type=self.type())
        if op == "pto.treshape":
            src = self.next("ssa")
            self.expect(":"), self.type(), self.expect("->")
            return Tile(**at, result=result, src=src, addr=None, type=self.type())
        self.fail((oline, ocol), f"unknown operation {op!r}")

    def literal(self, kind, text, type_, at):
        if text in ("true", "false") and type_ == "i1":
            return text == "true"
        if kind != "num":
            self.fail(at, f"bad constant {text!r}")
        if text.lstrip("-").startswith("0x"):
            if type_ in _HEX_INT:                 # a float's bit pattern, as MLIR prints non-finite values
                bits = np.array(int(text, 16), np.uint64).astype(_HEX_INT[type_])
                return float(bits.view(DTYPES[type_]))
            return int(text, 16)
        if type_ == "index" or type_ in DTYPES and DTYPES[type_].kind in "iub" or re.fullmatch(r"i\d+", type_):
            if not re.fullmatch(r"-?\d+", text):
                self.fail(at, f"bad integer constant {text!r} : {type_}")
            return int(text)
        return float(text)

    def instr(self, at):
        op = self.next("word")[4:]
        ins, in_types, attrs = [], (), []
        self.expect("ins", "(")
        while self.peek()[1] not in (":", ")"):
            if self.peek()[1] == "{":
                attrs += self.attrs()
            else:
                ins.append(self.next("ssa"))
            self.accept(",")
        if self.accept(":"):
            in_types = self.listed(self.type, ")")
        else:
            self.expect(")")
        self.expect("outs", "(")
        outs = self.listed(lambda: self.next("ssa"), ":")
        out_types = self.listed(self.type, ")")
        if self.peek()[1] == "{" and self.peek()[2] == at["line"]:
            attrs += self.attrs()
        return Instr(**at, op=op, ins=tuple(ins), in_types=in_types, outs=outs, out_types=out_types,
                     attrs=tuple(attrs))


def parse(text: str) -> Module:
    """Parse realize's PTO-AS text into a :class:`Module` (a :class:`PtoAsmError` with line:col)."""
    return _Parser(text).module()


# ------------------------------------------------------------------------------------ interpreter
class _Tile:
    """A tile: its type over a byte buffer it may share with its ``treshape`` aliases."""

    def __init__(self, type_: TileType, buf=None):
        self.type, self.dtype = type_, DTYPES[type_.dtype]
        self.buf = np.zeros(type_.rows * type_.cols * self.dtype.itemsize, np.uint8) if buf is None else buf

    def valid(self) -> np.ndarray:
        t = self.type
        flat = self.buf[: t.rows * t.cols * self.dtype.itemsize].view(self.dtype)
        if t.loc == "vec" and t.blayout == "col_major":
            return flat.reshape(t.cols, t.rows).T[: t.v_row, : t.v_col]
        return flat.reshape(t.rows, t.cols)[: t.v_row, : t.v_col]


class _Run:
    def __init__(self, func: Function, args, block_idx: int):
        self.func, self.block_idx, self.env = func, block_idx, {}
        if len(args) != len(func.params):
            raise self.error(None, f"expects {len(func.params)} arguments ({[n for n, _ in func.params]}), "
                                   f"got {len(args)}")
        for (name, type_), arg in zip(func.params, args):
            if isinstance(type_, PtrType):
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
            if isinstance(value, _Tile) or np.ndim(value):
                raise self.error(stmt, f"{name} is not an index")
            return int(value)
        if kind is not None and not isinstance(value, kind):
            raise self.error(stmt, f"{name} is not a {'tile' if kind is _Tile else 'tensor view'}")
        return value

    def block(self, body):
        for stmt in body:
            if type(stmt) is Stmt:                # return
                return
            self.DISPATCH[type(stmt)](self, stmt)

    def const(self, s: Const):
        self.env[s.result] = s.value if s.type == "index" else np.asarray(s.value, DTYPES.get(s.type, np.int64))

    def arith(self, s: Arith):
        if s.op == "get_block_idx":
            self.env[s.result] = self.block_idx
            return
        vals = [self.get(s, o, int) for o in s.operands]
        if s.op in ("divsi", "remsi") and vals[1] == 0:
            raise self.error(s, "division by zero")
        self.env[s.result] = vals[0] if s.op == "index_cast" else _ARITH[s.op](*vals)

    def view(self, s: View):
        src = self.get(s, s.src, np.ndarray)
        a, b = [self.get(s, v, int) for v in s.a], [self.get(s, v, int) for v in s.b]
        if s.op == "make_tensor_view":         # a strided view of the flat GM array (dn: the transpose)
            if src.dtype != DTYPES[s.type.dtype] or tuple(a) != s.type.shape or len(b) != len(a):
                raise self.error(s, f"shape {a} strides {b} over a {src.dtype.name} pointer do not match {s.type}")
            reach = sum((n - 1) * st for n, st in zip(a, b)) if all(a) else -1
            if min(b, default=0) < 0 or reach >= src.size:
                raise self.error(s, f"view shape {a} strides {b} reaches past the {src.size}-element tensor")
            self.env[s.result] = np.lib.stride_tricks.as_strided(src, a, [st * src.itemsize for st in b])
            return
        if len(a) != src.ndim or len(b) != src.ndim or any(
                o < 0 or n < 0 or o + n > d for o, n, d in zip(a, b, src.shape)):
            raise self.error(s, f"window offsets {a} sizes {b} fall outside the tensor {list(src.shape)}")
        if tuple(b) != s.type.shape:
            raise self.error(s, f"window sizes {b} do not match {s.type}")
        self.env[s.result] = src[tuple(slice(o, o + n) for o, n in zip(a, b)) or ...]   # 0-d: still a view

    def tile(self, s: Tile):
        t, buf = s.type, None
        if not (0 <= t.v_row <= t.rows and 0 <= t.v_col <= t.cols):
            raise self.error(s, f"valid region {t.v_row}x{t.v_col} exceeds the tile {t.rows}x{t.cols}")
        if s.src is not None:
            buf = self.get(s, s.src, _Tile).buf
            if t.rows * t.cols * DTYPES[t.dtype].itemsize > buf.size:
                raise self.error(s, f"{t.rows}x{t.cols} {t.dtype} does not fit the {buf.size}-byte tile {s.src}")
        self.env[s.result] = _Tile(t, buf)

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
            if isinstance(value, _Tile) and value.type != declared or isinstance(declared, ViewType) and (
                    not isinstance(value, np.ndarray) or value.shape != declared.shape):
                raise self.error(s, f"{name} is {getattr(value, 'type', getattr(value, 'shape', value))} "
                                    f"but the instruction says {declared}")
        if s.op == "tload":
            return self.copy(s, ins[0], outs[0], window_from=True)
        if s.op == "tstore":
            return self.copy(s, outs[0], ins[0], window_from=False)
        if s.op == "tmov":
            src, dst = self.tiles(s, ins + outs)
            return self.put(s, dst, self.converted(s, src, dst.dtype, src.valid()))
        fn = SEMANTICS.get(s.op)
        if fn is None:
            raise self.error(s, f"no semantics for pto.{s.op}")
        dsts = self.tiles(s, outs)
        args = [np.array(v.valid()) if isinstance(v, _Tile) else np.asarray(v) for v in ins]
        specs = [jax.ShapeDtypeStruct(d.valid().shape, d.dtype) for d in dsts]
        try:
            res = fn(*args, out=specs[0] if len(specs) == 1 else tuple(specs), **dict(s.attrs))
        except (TypeError, ValueError, IndexError, KeyError) as err:
            raise self.error(s, f"pto.{s.op} failed: {type(err).__name__}: {err}") from err
        res = res if isinstance(res, tuple) else (res,)
        if len(res) != len(dsts):
            raise self.error(s, f"{len(res)} results for {len(dsts)} destinations")
        for d, r in zip(dsts, res):
            self.put(s, d, np.asarray(r))

    def tiles(self, s, values):
        if not all(isinstance(v, _Tile) for v in values):
            raise self.error(s, "operands must be tiles")
        return values

    def converted(self, s, src: _Tile, dtype, value):
        if src.dtype != dtype and src.type.loc != "acc":
            raise self.error(s, f"dtype {src.dtype.name} does not match {np.dtype(dtype).name}")
        return value.astype(dtype)                  # acc (FIXPIPE): round to nearest

    def put(self, s, dst: _Tile, value):
        region = dst.valid()
        if value.shape != region.shape or value.dtype != dst.dtype:
            raise self.error(s, f"result {value.dtype.name}{list(value.shape)} does not fit the destination's "
                                f"valid region {dst.dtype.name}{list(region.shape)}")
        region[...] = value

    def copy(self, s, window, tile, window_from: bool):
        if not isinstance(window, np.ndarray) or not isinstance(tile, _Tile):
            raise self.error(s, "needs a partition view and a tile")
        region = tile.valid()
        if window.size != region.size:
            raise self.error(s, f"window {list(window.shape)} and valid region {list(region.shape)} "
                                "hold different numbers of elements")
        if window_from:
            if window.dtype != tile.dtype:
                raise self.error(s, f"GM {window.dtype.name} does not match the tile's {tile.dtype.name}")
            region[...] = window.reshape(region.shape)
        else:
            window[...] = self.converted(s, tile, window.dtype, region).reshape(window.shape)


_Run.DISPATCH = {Const: _Run.const, Arith: _Run.arith, View: _Run.view, Tile: _Run.tile, For: _Run.for_,
                 Instr: _Run.instr}


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


__all__ = ["Arith", "Const", "For", "Function", "Instr", "Module", "PtrType", "Stmt", "Tile", "TileType", "View",
           "ViewType", "parse", "run", "run_grid"]
