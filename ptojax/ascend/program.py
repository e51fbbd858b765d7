"""A lowered kernel compiled for Ascend: PTO-AS text for every block program, and how it runs.

``compile_kernel(lowering, memory)`` generates each block program's kernel, prints it, parses the
text back and verifies it — the parsed kernels are what runs, so what is emitted is what executes.
:class:`AscendBackend` hands block instances to the MPMD runtime: the interpreter runs a parsed
kernel at each tile of the instance, and the cost model predicts its time.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import math
import os

import numpy as np

from ..lowering import ir
from ..lowering.memory import ASCEND_CORE, CoreMemory
from ..lowering.pipeline import Lowering
from ..lowering.walk import body_of
from . import asm, isa, isel, targets
from .autotask import points_per_task
from .ptoas import assemble
from .codegen import codegen
from .hostcode import host_kernel
from .lanecode import lane_kernel
from .batched import extents, run_batch
from .interpreter import Core, run


# What AscendKernel.costs prices by default: the real module's instructions ("pto") or codegen's ("codegen").
PRICE_ON = "pto"


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
    _extents: dict = dataclasses.field(default_factory=dict, init=False, repr=False)  # key -> {location: bytes}
    _host: dict = dataclasses.field(default_factory=dict, init=False, repr=False)     # key -> HostKernel or None
    _lanes: dict = dataclasses.field(default_factory=dict, init=False, repr=False)    # key -> LaneKernel or None
    _pto: dict = dataclasses.field(default_factory=dict, init=False, repr=False)      # (arch, level) -> module text
    _functions: dict = dataclasses.field(default_factory=dict, init=False, repr=False)  # arch -> {key: Function};
    #                                                                                   ("tasks", arch) -> task functions

    def kernel(self, part) -> asm.Kernel:
        return self.kernels[(part.program.name, tuple(part.shape))]

    def extents(self, key) -> dict:
        """Bytes of each core buffer that kernel ``key``'s tiles reach, computed once."""
        if key not in self._extents:
            self._extents[key] = extents(self.kernels[key])
        return self._extents[key]

    def _task_sizes(self) -> list[int]:
        return [self.tasks.get(key, 1) for key in self.kernels]

    def pto(self, arch: str = "a3", level: str = "level2") -> str:
        """The kernel as one real PTO-AS module for ``arch`` (``a3``: A2/A3, ``a5``), the text PTOAS
        assembles (:mod:`~ptojax.ascend.isel`), made once per (arch, level): a function per grid point
        of each program, then a task function (:mod:`~ptojax.ascend.isel.task`, L1/UB reuse) for each
        program whose tasks take several grid points."""
        if (arch, level) not in self._pto:
            self._pto[arch, level] = isel.module(list(self.kernels.values()), arch=arch, level=level,
                                                 memory=self.memory, tasks=self._task_sizes())
        return self._pto[arch, level]

    def cpp(self, arch: str = "a3", level: str = "level2", insert_sync: bool = True) -> str:
        """The C++ for the pto-isa tile library that Huawei's ``ptoas`` makes of :meth:`pto`
        (:func:`~ptojax.ascend.ptoas.assemble`; ``PTOAS`` or ``ptoas`` on PATH)."""
        return assemble(self.pto(arch, level), arch=arch, level=level, insert_sync=insert_sync)

    def host(self, key):
        """Kernel ``key`` as host code (:func:`~ptojax.ascend.hostcode.host_kernel`), made once;
        None where the interpreter runs it."""
        if key not in self._host:
            self._host[key] = host_kernel(self.kernels[key], self.memory)
        return self._host[key]

    def lanes(self, key):
        """Kernel ``key`` as lane code (:func:`~ptojax.ascend.lanecode.lane_kernel`), made once; None
        where independent instances run one after another on host code or as the interpreter's lanes."""
        if key not in self._lanes:
            self._lanes[key] = lane_kernel(self.host(key), self.memory)
        return self._lanes[key]

    def host_text(self) -> str:
        """The host code of every program (its ``// program`` header, then the Python function), and its
        lane code (the ready tasks of one block call at once)."""
        out = []
        for key, kernel in self.kernels.items():
            host, lanes = self.host(key), self.lanes(key)
            out.append(f"{kernel.header()}\n{host.source if host else '# no host code: runs on the interpreter'}")
            out.append(f"# lane code\n{lanes.source}" if lanes else "# no lane code: ready tasks run one by one")
        return "\n".join(out)

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
            raise ValueError(f"costs: on must be 'pto' or 'codegen', got {on!r}")
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
        for part in eqn.params["spec"].parts:
            key = (part.program.name, tuple(part.shape))
            if key in kernels:
                continue
            text = asm.emit(codegen(part.program, part.shape, memory, pids[id(part.program)]))
            (parsed,) = asm.parse(text)
            isa.verify(parsed)
            kernels[key] = parsed
            n = part.tiles_per_block
            if n == 0 and target is not None:                   # "auto"
                n = points_per_task(parsed, targets.target(target), memory)
            if min(n, part.size) > 1:
                tasks[key] = min(n, part.size)
            texts.append(text)
    return AscendKernel(lowering, memory, kernels, "\n".join(texts), tasks)


