"""Codegen: a Block-level program (a jaxpr of tile ops) → a PTO-AS :class:`~ptojax.ascend.asm.Kernel`.

Memory planning happens here: every tile gets a ``tile_buf`` at an address in its location's buffer
(UB, L1, L0A, L0B, L0C), aligned, never overlapping a live tile, reusing the space of dead ones. A
program that does not fit is a :class:`PtoCapacityError` naming the program, label, buffer and bytes.

Tiles of any rank are stored as 2-D buffers (rows = product of the leading dims, cols = last dim,
row pitch padded to the alignment). Instructions whose meaning depends on the logical shape carry it
as the ``shapes`` attribute (one entry per tile operand).
"""
from __future__ import annotations

import numpy as np

from .._jax import Literal
from ..errors import PtoCapacityError, PtoUnsupportedError
from ..lowering.memory import IN_PLACE, CoreMemory
from ..lowering.walk import counted_loop
from ..primitives import tile as T
from . import asm

# Tile-scalar forms (TADDS, TMULS, ...): the scalar operand is an immediate.
SCALAR_FORM = {"tadd": "tadds", "tsub": "tsubs", "tmul": "tmuls", "tdiv": "tdivs", "tmax": "tmaxs", "tmin": "tmins"}

MAX_VIEW_RANK = 5        # dims of a PTO-AS tensor view (pto-isa's GlobalTensor shapes; ptoas fails on more)
_ALIGN = {"vec": 32, "mat": 32, "left": 512, "right": 512, "acc": 512}
_BUFFER = {"vec": "UB", "mat": "L1", "left": "L0A", "right": "L0B", "acc": "L0C"}


def _matrix(shape):
    shape = tuple(shape)
    if not shape:
        return 1, 1
    return int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1])


