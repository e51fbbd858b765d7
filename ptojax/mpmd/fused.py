"""A replayable plan's task bodies as one call of the backend.

A replay (``executors.replay``) binds the plan's buffers to new arrays (``Plan.rebind``), runs the
task bodies step by step and hands the scratch arrays back (``Plan.recycle``): at small shapes that
bookkeeping costs more than the bodies. :func:`fuse` asks the backend (``Backend.fuse``) for one
callable that runs every step of the replay on the GM arrays given by buffer id; a
:class:`FusedPlan` then makes those arrays per call — the inputs, fresh arrays for the outputs, the
kernel's own intermediate arrays kept from call to call (a plan replays on one thread at a time),
views of them — fills what orchestration filled and makes that one call.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .graph import PtoTaskError
from .orchestrator import Buffer, Plan


class FusedPlan:
    """A plan's bodies as one backend callable; called with the kernel's flat inputs, returns its flat
    outputs, or None where the callable does not take these arrays."""

    def __init__(self, plan: Plan, run: Callable[[list], int | None], first_tasks: list):
        self.run, self.first_tasks = run, first_tasks
        results = {b.base for b in plan.outputs if isinstance(b, Buffer)}
        self.shapes = [(buf.array.shape, buf.array.dtype) for buf in plan.buffers]
        self.layout = []                                # per buffer: how a call gets its array
        for buf in plan.buffers:
            if buf.base != buf.id:
                self.layout.append(("view", (buf.base, buf.array.shape)))
            elif buf.source == "scratch" and buf.id in results:
                self.layout.append(("new", (buf.array.shape, buf.array.dtype)))
            elif buf.source == "scratch":
                self.layout.append(("kept", np.empty(buf.array.shape, buf.array.dtype)))
            elif buf.source is not None:
                self.layout.append(("arg", buf.source))
            else:
                self.layout.append(("kept", buf.array))     # a constant
        self.fills = list(plan.fills)
        self.outputs = [b.id if isinstance(b, Buffer) else None for b in plan.outputs]
        self.scalars = [None if isinstance(b, Buffer) else b for b in plan.outputs]

    def __call__(self, args) -> list | None:
        arrays = []
        for kind, value in self.layout:
            if kind == "arg":
                arrays.append(args[value])
            elif kind == "kept":
                arrays.append(value)
            elif kind == "new":
                arrays.append(np.empty(*value))
            else:
                arrays.append(arrays[value[0]].reshape(value[1]))
        for i, value in self.fills:
            arrays[i].fill(value)
        failed = self.run(arrays)
        if failed is None:
            return None
        if failed >= 0:
            task = self.first_tasks[failed]
            raise PtoTaskError(f"pto runtime: {task.describe()} failed a check in the plan's fused code "
                               "that its own code passed when the plan was made")
        return [s if i is None else arrays[i] for i, s in zip(self.outputs, self.scalars)]


def fuse(plan: Plan, backend) -> FusedPlan | None:
    """``plan``'s replay (its ``steps``, set by a first ``executors.replay``) as one call of
    ``backend.fuse``, or None where the backend has none or does not take every step."""
    make = getattr(backend, "fuse", None)
    if make is None or plan.steps is None or not plan.replayable:
        return None
    steps, first = [], []
    for group, members in plan.steps:
        task = members[0]
        body, tiles = (task.run, None) if group is None else (plan.batches[group], [t.batch[1] for t in members])
        if body is None or task.binding < 0:
            return None
        steps.append((body, tiles, plan.bindings[task.binding][1]))
        first.append(task)
    run = make(steps)
    return None if run is None else FusedPlan(plan, run, first)


__all__ = ["FusedPlan", "fuse"]