_LANE_CODE_MIN = 8                  # block instances that run as lanes of lane code; fewer run on host code
_LANE_CODE_BYTES = 64 << 10         # core-buffer bytes of an instance above which it does not run as lane code
_LANES_MIN = 64                     # the same without lane code: on the interpreter's lanes (~50-100 µs per
                                    # instruction; host code ~1 µs per instruction and instance)
_THREADS = min(os.cpu_count() or 1, 4)  # a batch of many independent instances is shared by this many threads
_BYTES_PER_THREAD = 6 << 20         # core-buffer bytes a thread's share of a batch takes at least (NumPy releases
                                    # the GIL in its loops, but handing the GIL over costs: small batches stay on one)
_LANE_BYTES = 64 << 20              # core-buffer bytes of one batch's lanes (larger batches run in chunks)


@functools.cache
def _pool() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(_THREADS - 1, thread_name_prefix="ptojax-lanes")


class _Instances:
    """A task's body: block instances at grid points ``points`` of one kernel, on a core, with their GM arrays."""

    __slots__ = ("kernel", "host", "points", "arrays")

    def __init__(self, kernel: asm.Kernel, host, points, arrays):
        self.kernel, self.host, self.points, self.arrays = kernel, host, points, arrays

    def __call__(self, core) -> None:
        if self.host is not None:
            return self.host(core, self.points, self.arrays)
        for index in self.points:
            run(self.kernel, index, self.arrays, core, verified=True)


class _InstanceBatch:
    """Runs many block instances of one kernel (equal tile counts) at once, their tiles at position j
    together, for j in order: as the lanes of lane code from ``_LANE_CODE_MIN`` instances (of at most
    ``_LANE_CODE_BYTES`` of tiles each), else as the interpreter's lanes from ``_LANES_MIN``
    (:func:`~ptojax.ascend.batched.run_batch`); fewer instances, one call of the host code over all
    their tiles, instance after instance."""

    def __init__(self, compiled: AscendKernel, key, arrays):
        self.kernel, self.extent, self.memory = compiled.kernels[key], compiled.extents(key), compiled.memory
        self.host, self.lane, self.arrays = compiled.host(key), compiled.lanes(key), arrays
        self.lane_bytes = max(1, sum(self.extent.values()))
        if self.lane_bytes > _LANE_CODE_BYTES:          # large tiles: few calls per byte, and one instance's
            self.lane = None                            # tiles stay in cache (a K chain's accumulator)
        self.chunk = max(1, _LANE_BYTES // self.lane_bytes)

    def lanes(self, point_lists) -> None:
        for c in range(0, len(point_lists), self.chunk):         # lane buffers stay within _LANE_BYTES
            for j in range(len(point_lists[c])):
                points = [each[j] for each in point_lists[c:c + self.chunk]]
                if self.lane is not None:
                    self.lane(points, self.arrays)
                else:
                    run_batch(self.kernel, points, self.arrays, self.memory, self.extent, verified=True)

    def __call__(self, point_lists, core) -> None:
        if self.host is not None and len(point_lists) < (_LANES_MIN if self.lane is None else _LANE_CODE_MIN):
            return self.host(core, [index for each in point_lists for index in each], self.arrays)
        shares = min(_THREADS, len(point_lists) * len(point_lists[0]) * self.lane_bytes // _BYTES_PER_THREAD)
        if shares < 2:
            return self.lanes(point_lists)
        cut = [len(point_lists) * i // shares for i in range(shares + 1)]
        futures = [_pool().submit(self.lanes, point_lists[a:b]) for a, b in zip(cut[1:-1], cut[2:])]
        try:
            self.lanes(point_lists[:cut[1]])
        finally:                                                # never leave a share running on an error
            concurrent.futures.wait(futures)
        for f in futures:
            f.result()


class AscendBackend:
    """Runs block instances on the MPMD runtime: the parsed kernels, the interpreter and the cost model.

    (The runtime's Backend protocol, met structurally: the Ascend layer does not import the runtime.)
    """

    def __init__(self, compiled: AscendKernel, target):
        self.compiled, self.target = compiled, target
        self.l2_bytes = target.l2_bytes

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

    def task(self, part, points, arrays):
        key = (part.program.name, tuple(part.shape))
        seconds, bytes_in, bytes_out = self._task_cost(part, points, 0.0)
        body = _Instances(self.compiled.kernels[key], self.compiled.host(key), points, arrays)
        return body, seconds, int(bytes_in + bytes_out)

    def points_per_task(self, part) -> int:
        """``tiles_per_block="auto"``: the count :func:`compile_kernel` chose by the cost model
        (:mod:`~ptojax.ascend.autotask`)."""
        return self.compiled.tasks.get((part.program.name, tuple(part.shape)), 1)

    def batch(self, part, arrays):
        return _InstanceBatch(self.compiled, (part.program.name, tuple(part.shape)), arrays)

    def copy_cost(self, nbytes: int) -> float:
        """A GM-to-GM copy reads and writes every byte through HBM."""
        return self.target.gm_read_latency / self.target.clock_hz + 2 * nbytes / self.target.hbm_bytes_per_s

    def worker(self) -> Core:
        return Core(self.compiled.memory)
