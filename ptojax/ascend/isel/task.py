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
"""
from __future__ import annotations

import math

from ...errors import PtoCapacityError
from .. import asm
from .cube import CubePlan
from .selector import Selector, _uses


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


class TaskSelector(Selector):
    """Prints the task function of a kernel whose tasks take ``tiles`` grid points each."""

    def __init__(self, kernel: asm.Kernel, arch: str, level: str, memory, tiles: int, reuse: bool = True):
        super().__init__(kernel, arch, level, memory)
        self.tiles = tiles
        self.resident = resident_loads(kernel) if reuse else {}
        self.hoisted = {t for t, period in self.resident.items() if period % tiles == 0}
        self.loads = {s.outs[0].name: s for s in kernel.body if isinstance(s, asm.Instr) and s.op == "tload"}
        self.windows = {self.loads[t].ins[0].name: t for t in self.resident}     # partition view -> its tile

    def run(self, symbol: str) -> str:
        k = self.kernel
        self.cube = CubePlan(k.body)
        self.uses = _uses(k.body)
        setup = 0
        while setup < len(k.body) and isinstance(k.body[setup], (asm.Const, asm.MakeView, asm.Alloc)):
            setup += 1
        prelude, code = k.body[:setup], k.body[setup:]
        self.body([s for s in prelude if not (isinstance(s, asm.Alloc) and s.name in self.resident)])
        for s in prelude:                       # resident tiles: above codegen's plan (level3)
            if isinstance(s, asm.Alloc) and s.name in self.resident:
                self.alloc(self.tile_type(self.cube.types.get(s.name, s.type)), s.name)
        index = [name for name, type_ in k.params if type_ == "index"]
        bid, task = self.fresh("bid"), self.fresh("b")
        first = self.fresh("first")
        self.lines += [f"{bid} = pto.get_block_idx", f"{task} = arith.index_cast {bid} : i64 to index",
                       f"{first} = arith.muli {task}, {self.const(self.tiles, 'index')} : index"]
        if self.hoisted:
            self.hoist(code, index, first)
        t, flat, size = self.fresh("t"), self.fresh("flat"), math.prod(k.grid)

        def iteration():
            self.lines.append(f"{flat} = arith.addi {first}, {t} : index")
            if size % self.tiles == 0:
                return self.point(code, index, flat, t)
            inside = self.fresh("in")               # the tail task stops at the grid's end
            self.lines.append(f"{inside} = arith.cmpi slt, {flat}, {self.const(size, 'index')} : index")
            self.nested(f"scf.if {inside}", lambda: self.point(code, index, flat, t))

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
                if tile in self.hoisted:
                    continue
                rem, low, new = self.fresh("r"), self.fresh("m"), self.fresh("new")
                self.lines += [f"{rem} = arith.remsi {flat}, {self.const(self.resident[tile], 'index')} : index",
                               f"{low} = arith.minsi {t}, {rem} : index",
                               f"{new} = arith.cmpi eq, {low}, {self.const(0, 'index')} : index"]
                self.nested(f"scf.if {new}", lambda s=s: self.instr(s))
                continue
            self.body([s])

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
    docstring); without reuse where the resident tiles do not fit (``level3``)."""
    try:
        return TaskSelector(kernel, arch, level, memory, tiles).run(symbol)
    except PtoCapacityError:
        return TaskSelector(kernel, arch, level, memory, tiles, reuse=False).run(symbol)
