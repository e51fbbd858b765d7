"""A kernel's task graph as one JAX function, replayed from the parsed real PTO-AS text.

:class:`PlanBackend` is the runtime backend a kernel is orchestrated with (on zeros, nothing executed)
to learn its tasks: which function of the module runs at which block indices, on which GM buffers, in
which order. :func:`graph_function` turns that plan into ``fn(*flat inputs) -> flat outputs``: GM
tensors are flat jnp arrays threaded through the tasks in creation order (a topological order), the
points of consecutive tasks of one block call run as one batch (:func:`call`: the walk of
:mod:`~ptojax.ascend.replay` over all of them, their stores applied after it; one point after another
where they interact). The function is what ``pto_call``'s lowering inlines into the user's ``jax.jit``.
"""
from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from jax import lax

from .engine_parse import For, Function, If, Instr
from ..errors import PtoExecutionError
from .replay_loops import Loop, Step, roll
from .replay import UNROLL, Ix, Serial, Unroll, Walk, reinterpret, storage, store_held, vary, varying_axes


def call(func: Function, gm: dict, keys, blocks: np.ndarray, scalars=None, pristine=frozenset()) -> dict:
    """``gm`` after ``func`` ran at block indices ``blocks`` in order (the engine's semantics): all the
    points at once where they do not interact, else one after another; ``scalars``: its ``index``
    parameters' values (:class:`~ptojax.ascend.replay.Walk`); ``pristine``: the GM tensors that are
    still kernel inputs (:func:`~ptojax.ascend.strided.plain_store`). The walk sees the GM tensors in
    their :func:`~ptojax.ascend.replay.storage` dtypes."""
    once: dict = {}                 # one value per array (buffers sharing one stay one: Walk.reads)
    for x in gm.values():
        if id(x) not in once:
            once[id(x)] = (x, reinterpret(x, storage(x.dtype)))
    held = {k: once[id(x)][1] for k, x in gm.items()}
    out = _call(func, held, keys, blocks, scalars, pristine)
    return {k: gm[k] if x is held[k] else reinterpret(x, gm[k].dtype) for k, x in out.items()}   # untouched: as given


def _call(func: Function, gm: dict, keys, blocks: np.ndarray, scalars=None, pristine=frozenset()) -> dict:
    try:
        walk = Walk(func, gm, keys, blocks, len(blocks), serial=False, scalars=scalars).run()
    except (Serial, Unroll):
        return _serial(func, gm, keys, blocks, scalars, pristine)
    gm = dict(gm)
    written: dict = {}
    for key, idx, values, atomic in walk.stores:
        flat_idx = idx.reshape(-1)
        if not atomic and any(np.intersect1d(flat_idx, other).size for other in written.get(key, ())):
            return _serial(func, gm, keys, blocks, scalars)     # two stores of the batch overlap
        written.setdefault(key, []).append(flat_idx)
    for key, idx, values, atomic in walk.stores:
        gm[key] = store_held(gm[key], idx, values, atomic, key in pristine and walk.reads(key))
        pristine = pristine - {key}
    return gm


def _serial(func, gm, keys, blocks, scalars=None, pristine=frozenset()):
    """The points one after another: unrolled while few, else a ``fori_loop`` over them."""
    if len(blocks) > UNROLL:
        lo, hi = int(blocks.min()), int(blocks.max())
        table = jnp.asarray(blocks.astype(np.int32))
        axes = frozenset().union(*(varying_axes(x) for x in gm.values()))

        def body(k, state):
            block = Ix("i64", x=table[k][None], lo=lo, hi=hi)
            return vary(Walk(func, state, keys, block, 1, serial=True, scalars=scalars).run().gm, axes)
        try:
            return lax.fori_loop(0, len(blocks), body, vary(dict(gm), axes))
        except (Serial, Unroll):
            pass
    for b in blocks:
        walk = Walk(func, gm, keys, np.array([b]), 1, serial=True, scalars=scalars, pristine=pristine).run()
        gm, pristine = walk.gm, walk.pristine
    return gm


# ------------------------------------------------------------------------------------ task graph
@dataclasses.dataclass(frozen=True)
class Points:
    """A task body as the replay records it: function ``name`` at block indices ``blocks``."""

    name: str
    blocks: tuple


