"""The parser of the real-PTO-AS engine (:mod:`ptojax.ascend.engine`): the text instruction selection
prints (:mod:`ptojax.ascend.isel`, ``AscendKernel.pto()``) as frozen dataclasses.

The subset read: ``module { func.func @f(%arg0: !pto.ptr<f32>, ...) attributes {pto.kernel_kind = ...}
{ ... } }`` with

* ``arith.constant`` (ints, floats, their hex bit patterns, ``true``/``false``, ``dense<v> :
  vector<NxT>``), ``arith.addi/subi/muli/divsi/remsi/minsi/maxsi`` and ``arith.cmpi <pred>`` on
  ``index`` / ``iN``, ``arith.index_cast``, ``pto.get_block_idx``;
* ``pto.make_tensor_view``, ``pto.partition_view``, ``pto.alloc_tile``, ``pto.treshape``,
  ``pto.subset %t[%r, %c] sizes [R, C] : T`` (its result type inferred as PTOAS infers it, see
  :func:`subset_type`), ``pto.tgetval ins(%t, %off : T, index) outs : dt``, ``pto.load_scalar
  %ptr[%off] : !pto.ptr<dt> -> dt``;
* ``scf.for`` and ``scf.if %cond { ... } [else { ... }]``;
* every destination-passing instruction ``pto.<op> ins(%a, %b {attrs} : T0, T1) outs(%d : T2)
  {attrs}`` (``pto.tsetval``, ``tgather``'s mask form and ``tmrgsort``'s ``vector<4xi16>`` output
  included).

Tile types may carry ``?`` valid dims (``None`` here). Malformed text is a :class:`PtoAsmError`
with line and column.
"""
from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np

from .asm import DTYPES as _ASM_DTYPES
from .asm import PtoAsmError
from ..errors import PtoExecutionError
from ..lowering.memory import ASCEND_CORE

DTYPES = {**_ASM_DTYPES, "i64": np.dtype(np.int64), "ui8": np.dtype(np.uint8), "ui16": np.dtype(np.uint16),
          "ui32": np.dtype(np.uint32), "ui64": np.dtype(np.uint64)}
ARITH_OPS = ("addi", "subi", "muli", "divsi", "remsi", "minsi", "maxsi")
CMP_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
_HEX_INT = {"f32": np.uint32, "f16": np.uint16, "bf16": np.uint16}


# ------------------------------------------------------------------------------------------ model
@dataclasses.dataclass(frozen=True)
class TileType:
    """``!pto.tile_buf<...>``; a valid dim is ``None`` where the text says ``?`` (known at run time)."""
    loc: str
    dtype: str
    rows: int
    cols: int
    v_row: int | None
    v_col: int | None
    blayout: str = "row_major"
    slayout: str = "none_box"
    fractal: int = 512
    pad: int = 0


@dataclasses.dataclass(frozen=True)
class ViewType:
    """``!pto.tensor_view<AxBxdt>`` or (``partition``) ``!pto.partition_tensor_view<...>``; a dim is
    ``None`` where the text says ``?`` (its size is the ``shape``/``sizes`` operand at run time)."""
    shape: tuple[int | None, ...]
    dtype: str
    partition: bool = False


@dataclasses.dataclass(frozen=True)
class PtrType:
    dtype: str


@dataclasses.dataclass(frozen=True)
class VectorType:
    """``vector<4xi16>`` (``tmrgsort``'s executed counts)."""
    shape: tuple[int, ...]
    dtype: str


@dataclasses.dataclass(frozen=True)
class Stmt:
    line: int            # 1-based source line, and its text (for error messages)
    text: str


@dataclasses.dataclass(frozen=True)
class Const(Stmt):
    result: str
    value: object        # int, float, bool, or a read-only array (``dense<...>``)
    type: object


