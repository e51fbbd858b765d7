"""Block instances run from the real PTO-AS text: what ``ptoas`` accepts is what runs.

:class:`PtoTextBackend` is the :class:`~ptojax.ascend.program.AscendBackend` whose task bodies
interpret the kernel's real module (:meth:`~ptojax.ascend.program.AscendKernel.pto`, parsed back by
:mod:`~ptojax.ascend.engine`) instead of codegen's host code: each grid point of a task is one call
of its program's function, its block index the point's row-major position in the part's grid (as
``pto.get_block_idx`` gives it to the function); a task of a program with a task function
(:mod:`~ptojax.ascend.isel.task`) is one call of that function, its block index the task's number,
so the loads it keeps resident run as the text has them. The points of a task, and the tasks of a
batch (:meth:`PtoTextBackend.batch`), run together (:mod:`~ptojax.ascend.textbatch`, bit for bit the
engine's point-after-point result); the reference that ties every number to the text the vendor's
tools take.
"""
from __future__ import annotations

from . import engine, textbatch
from .program import AscendBackend


class _Blocks:
    """A task's body: function ``name`` at block indices ``blocks``, in order (the grid points
    together where the text allows: :func:`~ptojax.ascend.textbatch.run`)."""

    __slots__ = ("module", "name", "blocks", "arrays")

    def __init__(self, module, name, blocks, arrays):
        self.module, self.name, self.blocks, self.arrays = module, name, blocks, arrays

    def __call__(self, core=None) -> None:
        textbatch.run(self.module, self.name, self.arrays, self.blocks)


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


class PtoTextBackend(AscendBackend):
    """Runs block instances by interpreting the real PTO-AS module of the kernel for ``arch``."""

    def __init__(self, compiled, target, arch: str = "a3"):
        super().__init__(compiled, target)
        self.module = engine.parse(compiled.pto(arch))
        names = [name for name, _ in compiled.entries()]
        self.names = dict(zip(compiled.kernels, names))
        self.task_names = dict(zip(compiled.grouped(), names[len(compiled.kernels):]))

    def _body(self, part, points, arrays) -> _Blocks:
        key = (part.program.name, tuple(part.shape))
        grid, n = self.compiled.kernels[key].grid, self.compiled.tasks.get(key, 1)
        first = block_index(points[0], grid) if points else 0
        if key in self.task_names and first % n == 0 and len(points) <= n:
            return _Blocks(self.module, self.task_names[key], [first // n], arrays)
        return _Blocks(self.module, self.names[key], [block_index(p, grid) for p in points], arrays)

    def task(self, part, points, arrays):
        seconds, bytes_in, bytes_out = self._task_cost(part, points, 0.0)     # priced as host code's task
        return self._body(part, points, arrays), seconds, int(bytes_in + bytes_out)

    def batch(self, part, arrays):
        def run(tile_lists, core=None):
            bodies = [self._body(part, points, arrays) for points in tile_lists]
            for name in dict.fromkeys(b.name for b in bodies):     # one call per function, tasks in order
                _Blocks(self.module, name, [i for b in bodies if b.name == name for i in b.blocks], arrays)()
        return run
