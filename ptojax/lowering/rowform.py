"""Reduced results kept in the shape of their rows (``keepdims``), so a reduction and what follows it
tile alike.

``jnp.max(x, -1)`` reduces a ``[48, 1024]`` tensor to ``[48]``; ``jax.nn.softmax`` then takes
``max(-inf, ·)`` of it and reshapes it to ``[48, 1]`` to broadcast it back. As written, the ``[48]``
ops tile on a grid of their own and the reshape is a GM reinterpretation: the chain leaves its row
block at every reduction. This rewrite of the Tensor level keeps such a reduction ``keepdims``
(``[48, 1]``, an R×1 tile of each row block), runs the elementwise ops on it in that shape (their
constants reshaped with them), and drops the reshapes that only restore the unit dimension. The
shape the program asked for is made (a reshape, free: no tile moves) only where something other
than such an op reads it: an output, a matmul, a gather.
"""
from __future__ import annotations

import jax
import numpy as np

from .. import ops
from .._jax import ClosedJaxpr, Literal
from ..primitives import OPS
from .walk import CONTROL, control, interpret, is_const

REDUCTIONS = ("sum", "prod", "amax", "amin")


def _op(eqn):
    name = eqn.primitive.name
    return name[len("pto."):] if name.startswith("pto.") and name[len("pto."):] in OPS else None


def _elementwise(eqn) -> bool:
    op = _op(eqn)
    return op is not None and OPS[op].family == "elementwise" and len(eqn.outvars) == 1


def _same_layout(a, b) -> bool:
    """Whether shapes ``a`` and ``b`` hold the same elements in the same order: equal but for leading
    unit dimensions (an operand that broadcasting does not grow)."""
    def strip(shape):
        shape = tuple(shape)
        while shape and shape[0] == 1:
            shape = shape[1:]
        return shape
    return strip(a) == strip(b)


def plan(jaxpr) -> dict:
    """Var -> its kept (``keepdims``) shape, for the reduced values this rewrite keeps in row form:
    those reshaped back to that shape, or read by an elementwise op that broadcasts none of them and
    whose other tensor operands have its output's shape (constants, or tensors reshaped for free)."""
    kept: dict = {}
    for eqn in jaxpr.eqns:
        out = eqn.outvars[0]
        shape = tuple(out.aval.shape) if hasattr(out.aval, "shape") else ()
        if _op(eqn) in REDUCTIONS and not eqn.params["keepdims"] and shape:
            x = eqn.invars[0].aval.shape
            kept[out] = tuple(1 if d in eqn.params["axes"] else n for d, n in enumerate(x))
        elif _elementwise(eqn) and shape:
            reduced = [v for v in eqn.invars if not isinstance(v, Literal) and v in kept]
            others = [v for v in eqn.invars if isinstance(v, Literal) or v not in kept]
            rows = {kept[v] for v in reduced}
            if len(rows) == 1 and all(_same_layout(v.aval.shape, shape) for v in reduced) and \
                    all(not v.aval.shape or tuple(v.aval.shape) == shape for v in others):
                kept[out] = rows.pop()
    wanted = set()
    for eqn in reversed(jaxpr.eqns):
        op = _op(eqn)
        x = eqn.invars[0] if eqn.invars else None
        if op == "reshape" and not isinstance(x, Literal) and x in kept and tuple(eqn.params["new_shape"]) == kept[x]:
            wanted.add(x)
        elif _elementwise(eqn) and eqn.outvars[0] in kept:
            wanted.update(v for v in eqn.invars if not isinstance(v, Literal) and v in kept)
            wanted.add(eqn.outvars[0])
    return {v: kept[v] for v in wanted}


class _Rows:
    """One jaxpr's rewrite (:func:`plan`); values in row form are :class:`_Kept`."""

    def __init__(self, jaxpr):
        self.kept = plan(jaxpr)
        self.squeezed: dict = {}       # id(kept value) -> the reduced-shape reshape made of it

    def read(self, x):
        if isinstance(x, _Kept):
            key = id(x.value)
            if key not in self.squeezed:
                self.squeezed[key] = (x.value, ops.reshape(x.value, x.shape))
            return self.squeezed[key][1]
        return x

    def rule(self, eqn, invals, stack):
        if eqn.primitive.name in CONTROL:
            return control(eqn, [self.read(x) for x in invals], stack, run)
        out = eqn.outvars[0]
        if out in self.kept:
            shape = tuple(out.aval.shape)
            if _elementwise(eqn):
                args = [x.value if isinstance(x, _Kept) else _lift(x, self.kept[out]) for x in invals]
            else:
                args = [self.read(x) for x in invals]
            params = dict(eqn.params, keepdims=True) if _op(eqn) in REDUCTIONS else eqn.params
            return [_Kept(eqn.primitive.bind(*args, **params), shape)]
        if _op(eqn) == "reshape" and isinstance(invals[0], _Kept) and \
                tuple(eqn.params["new_shape"]) == tuple(invals[0].value.shape):
            return [invals[0].value]
        result = eqn.primitive.bind(*[self.read(x) for x in invals], **eqn.params)
        return list(result) if eqn.primitive.multiple_results else [result]


class _Kept:
    """A value kept in row form: ``value`` has the kept shape, ``shape`` is the reduced one."""

    __slots__ = ("value", "shape")

    def __init__(self, value, shape):
        self.value, self.shape = value, shape


def _lift(x, kept_shape):
    """An operand of the reduced shape in the kept shape (a 0-d or literal operand as it is)."""
    if not np.shape(x):
        return x
    return np.reshape(x, kept_shape) if is_const(x) else ops.reshape(x, kept_shape)


def run(jaxpr, consts, args, stack=""):
    """Evaluate ``jaxpr`` with its reduced values in row form (a body runner for ``walk.control``)."""
    rows = _Rows(jaxpr)
    return [rows.read(x) for x in interpret(jaxpr, consts, args, rows.rule, stack)]


def keep_rows(closed: ClosedJaxpr) -> ClosedJaxpr:
    """The Tensor-level jaxpr ``closed`` with its reduced values in row form (module docstring)."""
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    return jax.make_jaxpr(lambda *args: run(closed.jaxpr, closed.consts, args))(*avals)