@dataclasses.dataclass(frozen=True)
class Arith(Stmt):
    result: str
    op: str              # addi subi muli divsi remsi minsi maxsi cmpi index_cast get_block_idx
    operands: tuple[str, ...]
    type: str = "index"  # the result's type (cmpi: the operands')
    pred: str | None = None


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
    """``alloc_tile [addr = %a] [valid_row = %r] [valid_col = %c]`` (``src`` None) or ``treshape %src``
    (an alias of ``src``'s bytes)."""
    result: str
    src: str | None
    addr: str | int | None
    type: TileType
    valid: tuple = ()      # (valid_row, valid_col) operands (None: absent) of a ``?`` type (set_validshape's too)


@dataclasses.dataclass(frozen=True)
class Subset(Stmt):
    """``subset %src[offsets] sizes [R, C] : src_type``: a window of ``src``'s buffer; ``type`` inferred."""
    result: str
    src: str
    offsets: tuple
    sizes: tuple[int, ...]
    src_type: TileType
    type: TileType


@dataclasses.dataclass(frozen=True)
class Scalar(Stmt):
    """``tgetval ins(%src, %offset : T, index) outs : dt`` or ``load_scalar %src[%offset] : ptr -> dt``."""
    result: str
    op: str
    src: str
    offset: str | int
    src_type: object
    type: str


@dataclasses.dataclass(frozen=True)
class For(Stmt):
    var: str
    lo: str
    hi: str
    step: str
    body: tuple


@dataclasses.dataclass(frozen=True)
class If(Stmt):
    cond: str
    then: tuple
    orelse: tuple = ()


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


def subset_valid(offset: int | None, size: int, parent: int | None) -> int | None:
    """PTOAS's valid dim of a ``pto.subset`` (``SubsetOp::inferReturnTypes`` and, at run time,
    ``computeSubsetValidDim``): ``min(size, parent - offset % parent)`` — the parent's valid dim as a
    period, so an offset equal to it starts a full next period — 0 for an empty parent, ``None``
    (``?``) when the offset or the parent's dim is not known."""
    if offset is None or parent is None:
        return None
    return min(size, parent - offset % parent) if parent > 0 else 0


def subset_type(src: TileType, offsets, sizes) -> TileType:
    """The result type PTOAS infers for a subset of ``src`` (``offsets``: ints where constant, else None)."""
    (r, c), (rows, cols) = offsets, sizes
    return dataclasses.replace(src, rows=rows, cols=cols, v_row=subset_valid(r, rows, src.v_row),
                               v_col=subset_valid(c, cols, src.v_col))


# ----------------------------------------------------------------------------------------- parser
_LOCS = ("vec", "mat", "left", "right", "acc")      # on-chip buffers whose capacity bounds a tile
_TYPES: dict = {}        # a type's text -> its parsed (frozen) value, as every module spells the same few
_TOKEN = re.compile(r"""(?P<ws>\s+|//[^\n]*)|(?P<param>[!#]?[A-Za-z_][\w.]*<(?:[^<>\n]|<[^<>\n]*>)*>)
    |(?P<type>[!#][A-Za-z_][\w.]*)|(?P<ssa>%[\w.$]+)|(?P<sym>@[\w.$]+)
    |(?P<str>"[^"\n]*")|(?P<num>-?0x[0-9A-Fa-f]+|-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|(?P<word>[A-Za-z_][\w.]*)
    |(?P<punct>->|[(){}\[\],:=<>])""", re.VERBOSE)    # param: a parametric type nested at most twice


