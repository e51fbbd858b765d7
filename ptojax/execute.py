"""Running a lowered kernel: its real PTO-AS text interpreted on the MPMD runtime, simulated or on host
threads; a kept plan run again on new inputs (eager calls); the kernel as one JAX function replaying
that text (:func:`replay_function`: what ``jax.jit`` of a ``sim`` kernel inlines). The replay and the
dynamic-shape runtime are imported where they are used: an eager call needs neither."""
from __future__ import annotations

import dataclasses
import threading

import jax
import jax.numpy as jnp
import numpy as np

from .ascend.asm import PtoAsmError
from .ascend.program import AscendBackend, AscendKernel, compile_kernel
from .ascend.targets import target as get_target
from ._fpenv import ieee_call
from ._jax import weak_32
from .errors import PtoArgumentError, PtoUnsupportedError
from .lowering.pipeline import Lowering
from .mpmd import Machine, Plan, PtoOrchestrationError, Trace, orchestrate, replay, run_threads, simulate
from .mpmd import orchestrator


def canonical_arguments(args):
    """Arguments as ``jax.jit`` takes them: NumPy data in JAX's dtypes (float64 as float32 while
    ``jax_enable_x64`` is off), C-contiguous, in the machine's byte order; Python numbers weakly typed
    (``f16 * 2.0`` stays float16); JAX arrays, tracers and shape specs as they are."""
    def one(x):
        if isinstance(x, (jax.Array, jax.core.Tracer, jax.ShapeDtypeStruct)):
            if jnp.issubdtype(x.dtype, jax.dtypes.extended):
                raise PtoArgumentError(f"pj.kernel: an argument of dtype {x.dtype} (a typed PRNG key) cannot "
                                       "enter a kernel: the cores have no random number instruction")
            if is_weak(x) and np.dtype(x.dtype).itemsize == 8 and not isinstance(x, jax.ShapeDtypeStruct):
                return weak_32(x)                   # a Python number under jax_enable_x64 (jax.jit's tracer)
            return x
        if type(x) in (int, float, complex):
            with jax.enable_x64(False):             # weakly typed, 32 bits: the cores have no 64-bit types
                return jnp.asarray(x)
        x = np.asarray(x)
        if not (jnp.issubdtype(x.dtype, jnp.number) or x.dtype == np.bool_):
            raise PtoArgumentError(f"pj.kernel: argument {_short(x)} is not an array or a number; name it in "
                                   "pj.kernel(fn, static_argnames=...) or static_argnums=..., as for jax.jit's "
                                   "static arguments (a kernel is made for each value), or bind it with "
                                   "functools.partial")
        return np.asarray(x, dtype=jax.dtypes.canonicalize_dtype(x.dtype.newbyteorder("=")), order="C")  # native
    return jax.tree.map(one, args)


def _short(x) -> str:
    text = repr(x.item() if x.ndim == 0 else x)
    return text if len(text) <= 60 else text[:57] + "..."


def is_weak(x) -> bool:
    """Whether ``x`` is weakly typed (made from Python numbers only)."""
    return bool(getattr(x, "weak_type", False) or getattr(getattr(x, "aval", None), "weak_type", False))


def machine(target) -> Machine:
    """The runtime's machine model of an Ascend target (one die)."""
    return Machine((("AIC", target.aic), ("AIV", target.aiv)), target.aicpu, target.aicpu_task_s, target.dispatch_s,
                   target.hbm_bytes_per_s, target.name)


@dataclasses.dataclass
class _Replay:
    """A replayable plan kept between calls, its trace, the core its bodies run on and whether a call
    is using them."""

    plan: Plan
    trace: Trace
    core: object
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def run(self, arrays) -> list:
        """The outputs of the kernel on ``arrays``, the plan's bodies run again."""
        try:
            self.plan.rebind(arrays)
            replay(self.plan, self.trace, ctx=self.core)
            outputs = self.plan.results()
        finally:
            self.plan.recycle()
        return outputs


