"""A lowered kernel compiled for Ascend: PTO-AS text for every block program, and how it runs.

``compile_kernel(lowering, memory)`` generates each block program's kernel (codegen's plan: tiles,
addresses, instructions), prints it, parses the text back and verifies it; instruction selection
prints the plans as one real PTO-AS module (:meth:`AscendKernel.pto`). :class:`AscendBackend` hands
tasks to the MPMD runtime: their bodies interpret that module (:mod:`~ptojax.ascend.engine`: what
``ptoas`` accepts is what runs), and the cost model predicts their time.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from ..errors import PtoArgumentError, PtoCapacityError, PtoUnsupportedError
from ..lowering import ir, partition
from ..lowering.memory import ASCEND_CORE, CoreMemory
from ..lowering.pipeline import Lowering
from ..lowering.walk import body_of
from . import asm, isa, isel, targets
from .isel import liveness
from .autotask import points_per_task
from .ptoas import assemble
from .codegen import codegen


# What AscendKernel.costs prices by default: the real module's instructions ("pto") or codegen's ("codegen").
PRICE_ON = "pto"


def _arch(arch: str) -> str:
    """PTOAS's ``--pto-arch``: ``a3`` (the A2/A3 instruction set; ``a2`` names it too) or ``a5``."""
    if arch == "a2":
        return "a3"
    if arch not in ("a3", "a5"):
        raise PtoArgumentError(f"pto: arch must be 'a3' (A2/A3, also 'a2') or 'a5', got {arch!r}")
    return arch