class PlanBackend:
    """The runtime's backend for a plan to replay: a task body records its function and block
    indices (nothing runs, nothing is priced); one task per block part."""

    def __init__(self, compiled, arch: str = "a3"):
        from . import engine, isel
        from .program import block_index

        self.module = engine.parse(compiled.pto(arch))
        self.names = dict(zip(compiled.kernels, isel.symbols(list(compiled.kernels.values()))))
        self.compiled, self._index = compiled, block_index

    def task(self, part, points, arrays):
        key = (part.program.name, tuple(part.shape))
        grid = self.compiled.kernels[key].grid
        return Points(self.names[key], tuple(self._index(t, grid) for t in points)), 0.0, 0

    def points_per_task(self, part) -> int:
        return max(1, part.size)

    def copy_cost(self, nbytes: int) -> float:
        return 0.0

    def fill_cost(self, nbytes: int) -> float:
        return 0.0

    def worker(self):
        return None


MAX_STEPS = 32   # block calls left unrolled past which XLA may compile for many seconds (a chain: superlinearly)
MAX_INSTRUCTIONS = 256   # the same for the instructions of those calls (a loop's body once; one long program)
MAX_HOST_OPS = 512       # the host's ops on arguments (Plan.derived) a replay traces, one barrier each


def _instructions(items, functions) -> int:
    """The instructions ``items`` replay as straight-line code: a loop's body (rolled or kept by a
    program's ``scf.for``) counted once."""
    def count(body):
        return sum(count(s.body) if isinstance(s, For) else count(s.then) + count(s.orelse) if isinstance(s, If)
                   else isinstance(s, Instr) for s in body)
    return sum(_instructions(it.body, functions) if isinstance(it, Loop) else
               count(functions[it.name].body) if it.name else 1 for it in items)


def graph_function(plan, module):
    """The task graph of ``plan`` (orchestrated with a :class:`PlanBackend`, replayable) as one JAX
    function of the kernel's flat inputs to its flat outputs: GM tensors threaded through the tasks in
    creation order (a topological order), the points of consecutive tasks of one block call batched,
    a loop's trips rolled into a ``lax.fori_loop`` (:mod:`~ptojax.ascend.replay_loops`). None past
    :data:`MAX_STEPS` steps or :data:`MAX_INSTRUCTIONS` instructions left unrolled, which the host
    runtime runs instead: XLA's compile time of a chain of dependent block calls or instructions grows
    faster than its length (60 calls of a ``tanh`` step: 13-24 s; one program of 20 steps, 520
    instructions: 6-11 s)."""
    buffers = plan.buffers
    inputs, initial, layout, constants = {}, {}, {}, set()     # constants: a kernel's constants and fills
    derived = {}                                                # buffer -> the host's value of arguments it holds
    for b in buffers:
        if b.base == b.id:
            dtype = np.dtype(np.int8) if b.array.dtype == np.bool_ else b.array.dtype
            layout[b.id] = (b.array.size, dtype)
            if isinstance(b.source, int):
                inputs[b.id] = b.source
            elif b.source == "scratch":
                initial[b.id] = np.zeros(b.array.size, dtype)
            elif b.source is not None:
                derived[b.id] = b.source
            else:
                initial[b.id] = np.array(b.array).reshape(-1).view(dtype)
                constants.add(b.id)
    for i, value in plan.fills:
        base = buffers[i].base
        initial[base] = np.full(layout[base][0], value, layout[base][1])
        inputs.pop(base, None)
        constants.add(base)
    steps, stages = [], []
    for task in plan.graph.tasks:
        keys = tuple(buffers[i].base for i in plan.bindings[task.binding][1])
        if isinstance(task.run, Points):
            last = steps[-1] if steps else None
            if last and last.name == task.run.name and last.keys == keys and stages[-1] == task.stage:
                steps[-1] = dataclasses.replace(last, blocks=last.blocks + task.run.blocks)
                continue
            steps.append(Step(task.run.name, keys, task.run.blocks))
        elif task.name == "copy":
            steps.append(Step(None, keys[:2]))
        elif task.name == "fill":               # a fresh buffer: its initial value is the fill (plan.fills)
            continue
        else:
            raise PtoExecutionError(f"pto replay: {task.describe()} has no recorded body")
        stages.append(task.stage)
    outputs = [(b.base, b.array.shape, b.array.dtype) if hasattr(b, "array") else np.asarray(b) for b in plan.outputs]
    items = roll(steps, lambda k: initial.get(k), layout.get, {o[0] for o in outputs if isinstance(o, tuple)})
    if sum(it.steps if isinstance(it, Loop) else 1 for it in items) > MAX_STEPS or len(plan.derived) > MAX_HOST_OPS:
        return None
    functions = {name: module.function(name) for name in {s.name for s in steps} - {None}}
    if _instructions(items, functions) > MAX_INSTRUCTIONS:
        return None

    def replay(*flat):
        values = plan.host_values(lambda a: _viewed(flat[a.position], a.shape, a.dtype), _traced)

        def fetch(base):
            if base in derived:
                x = jnp.asarray(values[id(derived[base])]).reshape(-1)
            elif base not in inputs:    # a float constant behind a barrier: XLA folds x + 0.0 to x (-0.0 + 0.0
                value = jnp.asarray(initial[base])      # is +0.0); zeroed scratch without, which XLA elides
                barred = base in constants and jnp.issubdtype(value.dtype, jnp.floating)
                return lax.optimization_barrier(value) if barred else value
            else:
                x = jnp.asarray(flat[inputs[base]]).reshape(-1)
            return x.astype(layout[base][1]) if x.dtype != layout[base][1] else x

        gm: dict = {}
        _run(items, gm, fetch, functions, set(inputs))
        out = []
        for o in outputs:
            if isinstance(o, np.ndarray):
                out.append(jnp.asarray(o))
                continue
            base, shape, dtype = o
            x = (gm[base] if base in gm else fetch(base)).reshape(shape)
            if x.dtype != dtype:                  # a bool tensor's int8 bytes, a bitcast view's bits
                x = x.astype(dtype) if dtype == np.bool_ else lax.bitcast_convert_type(x, dtype)
            out.append(x)
        return out

    return replay


