"""Codegen's tile operations as one table: for each operation a planned block program holds, its
pipe, operand locations, dtype rule, whether it maps to one real instruction or a sequence, and its
cost (``cost.py``).

These are not the real ISA: a tile operation mirrors a tensor op (``tadd`` ↔ ``add``, ``tsum`` ↔ ``sum``
with its ``axes``, ``tsoftmax``), and instruction selection (``isel/``) prints the real instructions
for it — the real instruction set, checked against ``ptoas``, is ``instructions.py``. ``t<op>s`` are
the tile-scalar forms; ``register`` adds a user's operation (``pj.tiles.register_op``), which has no
real form and prints as written.
"""
from __future__ import annotations

import dataclasses

from ..errors import PtoCapacityError, PtoUnsupportedError
from ..primitives import OPS
from ..primitives import tile as T
from . import asm, cost
from .codegen import SCALAR_FORM

_TILE = ("vec",)
_CUBE_DTYPES = {("i8", "i8"): "i32", ("f16", "f16"): "f32", ("bf16", "bf16"): "f32", ("f32", "f32"): "f32"}

# Tensor ops whose tile twin is one PTO-ISA instruction (family); the rest are tile-library composites.
_NATIVE = {"add", "sub", "mul", "div", "maximum", "minimum", "pow", "fmod", "exp", "log", "sqrt", "rsqrt", "reciprocal",
           "abs", "neg", "relu", "cast", "where", "eq", "ne", "lt", "le", "gt", "ge", "sum", "amax", "amin", "prod",
           "argmax", "argmin", "transpose", "concat", "expand", "gather", "sort", "merge_topk", "quantize",
           "dequantize", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right"}


@dataclasses.dataclass(frozen=True)
class Instruction:
    mnemonic: str
    pipe: str
    operands: str                 # locations of the tile operands, in words
    dtypes: tuple[str, ...]       # accepted dtypes of the first tile operand
    native: bool                  # one PTO-ISA instruction (else a tile-library composite)
    summary: str


def _table():
    table = {
        "tload": Instruction("tload", "MTE2", "GM partition view -> vec | mat", tuple(asm.NAMES.values()), True,
                             "copy a GM window into a tile's valid region"),
        "tstore": Instruction("tstore", "MTE3|FIXPIPE", "vec | acc -> GM partition view", tuple(asm.NAMES.values()),
                              True, "copy a tile's valid region into a GM window"),
        "tmov": Instruction("tmov", "MTE1|FIXPIPE", "mat -> left | right; acc -> vec", tuple(asm.NAMES.values()), True,
                            "move a tile between local buffers"),
        "mgather": Instruction("mgather", "MTE2", "GM tensor, vec index tile -> vec", tuple(asm.NAMES.values()), True,
                               "rows of a GM tensor selected by an index tile"),
        "mscatter": Instruction("mscatter", "MTE3", "vec index tile, vec rows -> GM tensor", tuple(asm.NAMES.values()),
                                True, "write (or atomically add) rows into a GM tensor by index"),
        "tmatmul": Instruction("tmatmul", "CUBE", "left, right (, bias) -> acc", ("i8", "f16", "bf16", "f32"), True,
                               "C = A @ B (+ bias) into the accumulator"),
        "tmatmul_acc": Instruction("tmatmul_acc", "CUBE", "acc, left, right -> acc", ("i32", "f32"), True,
                                   "C += A @ B"),
        "tci": Instruction("tci", "VECTOR", "grid index -> vec", ("i32",), True,
                           "the int32 sequence base + step * index + j: a tile of a symbolic-size iota"),
        "tdeinterleave": Instruction("tdeinterleave", "VECTOR", "vec -> vec", ("f32", "i32", "f16", "bf16"), True,
                                     "the columns j::k of a tile (k 2 or 4): tgather's mask pattern"),
        "tinterleave": Instruction("tinterleave", "VECTOR", "k vec -> vec", ("f32", "i32", "f16", "bf16"), False,
                                   "k tiles (2 or 4) interleaved along their rows: tci and a tscatter per tile"),
        "tcumsum_carry": Instruction("tcumsum_carry", "VECTOR", "vec, vec column -> vec, vec column",
                                     tuple(asm.dtype_name(d) for d in OPS["cumsum"].dtypes), False,
                                     "a cumsum along a tile's rows from each row's carry, and the carry through it"),
    }
    for name, op in OPS.items():
        if name not in T.COMPUTE:                    # matmul (above), bitcast (a GM view: no tile instruction)
            continue
        mnemonic = T.COMPUTE[name].name[len("pto."):]
        dtypes = tuple(asm.dtype_name(d) for d in op.dtypes)
        table[mnemonic] = Instruction(mnemonic, "VECTOR", "vec tiles and scalar immediates -> vec", dtypes,
                                      name in _NATIVE, f"the tile form of pto.{name}")
        if mnemonic in SCALAR_FORM:
            scalar = SCALAR_FORM[mnemonic]
            table[scalar] = Instruction(scalar, "VECTOR", "vec tile, scalar immediate -> vec", dtypes, True,
                                        f"pto.{name} with a scalar operand")
    return table


TABLE: dict[str, Instruction] = _table()


def register(mnemonic: str, *, price, pipe: str = "VECTOR", dtypes=(), summary: str = "",
             operands: str = "tiles and scalar immediates -> tiles") -> Instruction:
    """Add a user-defined instruction: its table entry and price (``cost.CUSTOM``: ``price(instr,
    target, l2_hit) -> (pipe, cycles, flops)``, plus GM bytes in and out for an instruction that moves
    data). ``pj.tiles.register_op`` calls this."""
    if pipe not in cost.PIPES:
        raise PtoUnsupportedError(f"pto isa: pipe {pipe!r} of 'pto.{mnemonic}' is not one of {cost.PIPES}")
    entry = Instruction(mnemonic, pipe, f"user-defined: {operands}",
                        tuple(asm.dtype_name(d) for d in dtypes), False, summary or f"user-defined pto.{mnemonic}")
    TABLE[mnemonic] = entry
    cost.CUSTOM[mnemonic] = price
    return entry


def unregister(mnemonic: str) -> None:
    for table in (TABLE, cost.CUSTOM):
        table.pop(mnemonic, None)


def check(instr: asm.Instr, program: str) -> None:
    """Reject an instruction ptojax does not know or whose dtypes the hardware does not accept."""
    entry = TABLE.get(instr.op)
    if entry is None:
        raise PtoUnsupportedError(f"pto isa: program '{program}': unknown instruction 'pto.{instr.op}'")
    tiles = [o.type for o in instr.ins if isinstance(o.type, asm.TileBuf)]
    if instr.op in ("tmatmul", "tmatmul_acc"):
        a, b = (tiles[0], tiles[1]) if instr.op == "tmatmul" else (tiles[1], tiles[2])
        a, b, acc = a.dtype, b.dtype, instr.outs[0].type.dtype
        if _CUBE_DTYPES.get((a, b)) != acc:
            allowed = ", ".join(f"{x}*{y}->{z}" for (x, y), z in _CUBE_DTYPES.items())
            raise asm.PtoAsmError(f"pto isa: program '{program}': pto.{instr.op} cannot multiply {a} by {b} into {acc}; "
                                  f"the cube takes {allowed}")
        if instr.op == "tmatmul" and len(tiles) == 3 and tiles[2].dtype != acc:
            raise asm.PtoAsmError(f"pto isa: program '{program}': pto.tmatmul bias is {tiles[2].dtype}; it must be {acc}")
        return
    if tiles and entry.pipe == "VECTOR" and entry.dtypes and tiles[0].dtype not in entry.dtypes:
        raise asm.PtoAsmError(f"pto isa: program '{program}': pto.{instr.op} does not accept {tiles[0].dtype} tiles; "
                              f"allowed: {', '.join(entry.dtypes)}")


def verify(kernel: asm.Kernel, memory=None) -> None:
    """Check every instruction of a kernel (loops included) and, given the core's ``memory``
    (:class:`~ptojax.lowering.memory.CoreMemory`), that every tile lies inside its buffer."""
    def walk(body):
        for stmt in body:
            if isinstance(stmt, asm.For):
                walk(stmt.body)
            elif isinstance(stmt, asm.Instr):
                check(stmt, kernel.name)
            elif isinstance(stmt, asm.Alloc) and memory is not None:
                t, size = stmt.type, memory.buffer(stmt.type.loc)
                nbytes = t.rows * t.cols * t.np_dtype.itemsize
                if stmt.addr < 0 or stmt.addr + nbytes > size:
                    raise PtoCapacityError(f"pto isa: program '{kernel.name}': {stmt.name}, a tile of {nbytes} bytes at "
                                           f"address {stmt.addr}, does not fit the {size}-byte {t.loc} buffer")
    walk(kernel.body)


def cycles(instr: asm.Instr, target, *, l2_hit: float = 1.0) -> tuple[str, float]:
    """The pipe an instruction occupies and for how many cycles (``cost.instr_cost``)."""
    return cost.instr_cost(instr, target, l2_hit=l2_hit)