@dataclasses.dataclass(frozen=True, eq=False)
class AscendKernel:
    """PTO-AS kernels of a lowering: ``kernels[(program name, part grid)]`` parsed from ``text``."""

    lowering: Lowering
    memory: CoreMemory
    kernels: dict
    text: str
    tasks: dict = dataclasses.field(default_factory=dict)   # key -> grid points per task, where more than one
    # Made from ``kernels`` once (``init=False``: ``dataclasses.replace`` with other kernels starts afresh).
    _costs: dict = dataclasses.field(default_factory=dict, init=False, repr=False)    # (target, on) -> {key: BlockCost};
    #                                                 (target, key, HBM fraction) -> BlockCost;
    #                                                 (target, key, HBM fraction, phase, tiles) -> a task's
    _pto: dict = dataclasses.field(default_factory=dict, init=False, repr=False)      # (arch, level) -> module text
    _functions: dict = dataclasses.field(default_factory=dict, init=False, repr=False)  # arch -> {key: Function};
    #                                                                                   ("tasks", arch) -> task functions

    def kernel(self, part) -> asm.Kernel:
        return self.kernels[(part.program.name, tuple(part.shape))]

    def _task_sizes(self) -> list[int]:
        return [self.tasks.get(key, 1) for key in self.kernels]

    def pto(self, arch: str = "a3", level: str = "level2") -> str:
        """The kernel as one real PTO-AS module for ``arch`` (``a3``: A2/A3, ``a5``), the text PTOAS
        assembles (:mod:`~ptojax.ascend.isel`), made once per (arch, level): a function per grid point
        of each program, then a task function (:mod:`~ptojax.ascend.isel.task`, L1/UB reuse) for each
        program whose tasks take several grid points."""
        arch = _arch(arch)
        if (arch, level) not in self._pto:
            self._pto[arch, level] = isel.module(list(self.kernels.values()), arch=arch, level=level,
                                                 memory=self.memory, tasks=self._task_sizes())
        return self._pto[arch, level]

    def check_fit(self, arch: str = "a3"):
        """A :class:`~ptojax.errors.PtoCapacityError` naming the first function of :meth:`pto` whose tiles
        need more UB than the core has (:func:`~ptojax.ascend.isel.liveness.ub_plan`: what ``ptoas``
        refuses as ``vec overflow``)."""
        kernels = [*self.kernels.values(), *(self.kernels[key] for key in self.grouped())]
        labels = {name: k.label for (name, _), k in zip(self.entries(), kernels)}
        for name, text in liveness.functions(self.pto(arch)).items():
            need = liveness.ub_plan(text)
            if need > self.memory.ub:
                label = f" (label {labels[name]!r})" if labels.get(name) else ""
                advice = ("use fewer rows or columns in its ops' vec tile (a reduction or row-wise composite keeps its "
                          "rows whole unless the tile splits them and row loops are on for its label)")
                if "pto.tsort32" in text:        # a sort keeps each line it sorts whole: fewer of them help
                    advice = ("its sort keeps each line it sorts whole in the UB, whatever the vec tile's extent "
                              "along it: use fewer lines per tile — fewer rows for a sort along the last axis "
                              "(pj.tile(vec=(1, ...)) sorts one row at a time), fewer columns for one along a leading "
                              "axis; a row too long to sort even alone takes lax.top_k (staged in chunks however long "
                              "the row) or a sort outside the kernel")
                raise PtoCapacityError(
                    f"pto realize: function @{name}{label} needs {need} bytes of UB (its tiles placed as ptoas "
                    f"plans them); UB holds {self.memory.ub} bytes — {advice}")

    def cpp(self, arch: str = "a3", level: str = "level2", insert_sync: bool = True) -> str:
        """The C++ for the pto-isa tile library that Huawei's ``ptoas`` makes of :meth:`pto`
        (:func:`~ptojax.ascend.ptoas.assemble`; ``PTOAS`` or ``ptoas`` on PATH)."""
        return assemble(self.pto(arch, level), arch=_arch(arch), level=level, insert_sync=insert_sync)

    def costs(self, target, on: str | None = None) -> dict:
        """Each kernel's predicted block cost on ``target``, computed once: priced ``on`` the real
        module's instructions (``"pto"``, the default :data:`PRICE_ON`: :meth:`pto`'s text, parsed by
        :mod:`~ptojax.ascend.engine`, one function per kernel, what ``ptoas`` assembles) or on
        codegen's planning instructions (``"codegen"``). A kernel selection cannot print yet (a
        :class:`~ptojax.errors.PtoUnsupportedError`) or the engine cannot parse is priced on codegen's
        (``BlockCost.priced`` says which). The real text's loads read with codegen's L2 fraction
        (:func:`~ptojax.ascend.cost.load_l2_hit`), as the text carries no ``l2_hit``."""
        on = on or PRICE_ON
        if on not in ("pto", "codegen"):
            raise PtoArgumentError(f"costs: on must be 'pto' or 'codegen', got {on!r}")
        if (target.name, on) not in self._costs:
            from ..errors import PtoUnsupportedError
            from .cost import kernel_time, load_l2_hit

            costs = {key: kernel_time(k, target) for key, k in self.kernels.items()}
            if on == "pto":
                for key, func in self.functions().items():
                    try:
                        if func is not None:
                            costs[key] = kernel_time(func, target, l2_hit=load_l2_hit(self.kernels[key]))
                    except PtoUnsupportedError:    # e.g. a loop bound the text computes at run time
                        pass
            self._costs[target.name, on] = costs
        return self._costs[target.name, on]

    def cost(self, key, target, hbm: float):
        """:meth:`costs`' block cost of kernel ``key`` on ``target`` with a fraction ``hbm`` of its GM
        reads served by HBM (the runtime's L2 rule decides it per block call), computed once."""
        if hbm == 0.0:
            return self.costs(target)[key]
        if (target.name, key, hbm) not in self._costs:
            from .cost import kernel_time, load_l2_hit

            if self.costs(target)[key].priced == "pto":
                l2_hit = (1.0 - hbm) * load_l2_hit(self.kernels[key])
                self._costs[target.name, key, hbm] = kernel_time(self.functions()[key], target, l2_hit=l2_hit)
            else:
                self._costs[target.name, key, hbm] = kernel_time(self.kernels[key], target, l2_hit=1.0 - hbm)
        return self._costs[target.name, key, hbm]

    def entries(self) -> list[tuple[str, int]]:
        """``(function name, blocks)`` of every function of :meth:`pto`, in order: a grid-point
        function runs one block per grid point, a task function one per task."""
        names = isel.symbols(list(self.kernels.values()), self._task_sizes())
        blocks = [math.prod(k.grid) for k in self.kernels.values()]
        blocks += [-(-math.prod(self.kernels[key].grid) // self.tasks[key]) for key in self.grouped()]
        return list(zip(names, blocks))

    def grouped(self) -> list:
        """The keys of the kernels that have a task function, in :meth:`pto`'s order."""
        return [key for key in self.kernels if self.tasks.get(key, 1) > 1]

    def task_functions(self, arch: str = "a3") -> dict:
        """Each task function of the real module for ``arch`` (key -> engine ``Function``, None where
        it cannot print or parse), made once."""
        if ("tasks", arch) not in self._functions:
            from .engine_parse import parse
            from ..errors import PtoUnsupportedError

            names = dict(zip(self.grouped(), (name for name, _ in self.entries()[len(self.kernels):])))
            try:
                module = parse(self.pto(arch))
                funcs = {key: module.function(name) for key, name in names.items()}
            except (PtoUnsupportedError, asm.PtoAsmError):   # one by one: price what prints and parses
                funcs = {}
                for key in names:
                    try:
                        module = isel.module([self.kernels[key]], arch=arch, memory=self.memory,
                                             tasks=[self.tasks[key]])
                        funcs[key] = parse(module).functions[1]
                    except (PtoUnsupportedError, asm.PtoAsmError):
                        funcs[key] = None
            self._functions["tasks", arch] = funcs
        return self._functions["tasks", arch]

    def task_cost(self, key, target, hbm: float, first: int, count: int):
        """The block cost of the task over grid points ``first .. first+count-1`` of kernel ``key`` on
        ``target``, a fraction ``hbm`` of its GM reads from HBM: its task function's
        (:func:`~ptojax.ascend.cost.task_time`: a load the task keeps resident is not charged again)
        where it has one, else ``count`` × the grid point's :meth:`cost`."""
        n = self.tasks.get(key, 1)
        func = self.task_functions().get(key) if n > 1 and first % n == 0 and count <= n else None
        if func is None or self.costs(target)[key].priced != "pto":
            one = self.cost(key, target, hbm)
            return dataclasses.replace(one, cycles=one.cycles * count, seconds=one.seconds * count,
                                       pipes={p: c * count for p, c in one.pipes.items()},
                                       bytes_in=one.bytes_in * count, bytes_out=one.bytes_out * count,
                                       flops=one.flops * count, fill=one.fill * count)
        grid = self.kernels[key].grid
        phase = (target.name, key, hbm, first % max(1, math.prod(grid[1:])), count)   # the same loads
        if phase not in self._costs:
            from .cost import load_l2_hit, task_time

            l2_hit = (1.0 - hbm) * load_l2_hit(self.kernels[key])
            self._costs[phase] = task_time(func, target, block=first // n, l2_hit=l2_hit)
        return self._costs[phase]

    def functions(self, arch: str = "a3") -> dict:
        """Each kernel's function of the real module for ``arch`` (parsed; key -> engine ``Function``),
        made once; None for a kernel selection cannot print yet (or the engine cannot read)."""
        if arch not in self._functions:
            from .engine_parse import parse
            from ..errors import PtoUnsupportedError

            keys, kernels = list(self.kernels), list(self.kernels.values())
            names = isel.symbols(kernels)
            try:
                module = parse(self.pto(arch))
                funcs = {key: module.function(name) for key, name in zip(keys, names)}
            except (PtoUnsupportedError, asm.PtoAsmError):   # one by one: price what prints and parses
                funcs = {}
                for key, kernel, name in zip(keys, kernels, names):
                    try:
                        (funcs[key],) = parse(isel.module([kernel], arch=arch, memory=self.memory)).functions
                    except (PtoUnsupportedError, asm.PtoAsmError):
                        funcs[key] = None
            self._functions[arch] = funcs
        return self._functions[arch]


def planned_ub(program, shape, memory: CoreMemory = ASCEND_CORE) -> dict:
    """The partition's fit check (:data:`~ptojax.lowering.partition.PLANNERS`): ``{"vec": bytes}`` of UB
    that the function of vector ``program`` over a grid of ``shape`` needs in the real module, placed as
    :meth:`AscendKernel.check_fit` (and ``ptoas``) plan it; ``{}`` for a cube program and for one that
    selection cannot print yet (its compile says why). Codegen's :class:`PtoCapacityError` passes."""
    if program.core != "AIV":
        return {}
    try:
        text = isel.module([codegen(program, tuple(shape), memory)], arch="a3", memory=memory)
    except (PtoUnsupportedError, asm.PtoAsmError):
        return {}
    return {"vec": max((liveness.ub_plan(t) for t in liveness.functions(text).values()), default=0)}


partition.PLANNERS.append(planned_ub)


def _block_calls(jaxpr):
    for eqn in jaxpr.eqns:
        if eqn.primitive is ir.block_call_p:
            yield eqn
        for key, value in eqn.params.items():
            if key.endswith("jaxpr") and value is not None:
                yield from _block_calls(body_of(value)[0])
            elif key == "branches":
                for branch in value:
                    yield from _block_calls(body_of(branch)[0])


def compile_kernel(lowering: Lowering, memory: CoreMemory = ASCEND_CORE, target=None) -> AscendKernel:
    """The kernels of ``lowering``'s block programs; a part with ``tiles_per_block="auto"`` gets the
    grid points per task the cost model predicts fastest on ``target`` (:mod:`~ptojax.ascend.autotask`),
    one without a target (dynamic rows run one block per task)."""
    kernels, texts, tasks = {}, [], {}
    pids = {id(p): i for i, p in enumerate(lowering.programs)}
    for eqn in _block_calls(lowering.block.jaxpr):
        auto = []
        for part in eqn.params["spec"].parts:
            key = (part.program.name, tuple(part.shape))
            if key in kernels:
                continue
            made = codegen(part.program, part.shape, memory, pids[id(part.program)])
            text = asm.emit(made)
            (parsed,) = asm.parse(text)
            isa.verify(parsed, memory)
            # what was made, where the text parses back to it: its instructions keep their eqns (an error
            # selecting one names the user's call and line)
            kernels[key] = made if parsed == made else parsed
            texts.append(text)
            if part.tiles_per_block == 0 and target is not None:     # "auto": the call's parts together
                auto.append((key, part))
            elif min(part.tiles_per_block, part.size) > 1:
                tasks[key] = min(part.tiles_per_block, part.size)
        counts = points_per_task([kernels[k] for k, _ in auto], targets.target(target), memory) if auto else []
        tasks.update((key, min(n, part.size)) for (key, part), n in zip(auto, counts) if min(n, part.size) > 1)
    return AscendKernel(lowering, memory, kernels, "\n".join(texts), tasks)


def block_index(index, grid) -> int:
    """Grid point ``index`` as ``pto.get_block_idx`` numbers it: row-major over ``grid`` (missing
    trailing dims of the grid are 1)."""
    grid = tuple(grid) + (1,) * (len(index) - len(grid))
    flat = 0
    for i, size in zip(index, grid):
        if not 0 <= i < size:
            raise ValueError(f"grid point {tuple(index)} is outside the grid {grid}")
        flat = flat * int(size) + int(i)
    return flat


class _Blocks:
    """A task's body: function ``name`` of the parsed module at block indices ``blocks``, in order (the
    grid points together where the text allows: :func:`~ptojax.ascend.textbatch.run`, bit for bit the
    engine's point-after-point result)."""

    __slots__ = ("backend", "name", "blocks", "arrays")

    def __init__(self, backend, name, blocks, arrays):
        self.backend, self.name, self.blocks, self.arrays = backend, name, blocks, arrays

    def __call__(self, core=None) -> None:
        from . import textbatch

        textbatch.run(self.backend.module, self.name, self.arrays, self.blocks)


class AscendBackend:
    """Runs tasks on the MPMD runtime and prices them: each grid point of a task is one call of its
    program's function in the kernel's real module for ``arch``, its block index the point's row-major
    position in the part's grid (as ``pto.get_block_idx`` gives it); a task of a program with a task
    function (:mod:`~ptojax.ascend.isel.task`) is one call of that function, its block index the task's
    number, so the loads it keeps resident run as the text has them. The module is printed and parsed
    when a body first runs (a profile without computing needs neither).

    (The runtime's Backend protocol, met structurally: the Ascend layer does not import the runtime.)
    """

    def __init__(self, compiled: AscendKernel, target, arch: str = "a3"):
        self.compiled, self.target, self.arch = compiled, target, arch
        self.l2_bytes = target.l2_bytes
        names = [name for name, _ in compiled.entries()]
        self.names = dict(zip(compiled.kernels, names))
        self.task_names = dict(zip(compiled.grouped(), names[len(compiled.kernels):]))

    @functools.cached_property
    def module(self):
        """The kernel's real module, parsed by the engine."""
        from .engine_parse import parse

        return parse(self.compiled.pto(self.arch))

    def _task_cost(self, part, points, hbm: float) -> tuple[float, int, int]:
        """(seconds, GM bytes in, GM bytes out) of the task of ``part`` over the grid points ``points``."""
        key = (part.program.name, tuple(part.shape))
        if key not in self.compiled.tasks:
            one, n = self.compiled.cost(key, self.target, hbm), len(points)
            return one.seconds * n, one.bytes_in * n, one.bytes_out * n
        first = int(np.ravel_multi_index(tuple(int(i) for i in points[0]), part.shape)) if points[0] else 0
        cost = self.compiled.task_cost(key, self.target, hbm, first, len(points))
        return cost.seconds, cost.bytes_in, cost.bytes_out

    def priced(self, part, hbm: float, points) -> tuple[float, int]:
        """Seconds and GM bytes read of the task of ``part`` over the grid points ``points`` with a fraction
        ``hbm`` of its reads from HBM (:meth:`AscendKernel.task_cost`: resident loads read once)."""
        return self._task_cost(part, points, hbm)[:2]

    def _body(self, part, points, arrays) -> _Blocks:
        key = (part.program.name, tuple(part.shape))
        grid, n = self.compiled.kernels[key].grid, self.compiled.tasks.get(key, 1)
        first = block_index(points[0], grid) if points else 0
        if key in self.task_names and first % n == 0 and len(points) <= n:
            return _Blocks(self, self.task_names[key], [first // n], arrays)
        return _Blocks(self, self.names[key], [block_index(p, grid) for p in points], arrays)

    def task(self, part, points, arrays):
        seconds, bytes_in, bytes_out = self._task_cost(part, points, 0.0)
        return self._body(part, points, arrays), seconds, int(bytes_in + bytes_out)

    def points_per_task(self, part) -> int:
        """``tiles_per_block="auto"``: the count :func:`compile_kernel` chose by the cost model
        (:mod:`~ptojax.ascend.autotask`)."""
        return self.compiled.tasks.get((part.program.name, tuple(part.shape)), 1)

    def batch(self, part, arrays):
        """Many tasks of ``part`` at once: one walk per function over all their blocks, tasks in order."""
        def run(tile_lists, core=None):
            bodies = [self._body(part, points, arrays) for points in tile_lists]
            for name in dict.fromkeys(b.name for b in bodies):
                _Blocks(self, name, [i for b in bodies if b.name == name for i in b.blocks], arrays)()
        return run

    def copy_cost(self, nbytes: int) -> float:
        """A GM-to-GM copy reads and writes every byte through HBM."""
        return self.target.gm_read_latency / self.target.clock_hz + 2 * nbytes / self.target.hbm_bytes_per_s

    def fill_cost(self, nbytes: int) -> float:
        """A fill writes every byte through HBM."""
        return self.target.gm_write_latency / self.target.clock_hz + nbytes / self.target.hbm_bytes_per_s

    def worker(self) -> None:
        """No per-worker state: a body's tiles live in the engine's walk."""
        return None
