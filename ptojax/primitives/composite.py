"""Composite ops PyPTO ships as single operations: softmax, rms_norm, layer_norm, quantize, dequantize.

Each computes in float32 and rounds once to the output dtype; their derivatives come from the
float32 reference.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._jax import batching
from ..errors import PtoArgumentError, PtoShapeError, op_error
from . import elementwise, layout
from ._base import (F32, FLOAT, I8, I32, broadcast_shapes, canonical_dtype, check_dtype, check_same_dtype,
                    define, is_number_scalar, jvp_from_reference, normalize_axes, normalize_axis, shaped, tensor, upcast)


def _batch_axes(prim):
    def rule(args, dims, *, axes, **params):
        return prim.bind(layout._front(args[0], dims[0]), axes=tuple(a + 1 for a in axes), **params), 0
    batching.primitive_batchers[prim] = rule


# ------------------------------------------------------------------------------------------ softmax
def _softmax_abstract(x, *, axes):
    check_dtype("softmax", "operand", x, FLOAT)
    return shaped(x.shape, x.dtype)


def _softmax_reference(x, *, axes):
    z = x - jax.lax.stop_gradient(jnp.max(x, axes, keepdims=True, initial=-jnp.inf))    # (an empty axis too)
    e = jnp.exp(z)
    return e / jnp.sum(e, axes, keepdims=True)


softmax_p = define("softmax", "composite", abstract=_softmax_abstract, reference=upcast(_softmax_reference),
                   dtypes=FLOAT)
jvp_from_reference(softmax_p, upcast(_softmax_reference))
_batch_axes(softmax_p)


def softmax(x, axis: int = -1):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``."""
    x = tensor("softmax", x)
    return softmax_p.bind(x, axes=(normalize_axis("softmax", axis, x.ndim),))


# -------------------------------------------------------------------------------------- norms
def _norm_abstract(name):
    def abstract(x, *affine, eps, **flags):
        check_dtype(name, "operand", x, FLOAT)
        check_same_dtype(name, x, *affine)
        if x.ndim == 0:
            raise op_error(PtoShapeError, name, "normalises the last axis; got a rank-0 operand")
        shape = broadcast_shapes(name, x.shape, *(a.shape for a in affine))
        for a in affine:
            if a.ndim == 0 or a.shape[-1] != x.shape[-1]:
                raise op_error(PtoShapeError, name, f"weight {tuple(a.shape)} must end in the normalised "
                               f"axis {x.shape[-1]} of {tuple(x.shape)}")
        return shaped(shape, x.dtype)
    return abstract


def _rms_norm_reference(x, *gamma, eps):
    y = x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps)
    return y * gamma[0] if gamma else y


def _layer_norm_reference(x, *affine, eps, has_gamma, has_beta):
    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), -1, keepdims=True)
    y = (x - mean) * jax.lax.rsqrt(var + eps)
    affine = list(affine)
    if has_gamma:
        y = y * affine.pop(0)
    if has_beta:
        y = y + affine.pop(0)
    return y


rms_norm_p = define("rms_norm", "composite", abstract=_norm_abstract("rms_norm"),
                    reference=upcast(_rms_norm_reference), dtypes=FLOAT)
layer_norm_p = define("layer_norm", "composite", abstract=_norm_abstract("layer_norm"),
                      reference=upcast(_layer_norm_reference), dtypes=FLOAT)
for _p, _ref in ((rms_norm_p, _rms_norm_reference), (layer_norm_p, _layer_norm_reference)):
    jvp_from_reference(_p, upcast(_ref))
    elementwise.batch_broadcasting(_p)


def _eps(name, eps):
    if not is_number_scalar(eps) or isinstance(eps, (bool, np.bool_)) or not eps >= 0:
        raise op_error(PtoArgumentError, name, f"eps must be a non-negative number, got {eps!r}")
    return float(eps)


def rms_norm(x, gamma=None, *, eps: float = 1e-6):
    """``x / sqrt(mean(x**2) + eps) * gamma`` over the last axis."""
    args = [tensor("rms_norm", a) for a in (x, gamma) if a is not None]
    return rms_norm_p.bind(*args, eps=_eps("rms_norm", eps))


