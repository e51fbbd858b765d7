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

from .._jax import ClosedJaxpr, Primitive, ad, batching, mlir, xla
from ..errors import PtoUnsupportedError


GM_VIEWS = frozenset({"pto.reshape", "pto.bitcast"})     # reinterpretations of a GM tensor: no data moves


@dataclasses.dataclass(frozen=True)
class Output:
    """How an output buffer starts: as input ``alias`` (updated in place), else filled with ``fill`` --
    unless ``written_later``: the elements the call leaves unwritten are written by later calls (a
    concat's other pieces) before anything reads them."""

    alias: int | None = None
    fill: float | int | bool = 0
    written_later: bool = False


@dataclasses.dataclass(frozen=True, eq=False)
class Part:
    """One region of a loop nest: ``shape`` grid points, each running ``body``."""

    body: ClosedJaxpr
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _shape_text(shape):
    return "x".join(map(str, shape)) or "1"


@dataclasses.dataclass(frozen=True, eq=False)
class Grid:
    """The tile loops of one tensor op: a :class:`Part` per region (full tiles, then tails).

    ``kind`` is the core kind the bodies need ("vector" or "cube"), ``ops`` the tensor ops they
    implement and ``label`` their semantic label. Parts write disjoint windows of the outputs.
    """

    parts: tuple[Part, ...]
    outputs: tuple[Output, ...]
    kind: str
    ops: tuple[str, ...]
    label: str = ""

    @property
    def name(self) -> str:
        return "+".join(self.ops)

    def __repr__(self):
        grids = ",".join(_shape_text(p.shape) for p in self.parts)
        return f"{self.kind}:{self.name}@{grids}" + (f"[{self.label}]" if self.label else "")


def run(*inputs, spec):
    """Reference semantics: each part's grid points in row-major order, outputs threaded through."""
    avals = [v.aval for v in spec.parts[0].body.jaxpr.outvars]
    outs = [inputs[o.alias] if o.alias is not None else jnp.full(a.shape, o.fill, a.dtype)
            for o, a in zip(spec.outputs, avals)]
    for part in spec.parts:
        def point(t, outs, part=part):
            index = [jnp.asarray(i, jnp.int32) for i in jnp.unravel_index(t, part.shape)] if part.shape else []
            return jax.core.eval_jaxpr(part.body.jaxpr, part.body.consts, *index, *inputs, *outs)

        outs = point(0, outs) if part.size == 1 else lax.fori_loop(0, part.size, point, outs)
    return outs


def _primitive(name):
    prim = Primitive(name)
    prim.multiple_results = True
    prim.def_impl(partial(xla.apply_primitive, prim))
    prim.def_abstract_eval(lambda *inputs, spec: [v.aval for v in spec.parts[0].body.jaxpr.outvars])
    mlir.register_lowering(prim, mlir.lower_fun(run, multiple_results=True))
    return prim


tile_grid_p = _primitive("pto.tile_grid")


def _batch_grid(args, dims, *, spec):
    """``jax.vmap`` of a hand-written grid (``pj.tiles.grid``): the grid once per batch element, on its
    slices of the batched operands; the results stacked."""
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    runs = [tile_grid_p.bind(*(x if d is None else lax.index_in_dim(x, b, d, keepdims=False)
                               for x, d in zip(args, dims)), spec=spec) for b in range(size)]
    return [jnp.stack(outs) for outs in zip(*runs)], [0] * len(runs[0])


batching.primitive_batchers[tile_grid_p] = _batch_grid


def _no_grid_derivative(primals, tangents, *, spec):
    raise PtoUnsupportedError(f"pj.tiles.grid '{spec.name}' has no automatic derivative: a hand-written grid "
                              "is instructions, not a function JAX can differentiate; wrap forward and backward "
                              "kernels in jax.custom_vjp")


ad.primitive_jvps[tile_grid_p] = _no_grid_derivative
block_call_p = _primitive("pto.block_call")
