"""PTO-AS programs: the data model, the printer and the parser of the DPS text form.

One block program prints as an MLIR ``func.func`` in the destination-passing form CANN's ``ptoas``
reads::

    // program mul+add <AIV> id=0 label="Scale" grid=2x2
    func.func @mul_add(%i0: index, %i1: index, %arg0: !pto.ptr<f16>, %arg1: !pto.ptr<f16>) {
      %c32 = arith.constant 32 : index
      %v0 = pto.make_tensor_view %arg0, shape = [%c64, %c64], strides = [%c64, %c1] : !pto.tensor_view<64x64xf16>
      %t0 = pto.alloc_tile addr = 0 : !pto.tile_buf<loc=vec, dtype=f16, rows=32, cols=32, v_row=32, v_col=32, ...>
      %o0 = arith.muli %i0, %c32 : index
      %p0 = pto.partition_view %v0, offsets = [%o0, %o1], sizes = [%c32, %c32] : ... -> !pto.partition_tensor_view<32x32xf16>
      pto.tload ins(%p0 : !pto.partition_tensor_view<32x32xf16>) outs(%t0 : !pto.tile_buf<...>)
      pto.tmuls ins(%t0 : !pto.tile_buf<...>, %s0 : f16) outs(%t1 : !pto.tile_buf<...>)
      scf.for %k = %c1 to %c4 step %c1 { ... }
      return
    }

Statements are plain frozen dataclasses; ``emit`` prints them and ``parse`` reads them back, so
``emit(parse(text)) == text`` for everything ptojax prints. Malformed text is a :class:`PtoAsmError`
with line and column.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import re

import ml_dtypes
import numpy as np

from ..errors import PtoError

DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
          "i8": np.dtype(np.int8), "ui8": np.dtype(np.uint8), "i16": np.dtype(np.int16), "i32": np.dtype(np.int32), "i1": np.dtype(np.bool_)}
NAMES = {v: k for k, v in DTYPES.items()}


class PtoAsmError(PtoError, ValueError):
    """Malformed PTO-AS text: the message gives line and column."""


def dtype_name(dtype) -> str:
    return NAMES[np.dtype(dtype)]


# -------------------------------------------------------------------------------------------- types
@dataclasses.dataclass(frozen=True)
class TileBuf:
    """``!pto.tile_buf<...>``: a tile buffer in a core-local memory, with its valid region."""

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

    def __str__(self):
        return (f"!pto.tile_buf<loc={self.loc}, dtype={self.dtype}, rows={self.rows}, cols={self.cols}, "
                f"v_row={self.v_row}, v_col={self.v_col}, blayout={self.blayout}, slayout={self.slayout}, "
                f"fractal={self.fractal}, pad={self.pad}>")

    @functools.cached_property
    def np_dtype(self) -> np.dtype:
        return DTYPES[self.dtype]


@dataclasses.dataclass(frozen=True)
class ViewType:
    """``!pto.tensor_view<AxBxdt>`` (``partition=False``) or ``!pto.partition_tensor_view<...>``."""

    shape: tuple[int, ...]
    dtype: str
    partition: bool = False

    def __str__(self):
        kind = "partition_tensor_view" if self.partition else "tensor_view"
        return f"!pto.{kind}<{'x'.join(map(str, self.shape)) + 'x' if self.shape else ''}{self.dtype}>"


# ----------------------------------------------------------------------------------------- statements
@dataclasses.dataclass(frozen=True)
class Const:
    name: str
    value: int | float | bool
    type: str                          # "index", "i32", "f32", ...

    def text(self):
        value = str(self.value).lower() if isinstance(self.value, bool) else repr(self.value)
        return f"{self.name} = arith.constant {value} : {self.type}"


@dataclasses.dataclass(frozen=True)
class Arith:
    name: str
    op: str                            # "addi" or "muli" on index values
    lhs: str
    rhs: str

    def text(self):
        return f"{self.name} = arith.{self.op} {self.lhs}, {self.rhs} : index"


@dataclasses.dataclass(frozen=True)
class MakeView:
    name: str
    ptr: str
    type: ViewType
    shape: tuple[str, ...]
    strides: tuple[str, ...]

    def text(self):
        return (f"{self.name} = pto.make_tensor_view {self.ptr}, shape = [{', '.join(self.shape)}], "
                f"strides = [{', '.join(self.strides)}] : {self.type}")


@dataclasses.dataclass(frozen=True)
class PartitionView:
    name: str
    view: str
    offsets: tuple[str, ...]
    sizes: tuple[str, ...]
    source: ViewType
    type: ViewType

    def text(self):
        return (f"{self.name} = pto.partition_view {self.view}, offsets = [{', '.join(self.offsets)}], "
                f"sizes = [{', '.join(self.sizes)}] : {self.source} -> {self.type}")


@dataclasses.dataclass(frozen=True)
class Alloc:
    name: str
    type: TileBuf
    addr: int

    def text(self):
        return f"{self.name} = pto.alloc_tile addr = {self.addr} : {self.type}"


@dataclasses.dataclass(frozen=True)
class Operand:
    name: str
    type: object                       # TileBuf, ViewType or a scalar type name ("f32", "index", ...)

    def __str__(self):
        return f"{self.name} : {self.type}"


@dataclasses.dataclass(frozen=True)
class Instr:
    """``pto.<op> ins(...) outs(...) {attrs}``: one PTO instruction in destination-passing form."""

    op: str
    ins: tuple[Operand, ...]
    outs: tuple[Operand, ...]
    attrs: tuple[tuple[str, object], ...] = ()
    source: object = dataclasses.field(default=None, compare=False, repr=False)   # the eqn it stands for

    def text(self):
        attrs = ""
        if self.attrs:
            attrs = " {" + ", ".join(f"{k} = {_attr(v)}" for k, v in self.attrs) + "}"
        return f"pto.{self.op} ins({', '.join(map(str, self.ins))}) outs({', '.join(map(str, self.outs))}){attrs}"

    def attr(self, key, default=None):
        return self._attrs.get(key, default)

    @functools.cached_property
    def _attrs(self) -> dict:
        return dict(self.attrs)


@dataclasses.dataclass(frozen=True)
class For:
    var: str
    lower: str
    upper: str
    step: str
    body: tuple

    def lines(self, indent):
        pad = "  " * indent
        out = [f"{pad}scf.for {self.var} = {self.lower} to {self.upper} step {self.step} {{"]
        out += _lines(self.body, indent + 1)
        out.append(f"{pad}}}")
        return out


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One block program: its signature (grid indices, then GM pointers) and body."""

    name: str
    core: str
    label: str
    grid: tuple[int, ...]
    params: tuple[tuple[str, str], ...]          # (name, type text) in call order
    body: tuple
    pid: int = 0                                 # program id within its kernel

    def header(self):
        label = f" label={json.dumps(self.label)}" if self.label else ""     # quotes, newlines escaped
        grid = "x".join(map(str, self.grid)) or "1"
        return f"// program {self.name} <{self.core}> id={self.pid}{label} grid={grid}"


