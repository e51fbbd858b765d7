"""A task's function: the ``n`` consecutive grid points one task runs, with L1/UB reuse.

A block part with ``tiles_per_block = n`` gives each task ``n`` consecutive grid points (row-major).
Its task function takes the task number from ``pto.get_block_idx`` and loops over those points
(``scf.for``), each iteration the grid-point function's body at ``first + t``; a tail task stops at
the grid's end (``scf.if``). Consecutive points of a task often load the same GM window into the same
tile — the left operand of a matmul over its N blocks, the query rows of a score over key blocks —
and such a load is *resident*: it is made once and the tile kept, as PyPTO's "L1 reuse" does:

- hoisted before the loop when the window cannot change within any task (its period — the number of
  consecutive grid points that share it — is a multiple of ``n``);
- else guarded by ``scf.if``: loaded at the task's first point and where the window changes.

A load is resident when it sits at the top level of the program (not in one of its loops), its
window's offsets follow from grid indices and constants alone, its period is above 1, and nothing
else writes its tile. At ``level3`` a resident tile gets an address of its own above codegen's
plan (codegen may reuse the space of a tile once it is dead; a resident one never is), and a task
function whose resident tiles do not fit is printed without reuse.

A resident left operand of a K chain becomes its *strip* (:func:`k_strips`): the window of all K
chunks of its rows, loaded into one ``mat`` tile, each step's chunk a ``pto.subset`` of it, so points
along N load A once per task instead of once per K step — where L1 holds the strips beside every
``mat`` tile of the grid point (else, and where a level3 address does not fit, each step loads its
chunk). A grid point's other tiles are allocated inside the task loop: PTOAS's level2 memory plan
keeps a tile allocated before a loop and used in it live for the whole loop.
"""
from __future__ import annotations

import dataclasses
import math

from ...errors import PtoCapacityError
from ...lowering.memory import ASCEND_CORE
from .. import asm
from .cube import CubePlan, _walk
from .selector import Selector, _uses, deferred


def _writes(body, out=None) -> dict:
    """Tile name -> how many instructions write it (loop bodies included)."""
    out = {} if out is None else out
    for s in body:
        if isinstance(s, asm.For):
            _writes(s.body, out)
        elif isinstance(s, asm.Instr):
            for o in s.outs:
                out[o.name] = out.get(o.name, 0) + 1
    return out


def resident_loads(kernel: asm.Kernel) -> dict[str, int]:
    """The resident loads of ``kernel`` (see the module docstring): destination tile -> period, the
    number of consecutive grid points (row-major) that load the same window."""
    index = [name for name, type_ in kernel.params if type_ == "index"]
    sizes = tuple(kernel.grid) + (1,) * (len(index) - len(kernel.grid))
    deps: dict[str, frozenset | None] = {name: frozenset((d,)) for d, name in enumerate(index)}
    windows, writes, out = {}, _writes(kernel.body), {}
    for s in kernel.body:
        if isinstance(s, asm.Const):
            deps[s.name] = frozenset()
        elif isinstance(s, asm.Arith):
            a, b = deps.get(s.lhs), deps.get(s.rhs)
            deps[s.name] = None if a is None or b is None else a | b
        elif isinstance(s, asm.PartitionView):
            dims = [deps.get(o) for o in s.offsets]
            windows[s.name] = None if any(d is None for d in dims) else frozenset().union(*dims)
        elif isinstance(s, asm.Instr) and s.op == "tload" and windows.get(s.ins[0].name) is not None:
            tile = s.outs[0].name
            varying = [d for d in windows[s.ins[0].name] if sizes[d] > 1]
            period = math.prod(sizes[max(varying) + 1:]) if varying else math.prod(sizes)
            if period > 1 and writes.get(tile) == 1:
                out[tile] = period
    return out


@dataclasses.dataclass(frozen=True)
class Strip:
    """A resident left-operand window of a K chain's peeled first step (``tile``, rows × ``chunk``
    columns at column 0) widened to the whole strip of its rows, ``cols`` = the K steps × ``chunk``:
    the chain's loop takes its step's chunk (at column ``offset``) as a subset of the strip where it
    loaded ``step_tile`` from window ``step_window``."""

    tile: str
    step_tile: str
    step_window: str
    offset: str             # the loop step's column offset (an index SSA name)
    rows: int
    chunk: int
    cols: int


