"""The loop-nest primitives of the Tile and Block levels.

``pto.tile_grid`` (Tile level) and ``pto.block_call`` (Block level) run a body jaxpr once per point of
a grid: ``outputs = body(*grid_index, *inputs, *outputs)``. Outputs start as zeros, as a fill value,
or as one of the inputs (in-place updates such as ``assemble`` and ``scatter_update``). Both evaluate
with a ``fori_loop``, so every level stays a jaxpr JAX can run, and the IR does not grow with the grid.
"""
from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._jax import ClosedJaxpr, Primitive, mlir, xla


@dataclasses.dataclass(frozen=True)
class Output:
    """How an output buffer starts: as input ``alias`` (updated in place), else filled with ``fill``."""

    alias: int | None = None
    fill: float | int | bool = 0


@dataclasses.dataclass(frozen=True, eq=False)
class Grid:
    """A loop nest over tiles: ``shape`` grid points, each running ``body``.

    ``kind`` is the core kind the body needs ("vector" or "cube"), ``ops`` the tensor ops it
    implements and ``label`` their semantic label.
    """

    body: ClosedJaxpr
    shape: tuple[int, ...]
    outputs: tuple[Output, ...]
    kind: str
    ops: tuple[str, ...]
    label: str = ""

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def name(self) -> str:
        return "+".join(self.ops)

    def __repr__(self):
        return f"{self.kind}:{self.name}@{'x'.join(map(str, self.shape)) or '1'}" + (f"[{self.label}]" if self.label else "")


def run(*inputs, spec):
    """Reference semantics of a grid: every point in row-major order, outputs threaded through."""
    avals = [v.aval for v in spec.body.jaxpr.outvars]
    outs = [inputs[o.alias] if o.alias is not None else jnp.full(a.shape, o.fill, a.dtype)
            for o, a in zip(spec.outputs, avals)]
    shape = spec.shape

    def point(t, outs):
        index = [jnp.asarray(i, jnp.int32) for i in jnp.unravel_index(t, shape)] if shape else []
        return jax.core.eval_jaxpr(spec.body.jaxpr, spec.body.consts, *index, *inputs, *outs)

    if spec.size == 1:
        return point(0, outs)
    return lax.fori_loop(0, spec.size, point, outs)


def _primitive(name):
    prim = Primitive(name)
    prim.multiple_results = True
    prim.def_impl(partial(xla.apply_primitive, prim))
    prim.def_abstract_eval(lambda *inputs, spec: [v.aval for v in spec.body.jaxpr.outvars])
    mlir.register_lowering(prim, mlir.lower_fun(run, multiple_results=True))
    return prim


tile_grid_p = _primitive("pto.tile_grid")
block_call_p = _primitive("pto.block_call")