def _attr(value) -> str:
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_attr(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _lines(body, indent):
    pad = "  " * indent
    out = []
    for stmt in body:
        out += stmt.lines(indent) if isinstance(stmt, For) else [pad + stmt.text()]
    return out


def emit(kernel: Kernel) -> str:
    """The PTO-AS text of ``kernel``."""
    params = ", ".join(f"{n}: {t}" for n, t in kernel.params)
    symbol = re.sub(r"\W", "_", kernel.name)
    return "\n".join([kernel.header(), f"func.func @{symbol}({params}) {{", *_lines(kernel.body, 1),
                      "  return", "}"]) + "\n"


# ---------------------------------------------------------------------------------------------- parser
_TOKEN = re.compile(r"""\s*(?:(?P<str>"[^"]*")|(?P<type>!pto\.[a-z_]+<[^<>]*(?:<[^<>]*>[^<>]*)*>)
                     |(?P<num>-?\d+\.\d*(?:e[-+]?\d+)?|-?\d+e[-+]?\d+|-?inf|nan|-?\d+)
                     |(?P<name>[%@]?[A-Za-z_][\w.#+]*|%\d+)|(?P<punct>->|[(){}\[\],:=<>]))""", re.VERBOSE)


class _Lexer:
    def __init__(self, line: str, lineno: int):
        self.line, self.lineno, self.pos = line, lineno, 0
        self.tokens = []
        while self.pos < len(line):
            if line[self.pos:].strip() == "":
                break
            m = _TOKEN.match(line, self.pos)
            if not m or m.end() == self.pos:
                self.fail(self.pos + len(line[self.pos:]) - len(line[self.pos:].lstrip()), "unexpected character")
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            self.pos = m.end()
        self.i = 0

    def fail(self, col, message):
        raise PtoAsmError(f"pto-as:{self.lineno}:{col + 1}: {message}: {self.line.strip()!r}")

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else (None, None, len(self.line))

    def next(self, kind=None, value=None):
        tok = self.peek()
        if tok[0] is None or (kind and tok[0] != kind) or (value is not None and tok[1] != value):
            want = value or kind
            self.fail(tok[2], f"expected {want!r}, found {tok[1]!r}" if tok[0] else f"expected {want!r} at end of line")
        self.i += 1
        return tok[1]

    def accept(self, value):
        if self.peek()[1] == value:
            self.i += 1
            return True
        return False

    def done(self):
        if self.i != len(self.tokens):
            self.fail(self.tokens[self.i][2], f"unexpected {self.tokens[self.i][1]!r}")

    def names(self, close="]"):
        out = []
        while not self.accept(close):
            out.append(self.next("name"))
            if not self.accept(","):
                self.next(value=close)
                break
        return tuple(out)


def _parse_type(lex: _Lexer, text: str):
    m = re.fullmatch(r"!pto\.tile_buf<(.*)>", text)
    if m:
        fields = dict(part.strip().split("=", 1) for part in m.group(1).split(","))
        try:
            return TileBuf(fields["loc"], fields["dtype"], int(fields["rows"]), int(fields["cols"]), int(fields["v_row"]),
                           int(fields["v_col"]), fields["blayout"], fields["slayout"], int(fields["fractal"]), int(fields["pad"]))
        except (KeyError, ValueError) as err:
            lex.fail(0, f"malformed tile_buf type ({err})")
    m = re.fullmatch(r"!pto\.(tensor_view|partition_tensor_view)<((?:\d+x)*)(\w+)>", text)
    if m:
        shape = tuple(int(d) for d in m.group(2).split("x") if d)
        if m.group(3) not in DTYPES:
            lex.fail(0, f"unknown dtype {m.group(3)!r}")
        return ViewType(shape, m.group(3), m.group(1) == "partition_tensor_view")
    if ptr_dtype(text):
        return text
    lex.fail(0, f"unknown type {text!r}")


def ptr_dtype(text: str) -> str | None:
    """The dtype name of a ``!pto.ptr<dtype>`` type's text, or None for another type."""
    m = re.fullmatch(r"!pto\.ptr<(\w+)>", text)
    return m.group(1) if m else None


def _operand(lex: _Lexer):
    name = lex.next("name")
    lex.next(value=":")
    kind, value, _ = lex.peek()
    lex.i += 1
    return Operand(name, _parse_type(lex, value) if kind == "type" else value)


def _operands(lex: _Lexer):
    lex.next(value="(")
    out = []
    while not lex.accept(")"):
        out.append(_operand(lex))
        if not lex.accept(","):
            lex.next(value=")")
            break
    return tuple(out)


def _value(lex: _Lexer):
    kind, value, col = lex.peek()
    if value == "[":
        lex.i += 1
        items = []
        while not lex.accept("]"):
            items.append(_value(lex))
            lex.accept(",")
        return tuple(items)
    lex.i += 1
    if kind == "str":
        return value[1:-1]
    if value in ("true", "false"):
        return value == "true"
    if kind == "num":
        return _number(value)
    lex.fail(col, f"bad attribute value {value!r}")


def _number(text):
    if text in ("true", "false"):
        return text == "true"
    return float(text) if any(c in text for c in ".enaf") else int(text)


def _statement(lex: _Lexer):
    first = lex.next("name")
    if first.startswith("pto.") and lex.peek()[1] == "ins":
        op = first[len("pto."):]
        lex.next(value="ins")
        ins = _operands(lex)
        lex.next(value="outs")
        outs = _operands(lex)
        attrs = []
        if lex.accept("{"):
            while not lex.accept("}"):
                key = lex.next("name")
                lex.next(value="=")
                attrs.append((key, _value(lex)))
                lex.accept(",")
        lex.done()
        return Instr(op, ins, outs, tuple(attrs))
    name = first
    lex.next(value="=")
    what = lex.next("name")
    if what == "arith.constant":
        kind, text, col = lex.peek()
        lex.i += 1
        if kind not in ("num", "name"):
            lex.fail(col, f"bad constant {text!r}")
        lex.next(value=":")
        stmt = Const(name, _number(text), lex.next("name"))
    elif what in ("arith.addi", "arith.muli"):
        lhs = lex.next("name")
        lex.next(value=",")
        stmt = Arith(name, what[len("arith."):], lhs, lex.next("name"))
        lex.next(value=":")
        lex.next(value="index")
    elif what == "pto.make_tensor_view":
        ptr = lex.next("name")
        lex.next(value=","), lex.next(value="shape"), lex.next(value="="), lex.next(value="[")
        shape = lex.names()
        lex.next(value=","), lex.next(value="strides"), lex.next(value="="), lex.next(value="[")
        strides = lex.names()
        lex.next(value=":")
        stmt = MakeView(name, ptr, _parse_type(lex, lex.next("type")), shape, strides)
    elif what == "pto.partition_view":
        view = lex.next("name")
        lex.next(value=","), lex.next(value="offsets"), lex.next(value="="), lex.next(value="[")
        offsets = lex.names()
        lex.next(value=","), lex.next(value="sizes"), lex.next(value="="), lex.next(value="[")
        sizes = lex.names()
        lex.next(value=":")
        source = _parse_type(lex, lex.next("type"))
        lex.next(value="->")
        stmt = PartitionView(name, view, offsets, sizes, source, _parse_type(lex, lex.next("type")))
    elif what == "pto.alloc_tile":
        lex.next(value="addr"), lex.next(value="=")
        addr = int(lex.next("num"))
        lex.next(value=":")
        stmt = Alloc(name, _parse_type(lex, lex.next("type")), addr)
    else:
        lex.fail(lex.tokens[2][2] if len(lex.tokens) > 2 else 0, f"unknown operation {what!r}")
    lex.done()
    return stmt


def parse(text: str) -> list[Kernel]:
    """Every ``func.func`` program in ``text``."""
    kernels = []
    lines = text.splitlines()
    i = 0
    header = None
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        if stripped.startswith("// program "):
            header = (i + 1, stripped)
            i += 1
            continue
        if stripped.startswith("//"):
            i += 1
            continue
        if not stripped.startswith("func.func "):
            real = ("; this parser reads codegen's blocks (code.text); the real module (as_text('pto'), what ptoas "
                    "reads) is ptojax.ascend.engine.parse's" if stripped.startswith("module") else "")
            raise PtoAsmError(f"pto-as:{i + 1}:{len(line) - len(line.lstrip()) + 1}: expected 'func.func', "
                              f"found {stripped.split()[0]!r}{real}")
        if header is None:
            raise PtoAsmError(f"pto-as:{i + 1}:1: 'func.func' without a '// program' header")
        kernel, i = _parse_kernel(lines, i, header)
        kernels.append(kernel)
        header = None
    return kernels


_HEADER = re.compile(r'// program (?P<name>\S+) <(?P<core>AIC|AIV)> id=(?P<pid>\d+)(?: label=(?P<label>"(?:[^"\\]|\\.)*"))? '
                     r'grid=(?P<grid>[\dx]+)$')
_FUNC = re.compile(r"func\.func @(?P<sym>\w+)\((?P<params>.*)\) \{$")


def _parse_kernel(lines, i, header):
    lineno, text = header
    m = _HEADER.fullmatch(text)
    if not m:
        raise PtoAsmError(f"pto-as:{lineno}:1: malformed program header {text!r}")
    grid = tuple(int(g) for g in m.group("grid").split("x")) if m.group("grid") != "1" else ()
    f = _FUNC.fullmatch(lines[i].strip())
    if not f:
        raise PtoAsmError(f"pto-as:{i + 1}:1: malformed function signature {lines[i].strip()!r}")
    params = []
    for part in filter(None, (p.strip() for p in f.group("params").split(", %"))):
        part = part if part.startswith("%") else "%" + part
        name, _, ptype = part.partition(": ")
        if not ptype:
            raise PtoAsmError(f"pto-as:{i + 1}:1: parameter {part!r} has no type")
        params.append((name, ptype))
    body, i = _parse_block(lines, i + 1)
    if i >= len(lines) or lines[i].strip() != "}":
        raise PtoAsmError(f"pto-as:{i + 1}:1: expected '}}' closing the function")
    label = json.loads(m.group("label")) if m.group("label") else ""
    return Kernel(m.group("name"), m.group("core"), label, grid, tuple(params), tuple(body),
                  int(m.group("pid"))), i + 1


_FOR = re.compile(r"scf\.for (?P<var>%\w+) = (?P<lo>%\w+) to (?P<hi>%\w+) step (?P<step>%\w+) \{$")


def _parse_block(lines, i):
    body = []
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped in ("}", "return"):
            if stripped == "return":
                i += 1
                continue
            return body, i
        if not stripped or stripped.startswith("//"):
            i += 1
            continue
        m = _FOR.fullmatch(stripped)
        if m:
            inner, i = _parse_block(lines, i + 1)
            if i >= len(lines):
                raise PtoAsmError(f"pto-as:{i}:1: unterminated scf.for")
            body.append(For(m.group("var"), m.group("lo"), m.group("hi"), m.group("step"), tuple(inner)))
            i += 1
            continue
        if stripped.startswith("scf.for"):
            raise PtoAsmError(f"pto-as:{i + 1}:{len(lines[i]) - len(lines[i].lstrip()) + 1}: malformed scf.for")
        lex = _Lexer(lines[i], i + 1)
        body.append(_statement(lex))
        i += 1
    return body, i