def execute(lowering: Lowering, *args, target="a3", executor: str = "simulated", policy: str = "mpmd",
            workers: int = 4, compiled=None, donated=(), compute: bool = True, plans: dict | None = None):
    """Run ``lowering`` on ``args``: (outputs as a pytree of NumPy arrays, :class:`Trace`).

    ``donated``: flat argument positions whose arrays the kernel may update in place. ``compute=False``
    (simulated executor only) schedules the tasks on their predicted costs without running their
    bodies: the same trace, no outputs (None) — fast profiles of large shapes. ``plans``: a dict in
    which the simulated executor keeps plans that did not depend on the inputs' values (no device
    data read back, no scalar input a loop or branch reads; what the host computes from scalar inputs
    is recomputed: :meth:`~ptojax.mpmd.Plan.rebind`); later calls replay them — the task bodies on the new
    inputs, the same trace — without orchestrating again (a call that finds its plan in use by
    another thread orchestrates its own).
    """
    if not isinstance(lowering, Lowering):
        raise PtoArgumentError(f"pj.execute: the first argument is a Lowering (pj.lower(fn, *args)), not "
                               f"{type(lowering).__name__}")
    if plans is not None and not isinstance(plans, dict):
        raise PtoArgumentError(f"pj.execute: plans is a dict (or None), not {type(plans).__name__}")
    if compiled is not None and not isinstance(compiled, AscendKernel):
        raise PtoArgumentError(f"pj.execute: compiled is the lowering's compiled code (or None), not "
                               f"{type(compiled).__name__}")
    flat, tree = jax.tree.flatten(args)
    lowering.check_signature("pto run", flat, tree)
    outputs, trace = execute_flat(lowering, flat, target=target, executor=executor, policy=policy, workers=workers,
                                  compiled=compiled, donated=donated, compute=compute, plans=plans)
    return (jax.tree.unflatten(lowering.out_tree, outputs) if compute else None), trace


def execute_flat(lowering: Lowering, flat, *, target="a3", executor: str = "simulated", policy: str = "mpmd",
                 workers: int = 4, compiled=None, donated=(), compute: bool = True, plans: dict | None = None,
                 source=None):
    """:func:`execute` on the flat list of arguments: (the flat list of outputs, or None, :class:`Trace`);
    ``source``: what the trace says ran (:attr:`Trace.source`)."""
    with jax.enable_x64(False):     # the orchestrator's host values (loop counters, indices) in 32 bits
        return ieee_call(_execute_flat, lowering, flat, target, executor, policy, workers, compiled, donated,
                         compute, plans, source)     # IEEE subnormals inside XLA's execution too (see _fpenv)


def _execute_flat(lowering, flat, target, executor, policy, workers, compiled, donated, compute, plans, source):
    tgt = get_target(target) if isinstance(target, str) else target
    compiled = compiled or compile_kernel(lowering, tgt.memory, tgt)
    if not compute and executor != "simulated":
        raise PtoArgumentError(f"pto run: compute=False needs the simulated executor, not {executor!r}")
    arrays = _arrays(flat, compute)
    outside = sorted(set(donated) - set(range(len(arrays))))
    if outside:
        raise PtoArgumentError(f"pto run: donated positions {outside} name no argument of the {len(arrays)} given")
    donated = _alone(arrays, donated)
    key = _plan_key(arrays, policy, donated)
    plans = plans if compute and executor == "simulated" else None
    replayed = _replayed(plans, key, arrays)
    if replayed is not None:
        return replayed
    backend = AscendBackend(compiled, tgt)
    if compute:
        backend.module          # the real text printed and parsed: a program with no real form fails here
    plan = orchestrate(lowering.block.jaxpr, lowering.block.consts, arrays, backend, frozenset(donated),
                       execute=compute)
    trace = dataclasses.replace(_schedule(plan, tgt, backend, executor, policy, workers, compute), source=source)
    outputs = plan.results() if compute else None
    _keep(plans, key, plan, trace, backend)
    return outputs, trace