def k_strips(kernel: asm.Kernel, resident, types: dict, capacity: int) -> dict[str, Strip]:
    """Resident ``mat`` tiles of ``kernel`` that become the whole strip of their rows (:class:`Strip`):
    the left operand of a K chain whose loop (``1 .. S`` step 1) loads the same rows of the same 2-D
    GM tensor at column ``k * chunk`` into a tile of the same type, read only in the loop. Only while
    L1 holds the strips next to every ``mat`` tile of the grid point (``capacity`` bytes)."""
    values = {s.name: s.value for s in kernel.body if isinstance(s, asm.Const)}
    ariths = {s.name: s for s in _walk(kernel.body) if isinstance(s, asm.Arith)}
    views = {s.name: s for s in _walk(kernel.body) if isinstance(s, asm.PartitionView)}

    def value(name):
        if name in values:
            return values[name]
        a = ariths.get(name)
        lhs, rhs = (value(a.lhs), value(a.rhs)) if a is not None else (None, None)
        if lhs is None or rhs is None:
            return None
        return lhs * rhs if a.op == "muli" else lhs + rhs

    def same(x, y):
        a, b = ariths.get(x), ariths.get(y)
        return x == y or (a is not None and b is not None and (a.op, a.lhs, a.rhs) == (b.op, b.lhs, b.rhs))

    typed = {s.name: types.get(s.name, s.type) for s in _walk(kernel.body) if isinstance(s, asm.Alloc)}
    loops = [s for s in kernel.body if isinstance(s, asm.For) and value(s.lower) == 1 and value(s.step) == 1]
    out, used = {}, sum(t.rows * t.cols * t.np_dtype.itemsize for t in typed.values() if t.loc == "mat")
    for tile in resident:
        t = typed.get(tile)
        load = next(s for s in kernel.body if isinstance(s, asm.Instr) and s.op == "tload" and s.outs[0].name == tile)
        window = views[load.ins[0].name]
        if (t is None or t.loc != "mat" or t.blayout != "col_major" or (t.rows, t.cols) != (t.v_row, t.v_col)
                or len(window.offsets) != 2 or value(window.offsets[1]) != 0):
            continue
        for loop in loops:
            step = next((s for s in loop.body if isinstance(s, asm.PartitionView) and s.view == window.view
                         and s.sizes == window.sizes and same(s.offsets[0], window.offsets[0])), None)
            mul = ariths.get(step.offsets[1]) if step is not None else None
            if (mul is None or mul.op != "muli" or loop.var not in (mul.lhs, mul.rhs)
                    or value(mul.rhs if mul.lhs == loop.var else mul.lhs) != t.cols):
                continue
            loads = [s for s in loop.body
                     if isinstance(s, asm.Instr) and s.op == "tload" and s.ins[0].name == step.name]
            step_tile = loads[0].outs[0].name if len(loads) == 1 else None
            inside = {id(s) for s in _walk(loop.body)}
            read_outside = {o.name for s in _walk(kernel.body) if isinstance(s, asm.Instr) and id(s) not in inside
                            for o in s.ins}
            cols = value(loop.upper) * t.cols if value(loop.upper) is not None else None
            if (step_tile is None or typed.get(step_tile) != t or step_tile in read_outside or cols is None
                    or cols > window.source.shape[1] or used + t.rows * cols * t.np_dtype.itemsize > capacity):
                continue
            used += t.rows * cols * t.np_dtype.itemsize
            out[tile] = Strip(tile, step_tile, step.name, step.offsets[1], t.rows, t.cols, cols)
            break
    return out