class Parser:
    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.toks, pos, line, start = [], 0, 1, 0
        self.consts: dict[str, object] = {}          # SSA name -> value of an arith.constant (this function)
        self.const_types: dict[str, object] = {}     # ... and its type
        self.scopes: list[dict[str, int]] = []        # SSA names defined in each enclosing block -> their line
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m:
                self.fail((line, pos - start + 1), f"unexpected character {text[pos]!r}")
            kind, value, end = m.lastgroup, m.group(), m.end()
            if kind == "ws":
                if "\n" in value:
                    line, start = line + value.count("\n"), pos + value.rindex("\n") + 1
                pos = end
                continue
            if kind == "param":
                kind = "type"
            elif kind in ("type", "word") and text[end:end + 1] == "<":
                depth = 0                            # a parametric type/attribute: take the balanced <...>
                while end < len(text) and text[end] != "\n":
                    depth += {"<": 1, ">": -1}.get(text[end], 0)
                    end += 1
                    if depth == 0:
                        break
                if depth:
                    self.fail((line, pos - start + 1), "unbalanced '<' in a type")
                kind, value = "type", text[pos:end]
            self.toks.append((kind, value, line, pos - start + 1))
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
        if text in _TYPES:
            return _TYPES[text]
        if len(_TYPES) > 4096:
            _TYPES.clear()
        t = _TYPES[text] = self._type(kind, text, line, col)
        return t

    def _type(self, kind, text, line, col):
        m = re.fullmatch(r"!pto\.(partition_)?tensor_view<((?:(?:\d+|\?)x)*)(\w+)>", text or "")
        if m:
            self.known(m.group(3), (line, col))
            return ViewType(tuple(None if d == "?" else int(d) for d in m.group(2).split("x") if d), m.group(3),
                            bool(m.group(1)))
        m = re.fullmatch(r"!pto\.ptr<(\w+)>", text or "")
        if m:
            return PtrType(self.known(m.group(1), (line, col)))
        m = re.fullmatch(r"vector<((?:\d+x)+)(\w+)>", text or "")
        if m:
            return VectorType(tuple(int(d) for d in m.group(1).split("x") if d), self.known(m.group(2), (line, col)))
        m = re.fullmatch(r"!pto\.tile_buf<(.*)>", text or "")
        if m:
            try:
                f = dict(p.strip().split("=", 1) for p in m.group(1).split(","))
                dim = {k: None if f[k] == "?" else int(f[k]) for k in ("rows", "cols", "v_row", "v_col")}
                t = TileType(f["loc"], f["dtype"], *dim.values(), f.get("blayout", "row_major"),
                             f.get("slayout", "none_box"), int(f.get("fractal", 512)), int(f.get("pad", 0)))
            except (KeyError, ValueError) as err:
                self.fail((line, col), f"malformed tile type ({err})")
            self.known(t.dtype, (line, col))
            if t.rows is None or t.cols is None:
                self.fail((line, col), "a tile's rows and cols must be static")
            if t.loc in _LOCS and t.rows * t.cols * DTYPES[t.dtype].itemsize > ASCEND_CORE.buffer(t.loc):
                self.fail((line, col), f"a {t.rows}x{t.cols} {t.dtype} tile is larger than the "
                                       f"{ASCEND_CORE.buffer(t.loc)}-byte {t.loc} buffer")
            return t
        if kind == "word" or (kind == "type" and not text.startswith(("!", "#"))):
            return text
        self.fail((line, col), f"expected a type, found {text!r}")

    def known(self, dtype: str, at) -> str:
        """``dtype``, a dtype the engine knows; else a PtoAsmError at ``at``."""
        if dtype not in DTYPES:
            self.fail(at, f"unknown dtype {dtype!r}")
        return dtype

    def attr_value(self):
        kind, text, line, col = self.peek()
        self.next()
        if text == "[":
            return tuple(self.listed(self.attr_value, "]"))
        if kind == "type" and text.startswith("#"):
            if "<" not in text:
                self.fail((line, col), f"malformed attribute {text!r}")
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
        if self.peek()[1] == ":" and self.peek(1)[0] == "word" and self.peek(2)[1] in (",", "}", "]"):
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
        self.consts, self.scopes = {}, [{}]

        def param():
            pname = self.define()
            self.expect(":")
            return pname, self.type()
        params = self.listed(param, ")")
        attrs = self.attrs() if self.accept("attributes") else ()
        return Function(name, params, attrs, self.block(), line)

    def define(self) -> str:
        """The SSA name next, defined in the current block: once in it and the blocks around it (PTOAS:
        "redefinition of SSA value")."""
        _, name, line, col = self.peek()
        self.next("ssa")
        first = next((scope[name] for scope in self.scopes if name in scope), None)
        if first is not None:
            self.fail((line, col), f"redefinition of SSA value {name} (first defined on line {first})")
        self.scopes[-1][name] = line
        return name

    def block(self, *defined):
        """The statements between braces; ``defined``: the names the block's own op defines in it (a loop's
        induction variable, already read)."""
        self.expect("{")
        self.scopes.append(dict.fromkeys(defined, self.peek(-1)[2]))
        body = []
        while not self.accept("}"):
            if self.peek()[1] == "pto.set_validshape":
                body[-1:] = [self.set_valid(body[-1] if body else None)]
                continue
            body.append(self.statement())
        self.scopes.pop()
        return tuple(body)

    def set_valid(self, last):
        """``pto.set_validshape %t, %rows, %cols : type`` right after the ``treshape`` that makes ``%t``
        (a ``(?, ?)`` view, which PTOAS first gives its source's valid dims of the same place): the view's
        valid region from the operands, as the ``Tile`` that makes it."""
        at = self.peek()[2:]
        self.next("word")
        name = self.next("ssa")
        self.expect(",")
        rows = self.operand()
        self.expect(",")
        cols = self.operand()
        self.expect(":")
        type_ = self.tile_type()
        if not (isinstance(last, Tile) and last.src is not None and last.result == name and last.type == type_
                and type_.v_row is None and type_.v_col is None):
            self.fail(at, f"pto.set_validshape of {name}: the engine takes it right after the pto.treshape that "
                          "makes it, of a (?, ?) tile type")
        return dataclasses.replace(last, valid=(rows, cols))

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
            step = self.operand()
            return For(**at, var=var, lo=lo, hi=hi, step=step, body=self.block(var))
        if text == "scf.if":
            self.next()
            cond, then = self.next("ssa"), self.block()
            return If(**at, cond=cond, then=then, orelse=self.block() if self.accept("else") else ())
        if kind == "word" and text.startswith("pto."):
            return self.instr(at)
        result = self.define()
        self.expect("=")
        _, op, oline, ocol = self.peek()
        self.next("word")
        if op == "arith.constant":
            vkind, vtext, vline, vcol = self.peek()
            self.next()
            self.expect(":")
            type_ = self.type()
            value = self.literal(vkind, vtext, type_, (vline, vcol))
            self.consts[result] = value
            self.const_types[result] = type_
            return Const(**at, result=result, value=value, type=type_)
        if op in ("arith." + k for k in ARITH_OPS) or op == "arith.cmpi":
            pred = None
            if op == "arith.cmpi":
                pred = self.next("word")
                if pred not in CMP_PREDICATES:
                    self.fail(self.peek(-1)[2:], f"unknown cmpi predicate {pred!r}")
                self.expect(",")
            a = self.operand()
            self.expect(",")
            b = self.operand()
            self.expect(":")
            return Arith(**at, result=result, op=op[6:], operands=(a, b), type=self.int_type(), pred=pred)
        if op == "arith.index_cast":
            a = self.operand()
            self.expect(":"), self.int_type(), self.expect("to")
            return Arith(**at, result=result, op="index_cast", operands=(a,), type=self.int_type())
        if op == "pto.get_block_idx":
            if self.accept(":"):
                self.type()
            return Arith(**at, result=result, op="get_block_idx", operands=(), type="i64")
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
            valid = [None, None]               # operands of the dims the type leaves dynamic (``?``)
            for k, key in enumerate(("valid_row", "valid_col")):
                if self.accept(key):
                    self.expect("=")
                    valid[k] = self.operand()
            valid = tuple(valid) if any(valid) else ()
            self.expect(":")
            return Tile(**at, result=result, src=None, addr=addr, type=self.tile_type(), valid=valid)
        if op == "pto.treshape":
            src = self.next("ssa")
            self.expect(":"), self.tile_type(), self.expect("->")
            return Tile(**at, result=result, src=src, addr=None, type=self.tile_type())
        if op == "pto.subset":
            return self.subset(at, result)
        if op in ("pto.tgetval", "pto.load_scalar"):
            return self.scalar(at, result, op[4:])
        self.fail((oline, ocol), f"unknown operation {op!r}")

    def int_type(self):
        at = self.peek()[2:]
        type_ = self.type()
        if not (type_ == "index" or isinstance(type_, str) and re.fullmatch(r"i(1|8|16|32|64)", type_)):
            self.fail(at, f"expected index or an integer type, found {type_!r}")
        return type_

    def tile_type(self):
        at = self.peek()[2:]
        type_ = self.type()
        if not isinstance(type_, TileType):
            self.fail(at, f"expected a tile type, found {type_!r}")
        return type_

    def subset(self, at, result):
        src = self.next("ssa")
        self.expect("[")
        offsets = self.listed(self.operand, "]")
        self.expect("sizes", "[")
        where = self.peek()[2:]
        sizes = self.listed(lambda: self.next("num"), "]")
        if len(offsets) != 2 or len(sizes) != 2 or not all(re.fullmatch(r"\d+", n) for n in sizes):
            self.fail(where, "a subset takes two offsets and two static sizes")
        self.expect(":")
        src_type = self.tile_type()
        sizes = tuple(int(n) for n in sizes)
        known = [o if isinstance(o, int) else self.consts.get(o) for o in offsets]
        known = [o if isinstance(o, int) and not isinstance(o, bool) else None for o in known]
        return Subset(**at, result=result, src=src, offsets=offsets, sizes=sizes, src_type=src_type,
                      type=subset_type(src_type, known, sizes))

    def scalar(self, at, result, op):
        if op == "tgetval":                      # tgetval ins(%t, %off : T, index) outs : dt
            self.expect("ins", "(")
            src = self.next("ssa")
            self.expect(",")
            offset = self.operand()
            self.expect(":")
            src_type = self.tile_type()
            self.expect(",", "index", ")", "outs", ":")
        else:                                    # load_scalar %ptr[%off] : !pto.ptr<dt> -> dt
            src = self.next("ssa")
            self.expect("[")
            offset = self.operand()
            self.expect("]", ":")
            src_type = self.type()
            self.expect("->")
        where = self.peek()[2:]
        type_ = self.type()
        if type_ not in DTYPES:
            self.fail(where, f"unknown scalar type {type_!r}")
        return Scalar(**at, result=result, op=op, src=src, offset=offset, src_type=src_type, type=type_)

    def literal(self, kind, text, type_, at):
        if isinstance(type_, VectorType):          # dense<v> : vector<NxT>
            m = re.fullmatch(r"dense<(-?\d+)>", text or "")
            if not m:
                self.fail(at, f"bad vector constant {text!r} (a splat integer dense<v> only)")
            value = np.full(type_.shape, int(m.group(1)), DTYPES[type_.dtype])
            value.flags.writeable = False
            return value
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
            value = int(text)
            if type_ in DTYPES and DTYPES[type_].kind in "iu" and not (
                    np.iinfo(DTYPES[type_]).min <= value <= np.iinfo(DTYPES[type_]).max):
                self.fail(at, f"constant {value} does not fit {type_}")
            return value
        if not isinstance(type_, str) or type_ not in DTYPES:
            self.fail(at, f"unknown constant type {type_!r}")
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
            where = self.peek()[2:]
            in_types = self.listed(self.type, ")")
            for name, declared in zip(ins, in_types):
                if isinstance(declared, str) and self.const_types.get(name, declared) != declared:
                    self.fail(where, f"{name} is a {self.const_types[name]} constant, used as {declared}")
        else:
            self.expect(")")
        self.expect("outs", "(")
        outs = self.listed(lambda: self.next("ssa"), ":")
        out_types = self.listed(self.type, ")")
        if self.peek()[1] == "{" and self.peek()[2] == at["line"]:
            attrs += self.attrs()
        return Instr(**at, op=op, ins=tuple(ins), in_types=in_types, outs=outs, out_types=out_types,
                     attrs=tuple(attrs))


@functools.lru_cache(maxsize=256)
def parse(text: str) -> Module:
    """Parse selection's PTO-AS text into a :class:`Module` (a :class:`PtoAsmError` with line:col);
    a text parsed before is its (immutable) module again."""
    return Parser(text).module()


__all__ = ["Arith", "Const", "DTYPES", "For", "Function", "If", "Instr", "Module", "Parser", "PtrType", "Scalar",
           "Stmt", "Subset", "Tile", "TileType", "VectorType", "View", "ViewType", "parse", "subset_type",
           "subset_valid"]