def _arrays(flat, compute: bool) -> list:
    """The arguments as NumPy arrays; a shape (``jax.ShapeDtypeStruct``) as zeros that take no memory where the
    run computes nothing (a schedule alone), else an error: a run computes on values."""
    specs = [i for i, x in enumerate(flat) if isinstance(x, jax.ShapeDtypeStruct)]
    if specs and compute:
        raise PtoArgumentError(f"pto run: argument{'s' * (len(specs) > 1)} {', '.join(map(str, specs))} "
                               f"{'are' if len(specs) > 1 else 'is a'} jax.ShapeDtypeStruct{'s' * (len(specs) > 1)} "
                               "(a shape and dtype, no values): a call or run computes on arrays; profile(...) "
                               "or run(..., compute=False) take shapes")
    return [orchestrator.no_data(tuple(x.shape), x.dtype) if isinstance(x, jax.ShapeDtypeStruct) else np.asarray(x)
            for x in flat]


def _no_data(avals) -> list:
    """Zeros that take no memory for ``avals`` ((shape, dtype, ...) per flat argument): a schedule's inputs."""
    return [orchestrator.no_data(tuple(shape), dtype) for shape, dtype, *_ in avals]


def _replayed(plans: dict | None, key, arrays):
    """(outputs, trace) of the plan kept under ``key`` run again on ``arrays``; None where none is kept
    or another thread is running it."""
    kept = plans.get(key) if plans is not None else None
    if kept is not None and kept.lock.acquire(blocking=False):
        try:
            return kept.run(arrays), kept.trace
        finally:
            kept.lock.release()
    return None


def _keep(plans: dict | None, key, plan, trace, backend, most: int | None = None) -> None:
    """Keep a replayable ``plan`` under ``key`` (the first ``most`` kept go first past that many), else
    release its buffers."""
    if plans is None or not plan.replayable or key in plans:
        plan.release()
        return
    plan.recycle()
    plans[key] = _Replay(plan, trace, backend.worker())
    while most is not None and len(plans) > most:
        try:
            plans.pop(next(iter(plans)), None)
        except (RuntimeError, StopIteration):      # another thread changed it: it trims next time
            break


def _schedule(plan, tgt, backend, executor: str, policy: str, workers: int, compute: bool) -> Trace:
    """Run ``plan``'s tasks on ``executor``: its :class:`Trace`."""
    if executor == "simulated":
        return simulate(plan, machine(tgt), policy=policy, execute=compute, worker=backend.worker)
    if executor == "threads":
        if policy != "mpmd":        # host threads release a task when its inputs are ready: no barriers
            raise PtoArgumentError(f"pto run: the threads executor runs policy 'mpmd' only, not {policy!r}")
        return run_threads(plan, machine(tgt), workers=workers, worker=backend.worker)
    raise PtoArgumentError(f"pto run: executor {executor!r} is not 'simulated' or 'threads'")


KEPT_SIZES = 4     # the row counts whose plans a dynamic kernel keeps (the most recently made)


def execute_dynamic(dynamic, flat, m: int, *, target="a3", executor: str = "simulated", policy: str = "mpmd",
                    workers: int = 4, compute: bool = True, plans: dict | None = None):
    """A kernel compiled for a symbolic row count (:class:`~ptojax.ascend.dynamic.DynamicKernel`) at
    ``m`` rows on the runtime, as :func:`execute_flat` runs a static one: (the flat outputs, or None,
    :class:`Trace`). The tasks are the ``ceil(m/T)`` row blocks each program needs, scheduled by the
    GM windows they share; each runs its function of the dynamic module with ``m`` bound and is priced
    at its block's valid rows (:mod:`~ptojax.ascend.dynamic_tasks`). ``plans``: as :func:`execute`'s, for
    the last :data:`KEPT_SIZES` row counts."""
    with jax.enable_x64(False):
        return ieee_call(_execute_dynamic, dynamic, flat, m, target, executor, policy, workers, compute, plans)


