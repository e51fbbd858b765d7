"""Running a lowered kernel: Ascend code on the MPMD runtime, simulated or on host threads."""
from __future__ import annotations

import jax
import numpy as np

from .ascend.program import AscendBackend, compile_kernel
from .ascend.targets import target as get_target
from .errors import PtoArgumentError
from .lowering.pipeline import Lowering
from .mpmd import Machine, Trace, orchestrate, run_threads, simulate


def machine(target) -> Machine:
    """The runtime's machine model of an Ascend target (one die)."""
    return Machine((("AIC", target.aic), ("AIV", target.aiv)), target.aicpu, target.aicpu_task_s, target.dispatch_s,
                   target.hbm_bytes_per_s, target.name)


def execute(lowering: Lowering, *args, target="a3", executor: str = "simulated", policy: str = "mpmd",
            workers: int = 4, compiled=None, donated=(), compute: bool = True):
    """Run ``lowering`` on ``args``: (outputs as a pytree of NumPy arrays, :class:`Trace`).

    ``donated``: flat argument positions whose arrays the kernel may update in place. ``compute=False``
    (simulated executor only) schedules the tasks on their predicted costs without running their
    bodies: the same trace, no outputs (None) — fast profiles of large shapes.
    """
    tgt = get_target(target) if isinstance(target, str) else target
    compiled = compiled or compile_kernel(lowering, tgt.memory)
    flat, tree = jax.tree.flatten(args)
    if tree != lowering.in_tree:
        raise PtoArgumentError(f"pto run: arguments {tree} do not match the lowered signature {lowering.in_tree}")
    backend = AscendBackend(compiled, tgt)
    if not compute and executor != "simulated":
        raise PtoArgumentError(f"pto run: compute=False needs the simulated executor, not {executor!r}")
    plan = orchestrate(lowering.block.jaxpr, lowering.block.consts, [np.asarray(x) for x in flat], backend,
                       frozenset(donated), execute=compute)
    if executor == "simulated":
        trace = simulate(plan, machine(tgt), policy=policy, execute=compute, worker=backend.worker)
    elif executor == "threads":
        trace = run_threads(plan, machine(tgt), workers=workers, worker=backend.worker)
    else:
        raise PtoArgumentError(f"pto run: executor {executor!r} is not 'simulated' or 'threads'")
    outputs = jax.tree.unflatten(lowering.out_tree, plan.results()) if compute else None
    plan.release()
    return outputs, trace


__all__ = ["Trace", "execute", "machine"]
