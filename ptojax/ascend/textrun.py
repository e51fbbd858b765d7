"""Block instances run from the real PTO-AS text: what ``ptoas`` accepts is what runs.

:class:`PtoTextBackend` is the :class:`~ptojax.ascend.program.AscendBackend` whose task bodies
interpret the kernel's real module (:meth:`~ptojax.ascend.program.AscendKernel.pto`, parsed back by
:mod:`~ptojax.ascend.engine`) instead of codegen's host code: each grid point of a task is one call
of its program's function, its block index the point's row-major position in the part's grid (as
``pto.get_block_idx`` gives it to the function); a task of a program with a task function
(:mod:`~ptojax.ascend.isel.task`) is one call of that function, its block index the task's number,
so the loads it keeps resident run as the text has them. Slower than host code; the reference that
ties every number to the text the vendor's tools take.
"""
from __future__ import annotations

import numpy as np

from . import engine
from .program import AscendBackend


class _Blocks:
    """A task's body: grid points ``points`` of one function, one block index each."""

    __slots__ = ("module", "name", "grid", "points", "arrays")

    def __init__(self, module, name, grid, points, arrays):
        self.module, self.name, self.grid, self.points, self.arrays = module, name, grid, points, arrays

    def __call__(self, core=None) -> None:
        for index in self.points:
            engine.run(self.module, self.name, self.arrays, block_index(index, self.grid))


class _Task:
    """A task's body: its program's task function at block index ``block`` (the task's number)."""

    __slots__ = ("module", "name", "block", "arrays")

    def __init__(self, module, name, block, arrays):
        self.module, self.name, self.block, self.arrays = module, name, block, arrays

    def __call__(self, core=None) -> None:
        engine.run(self.module, self.name, self.arrays, self.block)


def block_index(index, grid) -> int:
    """Grid point ``index`` as ``pto.get_block_idx`` numbers it: row-major over ``grid`` (missing
    trailing dims of the grid are 1)."""
    index = tuple(int(i) for i in index)
    grid = tuple(grid) + (1,) * (len(index) - len(grid))
    return int(np.ravel_multi_index(index, grid)) if index else 0


class PtoTextBackend(AscendBackend):
    """Runs block instances by interpreting the real PTO-AS module of the kernel for ``arch``."""

    def __init__(self, compiled, target, arch: str = "a3"):
        super().__init__(compiled, target)
        self.module = engine.parse(compiled.pto(arch))
        names = [name for name, _ in compiled.entries()]
        self.names = dict(zip(compiled.kernels, names))
        self.task_names = dict(zip(compiled.grouped(), names[len(compiled.kernels):]))

    def _body(self, part, points, arrays):
        key = (part.program.name, tuple(part.shape))
        grid, n = self.compiled.kernels[key].grid, self.compiled.tasks.get(key, 1)
        first = block_index(points[0], grid) if points else 0
        if key in self.task_names and first % n == 0 and len(points) <= n:
            return _Task(self.module, self.task_names[key], first // n, arrays)
        return _Blocks(self.module, self.names[key], grid, points, arrays)

    def task(self, part, points, arrays):
        _, seconds, nbytes = super().task(part, points, arrays)
        return self._body(part, points, arrays), seconds, nbytes

    def batch(self, part, arrays):
        def run(tile_lists, core=None):
            for points in tile_lists:
                self._body(part, points, arrays)()
        return run
