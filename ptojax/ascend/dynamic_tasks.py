"""A dynamic kernel at a bound row count as runtime tasks: what the MPMD runtime schedules and profiles.

:func:`bound_graph` gives the template's Block graph at ``m`` rows: each row-tiled part's grid is
``ceil(m/T)`` row blocks (:meth:`~ptojax.ascend.dynamic.DynamicKernel.grid`), each row-carrying result
(and reshape) ``m`` rows, the same programs, so the runtime makes the tasks the actual size needs and
orders them by the GM windows they read and write, as for a static kernel. :class:`DynamicBackend`
runs and prices those tasks: a task body calls its function of the dynamic PTO-AS module with ``m``
bound (the engine, as :meth:`~ptojax.ascend.dynamic.DynamicKernel.run` does), and its time is that
function priced at its block's valid rows (:func:`~ptojax.ascend.cost.function_time` with ``%dyn_m``
and ``%dyn_vr`` given: a tail block costs its ``m - T*i`` rows). The Ascend layer does not import the
runtime: the backend meets its protocol structurally.
"""
from __future__ import annotations

import dataclasses

from .._jax import ShapedArray, Var
from ..errors import PtoUnsupportedError
from . import textbatch
from .cost import function_time, load_l2_hit
from .dynamic import SYMBOL, VALID, DynamicKernel
from .program import AscendBackend, block_index


def bound_graph(dynamic: DynamicKernel, m: int):
    """(the template's Block jaxpr at ``m`` rows, {bound part: template part})."""
    jaxpr = dynamic.lowering.block.jaxpr
    renamed, parts, eqns = {}, {}, []
    for eqn in jaxpr.eqns:
        outvars = []
        for v in eqn.outvars:
            if dynamic._rows(v):
                renamed[v] = Var(ShapedArray(dynamic.shape(v, m), v.aval.dtype))
            outvars.append(renamed.get(v, v))
        invars = [renamed.get(v, v) if isinstance(v, Var) else v for v in eqn.invars]
        if "spec" in eqn.params:
            bound = []
            for part in eqn.params["spec"].parts:
                bound.append(dataclasses.replace(part, shape=dynamic.grid(part, m)))
                parts[bound[-1]] = part
            params = dict(eqn.params, spec=dataclasses.replace(eqn.params["spec"], parts=tuple(bound)))
        else:                               # a reshape step (a view of a GM tensor)
            params = dict(eqn.params, new_shape=tuple(outvars[0].aval.shape))
        eqns.append(eqn.replace(invars=invars, outvars=outvars, params=params))
    outvars = [renamed.get(v, v) if isinstance(v, Var) else v for v in jaxpr.outvars]
    return jaxpr.replace(eqns=eqns, outvars=outvars), parts


class _Blocks:
    """A task's body: grid points ``points`` of one function of the dynamic module, ``m`` bound."""

    __slots__ = ("module", "name", "grid", "points", "arrays", "m")

    def __init__(self, module, name, grid, points, arrays, m):
        self.module, self.name, self.grid, self.points, self.arrays, self.m = module, name, grid, points, arrays, m

    def __call__(self, core=None) -> None:
        textbatch.run(self.module, self.name, list(self.arrays) + [self.m],
                      [block_index(index, self.grid) for index in self.points])


class DynamicBackend(AscendBackend):
    """Runs and prices the tasks of :func:`bound_graph`'s parts (``parts``: bound part -> template part)
    on ``target``: bodies from the dynamic module, times from its functions at each block's valid rows."""

    def __init__(self, dynamic: DynamicKernel, m: int, parts: dict, target):
        super().__init__(dynamic.compiled, target)
        self.dynamic, self.m, self.parts = dynamic, m, parts
        self._priced: dict = {}

    def _function(self, part) -> str:
        template = self.parts[part]
        return self.dynamic.names[(template.program.name, tuple(template.shape))]

    def _block_cost(self, part, point, hbm: float):
        """The cost of the block at grid point ``point`` of bound ``part``: its function priced at the
        block's valid rows (every block of a function without dynamic rows costs the same)."""
        fn, template = self._function(part), self.parts[part]
        t = self.dynamic.rows[fn]
        valid = None if t is None else min(t, self.dynamic.row_count(fn, self.m) - t * int(point[0]))
        key = (fn, hbm, valid)
        if key not in self._priced:
            template_key = (template.program.name, tuple(template.shape))
            values = {SYMBOL: self.m} if valid is None else {SYMBOL: self.m, VALID: valid}
            try:
                self._priced[key] = function_time(self.dynamic.module.function(fn), self.target, values=values,
                                                  l2_hit=(1.0 - hbm) * load_l2_hit(self.compiled.kernels[template_key]))
            except PtoUnsupportedError:     # a text the model cannot fold: the template's full block
                self._priced[key] = self.compiled.cost(template_key, self.target, hbm)
        return self._priced[key]

    def _task_cost(self, part, points, hbm: float) -> tuple[float, int, int]:
        costs = [self._block_cost(part, point, hbm) for point in points]
        return (sum(c.seconds for c in costs), sum(c.bytes_in for c in costs), sum(c.bytes_out for c in costs))

    def task(self, part, points, arrays):
        seconds, bytes_in, bytes_out = self._task_cost(part, points, 0.0)
        body = _Blocks(self.dynamic.module, self._function(part), part.shape, list(points), arrays, self.m)
        return body, seconds, int(bytes_in + bytes_out)

    def points_per_task(self, part) -> int:
        """``tiles_per_block`` "auto": one block per task (a symbolic row count has no size to price)."""
        return 1

    def batch(self, part, arrays):
        """Many tasks of ``part`` at once: one walk of its function over all their blocks, tasks in order
        (the blocks together where the text allows, :func:`~ptojax.ascend.textbatch.run`)."""
        def run(tile_lists, core=None):
            _Blocks(self.dynamic.module, self._function(part), part.shape, [i for points in tile_lists for i in points],
                    arrays, self.m)()
        return run


__all__ = ["DynamicBackend", "bound_graph"]
