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

from .engine_parse import Function
from ..errors import PtoExecutionError
from .replay import UNROLL, Ix, Serial, Unroll, Walk, reinterpret, storage, store_held, vary, varying_axes


def call(func: Function, gm: dict, keys, blocks: np.ndarray, scalars=None) -> dict:
    """``gm`` after ``func`` ran at block indices ``blocks`` in order (the engine's semantics): all the
    points at once where they do not interact, else one after another; ``scalars``: its ``index``
    parameters' values (:class:`~ptojax.ascend.replay.Walk`). The walk sees the GM tensors in their
    :func:`~ptojax.ascend.replay.storage` dtypes."""
    dtypes = {k: x.dtype for k, x in gm.items()}
    gm = _call(func, {k: reinterpret(x, storage(x.dtype)) for k, x in gm.items()}, keys, blocks, scalars)
    return {k: reinterpret(x, dtypes[k]) for k, x in gm.items()}


def _call(func: Function, gm: dict, keys, blocks: np.ndarray, scalars=None) -> dict:
    try:
        walk = Walk(func, gm, keys, blocks, len(blocks), serial=False, scalars=scalars).run()
    except (Serial, Unroll):
        return _serial(func, gm, keys, blocks, scalars)
    gm = dict(gm)
    written: dict = {}
    for key, idx, values, atomic in walk.stores:
        flat_idx = idx.reshape(-1)
        if not atomic and any(np.intersect1d(flat_idx, other).size for other in written.get(key, ())):
            return _serial(func, gm, keys, blocks, scalars)     # two stores of the batch overlap
        written.setdefault(key, []).append(flat_idx)
    for key, idx, values, atomic in walk.stores:
        gm[key] = store_held(gm[key], idx, values, atomic)
    return gm


def _serial(func, gm, keys, blocks, scalars=None):
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
        gm = Walk(func, gm, keys, np.array([b]), 1, serial=True, scalars=scalars).run().gm
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

    def worker(self):
        return None


MAX_STEPS = 256   # block calls in a row past which XLA's compile of the straight-line replay takes many seconds


def graph_function(plan, module):
    """The task graph of ``plan`` (orchestrated with a :class:`PlanBackend`, replayable) as one JAX
    function of the kernel's flat inputs to its flat outputs: GM tensors threaded through the tasks in
    creation order (a topological order), the points of consecutive tasks of one block call batched.
    None past :data:`MAX_STEPS` steps: the graph is written out trip by trip (a ``lax.scan`` of 256 rows
    is 769 block calls, about 36 s of XLA compile), which the host runtime runs instead."""
    buffers = plan.buffers
    inits = {}
    for b in buffers:
        if b.base == b.id:
            dtype = np.dtype(np.int8) if b.array.dtype == np.bool_ else b.array.dtype
            inits[b.id] = (("arg", b.source) if isinstance(b.source, int) else ("zeros", None) if b.source == "scratch"
                           else ("const", np.array(b.array).reshape(-1).view(dtype))), b.array.size, dtype
    steps = []
    for task in plan.graph.tasks:
        keys = tuple(buffers[i].base for i in plan.bindings[task.binding][1])
        if isinstance(task.run, Points):
            last = steps[-1] if steps else None
            if last and last[0] == "call" and tuple(last[1:4]) == (task.run.name, keys, task.stage):
                last[4].extend(task.run.blocks)
            else:
                steps.append(["call", task.run.name, keys, task.stage, list(task.run.blocks)])
        elif task.name == "copy":
            steps.append(["copy", keys[0], keys[1]])
        else:
            raise PtoExecutionError(f"pto replay: {task.describe()} has no recorded body")
    if len(steps) > MAX_STEPS:
        return None
    fills = [(buffers[i].base, value) for i, value in plan.fills]
    outputs = [(b.base, b.array.shape, b.array.dtype) if hasattr(b, "array") else np.asarray(b) for b in plan.outputs]
    functions = {step[1]: module.function(step[1]) for step in steps if step[0] == "call"}

    def replay(*flat):
        gm = {}
        for base, (init, size, dtype) in inits.items():
            if init[0] == "arg":
                x = jnp.asarray(flat[init[1]]).reshape(-1)
                gm[base] = x.astype(dtype) if x.dtype != dtype else x
            elif init[0] == "zeros":
                gm[base] = jnp.zeros((size,), dtype)
            else:
                gm[base] = jnp.asarray(init[1])
        for base, value in fills:
            gm[base] = jnp.full(gm[base].shape, value, gm[base].dtype)
        for step in steps:
            if step[0] == "copy":
                gm[step[2]] = gm[step[1]]
                continue
            _, name, keys, _, blocks = step
            gm.update(call(functions[name], {k: gm[k] for k in set(keys)}, keys, np.asarray(blocks, np.int64)))
        out = []
        for o in outputs:
            if isinstance(o, np.ndarray):
                out.append(jnp.asarray(o))
                continue
            base, shape, dtype = o
            x = gm[base].reshape(shape)
            out.append(x.astype(dtype) if x.dtype != dtype else x)
        return out

    return replay


__all__ = ["MAX_STEPS", "PlanBackend", "Points", "call", "graph_function"]