def tile_type(shape, dtype, loc, align=32) -> asm.TileBuf:
    rows, cols = _matrix(shape)
    item = np.dtype(dtype).itemsize
    if loc == "vec":
        pitch = -(-cols * item // align) * align // item
        return asm.TileBuf("vec", asm.dtype_name(dtype), rows, pitch, rows, cols)
    fractal = 1024 if loc == "acc" else 512
    pad_rows, pad_cols = -(-rows // 16) * 16, -(-cols * item // 32) * 32 // item
    pad_cols = max(pad_cols, 16)
    blayout = "col_major" if loc in ("mat", "left", "right", "acc") else "row_major"
    return asm.TileBuf(loc, asm.dtype_name(dtype), pad_rows, pad_cols, rows, cols, blayout, "row_major", fractal)


def tile_bytes(t: asm.TileBuf) -> int:
    return t.rows * t.cols * t.np_dtype.itemsize


class _Allocator:
    """First-fit allocation per buffer with lifetimes."""

    def __init__(self, memory: CoreMemory, program):
        self.memory, self.program = memory, program
        self.free = {loc: [(0, memory.buffer(loc))] for loc in _ALIGN}

    def alloc(self, loc, size) -> int:
        align = _ALIGN[loc]
        size = -(-size // align) * align
        for i, (start, length) in enumerate(self.free[loc]):
            begin = -(-start // align) * align
            if begin + size <= start + length:
                rest = []
                if begin > start:
                    rest.append((start, begin - start))
                if begin + size < start + length:
                    rest.append((begin + size, start + length - begin - size))
                self.free[loc][i:i + 1] = rest
                return begin
        live = self.memory.buffer(loc) - sum(length for _, length in self.free[loc])
        widest = max((length for _, length in self.free[loc]), default=0)
        raise PtoCapacityError(
            f"pto codegen: program '{self.program.name}' ({self.program.core}"
            f"{', label ' + repr(self.program.label) if self.program.label else ''}) cannot place a {size}-byte tile in "
            f"{_BUFFER[loc]}: {live} of {self.memory.buffer(loc)} bytes are live at that point"
            + (f", and the free {self.memory.buffer(loc) - live} bytes lie apart (the widest free span is {widest} "
               "bytes): use fewer rows or columns in its ops' vec tile" if live + size <= self.memory.buffer(loc) else ""))

    def release(self, loc, addr, size):
        size = -(-size // _ALIGN[loc]) * _ALIGN[loc]
        spans = sorted(self.free[loc] + [(addr, size)])
        merged = [spans[0]]
        for start, length in spans[1:]:
            last_start, last_len = merged[-1]
            if last_start + last_len == start:
                merged[-1] = (last_start, last_len + length)
            else:
                merged.append((start, length))
        self.free[loc] = merged


def _param(value):
    if isinstance(value, np.dtype) or isinstance(value, type):
        return asm.dtype_name(value)
    if isinstance(value, (tuple, list)):
        return tuple(_param(v) for v in value)
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    return value


class _Codegen:
    def __init__(self, program, part_shape, memory: CoreMemory, pid: int):
        self.program, self.memory, self.pid = program, memory, pid
        self.body = program.body.jaxpr
        self.grid = tuple(part_shape)
        self.alloc = _Allocator(memory, program)
        self.consts: dict = {}       # (value, type) -> Const
        self.views_code: list = []   # make_tensor_view statements
        self.allocs: list = []       # alloc_tile statements
        self.code: list = []         # the statements being emitted (a loop body while inside one)
        self.carried: dict = {}      # a loop body's new carry tile -> the carry it replaces (written in place)
        self.dying: set = set()      # the vars the eqn being emitted uses for the last time
        self.names: dict = {}        # jaxpr var -> asm name (index value or tile)
        self.tiles: dict = {}        # tile name -> (TileBuf, addr)
        self.holders: dict = {}      # tile name -> vars still referring to it
        self.aliases: dict = {}      # tile name -> the allocated tile whose bytes it is (no space of its own)
        self.views: dict = {}        # jaxpr GM var -> (view name, ViewType)
        self.kept: dict = {}         # view name -> the GM dims it keeps, where unit dims were dropped
        self.counter = 0

    # ---------------------------------------------------------------------------------- helpers
    def fresh(self, prefix):
        self.counter += 1
        return f"%{prefix}{self.counter}"

    def const(self, value, type_="index"):
        key = (value, type_)
        if key not in self.consts:
            name = f"%c{value}" if type_ == "index" and value >= 0 else self.fresh("s")
            self.consts[key] = asm.Const(name, value, type_)
        return self.consts[key].name

    def index(self, v):
        return self.const(int(v.val)) if isinstance(v, Literal) else self.names[v]

    def bind(self, var, name):
        self.names[var] = name
        if name in self.tiles:
            self.holders.setdefault(self.aliases.get(name, name), set()).add(var)

    def new_tile(self, var, loc):
        t = tile_type(var.aval.shape, var.aval.dtype, loc)
        name = self.fresh("t")
        addr = self.alloc.alloc(loc, tile_bytes(t))
        self.allocs.append(asm.Alloc(name, t, addr))
        self.tiles[name] = (t, addr)
        self.bind(var, name)
        return asm.Operand(name, t)

    def release(self, var):
        name = self.names.get(var)
        if name in self.tiles:
            name = self.aliases.get(name, name)
            holders = self.holders[name]
            holders.discard(var)
            if not holders:
                t, addr = self.tiles[name]
                self.alloc.release(t.loc, addr, tile_bytes(t))

    def operand(self, v):
        if isinstance(v, Literal):
            value = np.asarray(v.val, v.aval.dtype)      # a Python scalar takes the eqn's dtype, not float64
            return asm.Operand(self.const(value.item(), asm.dtype_name(value.dtype)), asm.dtype_name(value.dtype))
        name = self.names[v]
        return asm.Operand(name, self.tiles[name][0] if name in self.tiles else "index")   # a grid index (tci)

    def view_of(self, gm, whole: bool = False):
        """``gm``'s view; ``whole``: read or written as a whole tensor (its dims as they are)."""
        if gm not in self.views:
            raise PtoUnsupportedError(f"pto codegen: program '{self.program.name}' reads a GM value that is not "
                                      "one of its parameters")
        if whole and self.views[gm][0] in self.kept:
            raise PtoUnsupportedError(f"pto codegen: program '{self.program.name}': a gather or scatter of a GM tensor "
                                      f"of rank {len(gm.aval.shape)}; a PTO-AS tensor view holds at most {MAX_VIEW_RANK}")
        return self.views[gm]

    def partition(self, gm, indices, window):
        view, vtype = self.view_of(gm)
        kept = self.kept.get(view, range(len(window.shape)))
        window = T.Window(*(tuple(part[d] for d in kept) for part in (window.shape, window.index, window.stride,
                                                                      window.base)))
        offsets = []
        for i, s, b in zip(window.index, window.stride, window.base):
            if i < 0:
                offsets.append(self.const(b))
                continue
            name = self.index(indices[i])
            if s != 1:
                scaled = self.fresh("o")
                self.code.append(asm.Arith(scaled, "muli", name, self.const(s)))
                name = scaled
            if b:
                shifted = self.fresh("o")
                self.code.append(asm.Arith(shifted, "addi", name, self.const(b)))
                name = shifted
            offsets.append(name)
        ptype = asm.ViewType(tuple(window.shape), vtype.dtype, True)
        pname = self.fresh("p")
        self.code.append(asm.PartitionView(pname, view, tuple(offsets), tuple(self.const(s) for s in window.shape),
                                           vtype, ptype))
        return asm.Operand(pname, ptype)

    # ------------------------------------------------------------------------------------- main
    def run(self) -> asm.Kernel:
        n = len(self.grid)
        params = []
        for i, v in enumerate(self.body.invars[:n]):
            self.names[v] = f"%i{i}"
            params.append((f"%i{i}", "index"))
        for j, v in enumerate(self.body.invars[n:]):
            params.append((f"%arg{j}", f"!pto.ptr<{asm.dtype_name(v.aval.dtype)}>"))
            shape = tuple(v.aval.shape)
            strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]
            if len(shape) > MAX_VIEW_RANK:          # unit dims dropped: no window moves along them
                kept = tuple(d for d, n in enumerate(shape) if n != 1)
                if len(kept) > MAX_VIEW_RANK:
                    raise PtoUnsupportedError(f"pto codegen: program '{self.program.name}': a GM tensor of shape "
                                              f"{list(shape)} has {len(kept)} dims longer than 1; a PTO-AS tensor "
                                              f"view holds at most {MAX_VIEW_RANK}")
                self.kept[f"%v{j}"] = kept
                shape, strides = tuple(shape[d] for d in kept), [strides[d] for d in kept]
            vtype = asm.ViewType(shape, asm.dtype_name(v.aval.dtype))
            self.views[v] = (f"%v{j}", vtype)
            self.views_code.append(asm.MakeView(f"%v{j}", f"%arg{j}", vtype, tuple(self.const(x) for x in shape),
                                                tuple(self.const(x) for x in strides)))
        dead_after = _last_uses(self.body)
        for pos, eqn in enumerate(self.body.eqns):
            self.dying = set(dead_after.get(pos, ()))
            self.eqn(eqn)
            for v in dead_after.get(pos, ()):
                self.release(v)
        body = tuple(list(self.consts.values()) + self.views_code + self.allocs + self.code)
        return asm.Kernel(self.program.name, self.program.core, self.program.label, self.grid, tuple(params), body,
                          self.pid)

    # --------------------------------------------------------------------------------------- eqns
    def eqn(self, eqn):
        prim = eqn.primitive
        if prim is T.tload_p:
            gm, *indices = eqn.invars
            view = self.partition(gm, indices, eqn.params["window"])
            self.code.append(asm.Instr("tload", (view,), (self.new_tile(eqn.outvars[0], eqn.params["loc"]),)))
        elif prim is T.tstore_p:
            gm, src, *indices = eqn.invars
            view = self.partition(gm, indices, eqn.params["window"])
            self.code.append(asm.Instr("tstore", (self.operand(src),), (view,)))
            self.views[eqn.outvars[0]] = self.views[gm]
        elif prim is T.mscatter_p:
            gm, idx, rows = eqn.invars
            name, vtype = self.view_of(gm, whole=True)
            attrs = (("accumulate", eqn.params["accumulate"]), ("axis", eqn.params["axis"]),
                     ("shapes", (tuple(idx.aval.shape), tuple(rows.aval.shape))))
            self.code.append(asm.Instr("mscatter", (self.operand(idx), self.operand(rows)),
                                       (asm.Operand(name, vtype),), attrs))
            self.views[eqn.outvars[0]] = self.views[gm]
        elif T.reads_gm(prim):
            self.gm_read(eqn)
        elif prim is T.tmatmul_acc_p:
            acc, a, b = eqn.invars
            name = self.names[acc]
            self.bind(eqn.outvars[0], name)          # accumulate in place (destination passing)
            attrs = (("transpose_a", eqn.params["transpose_a"]), ("transpose_b", eqn.params["transpose_b"]))
            self.code.append(asm.Instr("tmatmul_acc", tuple(self.operand(x) for x in (acc, a, b)),
                                       (asm.Operand(name, self.tiles[name][0]),), attrs))
        elif prim.name == "scan":
            self.loop(eqn)
        elif prim.name.startswith("pto.t"):
            self.compute(eqn)
        elif prim.name in ("add", "pto.add") and not eqn.outvars[0].aval.shape:
            pass  # a loop counter's increment: scf.for advances it
        else:
            raise PtoUnsupportedError(f"pto codegen: '{prim.name}' cannot appear in a block program "
                                      f"('{self.program.name}')")

    def gm_read(self, eqn):
        """``mgather`` or a registered GM reader: the GM tensor's view, then tile operands (their logical
        shapes in ``shapes``), into new tiles in the primitive's buffer."""
        gm, *rest = eqn.invars
        name, vtype = self.view_of(gm, whole=True)
        ins = (asm.Operand(name, vtype), *(self.operand(v) for v in rest))
        shapes = tuple(tuple(v.aval.shape) for v, o in zip(rest, ins[1:]) if isinstance(o.type, asm.TileBuf))
        attrs = tuple((k, _param(v)) for k, v in sorted(eqn.params.items())) + (("shapes", shapes),)
        loc = T.GM_READERS[eqn.primitive]
        outs = tuple(self.new_tile(v, loc) for v in eqn.outvars)
        self.code.append(asm.Instr(eqn.primitive.name[len("pto."):], ins, outs, attrs))

    def compute(self, eqn):
        op = eqn.primitive.name[len("pto."):]
        ins = [self.operand(v) for v in eqn.invars]
        if op == "tmatmul":
            loc = "acc"
        elif op == "tmov":
            loc = eqn.params["loc"]
        else:
            locs = {o.type.loc for o in ins if isinstance(o.type, asm.TileBuf)}
            loc = "acc" if locs == {"acc"} else "vec"
        if op == "tcvt" and loc == "acc":
            outs = (self._fixpipe(eqn.outvars[0], ins[0].name),)
        else:
            outs = tuple(self._in_place(v, eqn) or self._reuse(v, eqn, loc) or self.new_tile(v, loc)
                         for v in eqn.outvars)
        attrs = [(k, _param(v)) for k, v in sorted(eqn.params.items()) if k != "loc"]
        if op in SCALAR_FORM and any(not isinstance(o.type, asm.TileBuf) for o in ins):
            attrs.append(("scalar_first", not isinstance(ins[0].type, asm.TileBuf)))
            op = SCALAR_FORM[op]
        shapes = [tuple(v.aval.shape) for v in eqn.invars if not isinstance(v, Literal) and v in self.names]
        if any(len(s) != 2 for s in shapes + [tuple(v.aval.shape) for v in eqn.outvars]):
            attrs.append(("shapes", tuple(shapes)))
        self.code.append(asm.Instr(op, tuple(ins), outs, tuple(attrs), source=eqn))

    def _fixpipe(self, var, src):
        """The result of converting accumulator ``src`` (f32 -> f16 / bf16, i32 -> ...): FIXPIPE converts
        it on its way out of L0C (``tstore`` of the accumulator; isel's ``tcvt`` rule prints nothing), so
        it is an alias of the accumulator's bytes, not a tile of its own: no ``alloc_tile``, no L0C
        space (a (128, 64, 256) f16 matmul's f32 accumulator fills L0C's 128 KiB by itself). The
        accumulator stays allocated while the alias is in use."""
        root = self.aliases.get(src, src)
        t = tile_type(var.aval.shape, var.aval.dtype, "acc")
        name = self.fresh("t")
        self.tiles[name] = (t, self.tiles[root][1])
        self.aliases[name] = root
        self.bind(var, name)
        return asm.Operand(name, t)

    def _reuse(self, var, eqn, loc):
        """An elementwise result written over an operand tile of its type that dies here (``texp`` of
        ``x - m`` into the tile of ``x - m``): fewer tiles, as the assembler allocates each one apart."""
        if eqn.primitive not in IN_PLACE or np.dtype(var.aval.dtype).kind != "f":
            return None
        want = tile_type(var.aval.shape, var.aval.dtype, loc)
        for v in eqn.invars:
            if isinstance(v, Literal):
                continue
            name = self.names.get(v)
            if v in self.dying and name in self.tiles and self.holders.get(name) == {v} and self.tiles[name][0] == want:
                self.bind(var, name)
                return asm.Operand(name, want)
        return None

    def _in_place(self, var, eqn):
        """The operand of a loop's carry tile that ``eqn`` updates (``acc = tmax(acc, x)``): the carry's
        own tile, written in place (destination passing); None for any other result."""
        old = self.carried.get(var)
        if old is None or not any(v is old for v in eqn.invars) or old not in self.names:
            return None
        name = self.names[old]
        t = self.tiles[name][0]
        if tuple(var.aval.shape) != tuple(old.aval.shape) or np.dtype(var.aval.dtype) != np.dtype(old.aval.dtype):
            return None
        self.bind(var, name)
        return asm.Operand(name, t)

    def loop(self, eqn):
        """A ``fori_loop`` (a scan whose first carry is an int32 counter from a constant) → ``scf.for``."""
        p = eqn.params
        body = p["jaxpr"].jaxpr
        nc, ncarry = p["num_consts"], p["num_carry"]
        consts, carry = eqn.invars[:nc], eqn.invars[nc:nc + ncarry]
        lower = counted_loop(eqn)
        if lower is None:
            raise PtoUnsupportedError(f"pto codegen: only counted loops (fori_loop) are supported in block "
                                      f"programs ('{self.program.name}')")
        var = self.fresh("k")
        for inner, outer in zip(body.invars[:nc], consts):
            if outer in self.views:
                self.views[inner] = self.views[outer]
            elif not isinstance(outer, Literal):
                self.bind(inner, self.names[outer])
        self.names[body.invars[nc]] = var
        for inner, outer in zip(body.invars[nc + 1:nc + ncarry], carry[1:]):
            if outer in self.views:                 # a GM tensor the loop stores into
                self.views[inner] = self.views[outer]
            else:
                self.bind(inner, self.names[outer])
        self.carried.update((o, i) for o, i in zip(body.outvars[1:ncarry], body.invars[nc + 1:nc + ncarry])
                            if not isinstance(o, Literal) and o is not i)
        outer_code, self.code = self.code, []
        dead_after = _last_uses(body)
        outer_dying = self.dying
        for pos, inner_eqn in enumerate(body.eqns):
            self.dying = set(dead_after.get(pos, ()))
            self.eqn(inner_eqn)
            for v in dead_after.get(pos, ()):
                self.release(v)
        loop_body, self.code, self.dying = tuple(self.code), outer_code, outer_dying
        for inner, outer in zip(body.outvars[1:ncarry], eqn.outvars[1:ncarry]):
            if inner in self.views:
                self.views[outer] = self.views[inner]
                continue
            if self.names[inner] != self.names.get(body.invars[nc + 1 + list(body.outvars[1:ncarry]).index(inner)]):
                raise PtoUnsupportedError(f"pto codegen: loop carry of '{self.program.name}' is not updated in place")
            self.bind(outer, self.names[inner])
        self.code.append(asm.For(var, self.const(lower), self.const(lower + p["length"]), self.const(1), loop_body))


def _last_uses(jaxpr):
    """Eqn position -> the vars last used there (uses inside a loop body count at the loop)."""
    last = {}
    for pos, eqn in enumerate(jaxpr.eqns):
        for v in eqn.invars:
            if not isinstance(v, Literal):
                last[v] = pos
    outs = set(v for v in jaxpr.outvars if not isinstance(v, Literal))
    dead: dict = {}
    for v, pos in last.items():
        if v not in outs:
            dead.setdefault(pos, []).append(v)
    return dead


def codegen(program, part_shape, memory: CoreMemory, pid: int = 0) -> asm.Kernel:
    """The PTO-AS kernel of one block program (program id ``pid``) over a grid of ``part_shape``."""
    return _Codegen(program, part_shape, memory, pid).run()
