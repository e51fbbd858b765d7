"""Max / min reductions whose NaN need not be carried: a softmax's row max.

JAX's ``max`` of a row holding a NaN is NaN; the vector unit's ``trowmax`` skips a NaN past the first
element, so instruction selection adds a NaN pass to every float ``amax`` / ``amin`` (a clamp, a
multiply by 0 and a row sum beside the reduction). A softmax does not need it: ``m = max(x)`` is only
subtracted from ``x`` (NaN where ``x`` is), exponentiated and summed over the same axes -- a sum that is
NaN in every row holding a NaN, whatever ``m`` is -- and every result combines with that sum. A row
holding a NaN is then all NaN with or without the pass, and the other rows never see it.

:func:`mark_skip_nan` proves this on the Tensor graph, per reduction, by following what its result
reaches, each value in one of these states:

- ``ROW``: may differ from JAX's only in the rows of ``x`` (over the reduced axes) holding a NaN --
  the reduction itself, and any elementwise op of it with values that are exact;
- ``FULL``: ``x``-shaped, ``ROW`` and NaN wherever ``x`` is NaN: ``x`` plus / minus / times / over a
  ``ROW`` value, and NaN-keeping ops of that (``exp``, ``neg``, a cast to a float, ...);
- ``NAN``: exact, and NaN in every row holding a NaN: the ``sum`` of a ``FULL`` value over the reduced
  axes, and NaN-keeping ops of it. ``+ - * /`` of a ``NAN`` value and a ``ROW`` / ``FULL`` one is
  exact: the NaN row is NaN either way.

A row value is held with the reduced axes kept, dropped, or spread to ``x``'s shape; ops that would
broadcast it across rows, any other op reading a ``ROW`` / ``FULL`` value, a kernel output that is one,
or an op mixing two reductions' values keep the pass. A reduction proved so is marked
``skip_nan=True``; its reference (``jnp.max``) stays a valid value of it.
"""
from __future__ import annotations

import numpy as np

from .._jax import ClosedJaxpr, Var
from ..primitives import OPS

ROW, FULL, NAN = "row", "full", "nan"
_EXTREMA = ("pto.amax", "pto.amin")
_ARITHMETIC = frozenset(f"pto.{n}" for n in ("add", "sub", "mul", "div"))          # NaN from either operand
_NAN_KEEPING = frozenset(f"pto.{n}" for n in ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh",
                                               "sigmoid", "silu", "gelu"))
_ELEMENTWISE = frozenset(f"pto.{n}" for n, op in OPS.items() if op.family == "elementwise")
_FLOATS = frozenset(np.dtype(n) for n in ("float32", "float16", "bfloat16"))


class _Reduction:
    """One ``amax`` / ``amin`` eqn: its operand, the shapes a row value takes, and whether it still holds."""

    def __init__(self, eqn):
        self.eqn, self.x, self.ok = eqn, eqn.invars[0], True
        shape, axes = tuple(self.x.aval.shape), set(eqn.params["axes"])
        self.axes = axes
        self.forms = {"kept": tuple(1 if d in axes else n for d, n in enumerate(shape)),
                      "dropped": tuple(n for d, n in enumerate(shape) if d not in axes), "spread": shape}

    def form(self, shape):
        shape = tuple(shape)
        return next((name for name, f in self.forms.items() if f == shape), None)


def _aligned(reduction, operands, out_shape) -> bool:
    """Whether an elementwise op keeps each row's elements in that row: its row operands and result in
    one form, or kept-form operands spread over an ``x``-shaped result."""
    out = reduction.form(out_shape)
    forms = {reduction.form(v.aval.shape) for v in operands}
    return out is not None and (forms == {out} or (out == "spread" and forms <= {"kept", "spread"}))


def _step(eqn, reduction, states):
    """The state of ``eqn``'s result given its operands' states (``None`` in ``states``: exact), or
    False where the reduction must keep its NaN pass."""
    name, out = eqn.primitive.name, eqn.outvars[0].aval
    marked = [v for v, s in states if s is not None]
    kinds = {s for _, s in states if s is not None}
    float_out = np.dtype(out.dtype) in _FLOATS
    if name == "pto.sum" and kinds == {FULL}:
        return NAN if set(eqn.params["axes"]) == reduction.axes else False
    if name in ("pto.reshape", "pto.expand"):
        form = reduction.form(out.shape)
        if kinds <= {ROW, NAN} and form is not None and (name == "pto.reshape" or reduction.form(marked[0].aval.shape)
                                                            == "kept"):
            return kinds.pop()
        return False if ROW in kinds or FULL in kinds else None
    if name not in _ELEMENTWISE:
        return False if ROW in kinds or FULL in kinds else None
    if not _aligned(reduction, marked, out.shape):
        return False if ROW in kinds or FULL in kinds else None
    keeps_nan = float_out and (name in _ARITHMETIC or (name in _NAN_KEEPING and len(eqn.invars) == 1)
                               or (name == "pto.cast" and len(eqn.invars) == 1))
    if NAN in kinds and kinds - {NAN}:                       # a NaN row meets a row that differs: exact
        return None if name in _ARITHMETIC and float_out else False
    if kinds == {NAN}:
        return NAN if keeps_nan else None
    if FULL in kinds:
        return FULL if keeps_nan and reduction.form(out.shape) == "spread" else False
    # ROW (with exact values): x op row keeps x's NaNs
    if (name in _ARITHMETIC and float_out and reduction.form(out.shape) == "spread"
            and any(v is reduction.x for v in eqn.invars)):
        return FULL
    return ROW


def _follow(eqn, state) -> None:
    """The state of ``eqn``'s result from its operands' (``state``: var -> (reduction, kind)); a reduction
    whose value ``eqn`` may let through unabsorbed, or mixes with another's, is ruled out."""
    marks = {state[v][0] for v in eqn.invars if isinstance(v, Var) and v in state}
    if not marks:
        return
    if len(marks) > 1 or len(eqn.outvars) != 1:
        for r in marks:
            r.ok = False
        return
    (reduction,) = marks
    kind = _step(eqn, reduction, [(v, state[v][1] if isinstance(v, Var) and v in state else None)
                                  for v in eqn.invars])
    if kind is False:
        reduction.ok = False
    elif kind is not None:
        state[eqn.outvars[0]] = (reduction, kind)


def mark_skip_nan(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` with each float ``amax`` / ``amin`` whose NaN the results absorb marked
    ``skip_nan=True`` (see the module's docstring); only the top-level graph is searched."""
    jaxpr = closed.jaxpr
    found = [_Reduction(e) for e in jaxpr.eqns if e.primitive.name in _EXTREMA
             and np.dtype(e.invars[0].aval.dtype) in _FLOATS and not e.params.get("skip_nan")]
    if not found:
        return closed
    state: dict = {}                          # var -> (reduction, kind)
    for eqn in jaxpr.eqns:
        _follow(eqn, state)                   # (a reduction of a row value too: it rules that one out)
        mine = next((r for r in found if r.eqn is eqn), None)
        if mine is not None:
            state[eqn.outvars[0]] = (mine, ROW)
    for v in jaxpr.outvars:
        if isinstance(v, Var) and v in state and state[v][1] != NAN:
            state[v][0].ok = False
    proved = {id(r.eqn) for r in found if r.ok}
    if not proved:
        return closed
    eqns = [e.replace(params={**e.params, "skip_nan": True}) if id(e) in proved else e for e in jaxpr.eqns]
    return ClosedJaxpr(jaxpr.replace(eqns=eqns), closed.consts)
