"""Dimensions that may be symbolic: the shape arithmetic of every op's rule.

A dimension is an int or a ``jax.export`` symbolic expression (``m``, ``2*m + 1``), as
``jax.export.symbolic_shape("m, 64")`` makes them. Equality of two dimensions is decided by JAX
(``m == m`` is true, ``m == 3`` false); an order (``m >= 3``) may be undecidable, and then the op
raises a :class:`~ptojax.errors.PtoShapeError` that names the dimensions and the constraint it needs
(``jax.export.symbolic_shape("m", constraints=("m >= 3",))`` states it).
"""
from __future__ import annotations

import math
from typing import Callable

import jax
import numpy as np
from jax import lax

from ..errors import PtoArgumentError, PtoShapeError, op_error


def is_symbolic(dim) -> bool:
    """Whether ``dim`` is a ``jax.export`` symbolic expression (not an int)."""
    return jax.export.is_symbolic_dim(dim)


def symbolic(shape) -> tuple:
    """The symbolic dimensions of ``shape`` (empty for a static shape)."""
    return tuple(d for d in shape if is_symbolic(d))


def shape_text(shape) -> str:
    """``(m, 64)``: a shape as its user wrote it (symbols by name)."""
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def size(shape):
    """The number of elements of ``shape``: an int, or an expression of its symbols."""
    return math.prod(shape)


def broadcast_shapes(op: str, *shapes) -> tuple:
    """NumPy broadcasting of (possibly symbolic) shapes, or a :class:`PtoShapeError` naming them."""
    shapes = [tuple(s) for s in shapes]
    try:
        return tuple(lax.broadcast_shapes(*shapes))
    except (ValueError, TypeError, jax.errors.InconclusiveDimensionOperation):
        raise op_error(PtoShapeError, op, "shapes " + ", ".join(shape_text(s) for s in shapes)
                       + " do not broadcast (NumPy rules: trailing dimensions equal or 1)") from None


def decide(op: str, check: Callable[[], bool], statement: str) -> bool:
    """``check()``; where JAX cannot decide it for every value of the symbols, a :class:`PtoShapeError`
    naming ``statement`` (the dimensions and the relation the op needs)."""
    try:
        return bool(check())
    except jax.errors.InconclusiveDimensionOperation:
        raise op_error(PtoShapeError, op, f"cannot decide whether {statement} for every value of the symbolic "
                       "dimensions; state the bound as a constraint: jax.export.symbolic_shape(..., "
                       "constraints=...)") from None


def as_int(d) -> int:
    """An int (a NumPy one too) as a Python int; a TypeError for anything else (``2.7`` is no size)."""
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
        raise TypeError(f"{d!r} is not an int")
    return int(d)


def dims(op: str, shape, what: str = "shape") -> tuple:
    """``shape`` as a tuple of dimensions (ints or symbolic expressions), or a :class:`PtoArgumentError`."""
    try:
        return tuple(d if is_symbolic(d) else as_int(d) for d in shape)
    except (TypeError, ValueError):
        raise op_error(PtoArgumentError, op, f"{what} must be a sequence of ints or symbolic dimensions, "
                       f"got {shape!r}") from None