def layer_norm(x, gamma=None, beta=None, *, eps: float = 1e-5):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis (biased variance)."""
    args = [tensor("layer_norm", a) for a in (x, gamma, beta) if a is not None]
    return layer_norm_p.bind(*args, eps=_eps("layer_norm", eps), has_gamma=gamma is not None,
                             has_beta=beta is not None)


# ------------------------------------------------------------------------------------- quantization
QMAX = 127.0


def _quantize_abstract(x, *, axes, scale_dtype):
    check_dtype("quantize", "operand", x, FLOAT)
    if any(x.shape[a] == 0 for a in axes):       # (no max|x| to scale by)
        raise op_error(PtoShapeError, "quantize", f"cannot quantize over the empty axes {axes} of {tuple(x.shape)}")
    scale_shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    return [shaped(x.shape, I8), shaped(scale_shape, scale_dtype)]


def _quantize_reference(x, *, axes, scale_dtype):
    x = x.astype(F32)
    amax = jnp.max(jnp.abs(x), axes, keepdims=True)
    mult = jnp.where(amax > 0, QMAX / jnp.where(amax > 0, amax, 1.0), 0.0)
    q = jnp.clip(jnp.round(x * mult), -QMAX - 1, QMAX).astype(I8)
    # amax / QMAX, the division rounded once (XLA would multiply by a rounded 1 / QMAX)
    return [q, (amax / jnp.where(jnp.isnan(amax), amax, QMAX)).astype(scale_dtype)]


quantize_p = define("quantize", "composite", abstract=_quantize_abstract, reference=_quantize_reference,
                    multiple_results=True, dtypes=FLOAT)
jvp_from_reference(quantize_p, _quantize_reference)
batching.primitive_batchers[quantize_p] = lambda args, dims, *, axes, scale_dtype: (
    quantize_p.bind(layout._front(args[0], dims[0]), axes=tuple(a + 1 for a in axes), scale_dtype=scale_dtype),
    [0, 0])


def quantize(x, axis=-1, *, scale_dtype=jnp.float32):
    """Dynamic symmetric int8 quantization over ``axis`` (per row; per token-head on ``(T, H, D)``).

    Returns ``(q, scale)``: ``q = rint(x * m)`` in float32 for ``m = 127 / max|x|`` rounded to float32,
    clipped to int8, and the dequantization scale ``max|x| / 127`` with ``axis`` kept as size 1 (0 for
    an all-zero slice; ``m`` overflows to inf, and ``q`` saturates, where ``max|x| < 127 / FLT_MAX``).
    ``axis=None`` quantizes per tensor.
    """
    x = tensor("quantize", x)
    scale_dtype = canonical_dtype("quantize", scale_dtype)
    if scale_dtype not in FLOAT:
        raise op_error(PtoArgumentError, "quantize", f"scale_dtype must be floating, got {scale_dtype.name}")
    q, scale = quantize_p.bind(x, axes=normalize_axes("quantize", axis, x.ndim), scale_dtype=scale_dtype)
    return q, scale


def _dequantize_abstract(q, scale, *, dtype):
    check_dtype("dequantize", "values", q, (I8, I32))
    check_dtype("dequantize", "scale", scale, FLOAT)
    return shaped(broadcast_shapes("dequantize", q.shape, scale.shape), dtype)


def _dequantize_reference(q, scale, *, dtype):
    return (q.astype(F32) * scale.astype(F32)).astype(dtype)


dequantize_p = define("dequantize", "composite", abstract=_dequantize_abstract,
                      reference=_dequantize_reference, dtypes=(I8, I32))
jvp_from_reference(dequantize_p, _dequantize_reference)
elementwise.batch_broadcasting(dequantize_p)


def dequantize(q, scale, *, dtype=jnp.float32):
    """``q * scale`` in float32, rounded to ``dtype`` (int8 values or an int32 accumulator)."""
    dtype = canonical_dtype("dequantize", dtype)
    if dtype not in FLOAT:
        raise op_error(PtoArgumentError, "dequantize", f"dtype must be floating, got {dtype.name}")
    return dequantize_p.bind(tensor("dequantize", q), tensor("dequantize", scale), dtype=dtype)