def _execute_dynamic(dynamic, flat, m, target, executor, policy, workers, compute, plans):
    from .ascend.dynamic_tasks import DynamicBackend, bound_graph

    tgt = get_target(target) if isinstance(target, str) else target
    if not compute and executor != "simulated":
        raise PtoArgumentError(f"pto run: compute=False needs the simulated executor, not {executor!r}")
    arrays = _arrays(flat, compute)
    key = (m, _plan_key(arrays, policy, ()))
    plans = plans if compute and executor == "simulated" else None
    replayed = _replayed(plans, key, arrays)
    if replayed is not None:
        return replayed
    jaxpr, parts = bound_graph(dynamic, m)
    backend = DynamicBackend(dynamic, m, parts, tgt)
    plan = orchestrate(jaxpr, dynamic.lowering.block.consts, arrays, backend, execute=compute)
    trace = _schedule(plan, tgt, backend, executor, policy, workers, compute)
    outputs = plan.results() if compute else None
    _keep(plans, key, plan, trace, backend, KEPT_SIZES)
    return outputs, trace


def steering(lowering: Lowering, avals, target="a3", compiled=None) -> frozenset:
    """The flat argument positions whose values decide the kernel's task graph (runtime lengths,
    scalar inputs a loop's condition or a branch's index reads), or ``"device data"`` where values the
    kernel computes do (MoE counts read back): what a profile cannot do without. ``avals``: (shape, dtype[, weak]) per
    flat argument; orchestrated on zeros, no task run."""
    tgt = get_target(target) if isinstance(target, str) else target
    compiled = compiled or compile_kernel(lowering, tgt.memory, tgt)
    zeros = _no_data(avals)
    try:
        with jax.enable_x64(False):
            return orchestrator.steering(lowering.block.jaxpr, lowering.block.consts, zeros,
                                         AscendBackend(compiled, tgt))
    except orchestrator.PtoTaskLimitError:
        raise
    except PtoOrchestrationError:
        return frozenset({"device data"})


def replay_function(lowering: Lowering, avals, target="a3", compiled=None):
    """The kernel as one JAX function of its flat arguments to its flat outputs, replaying the parsed
    real PTO-AS text (:func:`~ptojax.ascend.replay_graph.graph_function`) — or None where argument values or
    device data decide its tasks (trip counts, runtime lengths, MoE counts read back): those keep
    the host path, as do kernels with a program the real text cannot express yet and task graphs too
    long to compile as straight-line code (more than :data:`~ptojax.ascend.replay_graph.MAX_STEPS`
    block calls or :data:`~ptojax.ascend.replay_graph.MAX_INSTRUCTIONS` instructions after loops are
    rolled). ``avals``: (shape, dtype) per flat argument."""
    from .ascend.replay_graph import PlanBackend, graph_function

    tgt = get_target(target) if isinstance(target, str) else target
    compiled = compiled or compile_kernel(lowering, tgt.memory, tgt)
    try:
        backend = PlanBackend(compiled)
    except (PtoUnsupportedError, PtoAsmError):     # a program selection cannot print as real PTO yet
        return None
    zeros = _no_data(avals)
    try:
        plan = orchestrate(lowering.block.jaxpr, lowering.block.consts, zeros, backend, frozenset(), execute=False)
    except PtoOrchestrationError:
        return None
    if plan.steering or not plan.replayable:
        return None
    return graph_function(plan, backend.module)


def _alone(arrays, donated) -> frozenset:
    """The donated positions whose arrays no other argument's memory overlaps: an array passed twice
    (``f(cache, ..., cache)``) is not updated in place, or the other argument's reads would see the
    update (as ``jax.jit``, which copies such a buffer)."""
    return frozenset(i for i in donated if not any(
        j != i and np.may_share_memory(arrays[i], a) for j, a in enumerate(arrays)))


def _plan_key(arrays, policy, donated) -> tuple:
    """What a kept plan depends on besides the signature: the policy, which donated arrays are writeable."""
    return policy, tuple(sorted((i, arrays[i].flags.writeable) for i in donated))


__all__ = ["Trace", "execute", "execute_dynamic", "execute_flat", "machine", "replay_function", "steering"]
