"""Running a lowered kernel: Ascend code on the MPMD runtime, simulated or on host threads."""
from __future__ import annotations

import dataclasses
import threading

import jax
import numpy as np

from .ascend.program import AscendBackend, compile_kernel
from .ascend.targets import target as get_target
from ._fpenv import ieee
from .errors import PtoArgumentError
from .lowering.pipeline import Lowering
from .mpmd import Machine, Plan, Trace, orchestrate, replay, run_threads, simulate


def machine(target) -> Machine:
    """The runtime's machine model of an Ascend target (one die)."""
    return Machine((("AIC", target.aic), ("AIV", target.aiv)), target.aicpu, target.aicpu_task_s, target.dispatch_s,
                   target.hbm_bytes_per_s, target.name)


@dataclasses.dataclass
class _Replay:
    """A replayable plan kept between calls, its trace, the core its bodies run on, and whether a
    call is using them."""

    plan: Plan
    trace: Trace
    core: object
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


def execute(lowering: Lowering, *args, target="a3", executor: str = "simulated", policy: str = "mpmd",
            workers: int = 4, compiled=None, donated=(), compute: bool = True, plans: dict | None = None):
    """Run ``lowering`` on ``args``: (outputs as a pytree of NumPy arrays, :class:`Trace`).

    ``donated``: flat argument positions whose arrays the kernel may update in place. ``compute=False``
    (simulated executor only) schedules the tasks on their predicted costs without running their
    bodies: the same trace, no outputs (None) — fast profiles of large shapes. ``plans``: a dict in
    which the simulated executor keeps plans that did not depend on the inputs' values (no host read
    of device data or of a scalar input); later calls replay them — the task bodies on the new
    inputs, the same trace — without orchestrating again (a call that finds its plan in use by
    another thread orchestrates its own).
    """
    flat, tree = jax.tree.flatten(args)
    if tree != lowering.in_tree:
        raise PtoArgumentError(f"pto run: arguments {tree} do not match the lowered signature {lowering.in_tree}")
    outputs, trace = execute_flat(lowering, flat, target=target, executor=executor, policy=policy, workers=workers,
                                  compiled=compiled, donated=donated, compute=compute, plans=plans)
    return (jax.tree.unflatten(lowering.out_tree, outputs) if compute else None), trace


def execute_flat(lowering: Lowering, flat, *, target="a3", executor: str = "simulated", policy: str = "mpmd",
                 workers: int = 4, compiled=None, donated=(), compute: bool = True, plans: dict | None = None):
    """:func:`execute` on the flat list of arguments: (the flat list of outputs, or None, :class:`Trace`)."""
    with ieee():   # IEEE subnormals inside XLA's execution too (see _fpenv); threads started here inherit it
        tgt = get_target(target) if isinstance(target, str) else target
        compiled = compiled or compile_kernel(lowering, tgt.memory)
        if not compute and executor != "simulated":
            raise PtoArgumentError(f"pto run: compute=False needs the simulated executor, not {executor!r}")
        arrays = [np.asarray(x) for x in flat]
        key = (policy, tuple(sorted((i, arrays[i].flags.writeable) for i in donated)))
        keep = plans is not None and compute and executor == "simulated"
        kept = plans.get(key) if keep else None
        if kept is not None and kept.lock.acquire(blocking=False):
            try:
                kept.plan.rebind(arrays)
                replay(kept.plan, kept.trace, ctx=kept.core)
                return kept.plan.results(), kept.trace
            finally:
                kept.plan.recycle()
                kept.lock.release()
        backend = AscendBackend(compiled, tgt)
        plan = orchestrate(lowering.block.jaxpr, lowering.block.consts, arrays, backend, frozenset(donated),
                           execute=compute)
        if executor == "simulated":
            trace = simulate(plan, machine(tgt), policy=policy, execute=compute, worker=backend.worker)
        elif executor == "threads":
            trace = run_threads(plan, machine(tgt), workers=workers, worker=backend.worker)
        else:
            raise PtoArgumentError(f"pto run: executor {executor!r} is not 'simulated' or 'threads'")
        outputs = plan.results() if compute else None
        if keep and plan.replayable and key not in plans:
            plan.recycle()
            plans[key] = _Replay(plan, trace, backend.worker())
        else:
            plan.release()
        return outputs, trace


__all__ = ["Trace", "execute", "execute_flat", "machine"]