def _viewed(x, shape, dtype):
    """Kernel argument ``x`` seen as ``shape`` and ``dtype`` (a bit cast view's, of one width)."""
    x = jnp.asarray(x)
    return (x if x.dtype == dtype else lax.bitcast_convert_type(x, dtype)).reshape(shape)


def _traced(eqn, operands) -> list:
    """The host op ``eqn`` on traced ``operands`` as the host computes it, one op at a time: its operands
    and results behind optimization barriers, so that XLA neither folds a constant operand into it
    (``t / 3.0`` as ``t * (1 / 3)``) nor fuses it with the next op (a product contracted with a later
    add); a NaN keeps its bits."""
    out = eqn.primitive.bind(*lax.optimization_barrier([jnp.asarray(o) for o in operands]), **eqn.params)
    return list(lax.optimization_barrier(list(out if eqn.primitive.multiple_results else [out])))


def _run(items, gm: dict, fetch, functions: dict, pristine: set | None = None) -> None:
    """Run steps and loops on the GM buffers ``gm`` (updated), ``fetch(id)`` giving those not in it;
    ``pristine`` (updated): the buffers whose values are still the kernel's inputs."""
    def get(k):
        if k not in gm:
            gm[k] = fetch(k)        # once: a buffer's steps see one value (plain_store compares them)
        return gm[k]
    pristine = set() if pristine is None else pristine
    for item in items:
        if isinstance(item, Loop):
            done = _loop(item, get, functions)
            pristine -= set(done)
            gm.update(done)
        elif item.name is None:
            gm[item.keys[1]] = get(item.keys[0])
            pristine.discard(item.keys[1])
            if item.keys[0] in pristine:
                pristine.add(item.keys[1])
        else:
            before = {k: get(k) for k in item.keys}
            gm.update(call(functions[item.name], before, item.keys, np.asarray(item.blocks, np.int64),
                           pristine=frozenset(pristine & set(item.keys))))
            pristine -= {k for k in item.keys if gm[k] is not before[k]}


def _loop(loop: Loop, get, functions: dict) -> dict:
    """The GM buffers after ``loop``'s trips, under the last trip's ids where they are read after it."""
    state = {k: get(k) for k in loop.outer}
    state.update({q: get(c) for c, q in loop.moves})          # what each carried buffer takes at the first trip
    state.update({k: get(k) if k not in loop.inits else jnp.zeros(loop.inits[k].shape[-1:], loop.inits[k].dtype)
                  for k in loop.last if k not in state})
    axes = frozenset().union(*(varying_axes(x) for x in state.values()))

    def trip(t, state):
        gm = {**state, **{c: state[q] for c, q in loop.moves}}
        gm.update({q: jnp.asarray(v)[t] if v.ndim == 2 else jnp.asarray(v) for q, v in loop.inits.items()})
        _run(loop.body, gm, None, functions)
        return vary({k: gm[k] for k in state}, axes)

    state = lax.fori_loop(0, loop.trips, trip, vary(state, axes))
    return {**{k: state[k] for k in loop.outer}, **{last: state[k] for k, last in loop.last.items()}}


__all__ = ["MAX_STEPS", "PlanBackend", "Points", "call", "graph_function"]