class TaskSelector(Selector):
    """Prints the task function of a kernel whose tasks take ``tiles`` grid points each."""

    def __init__(self, kernel: asm.Kernel, arch: str, level: str, memory, tiles: int, reuse: bool = True,
                 strips: bool = True):
        super().__init__(kernel, arch, level, memory)
        self.tiles = tiles
        self.resident = resident_loads(kernel) if reuse else {}
        self.cube = CubePlan(kernel.body)
        self.strips = k_strips(kernel, self.resident, self.cube.types, (memory or ASCEND_CORE).l1) if strips else {}
        self.step_tiles = {strip.step_tile: strip for strip in self.strips.values()}
        self.step_windows = {strip.step_window for strip in self.strips.values()}
        self.hoisted = {t for t, period in self.resident.items() if period % tiles == 0}
        self.loads = {s.outs[0].name: s for s in kernel.body if isinstance(s, asm.Instr) and s.op == "tload"}
        self.windows = {self.loads[t].ins[0].name: t for t in self.resident}     # partition view -> its tile

    def run(self, symbol: str) -> str:
        k = self.kernel
        self.uses = _uses(k.body)
        setup = 0
        while setup < len(k.body) and isinstance(k.body[setup], (asm.Const, asm.MakeView, asm.Alloc)):
            setup += 1
        prelude, code = list(k.body[:setup]), list(k.body[setup:])
        # a grid point's own tiles are allocated in the loop's body: PTOAS's memory plan (level2) keeps
        # a tile allocated before a loop and used in it live for the whole loop, so tiles one grid point
        # holds one after another (the left operand of a K chain's first step and of its loop) would
        # all take space at once
        allocs = [s for s in prelude if isinstance(s, asm.Alloc) and s.name not in self.resident
                  and s.name not in self.step_tiles]
        self.body([s for s in prelude if not isinstance(s, asm.Alloc)])
        for s in prelude:                       # resident tiles: above codegen's plan (level3)
            if isinstance(s, asm.Alloc) and s.name in self.resident:
                t = self.tile_type(self.cube.types.get(s.name, s.type))
                strip = self.strips.get(s.name)
                if strip is None:
                    self.alloc(t, s.name)
                    continue
                self.alloc(dataclasses.replace(t, cols=strip.cols, v_col=strip.cols), s.name)
        index = [name for name, type_ in k.params if type_ == "index"]
        bid, task = self.fresh("bid"), self.fresh("b")
        first = self.fresh("first")
        self.lines += [f"{bid} = pto.get_block_idx", f"{task} = arith.index_cast {bid} : i64 to index",
                       f"{first} = arith.muli {task}, {self.const(self.tiles, 'index')} : index"]
        if self.hoisted:
            self.hoist(code, index, first)
        t, flat, size = self.fresh("t"), self.fresh("flat"), math.prod(k.grid)

        point = deferred(allocs + code)             # each tile allocated where first used (selector.deferred)

        def iteration():
            self.lines.append(f"{flat} = arith.addi {first}, {t} : index")
            if size % self.tiles == 0:
                return self.point(point, index, flat, t)
            inside = self.fresh("in")               # the tail task stops at the grid's end
            self.lines.append(f"{inside} = arith.cmpi slt, {flat}, {self.const(size, 'index')} : index")
            self.nested(f"scf.if {inside}", lambda: self.point(point, index, flat, t))

        self.nested(f"scf.for {t} = {self.const(0, 'index')} to {self.const(self.tiles, 'index')} "
                    f"step {self.const(1, 'index')}", iteration)
        return self.function(symbol)

    def nested(self, header: str, emit):
        """The statements ``emit()`` prints, inside ``header { ... }``."""
        outer, self.lines = self.lines, []
        emit()
        inner, self.lines = self.lines, outer
        self.lines += [header + " {"] + ["  " + line for line in inner] + ["}"]

    def point(self, code, index, flat, t):
        """One grid point's body at flat position ``flat``: resident loads skipped or guarded."""
        self.block_index(index, flat)
        for s in code:
            if isinstance(s, asm.PartitionView) and self.windows.get(s.name) in self.hoisted:
                continue
            if isinstance(s, asm.Instr) and s.op == "tload" and s.outs[0].name in self.resident:
                tile = s.outs[0].name
                if tile not in self.hoisted:
                    rem, low, new = self.fresh("r"), self.fresh("m"), self.fresh("new")
                    self.lines += [f"{rem} = arith.remsi {flat}, {self.const(self.resident[tile], 'index')} : index",
                                   f"{low} = arith.minsi {t}, {rem} : index",
                                   f"{new} = arith.cmpi eq, {low}, {self.const(0, 'index')} : index"]
                    self.nested(f"scf.if {new}", lambda s=s: self.instr(s))
                strip = self.strips.get(tile)
                if strip is not None:                   # the first step's chunk
                    self.renamed[tile] = self.subset(tile, 0, strip.rows, 0, strip.chunk)
                continue
            self.body([s])

    def body(self, stmts, indent=""):
        """Selection's statements, with a K strip's window widened to the strip and a loop step's load
        of a chunk of it replaced by a subset of the strip."""
        for s in stmts:
            if isinstance(s, asm.PartitionView) and s.name in self.step_windows:
                continue
            if isinstance(s, asm.PartitionView) and self.windows.get(s.name) in self.strips:
                strip = self.strips[self.windows[s.name]]
                s = dataclasses.replace(s, sizes=(s.sizes[0], self.const(strip.cols, "index")),
                                        type=dataclasses.replace(s.type, shape=(strip.rows, strip.cols)))
            elif isinstance(s, asm.Instr) and s.op == "tload" and s.outs[0].name in self.step_tiles:
                strip = self.step_tiles[s.outs[0].name]
                self.renamed[strip.step_tile] = self.subset(strip.tile, 0, strip.rows, strip.offset, strip.chunk)
                continue
            super().body([s], indent)

    def hoist(self, code, index, first):
        """The hoisted loads, before the task loop, at the task's first grid point."""
        names = {name: self.fresh("h") for name in index}
        self.block_index(list(names.values()), first)
        arith = {s.name: s for s in code if isinstance(s, asm.Arith)}

        def renamed(name):
            if name in names:
                return names[name]
            if name in arith:
                s = arith[name]
                names[name] = self.fresh("h")
                self.lines.append(asm.Arith(names[name], s.op, renamed(s.lhs), renamed(s.rhs)).text())
            return names.get(name, name)

        views = {s.name: s for s in code if isinstance(s, asm.PartitionView)}
        for tile in sorted(self.hoisted, key=lambda t: code.index(self.loads[t])):
            load = self.loads[tile]
            view = views[load.ins[0].name]
            self.body([asm.PartitionView(view.name, view.view, tuple(renamed(o) for o in view.offsets), view.sizes,
                                         view.source, view.type)])
            self.instr(load)


def task_function(kernel: asm.Kernel, symbol: str, tiles: int, *, arch: str, level: str, memory) -> str:
    """The task function ``@symbol`` of ``kernel`` for tasks of ``tiles`` grid points (see the module
    docstring); where the resident tiles do not fit (``level3``) without K strips, then without reuse."""
    for strips in (True, False):
        try:
            return TaskSelector(kernel, arch, level, memory, tiles, strips=strips).run(symbol)
        except PtoCapacityError:
            pass
    return TaskSelector(kernel, arch, level, memory, tiles, reuse=False).run(symbol)
