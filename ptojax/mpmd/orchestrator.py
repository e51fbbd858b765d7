"""The orchestrator: walks a Block graph and emits task instances.

It runs on the host (PyPTO's AICPU control thread): scalar work is evaluated as it goes, block-level
loops are unrolled with their actual bounds (a ``while`` whose bound is a kernel input — an actual
sequence length — makes only the tasks that length needs), and every ``block_call`` becomes one task
per block instance with the GM regions its tiles read and write. GM tensors are buffers; an output
that updates an input in place reuses the input's buffer when nothing reads the old value later
(also after the loop or branch whose body writes it, and in a loop's next iteration), and otherwise
starts from a copy made by a copy task.

**Device data on the host.** When a loop condition, a cond's index or a host scalar op needs the value
of a GM tensor computed in the kernel (per-expert token counts), the orchestrator synchronises, like
the AICPU control thread reading GM: it runs the tasks not yet run, in creation order (a valid
topological order), up to the last one that writes that tensor, marks them run (``run = None``: the
executors still schedule them but do not run their bodies again) and reads a copy of the tensor. So
one compiled kernel serves every outcome and makes only the tasks the values need. Timing model: the
host emits nothing before its read, so every task emitted after a sync depends on the tensor's
producers — they write a token region that every later task reads — and, through them, on what the
host waited for at earlier syncs; the read itself takes no time. ``orchestrate(..., execute=False)``
does not run tasks and refuses to synchronise.

**Arguments on the host.** What the host computes from kernel arguments alone (AdamW's
``1 - b1 ** t``, a slice start clamped to the rows) is followed: it decides tasks only where a loop's
condition or a branch's index reads it (:attr:`Plan.steering`); elsewhere it is data, kept as its
recipe (:class:`Derived`), which a kept plan recomputes for new arguments and a replay traces.

**GM traffic.** With a backend that gives its L2 capacity (``Backend.l2_bytes``), the reads of each
block call are split between L2 and HBM by the L2 rule (:mod:`.l2`), in program order; the backend
prices the call's tasks with that split (``Backend.priced``) and each task records its HBM bytes
(``Task.hbm``), which the simulated HBM channel and the lower bound count.

The orchestrator knows nothing of the target: a :class:`Backend` turns a block instance into a
callable and a predicted cost.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
import math
import threading
import weakref
from typing import Callable, Protocol

import jax
import numpy as np

from .._jax import Literal, Var
from ..errors import PtoError
from ..lowering import ir
from ..lowering.block_graph import call_sites
from ..lowering.walk import body_of
from ..primitives import tile as T
from .graph import PtoTaskError, Region, Task, TaskGraph
from .l2 import L2, Access


POOL_BYTES = 64 << 20           # the most bytes of freed scratch arrays the pool keeps, all threads together
_POOL_DEPTH = 4                 # arrays kept per (shape, dtype)


class _Pool:
    """Freed GM scratch arrays for later runs (fresh pages cost more than a fill), shared by all
    threads: at most ``_POOL_DEPTH`` per (shape, dtype) and :data:`POOL_BYTES` in all, the least
    recently used (shape, dtype) given up first, so that many shapes (a dynamic batch) keep a bounded
    amount however long the process runs."""

    def __init__(self):
        self.free: collections.OrderedDict = collections.OrderedDict()    # (shape, dtype) -> [array]
        self.nbytes = 0
        self.lock = threading.Lock()

    def take(self, shape, dtype) -> np.ndarray | None:
        """A free array of ``shape`` and ``dtype`` (the latest given back), or None."""
        key = (tuple(shape), np.dtype(dtype))
        with self.lock:
            free = self.free.get(key)
            if not free:
                return None
            array = free.pop()
            self.nbytes -= array.nbytes
            if not free:
                del self.free[key]
            return array

    def give(self, arrays) -> None:
        """Keep ``arrays`` for later runs, within the bounds."""
        with self.lock:
            for array in arrays:
                key = (array.shape, array.dtype)
                free = self.free.setdefault(key, [])
                self.free.move_to_end(key)
                if len(free) < _POOL_DEPTH and array.nbytes <= POOL_BYTES:
                    free.append(array)
                    self.nbytes += array.nbytes
                elif not free:
                    del self.free[key]
            while self.nbytes > POOL_BYTES:                  # least recently used first
                key, free = next(iter(self.free.items()))
                self.nbytes -= free.pop(0).nbytes
                if not free:
                    del self.free[key]

    def clear(self) -> None:
        with self.lock:
            self.free.clear()
            self.nbytes = 0


_POOL = _Pool()


MAX_TASKS = 1_000_000    # a run that makes more stops: a host loop driven by data may never end
MAX_TRIPS = 100_000      # a loop the host runs for more trips stops (one loop; its trips can make no task)


class PtoOrchestrationError(PtoError, RuntimeError):
    """The Block graph cannot be turned into tasks (e.g. a block-level scan over tensors), or a value the
    host needs depends on device data while tasks are not executed."""


_FEWER = "larger tiles (pj.tile(vec=...), options={'tiles': ...}) or tiles_per_block make fewer"


class PtoTaskLimitError(PtoOrchestrationError):
    """The kernel makes more than :data:`MAX_TASKS` tasks (a data-driven host loop that may not end, or
    a grid too fine for its shapes)."""


class Backend(Protocol):
    """What the runtime needs from a target."""

    def task(self, part, points, arrays) -> tuple[Callable[[object], None], float, int]:
        """For block ``part`` over grid points ``points`` on GM ``arrays`` (inputs then outputs):
        the work (called with a worker context), its predicted seconds and the GM bytes it moves."""

    def copy_cost(self, nbytes: int) -> float:
        """Seconds to copy ``nbytes`` within GM (read and written through HBM)."""

    def fill_cost(self, nbytes: int) -> float:
        """Seconds to set ``nbytes`` of GM to one value (written through HBM)."""

    l2_bytes: int
    """Optional: the L2's capacity. With it, the GM reads of each block call are split between L2 and
    HBM by the L2 rule (:mod:`~ptojax.mpmd.l2`) and priced by :meth:`priced`; without it they all hit L2."""

    def priced(self, part, hbm: float, points) -> tuple[float, int]:
        """Optional (with ``l2_bytes``): seconds and GM bytes read of the task of ``part`` over grid
        points ``points`` when a fraction ``hbm`` of its GM reads come from HBM (a task that keeps an
        operand resident across its points reads it once)."""

    def worker(self) -> object:
        """A fresh per-worker context (a simulated core's buffers)."""

    def points_per_task(self, part) -> int:
        """Optional: how many grid points one task of ``part`` takes when its ``tiles_per_block`` is 0 (auto)."""

    def batch(self, part, arrays) -> Callable[[list, object], None]:
        """Optional: a callable running many block instances of ``part`` at once, given their grid points
        (one list per instance, equal lengths) and a worker context."""


@dataclasses.dataclass
class Buffer:
    """A GM tensor: its array and, for a reshaped view, the buffer it views."""

    id: int
    array: np.ndarray
    base: int
    external: bool = False            # a kernel input or constant: never updated in place
    source: object = None             # kernel argument position, "scratch" (the kernel's own), a Derived or None


@dataclasses.dataclass(frozen=True)
class Argument:
    """Kernel argument ``position`` read on the host, seen as ``shape`` and ``dtype`` (a view's)."""

    position: int
    shape: tuple
    dtype: np.dtype


@dataclasses.dataclass(frozen=True, eq=False)
class Derived:
    """Result ``index`` of a host op ``eqn`` on ``operands`` (:class:`Argument`, earlier :class:`Derived`
    values, constants): a value the host computed from kernel arguments (AdamW's ``1 - b1 ** t``), kept
    as its recipe so that new arguments recompute it (:meth:`Plan.rebind`) and a replay traces it."""

    eqn: object
    operands: tuple
    index: int


def host_apply(eqn, operands) -> list:
    """The results of the host op ``eqn`` on ``operands``, evaluated now (also while a caller's
    ``jax.jit`` traces), each its own array."""
    with jax.ensure_compile_time_eval():
        out = eqn.primitive.bind(*[np.asarray(x) for x in operands], **eqn.params)
    return [np.array(o) for o in (out if eqn.primitive.multiple_results else [out])]


@dataclasses.dataclass
class Plan:
    """The outcome of orchestration: the task graph, the buffers, and the kernel's output buffers. A
    ``replayable`` plan (no task decided by a value) runs again on new inputs: :meth:`rebind`,
    run its tasks (``executors.replay``), read the results, :meth:`recycle`."""

    graph: TaskGraph
    buffers: list[Buffer]
    outputs: list                     # Buffer or scalar per kernel output
    stages: int
    syncs: int = 0                    # reads of device data by the host (each waited for its producers)
    batches: dict = dataclasses.field(default_factory=dict)   # task group -> its batch runner
    owned: list = dataclasses.field(default_factory=list)     # GM arrays the orchestrator allocated
    replayable: bool = False          # no value decided the tasks and the host read no device data
    bindings: list = dataclasses.field(default_factory=list)  # (array list a task body reads, buffer ids)
    fills: list = dataclasses.field(default_factory=list)     # (buffer id, value) filled before the tasks
    steps: list | None = None         # the order a replay runs the task bodies in (executors.replay)
    steering: frozenset = frozenset()  # argument positions (or "device data") whose values decide tasks
    derived: list = dataclasses.field(default_factory=list)   # the host's values of arguments (Derived), in order

    def host_values(self, read: Callable, apply: Callable) -> dict:
        """Each :class:`Derived` value (by id) computed anew: ``read(argument)`` gives an
        :class:`Argument`'s array, ``apply(eqn, operands)`` an eqn's results."""
        values: dict = {}
        for d in self.derived:
            operands = [values[id(o)] if isinstance(o, Derived) else read(o) if isinstance(o, Argument) else o
                        for o in d.operands]
            values[id(d)] = apply(d.eqn, operands)[d.index]
        return values

    def results(self):
        return [b.array if isinstance(b, Buffer) else b for b in self.outputs]

    def rebind(self, args) -> None:
        """Give a replayable plan new kernel inputs ``args`` (the signature it was made for) and fresh
        scratch arrays, filled as orchestration filled them: running its tasks again computes the
        kernel on ``args``, with no orchestration."""
        owned = []
        values = self.host_values(lambda a: np.asarray(args[a.position], order="C").view(a.dtype).reshape(a.shape),
                                  host_apply)
        for buf in self.buffers:
            if buf.base != buf.id:
                buf.array = self.buffers[buf.base].array.view(buf.array.dtype).reshape(buf.array.shape)
            elif buf.source == "scratch":
                buf.array = _scratch(buf.array.shape, buf.array.dtype, owned)
            elif isinstance(buf.source, Derived):
                buf.array = np.asarray(values[id(buf.source)], buf.array.dtype).reshape(buf.array.shape)
            elif buf.source is not None:
                buf.array = np.asarray(args[buf.source], order="C")
        self.owned = owned
        for arrays, ids in self.bindings:
            arrays[:] = [self.buffers[i].array for i in ids]
        for i, value in self.fills:
            self.buffers[i].array.fill(value)

    def recycle(self) -> None:
        """After the run, once the results are read: return the scratch arrays — owned, not results —
        to the pool of later runs (:class:`_Pool`) and let go of the inputs' and the scratch arrays
        (their buffers keep only shape and dtype; constants stay)."""
        results = {id(self.buffers[b.base].array) for b in self.outputs if isinstance(b, Buffer)}
        _POOL.give([a for a in self.owned if id(a) not in results])
        self.owned = []
        for buf in self.buffers:
            if buf.source is not None or buf.base != buf.id:      # constants stay
                buf.array = no_data(buf.array.shape, buf.array.dtype)
        for arrays, _ in self.bindings:
            arrays[:] = [None] * len(arrays)

    def release(self) -> None:
        """:meth:`recycle`, and drop the task bodies (the graph, which the trace keeps, links its tasks
        in cycles): for a plan that will not run again."""
        self.recycle()
        for task in self.graph.tasks:
            task.run, task.batch = None, None
        self.batches.clear()
        self.buffers, self.bindings, self.steps = [], [], None


class _Orchestrator:
    def __init__(self, backend: Backend, execute: bool = True):
        self.backend = backend
        self.execute = execute
        self.buffers: list[Buffer] = []
        self.tasks: list[Task] = []
        self.stage = 0
        self.sites: dict = {}                       # id(block-call eqn) -> its place (Task.call)
        self.full: dict[int, Region] = {}
        self.writers: dict[int, list[Task]] = {}    # base buffer -> the tasks that write it
        self.ran = 0                                # tasks[:ran] have run at a sync
        self.ctx = None                             # the worker context syncs run tasks with
        self.waited: set[int] = set()               # tids of the tasks the host has waited for
        self.token: Region | None = None            # written by what the last sync waited for
        self.holders: list[Task] = []               # the tasks that write it
        self.since = 0                              # the first tid emitted after the last sync
        self.syncs = 0
        self.batches: dict = {}                     # (stage, part, tiles per task) -> batch runner
        self.owned: list[np.ndarray] = []           # GM arrays allocated here (outputs and scratch)
        self.bindings: list = []                    # (array list a task body reads, buffer ids)
        self.fills: list = []                       # (buffer id, value)
        self.replayable = True                      # no task decided by a value, no device data read, so far
        self.steering: set = set()                  # kernel arguments whose values decide tasks
        self.derived: dict = {}                     # id of a host value -> (it, what it came from, its Derived)
        self.holding: dict = {}                     # id of a Derived -> the buffer holding its value
        self.made: dict = {}                        # (eqn, operands) -> its Derived results, in order made
        capacity = getattr(backend, "l2_bytes", None)
        self.l2 = L2(capacity) if capacity else None     # GM residency, when the backend prices by it

    def emit(self, task: Task):
        if len(self.tasks) >= MAX_TASKS:
            raise PtoTaskLimitError(
                f"pto runtime: the kernel made {MAX_TASKS:,} tasks and goes on (the last: {task.name!r}); a loop "
                f"whose trip count or condition comes from data may not end, or its grids are too fine: {_FEWER} "
                "(ptojax.mpmd.orchestrator.MAX_TASKS sets the limit)")
        if self.token is not None:
            task.reads += (self.token,)
        for region in task.writes:
            self.writers.setdefault(region.buffer, []).append(task)
        self.tasks.append(task)

    # --------------------------------------------------------------------------------- device data
    def sync(self, buf: "Buffer", what: str) -> np.ndarray:
        """The value of GM tensor ``buf`` once the tasks that write it have run (see the module docstring)."""
        producers = [t for t in self.writers.get(buf.base, ()) if t.tid not in self.waited]
        if producers and not self.execute:
            raise PtoOrchestrationError(
                f"pto runtime: {what} depends on device data (GM tensor {buf.array.dtype}{list(buf.array.shape)} "
                f"written by {producers[-1].describe()}); reading it on the host runs the tasks that produce it, "
                "and this run executes none (a run or profile with compute=False, or a profile of shapes only)")
        if producers:
            self.run_tasks(producers[-1].tid + 1, what)
            holders = {t.tid: t for t in producers}
            if self.token is not None and all(t.tid < self.since for t in producers):
                holders.update((t.tid, t) for t in self.holders)      # none of them waited for the last sync
            self.syncs += 1
            self.holders = [holders[k] for k in sorted(holders)]
            self.token = Region(-self.syncs, (0,), (len(self.holders),))
            for slot, task in enumerate(self.holders):
                task.writes += (Region(-self.syncs, (slot,), (slot + 1,)),)
            self.waited.update(holders)
            self.since = len(self.tasks)
        return np.array(buf.array)

    def run_tasks(self, upto: int, what: str):
        """Run ``tasks[ran:upto]`` in creation order, once: their ``run`` becomes None."""
        if self.ctx is None:
            self.ctx = self.backend.worker()
        for task in self.tasks[self.ran:upto]:
            if task.run is not None:
                try:
                    task.run(self.ctx)
                except Exception as exc:  # noqa: BLE001 - reported with the task's identity
                    raise PtoTaskError(f"pto runtime: {task.describe()} failed while the host read device data for "
                                       f"{what}: {type(exc).__name__}: {exc}") from exc
                task.run = None
        self.ran = max(self.ran, upto)

    # ------------------------------------------------------------------------------------ buffers
    def buffer(self, array, external=False, source=None) -> Buffer:
        if self.execute:                        # as the cores read GM (a closed-over np.broadcast_to is a view)
            array = np.asarray(array, order="C")
        buf = Buffer(len(self.buffers), array, len(self.buffers), external, source)
        self.buffers.append(buf)
        self.full[buf.id] = Region(buf.id, (0,) * array.ndim, tuple(array.shape))
        return buf

    def scratch(self, shape, dtype) -> Buffer:
        """A GM tensor the kernel owns (uninitialised)."""
        return self.buffer(_scratch(shape, dtype, self.owned) if self.execute else no_data(tuple(shape), dtype),
                           source="scratch")

    def view(self, base: Buffer, shape, dtype=None) -> Buffer:
        """A reshaped view of ``base`` (its bytes as ``dtype`` of the same width, where given)."""
        array = base.array if dtype is None else base.array.view(dtype)
        buf = Buffer(len(self.buffers), array.reshape(shape), base.base, base.external)
        self.buffers.append(buf)
        return buf

    def region(self, buf: Buffer, lo, hi) -> Region:
        if buf.base == buf.id:
            return Region(buf.base, tuple(int(v) for v in lo), tuple(int(v) for v in hi))
        view = tuple(int(v) for v in lo), tuple(int(v) for v in hi), buf.array.shape
        lo, hi = _base_box(buf.array.shape, self.buffers[buf.base].array.shape, lo, hi)   # a box holding it
        return Region(buf.base, tuple(int(v) for v in lo), tuple(int(v) for v in hi), view)

    # ------------------------------------------------------------------------------------- walking
    def run(self, jaxpr, consts, args, live=frozenset()):
        """Walk ``jaxpr`` on ``consts`` and ``args``; ``live``: the bases of the GM buffers read after it
        (by the enclosing scopes, a loop's next iteration or condition), never updated in place here."""
        env = {}
        env.update(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))

        def read_later(pos):
            """Bases of the GM buffers that eqns after ``pos`` (or the results, or what follows) still read."""
            later = [v for e in jaxpr.eqns[pos + 1:] for v in e.invars] + list(jaxpr.outvars)
            return {env[v].base for v in later if isinstance(v, Var) and isinstance(env.get(v), Buffer)} | live

        for pos, eqn in enumerate(jaxpr.eqns):
            invals = [_literal(v) if isinstance(v, Literal) else env[v] for v in eqn.invars]
            if eqn.primitive is ir.block_call_p:
                outs = self.block(eqn, invals, lambda pos=pos: read_later(pos))
            elif eqn.primitive.name in ("scan", "while", "cond"):
                outs = self.control(eqn, invals, frozenset(read_later(pos)))
            else:
                outs = self.host(eqn, invals)
            env.update(zip(eqn.outvars, outs))
        return [_literal(v) if isinstance(v, Literal) else env[v] for v in jaxpr.outvars]

    def sources(self, value) -> frozenset:
        """The kernel arguments (or "device data") the host value ``value`` was computed from."""
        if isinstance(value, Buffer):
            source = self.buffers[value.base].source
            return frozenset({source if isinstance(source, int) and not self.computed(value) else "device data"})
        return self.derived.get(id(value), (None, frozenset()))[1]

    def held(self, value) -> Buffer:
        """A host value as a GM tensor a block call reads: a constant's own, one per host value of
        arguments (every call and loop trip that reads it reads one buffer, as a kernel input's)."""
        recipe = self.recipe(value)
        if recipe is None:
            return self.buffer(value, external=True)
        if id(recipe) not in self.holding:
            self.holding[id(recipe)] = self.buffer(value, external=True, source=recipe)
        return self.holding[id(recipe)]

    def recipe(self, value):
        """``value``'s :class:`Derived` where the host computed it from kernel arguments alone, else None."""
        return self.derived.get(id(value), (None, None, None))[2]

    def host(self, eqn, invals):
        if any(isinstance(x, Buffer) for x in invals):
            if eqn.primitive.name == "pto.reshape":
                return [self.view(invals[0], eqn.params["new_shape"])]
            if eqn.primitive.name == "pto.bitcast":
                return [self.view(invals[0], invals[0].array.shape, eqn.params["dtype"])]
        sources = frozenset().union(*map(self.sources, invals))
        operands = [self.sync(x, f"the host op '{eqn.primitive.name}'") if isinstance(x, Buffer) else x
                    for x in invals]
        outs = host_apply(eqn, operands)
        if not sources:
            return outs
        recipes = [None] * len(outs)             # followed: they steer only where a loop or branch reads them
        if "device data" in sources:
            self.replayable = False
        else:                                    # arguments alone: new arguments recompute them
            given = tuple(Argument(self.buffers[x.base].source, x.array.shape, x.array.dtype) if isinstance(x, Buffer)
                          else self.recipe(x) or np.asarray(x) for x in invals)
            key = (id(eqn), *(id(g) if isinstance(g, Derived) else g if isinstance(g, Argument) else
                              (g.dtype.str, g.shape, g.tobytes()) for g in given))
            if key not in self.made:             # one recipe however often it recurs (a loop's trips)
                self.made[key] = [Derived(eqn, given, i) for i in range(len(outs))]
            recipes = self.made[key]
        self.derived.update((id(o), (o, sources, r)) for o, r in zip(outs, recipes))
        return outs

    def computed(self, value) -> bool:
        """Whether ``value`` is a GM tensor that tasks write (device data, not a kernel input)."""
        return isinstance(value, Buffer) and bool(self.writers.get(value.base))

    def scalar(self, value, what):
        """The value of a loop's condition or a branch's index: what it was computed from decides tasks."""
        sources = self.sources(value)
        if sources:
            self.steering.update(sources)
            self.replayable = False
        return self.sync(value, what) if isinstance(value, Buffer) else np.asarray(value)

    def control(self, eqn, invals, live):
        """A loop or branch; ``live``: the bases of the GM buffers read after it. Its bodies also keep
        the values every iteration reads (the loop's fixed operands; a while's carries while its
        condition runs) from being updated in place."""
        p = eqn.params
        name = eqn.primitive.name
        if name == "scan":
            body, consts = body_of(p["jaxpr"])
            nc, ncarry = p["num_consts"], p["num_carry"]
            fixed, carry, xs = invals[:nc], list(invals[nc:nc + ncarry]), invals[nc + ncarry:]
            if xs:
                raise PtoOrchestrationError("pto runtime: block-level scans over tensors (xs) are not supported")
            live = live | _bases(fixed)
            _check_trips(eqn, p["length"], ahead=True)
            ys = []
            for _ in range(p["length"]):
                out = self.run(body, list(consts), [*fixed, *carry], live)
                carry, y = out[:ncarry], out[ncarry:]
                ys.append(y)
            if any(len(y) for y in ys):
                raise PtoOrchestrationError("pto runtime: block-level scans that stack outputs are not supported")
            return carry
        if name == "while":
            cond, cconsts = body_of(p["cond_jaxpr"])
            body, bconsts = body_of(p["body_jaxpr"])
            cn, bn = p["cond_nconsts"], p["body_nconsts"]
            cfix, bfix, carry = invals[:cn], invals[cn:cn + bn], list(invals[cn + bn:])
            live = live | _bases(cfix) | _bases(bfix)
            counted = _counted(cond, body, len(carry))
            if counted is not None and not any(self.computed(carry[k]) for k in counted):  # (the cond reads those)
                i, n = (int(self.scalar(carry[k], "a while loop's condition")) for k in counted)
                _check_trips(eqn, n - i, ahead=True)
            trips = 0
            while bool(self.scalar(self.run(cond, list(cconsts), [*cfix, *carry], live | _bases(carry))[0],
                                   "a while loop's condition")):
                trips += 1
                _check_trips(eqn, trips, ahead=False)
                carry = self.run(body, list(bconsts), [*bfix, *carry], live)
            return carry
        index, *args = invals
        branches = p["branches"]
        branch, consts = body_of(branches[int(np.clip(self.scalar(index, "a cond's index"), 0, len(branches) - 1))])
        return self.run(branch, list(consts), args, live)

    # -------------------------------------------------------------------------------------- blocks
    def block(self, eqn, invals, read_later):
        """One task per block instance; ``read_later()`` gives the buffer bases read after this call."""
        spec = eqn.params["spec"]
        inputs = [x if isinstance(x, Buffer) else self.held(x) for x in invals]
        avals = [v.aval for v in eqn.outvars]       # the call's (a graph bound to a size has its own)
        outputs, fills = [], {}
        for o, aval in zip(spec.outputs, avals):
            if o.alias is None:                      # filled below unless the tasks (or later calls) write all of it
                if not o.written_later:
                    fills[len(outputs)] = o.fill
                outputs.append(self.scratch(aval.shape, aval.dtype))
                continue
            target = inputs[o.alias]
            if (not target.external and sum(b.base == target.base for b in inputs) == 1
                    and _reads_only_its_own(spec, o.alias, len(inputs) + len(outputs))
                    and target.base not in read_later()):
                outputs.append(target)                               # nothing reads the old value: in place
            else:
                outputs.append(self.copy(target))
        arrays = [b.array for b in inputs + outputs]
        self.bindings.append((arrays, tuple(b.id for b in inputs + outputs)))
        binding = len(self.bindings) - 1
        batch = getattr(self.backend, "batch", None)
        for k, value in fills.items():               # what the tasks leave unwritten is the fill value
            if not _written_whole(spec.parts, len(inputs) + k, outputs[k].array.shape):
                self.fill(outputs[k], value)
        priced = []                                  # (part, its tasks): the L2 rule is applied per call
        for number, part in enumerate(spec.parts):
            per_task = part.tiles_per_block or getattr(self.backend, "points_per_task", lambda _: 1)(part)
            count = -(-math.prod(part.shape) // per_task)
            if count > MAX_TASKS:                            # before making them: a fine grid takes minutes
                raise PtoTaskLimitError(
                    f"pto runtime: program {part.program.name!r} (grid {tuple(part.shape)}, {per_task} point(s) per "
                    f"task) would make {count:,} tasks, past the {MAX_TASKS:,} a run makes: {_FEWER} "
                    "(ptojax.mpmd.orchestrator.MAX_TASKS sets the limit)")
            windows = _part_windows(part)
            points = list(np.ndindex(*part.shape))
            runner = batch(part, arrays) if batch is not None else None
            made = []
            pointwise = self.point_regions(windows, points, inputs + outputs) if per_task == 1 else None
            joined = _joined_windows(part) if pointwise is None else None     # a tile's slices as one
            for start in range(0, len(points), per_task):
                at = points[start:start + per_task]   # this task's grid points
                run, cost, nbytes = self.backend.task(part, at, arrays)
                if pointwise is None:
                    reads, writes, scatters = self.regions(joined, _spans(part.shape, start, start + len(at) - 1),
                                                           inputs + outputs)
                else:
                    reads, writes, scatters = pointwise[start]
                group = None
                if runner is not None:
                    group = (self.stage, number, len(at))
                    self.batches[group] = runner
                made.append((Task(len(self.tasks), part.program.name, part.program.core, part.program.label, cost,
                                  run, reads, writes, at[0], self.stage, nbytes,
                                  None if group is None else (group, at), scatters=scatters,
                                  binding=binding, points=len(at), call=self.sites.get(id(eqn), -1)),
                             at))
                self.emit(made[-1][0])
            priced += [(part, task, at) for task, at in made]
        if self.l2 is not None:
            self.price_memory(priced)
        self.stage += 1
        return outputs

    def price_memory(self, made):
        """Split the GM reads of one block call's tasks (``(part, task, points)``, all its parts) between
        L2 and HBM by the L2 rule (:mod:`.l2`) and price them so (the backend's ``priced``): each task's
        cost and HBM bytes.

        The rule's HBM bytes are shared out over the tasks by the bytes of their read regions, so the
        tasks' HBM bytes add up to the rule's however the grid points are grouped into tasks -- except
        that a task is charged at most the GM bytes it reads (the backend's read bytes; a region can
        cover more, e.g. the whole cache an in-place scatter updates). A task is priced with the share
        of ITS reads that those bytes are (a task reloading a tile per point reads more than its
        regions, one keeping it resident less). The dirty bytes the call writes back (the rule's
        write-back: its own writes past the L2 and earlier calls' that its traffic pushes out) are
        shared out by the bytes of the tasks' regions, read and written, into their HBM bytes -- the
        die's HBM channel and the bound count them; a core's store rate stays its cost."""
        reads, writes, region_bytes, write_bytes = {}, {}, [], []     # buffer -> its l2.Access
        for _, task, _ in made:
            task_bytes = written = 0
            for regions, into in ((task.reads, reads), (task.writes, writes)):
                for region in regions:
                    buffer = region.buffer
                    if buffer >= 0:                           # not a sync token
                        access = into.get(buffer)
                        if access is None:
                            array = self.buffers[buffer].array
                            access = into[buffer] = Access(array.shape, array.itemsize)
                        nbytes = access.add(*(region.view or (region.lo, region.hi)))
                        if into is reads:
                            task_bytes += nbytes
                        else:
                            written += nbytes
            region_bytes.append(task_bytes)
            write_bytes.append(written)
        fraction, spill = self.l2.hbm_fraction(reads, writes)
        spilled = spill / max(sum(region_bytes) + sum(write_bytes), 1)
        shared = moved = 0.0
        for (part, task, points), task_bytes, written in zip(made, region_bytes, write_bytes):
            share = round(fraction * (shared + task_bytes)) - round(fraction * shared)   # adds up exactly
            shared += task_bytes
            task.cost, read_bytes = self.backend.priced(part, 0.0, points)
            task.hbm = min(share, read_bytes)
            if task.hbm:
                task.cost, _ = self.backend.priced(part, round(task.hbm / read_bytes, 4), points)
            step = task_bytes + written
            task.hbm += round(spilled * (moved + step)) - round(spilled * moved)     # the channel's, not the cost's
            moved += step

    def fill(self, buf: Buffer, value) -> None:
        """A task setting all of ``buf`` (fresh scratch) to ``value`` before a block call's tasks write part
        of it (a pad's border, a scatter's untouched rows): written through to HBM, as a copy is."""
        nbytes = buf.array.nbytes
        arrays = [buf.array]
        self.fills.append((buf.id, value))       # (the replay's initial value)
        self.bindings.append((arrays, (buf.id,)))

        def run(_ctx, arrays=arrays):
            arrays[0].fill(value)

        evicted = 0
        if self.l2 is not None:
            self.l2.touch(buf.id, nbytes)
            evicted = round(self.l2.evict())
        self.emit(Task(len(self.tasks), "fill", "AIV", "", self.backend.fill_cost(nbytes), run, (),
                       (self.full[buf.id],), (), self.stage, nbytes, binding=len(self.bindings) - 1,
                       hbm=nbytes + evicted))

    def copy(self, src: Buffer) -> Buffer:
        dst = self.scratch(src.array.shape, src.array.dtype)
        nbytes = src.array.nbytes
        pair = [src.array, dst.array]
        self.bindings.append((pair, (src.id, dst.id)))

        def run(_ctx, pair=pair):
            pair[1][...] = pair[0]

        evicted = 0
        if self.l2 is not None:                  # the copy is written through; it pushes dirty bytes out
            self.l2.touch(src.base, nbytes)
            self.l2.touch(dst.id, nbytes)
            evicted = round(self.l2.evict())
        self.emit(Task(len(self.tasks), "copy", "AIV", "", self.backend.copy_cost(nbytes), run,
                       (self.full[src.base],), (self.full[dst.id],), (), self.stage, 2 * nbytes,
                       binding=len(self.bindings) - 1, hbm=2 * nbytes + evicted))
        return dst

    def point_regions(self, windows, points, buffers) -> list:
        """:meth:`regions` of one task per grid point of ``points`` (row-major, as :func:`np.ndindex` gives
        them), each window's boxes computed for all points at once."""
        count = len(points)
        if not count:
            return []
        grid = np.array(points, np.int64).reshape(count, -1)
        reads, writes, scatters, written = [], [], set(), set()
        for kind, position, window in windows:
            buf = buffers[position]
            if window is None:
                column = [self.full[buf.base]] * count
            else:
                dims = list(zip(buf.array.shape, window.index, window.stride, window.base, window.shape))
                lo = np.empty((count, len(dims)), np.int64)
                hi = np.empty((count, len(dims)), np.int64)
                for d, (n, i, s, b, size) in enumerate(dims):
                    if i is None:               # driven by a loop counter: the whole dimension
                        lo[:, d], hi[:, d] = 0, n
                    elif i < 0:
                        lo[:, d], hi[:, d] = b, b + size
                    else:
                        lo[:, d] = b + s * grid[:, i]
                        hi[:, d] = np.minimum(lo[:, d] + size, n)    # a tail tile: the rows there are
                if buf.base != buf.id:
                    column = [self.region(buf, a, z) for a, z in zip(lo.tolist(), hi.tolist())]
                else:
                    column = list(map(Region, [buf.base] * count, map(tuple, lo.tolist()), map(tuple, hi.tolist())))
            (reads if kind == "read" else writes).append(column)
            if kind != "read":
                (scatters if kind == "scatter" else written).add(buf.base)
        scatters = frozenset(scatters - written)
        read_rows = [tuple(dict.fromkeys(row)) for row in zip(*reads)] if reads else [()] * count
        write_rows = [tuple(dict.fromkeys(row)) for row in zip(*writes)] if writes else [()] * count
        return [(r, w, scatters) for r, w in zip(read_rows, write_rows)]

    def regions(self, windows, spans, buffers):
        """The GM regions of a task whose tiles fill the grid boxes ``spans`` (:func:`_spans`): (reads,
        writes, the buffers it writes only by unique-index scatters)."""
        reads, writes, scatters, written = {}, {}, set(), set()
        for kind, position, window in windows:
            buf = buffers[position]
            boxes = [self.full[buf.base]] if window is None else [
                self.region(buf, *_box(window, first, last, buf.array.shape)) for first, last in spans]
            (reads if kind == "read" else writes).update(dict.fromkeys(boxes))      # in order, once each
            if kind != "read":
                (scatters if kind == "scatter" else written).add(buf.base)
        return tuple(reads), tuple(writes), frozenset(scatters - written)


def _counted(cond, body, carries: int) -> tuple | None:
    """The carries ``(i, n)`` of a ``fori_loop`` with bounds from data (a ``while`` on ``i < n`` whose body
    adds 1 to ``i`` and keeps ``n``: ``n - i`` trips); else None."""
    if (len(cond.eqns) != 1 or cond.eqns[0].primitive.name.removeprefix("pto.") != "lt"
            or cond.outvars != cond.eqns[0].outvars):
        return None
    at = {v: k for k, v in enumerate(cond.invars[len(cond.invars) - carries:])}
    i, n = (at.get(v) if isinstance(v, Var) else None for v in cond.eqns[0].invars)
    if i is None or n is None:
        return None
    inner = body.invars[len(body.invars) - carries:]
    step = next((e for e in body.eqns if e.outvars[0] is body.outvars[i]), None)
    if (body.outvars[n] is not inner[n] or step is None or step.primitive.name.removeprefix("pto.") != "add"
            or step.invars[0] is not inner[i] or not isinstance(step.invars[1], Literal) or step.invars[1].val != 1):
        return None
    return i, n


def _check_trips(eqn, trips: int, ahead: bool) -> None:
    """A :class:`PtoOrchestrationError` where a loop the host runs trip by trip has more than
    :data:`MAX_TRIPS` trips (``ahead``: known before the first, else counted as it runs)."""
    if trips > MAX_TRIPS:
        loop = f"a {eqn.primitive.name} loop of the kernel"
        did = f"has {trips:,} trips" if ahead else f"ran {MAX_TRIPS:,} trips and goes on"
        raise PtoOrchestrationError(
            f"pto runtime: {loop} {did}: the runtime runs a kernel's loops on the host trip by trip, at most "
            f"{MAX_TRIPS:,} (ptojax.mpmd.orchestrator.MAX_TRIPS); a trip count or condition from data may be wrong")


def _literal(var) -> np.ndarray:
    """A jaxpr literal's value with its aval's dtype (a weak-typed Python number would become int64 or
    float64, which a block program reading it as an operand refuses)."""
    return np.asarray(var.val, dtype=var.aval.dtype)


def _bases(values) -> frozenset:
    """The bases of the GM buffers among ``values``."""
    return frozenset(v.base for v in values if isinstance(v, Buffer))


def _base_box(view, base, lo, hi):
    """A box ``[lo, hi)`` of a reshaped view as a box of its base tensor that contains it.

    Both shapes are cut into groups of consecutive dims with equal products (a reshape splits or
    merges dims within a group). Per group the view box spans a range of the group's row-major flat
    index; that range maps back to the group's base dims exactly when it is one contiguous box there,
    and to the smallest enclosing box otherwise."""
    groups = _groups(tuple(view), tuple(base))
    if groups is None or any(a >= b for a, b in zip(lo, hi)):
        return (0,) * len(base), tuple(base)
    out_lo, out_hi = [], []
    for vdims, bdims in groups:
        first = last = 0
        for d in vdims:
            first, last = first * view[d] + int(lo[d]), last * view[d] + int(hi[d]) - 1
        _enclose(first, last, [base[d] for d in bdims], out_lo, out_hi)
    return out_lo, out_hi


def _groups(view, base):
    """(view dims, base dims) pairs of consecutive dims with equal products covering both shapes
    (trailing size-1 dims join the last group); None if they do not line up."""
    if 0 in view or 0 in base or not view or not base:
        return None
    groups, i, j = [], 0, 0
    while i < len(view) and j < len(base):
        vd, bd, pv, pb = [i], [j], view[i], base[j]
        i, j = i + 1, j + 1
        while pv != pb:
            if pv < pb and i < len(view):
                vd.append(i)
                pv, i = pv * view[i], i + 1
            elif pb < pv and j < len(base):
                bd.append(j)
                pb, j = pb * base[j], j + 1
            else:
                return None
        groups.append((vd, bd))
    for shape, k, g in ((view, i, 0), (base, j, 1)):
        for d in range(k, len(shape)):
            if shape[d] != 1:
                return None
            groups[-1][g].append(d)
    return groups


def _enclose(first, last, shape, lo, hi):
    """Append to ``lo``/``hi`` the smallest box of ``shape`` holding flat indices ``first..last``."""
    inner = 1
    for n in shape[1:]:
        inner *= n
    top, bottom = first // inner, last // inner
    lo.append(top), hi.append(bottom + 1)
    if len(shape) == 1:
        return
    if top == bottom:
        _enclose(first % inner, last % inner, shape[1:], lo, hi)
    else:
        lo.extend(0 for _ in shape[1:]), hi.extend(shape[1:])


def _spans(grid, a, b) -> list:
    """The grid points with row-major numbers ``a..b`` as at most ``2 * len(grid) - 1`` boxes of
    coordinates ``(first, last)`` (inclusive per dim) that they fill exactly: a partial outer row, a
    block of whole rows, a partial last row, recursively. (A task's tiles that wrap a row are not one
    box: the box around them would take in tiles of other tasks and order the tasks of one call.)"""
    if not grid:
        return [((), ())]
    rest = grid[1:]
    inner = math.prod(rest)
    (qa, ra), (qb, rb) = divmod(a, inner), divmod(b, inner)

    def within(q, lo, hi):
        return [((q, *f), (q, *z)) for f, z in _spans(rest, lo, hi)]

    if qa == qb:
        return within(qa, ra, rb)
    out = []
    if ra:
        out += within(qa, ra, inner - 1)
        qa += 1
    whole_to = qb if rb == inner - 1 else qb - 1
    if qa <= whole_to:
        out.append(((qa, *(0,) * len(rest)), (whole_to, *(m - 1 for m in rest))))
    if rb != inner - 1:
        out += within(qb, 0, rb)
    return out


def _box(window, first, last, shape):
    """The box ``window`` covers over the tiles whose grid coordinates range from ``first`` to ``last``
    (per dim; the window's offset is affine in each coordinate, so the extremes bound every tile)."""
    lo, hi = [], []
    for n, i, s, b, size in zip(shape, window.index, window.stride, window.base, window.shape):
        if i is None:                       # driven by a loop counter: the whole dimension
            lo.append(0), hi.append(n)
        elif i < 0:
            lo.append(b), hi.append(b + size)
        else:
            a, z = (b + s * first[i], b + s * last[i]) if s >= 0 else (b + s * last[i], b + s * first[i])
            lo.append(a), hi.append(min(z + size, n))       # a tail tile: the rows there are
    return lo, hi


def _written_whole(parts, position, shape) -> bool:
    """Whether the grids of ``parts`` write every element of GM parameter ``position`` (of ``shape``)
    and none reads it: each writes it only by ``tstore``s whose window starts follow grid indices,
    constants or a program loop's counter (:func:`_stores`; a dim a loop drives is taken whole, as the
    tasks' regions take it), a tail tile past the tensor's end clipped. Parts of one window each, laid
    out tile by tile (stride = tile), write each element once: their tiles' volume is counted; others
    are checked by the union of their boxes."""
    writes = []                                      # (part, its windows writing the parameter)
    for part in parts:
        windows = _part_windows(part)
        if any(kind == "read" for kind, pos, _ in windows if pos == position):
            return False
        stores = _STORES.get(part)
        if stores is None:
            stores = _STORES[part] = _stores(part.body.jaxpr, len(part.shape))
        mine = [w for pos, w in stores if pos == position]
        if None in mine or len(mine) < sum(kind != "read" for kind, pos, _ in windows if pos == position):
            return False
        writes.append((part, mine))
    tiled = [_tiled(ws[0], part.shape, shape) if len(ws) == 1 else 0 for part, ws in writes]
    if all(tiled) or not shape:
        return sum(tiled) == math.prod(shape)
    boxes = Access(shape, 1)
    for part, ws in writes:
        points = np.array(list(np.ndindex(*part.shape)), np.int64).reshape(-1, len(part.shape))
        for w in ws:
            lo = np.stack([np.zeros(len(points), np.int64) if i is None else np.full(len(points), b) if i < 0
                           else b + s * points[:, i] for i, s, b in zip(w.index, w.stride, w.base)], axis=-1)
            size = [n if i is None else z for i, z, n in zip(w.index, w.shape, shape)]
            for first in lo.tolist():
                boxes.add([max(a, 0) for a in first], [min(a + z, n) for a, z, n in zip(first, size, shape)])
    return boxes.runs() is None


def _tiled(w, grid, shape) -> int:
    """The elements window ``w`` (of :func:`_stores`) writes over ``grid`` when laid out tile by tile
    (stride = tile, each tile starting inside the tensor; a tail tile past its end clipped; a dim a loop
    drives whole), each once; else 0."""
    used = [i for i in w.index if i is not None and i >= 0]
    if len(used) != len(set(used)):
        return 0
    volume = 1
    for n, i, stride, base, size in zip(shape, w.index, w.stride, w.base, w.shape):
        if i is None:
            volume *= n
            continue
        extent = 1 if i < 0 else grid[i]
        if (extent > 1 and stride != size) or base < 0 or base + stride * (extent - 1) >= n:
            return 0
        volume *= min(base + stride * (extent - 1) + size, n) - base
    return volume


def _nested(eqn, alias):
    """``(param name, jaxpr, alias)`` of each jaxpr in ``eqn``'s params, ``alias`` extended to map its
    inputs to the enclosing body's variables."""
    for key, value in eqn.params.items():
        if key.endswith("jaxpr") and value is not None:
            sub = body_of(value)[0]
            inner = dict(alias)
            inner.update({iv: alias.get(ov, ov) for iv, ov in zip(sub.invars, eqn.invars) if isinstance(ov, Var)})
            yield key, sub, inner


def _stores(body, n):
    """``(GM parameter position, window)`` of each write of a block body: a ``tstore``'s window with each
    start resolved -- a grid index (its number), a constant (folded into the base: index -1) or a program
    loop's carry (index None: the dim is the loop's, taken whole); None for any other write (indexed,
    or a start computed from data or arithmetic)."""
    params = {v: k for k, v in enumerate(body.invars[n:])}
    grid = {v: k for k, v in enumerate(body.invars[:n])}
    out = []

    def walk(jaxpr, alias, loops):
        for eqn in jaxpr.eqns:
            if eqn.primitive is T.tstore_p or eqn.primitive is T.mscatter_p:
                position = params.get(alias.get(eqn.invars[0], eqn.invars[0]))
                if position is not None:
                    out.append((position, _resolved(eqn, alias, grid, loops) if eqn.primitive is T.tstore_p
                                else None))
                    params[eqn.outvars[0]] = position
            for key, sub, inner in _nested(eqn, alias):
                carries = set()
                if eqn.primitive.name == "scan":
                    first = eqn.params["num_consts"]
                    carries = set(sub.invars[first:first + eqn.params["num_carry"]])
                elif eqn.primitive.name == "while" and key == "body_jaxpr":
                    carries = set(sub.invars[eqn.params["body_nconsts"]:])
                walk(sub, inner, loops | carries)

    walk(body, {}, frozenset())
    return out


def _resolved(store, alias, grid, loops):
    """:func:`_stores`' window of a ``tstore`` eqn, or None."""
    window = store.params["window"]
    index, base = list(window.index), list(window.base)
    for d, i in enumerate(window.index):
        if i < 0:
            continue
        v = store.invars[2 + i]
        if isinstance(v, Literal):
            index[d], base[d] = -1, base[d] + window.stride[d] * int(v.val)
        elif alias.get(v, v) in grid:
            index[d] = grid[alias.get(v, v)]
        elif v in loops or alias.get(v, v) in loops:
            index[d] = None
        else:
            return None
    return dataclasses.replace(window, index=tuple(index), base=tuple(base))


_WINDOWS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # block part -> its windows
_STORES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()    # block part -> _stores
_JOINED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()    # block part -> _joined_windows


def _reads_only_its_own(spec, source: int, target: int) -> bool:
    """Whether every task of ``spec`` reads GM operand ``source`` only at windows at which it writes
    ``target`` (tile for tile): then ``target`` may be ``source`` updated in place, as no task reads
    what another writes (``x.at[1:].set(x[:-1])`` reads the rows the next task writes)."""
    for part in spec.parts:
        windows = _part_windows(part)
        reads = {w for kind, pos, w in windows if kind == "read" and pos == source}
        writes = {w for kind, pos, w in windows if kind != "read" and pos == target}
        if None in reads or not reads <= writes:
            return False
    return True


def _part_windows(part):
    """:func:`_windows` of a block part, computed once per part (loops call a part many times)."""
    windows = _WINDOWS.get(part)
    if windows is None:
        windows = _WINDOWS[part] = _windows(part.body.jaxpr, len(part.shape))
    return windows


def _joined_windows(part):
    """:func:`_part_windows` with the windows of a tensor that cut one tile into slices joined into the
    tile's window (:func:`_join`), computed once per part: the regions of a task of several grid points
    take one box per window over its points, which is exact for a tile's window but, for a slice of
    it (a program computing each tile in pieces), takes in the other slices' rows of the tiles
    between -- boxes larger than the task's tiles, overlapping each other and the next task's."""
    joined = _JOINED.get(part)
    if joined is None:
        joined = []
        for kind, position, window in dict.fromkeys(_part_windows(part)):
            merged = window is not None
            while merged:
                merged = False
                for k, (kind2, position2, other) in enumerate(joined):
                    both = (kind == kind2 and position == position2 and other is not None and _join(other, window))
                    if both:
                        del joined[k]
                        window, merged = both, True
                        break
            joined.append((kind, position, window))
        _JOINED[part] = joined
    return joined


def _join(a, b):
    """The window of the slices ``a`` and ``b`` of one tile side by side in one dim (same index and
    stride, equal elsewhere, ``b`` starting where ``a`` ends or the other way round, together no wider
    than the grid step there); None otherwise."""
    if a.index != b.index or a.stride != b.stride:
        return None
    differ = [d for d in range(len(a.shape)) if (a.shape[d], a.base[d]) != (b.shape[d], b.base[d])]
    if len(differ) != 1:
        return None
    d = differ[0]
    if a.base[d] > b.base[d]:
        a, b = b, a
    if a.base[d] + a.shape[d] != b.base[d] or (a.index[d] is not None and a.index[d] >= 0
                                               and 0 < a.stride[d] < a.shape[d] + b.shape[d]):
        return None                     # not side by side, or wider than a step: a halo (tiles overlap)
    return dataclasses.replace(a, shape=a.shape[:d] + (a.shape[d] + b.shape[d],) + a.shape[d + 1:])


def _windows(body, n):
    """(read|write, GM parameter position, window or None for the whole tensor) of a block body."""
    params = {v: k for k, v in enumerate(body.invars[n:])}
    index = set(body.invars[:n])
    out = []

    def walk(jaxpr, alias):
        for eqn in jaxpr.eqns:
            if eqn.primitive in (T.tload_p, T.tstore_p, T.mscatter_p) or T.reads_gm(eqn.primitive):
                gm = alias.get(eqn.invars[0], eqn.invars[0])
                position = params.get(gm)
                if position is None:
                    continue
                kind = "read" if eqn.primitive is T.tload_p or T.reads_gm(eqn.primitive) else "write"
                if eqn.primitive in (T.tload_p, T.tstore_p):
                    operands = eqn.invars[1:] if eqn.primitive is T.tload_p else eqn.invars[2:]
                    window = eqn.params["window"]
                    grid = [None if isinstance(v, Literal) or alias.get(v, v) not in index
                            else list(body.invars[:n]).index(alias.get(v, v)) for v in operands]
                    window = dataclasses.replace(window, index=tuple(
                        -1 if i < 0 else grid[i] for i in window.index))
                    out.append((kind, position, window))
                elif eqn.primitive is T.mscatter_p and eqn.params.get("unique") and not eqn.params["accumulate"]:
                    out.append(("scatter", position, None))      # disjoint rows per instance, nothing read
                else:
                    out.append((kind, position, None))
                    if eqn.primitive is T.mscatter_p:
                        out.append(("read", position, None))
                if eqn.primitive is T.tstore_p or eqn.primitive is T.mscatter_p:
                    params[eqn.outvars[0]] = position
            for _, sub, inner in _nested(eqn, alias):
                walk(sub, inner)

    walk(body, {})
    return out


def orchestrate(block_jaxpr, consts, args, backend: Backend, donated=(), *, execute: bool = True) -> Plan:
    """Unroll ``block_jaxpr`` on concrete kernel inputs into a :class:`Plan`.

    Inputs are never written, except those whose positions are in ``donated``: their buffers may be
    updated in place (like ``jax.jit``'s donated arguments — the caller gives them up) unless they are
    read-only arrays (XLA's, inside ``jax.jit``), which are copied first. A value the
    host needs from device data runs the tasks that produce it (``execute=False``: an error instead);
    ``Plan.syncs`` counts those reads.
    """
    orch, args, outputs = _walk(block_jaxpr, consts, args, backend, donated, execute)
    outputs = [orch.held(o) if orch.recipe(o) else o for o in outputs]
    return Plan(TaskGraph(orch.tasks), orch.buffers, outputs, orch.stage, orch.syncs, orch.batches, orch.owned,
                orch.replayable, orch.bindings, orch.fills, steering=frozenset(orch.steering),
                derived=[d for made in orch.made.values() for d in made])


def steering(block_jaxpr, consts, args, backend: Backend) -> frozenset:
    """:attr:`Plan.steering` of ``orchestrate(..., execute=False)`` on ``args``, without building the
    task graph (a :class:`PtoOrchestrationError` where device data steers it)."""
    orch, _, _ = _walk(block_jaxpr, consts, args, backend, frozenset(), False, priced=False)
    return frozenset(orch.steering)


def _walk(block_jaxpr, consts, args, backend, donated, execute, priced=True):
    """The orchestrator that unrolled ``block_jaxpr`` on ``args`` (as arrays), and the kernel's outputs;
    ``priced=False``: the tasks keep the backend's costs (no L2 rule)."""
    orch = _Orchestrator(backend, execute)
    orch.sites = call_sites(block_jaxpr)
    if not priced:
        orch.l2 = None
    args = [np.asarray(a) for a in args]
    inputs = [orch.buffer(a, external=i not in donated or not a.flags.writeable, source=i)
              for i, a in enumerate(args)]                          # read-only donated arrays: copied
    consts = [orch.buffer(c, external=True) if np.ndim(c) else np.asarray(c) for c in consts]
    with _collector_paused():
        return orch, args, orch.run(block_jaxpr, consts, inputs)


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off within (as it was after): its full passes walk every task
    made so far, which made a long loop's unrolling quadratic in its trips; cycles are collected later."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@functools.lru_cache(maxsize=1024)
def no_data(shape, dtype) -> np.ndarray:
    """A read-only array of ``shape`` and ``dtype`` that holds no memory (one zero, broadcast): a GM tensor
    of a run that executes no task (a schedule), a released buffer's stand-in."""
    return np.broadcast_to(np.zeros((), dtype), shape)


def _scratch(shape, dtype, owned: list) -> np.ndarray:
    """An uninitialised GM array, from the pool when it can; recorded in ``owned``."""
    array = _POOL.take(shape, dtype)
    if array is None:
        array = np.empty(shape, dtype)
    owned.append(array)
    return array


__all__ = ["Backend", "Buffer", "Plan", "PtoOrchestrationError", "PtoTaskLimitError", "no_data", "orchestrate",
           "steering"]
