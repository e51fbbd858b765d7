"""Kernels traced with ``jax.export`` symbolic dimensions: which arguments carry them, and the error
a level that needs concrete sizes raises.

The Tensor level takes symbols (every op's shape rule computes with them, :mod:`ptojax.primitives.dims`);
the Tile level and below count tiles from concrete sizes, so a symbolic lowering stops after the
Tensor level, and asking for a lower level is a :class:`~ptojax.errors.PtoUnsupportedError` naming the
level, the argument and its symbolic dimension.
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np

from .._jax import ClosedJaxpr
from ..errors import PtoUnsupportedError
from ..primitives import dims


@dataclasses.dataclass(frozen=True)
class Symbolic:
    """One argument with symbolic dimensions: its flat position, ``dtype[shape]`` text and symbols."""

    index: int
    aval: str
    symbols: tuple[str, ...]

    def __str__(self):
        return f"argument {self.index} is {self.aval} (symbolic {', '.join(self.symbols)})"


def _aval_text(aval) -> str:
    return f"{np.dtype(aval.dtype).name}[{','.join(map(str, aval.shape))}]"


def symbolic_arguments(closed: ClosedJaxpr) -> tuple[Symbolic, ...]:
    """The flat arguments of a traced kernel whose shapes hold ``jax.export`` symbolic dimensions."""
    return tuple(Symbolic(i, _aval_text(v.aval), tuple(str(d) for d in dims.symbolic(v.aval.shape)))
                 for i, v in enumerate(closed.jaxpr.invars) if dims.symbolic(v.aval.shape))


def level_error(level: str, args: tuple[Symbolic, ...]) -> PtoUnsupportedError:
    """The error of a ``level`` that cannot take the symbolic dimensions of ``args`` yet."""
    return PtoUnsupportedError(
        f"pto lowering: the {level} level needs concrete sizes, but {'; '.join(map(str, args))}; "
        "the tensor level and backend='xla' take symbolic dimensions (jax.export), lower with concrete "
        "shapes for the tile, block and pto levels")


def evaluate_at_sizes(closed: ClosedJaxpr, args) -> list:
    """Run a jaxpr whose inputs have symbolic shapes on concrete ``args``: exported with those shapes,
    then called (``jax.export`` binds the symbols to the sizes of ``args`` and checks they agree)."""
    specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    run = jax.jit(lambda *xs: jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *xs))
    return jax.export.export(run)(*specs).call(*args)
