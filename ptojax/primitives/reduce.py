"""Reductions over axes: sum, amax, amin, prod, argmax, argmin; and cumsum.

Floating-point sums, products and prefix sums accumulate in float32 and round once to the input dtype;
integer ones keep the input dtype and wrap on overflow, as the vector unit does.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from .._jax import ad, batching
from ..errors import PtoShapeError, op_error
from . import layout
from ._base import (F32, FLOAT, I32, NUMERIC, check_dtype, define, flag, jvp_from_reference, jvp_zero,
                    normalize_axes, normalize_axis, shaped, tensor)


def reduced_shape(shape, axes, keepdims):
    """``shape`` reduced over ``axes`` (kept as 1s where ``keepdims``)."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape) if keepdims or i not in axes)


def _accumulate(fn):
    """Run ``fn(x, dtype=acc)`` with float inputs widened to float32, then round to the input dtype."""
    def run(x, **params):
        acc = F32 if x.dtype in FLOAT else x.dtype
        return fn(x.astype(acc), dtype=acc, **params).astype(x.dtype)
    return run


def _batch_axes(prim):
    def rule(args, dims, *, axes, **params):
        x = layout._front(args[0], dims[0])
        return prim.bind(x, axes=tuple(a + 1 for a in axes), **params), 0
    batching.primitive_batchers[prim] = rule


def _reduction(name, reference, *, nonempty):
    def abstract(x, *, axes, keepdims, skip_nan=False):     # (amax / amin: ``lowering/nan_rows.py``)
        check_dtype(name, "operand", x, NUMERIC)
        if nonempty and any(x.shape[a] == 0 for a in axes):
            raise op_error(PtoShapeError, name, f"cannot reduce the empty axes {axes} of {tuple(x.shape)}")
        return shaped(reduced_shape(x.shape, axes, keepdims), x.dtype)

    prim = define(name, "reduce", abstract=abstract, reference=reference, dtypes=NUMERIC)
    _batch_axes(prim)
    return prim


_prod_reference = _accumulate(lambda x, *, axes, keepdims, dtype: jnp.prod(x, axes, dtype, keepdims=keepdims))
sum_p = _reduction("sum", _accumulate(lambda x, *, axes, keepdims, dtype: jnp.sum(x, axes, dtype, keepdims=keepdims)),
                   nonempty=False)
prod_p = _reduction("prod", _prod_reference, nonempty=False)
# ``skip_nan``: the lowering proved that every result of the kernel is NaN in a row holding a NaN
# whatever the extremum of that row is (a softmax's row max), so the cores need not carry the NaN; the
# NaN-carrying ``jnp.max`` is one such extremum
amax_p = _reduction("amax", lambda x, *, axes, keepdims, skip_nan=False: jnp.max(x, axes, keepdims=keepdims),
                    nonempty=True)
amin_p = _reduction("amin", lambda x, *, axes, keepdims, skip_nan=False: jnp.min(x, axes, keepdims=keepdims),
                    nonempty=True)


def _sum_transpose(ct, x, *, axes, keepdims):
    shape = tuple(x.aval.shape)
    return [layout.expand(layout.reshape(ct, reduced_shape(shape, axes, True)), shape)]


ad.deflinear2(sum_p, _sum_transpose)
jvp_from_reference(prod_p, _prod_reference)


def _reduce(prim, name):
    def op(x, axis=None, keepdims: bool = False):
        x = tensor(name, x)
        return prim.bind(x, axes=normalize_axes(name, axis, x.ndim), keepdims=flag(name, "keepdims", keepdims))
    op.__name__ = name
    return op


sum = _reduce(sum_p, "sum")  # noqa: A001 - PyPTO's name
prod = _reduce(prod_p, "prod")
amax = _reduce(amax_p, "amax")
amin = _reduce(amin_p, "amin")
sum.__doc__ = "Sum over ``axis`` (an int, a tuple, or None for all axes)."
prod.__doc__ = "Product over ``axis`` (an int, a tuple, or None for all axes)."
amax.__doc__ = "Maximum over ``axis``; NaN propagates."
amin.__doc__ = "Minimum over ``axis``; NaN propagates."


# ------------------------------------------------------------------------------------ argmax/argmin
def _arg_reduction(name, reference):
    def abstract(x, *, axes, keepdims):
        check_dtype(name, "operand", x, NUMERIC)
        if x.shape[axes[0]] == 0:
            raise op_error(PtoShapeError, name, f"cannot reduce the empty axis {axes[0]} of {tuple(x.shape)}")
        return shaped(reduced_shape(x.shape, axes, keepdims), I32)

    prim = define(name, "reduce", abstract=abstract, dtypes=NUMERIC, differentiable=False,
                  reference=lambda x, *, axes, keepdims: reference(x, axes[0], keepdims=keepdims).astype(I32))
    _batch_axes(prim)
    jvp_zero(prim)

    def op(x, axis: int = -1, keepdims: bool = False):
        x = tensor(name, x)
        return prim.bind(x, axes=(normalize_axis(name, axis, x.ndim),), keepdims=flag(name, "keepdims", keepdims))
    op.__name__ = name
    op.__doc__ = f"int32 index of the first {name[3:]}imum along ``axis``."
    return prim, op


argmax_p, argmax = _arg_reduction("argmax", jnp.argmax)
argmin_p, argmin = _arg_reduction("argmin", jnp.argmin)


# ------------------------------------------------------------------------------------------- cumsum
def _cumsum_abstract(x, *, axes, reverse):
    check_dtype("cumsum", "operand", x, NUMERIC)
    return shaped(x.shape, x.dtype)


cumsum_p = define("cumsum", "reduce", abstract=_cumsum_abstract, dtypes=NUMERIC, reference=_accumulate(
    lambda x, *, axes, reverse, dtype: lax.cumsum(x, axes[0], reverse=reverse)))
ad.deflinear2(cumsum_p, lambda ct, x, *, axes, reverse: [cumsum_p.bind(ct, axes=axes, reverse=not reverse)])
_batch_axes(cumsum_p)


def cumsum(x, axis: int = -1, *, reverse: bool = False):
    """Inclusive prefix sum along ``axis`` (from the end when ``reverse``)."""
    x = tensor("cumsum", x)
    return cumsum_p.bind(x, axes=(normalize_axis("cumsum", axis, x.ndim),), reverse=flag("cumsum", "reverse", reverse))


def unbroadcast(x, shape):
    """Sum ``x`` down to ``shape`` (the transpose of NumPy broadcasting)."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1)
    return layout.reshape(sum_p.bind(x, axes=axes, keepdims=False), shape)


ad.deflinear2(layout.expand_p, lambda ct, x, *, shape: [unbroadcast(ct, x.aval.shape)])
