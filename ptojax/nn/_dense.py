"""Fused dense (matmul + bias + activation) and SwiGLU: forward and backward ptojax kernels."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._jax import vary_alike
from .. import ops
from ..errors import PtoArgumentError, PtoShapeError
from ..lowering import tile
from ._common import F32, check_backend, check_float, col_reduce_tile, dtype_of, ew_tile, make, matmul_f32

ACTIVATIONS = ("relu", "gelu", "silu", None)
_C = float(np.sqrt(2.0 / np.pi))


def _act(z, activation):
    if activation == "relu":
        return ops.relu(z)
    if activation == "gelu":
        return ops.gelu(z)                      # tanh approximation, as jax.nn.gelu's default
    if activation == "silu":
        return ops.silu(z)
    return z


def _act_grad(g, r, activation):
    """dL/dz from dL/dy and the saved residual ``r`` (y for relu, z for gelu/silu), all fp32."""
    if activation == "relu":
        return jnp.where(r > 0, g, 0.0)
    if activation == "silu":
        s = jax.nn.sigmoid(r)
        return g * (s * (1.0 + r * (1.0 - s)))
    if activation == "gelu":
        t = jnp.tanh(_C * (r + 0.044715 * r * r * r))
        return g * (0.5 * (1.0 + t) + 0.5 * r * (1.0 - t * t) * _C * (1.0 + 3 * 0.044715 * r * r))
    return g


def _colsum(x):
    with tile(vec=col_reduce_tile()):
        return jnp.sum(x, axis=0)


# --------------------------------------------------------------------------------------- dense
def _dense_fwd_kernel(x, w, b, *, activation):
    with jax.named_scope("Linear"):
        z = matmul_f32(x, w)
    with tile(vec=ew_tile()), jax.named_scope("BiasAct"):
        z = z + b.astype(F32)
        y = _act(z, activation)
        out = y.astype(x.dtype)
        if activation in ("gelu", "silu"):
            return out, z.astype(x.dtype)        # the pre-activation: what the derivative needs
        return out, None


def _dense_bwd_kernel(x, w, r, g, *, activation):
    with tile(vec=ew_tile()), jax.named_scope("ActGrad"):
        dz = _act_grad(g.astype(F32), r.astype(F32) if r is not None else None, activation)
        dz_in = dz.astype(x.dtype)
    with jax.named_scope("BiasGrad"):
        db = _colsum(dz)
    with jax.named_scope("Linear_dx"):
        dx = matmul_f32(dz_in, w, transpose_b=True)
    with jax.named_scope("Linear_dw"):
        dw = matmul_f32(x, dz_in, transpose_a=True)
    with tile(vec=ew_tile()):
        return dx.astype(x.dtype), dw.astype(w.dtype), db.astype(x.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _dense2d(x, w, b, activation, backend):
    return make("dense_fwd", _dense_fwd_kernel, backend, activation=activation)(x, w, b)[0]


def _dense2d_fwd(x, w, b, activation, backend):
    y, z = make("dense_fwd", _dense_fwd_kernel, backend, activation=activation)(x, w, b)
    r = y if activation == "relu" else z       # relu: the output's sign is the mask; None: nothing
    return y, (x, w, r)


def _dense2d_bwd(activation, backend, res, g):
    x, w, r = res
    dx, dw, db = make("dense_bwd", _dense_bwd_kernel, backend, activation=activation)(x, w, r, g)
    return dx, dw, db


_dense2d.defvjp(_dense2d_fwd, _dense2d_bwd)


def dense(x, w, b=None, activation: str | None = None, *, backend: str = "sim"):
    """``activation(x @ w + b)`` as one fused kernel (the seed's fused_gemm_relu), differentiable.

    ``x``: (..., K), ``w``: (K, N), ``b``: (N,) or None. fp16/bf16 operands accumulate in fp32 on the
    cube; bias and activation run in fp32 and round once. ``activation``: "relu", "gelu" (tanh
    approximation, as ``jax.nn.gelu``), "silu" or None. Residuals: x, w and — relu: the output,
    gelu/silu: the pre-activation.
    """
    check_backend("dense", backend)
    if activation not in ACTIVATIONS:
        raise PtoArgumentError(f"pj.nn.dense: activation {activation!r} is not one of {ACTIVATIONS}")
    given = b
    if b is None:
        b = jnp.zeros(np.shape(w)[-1:], dtype_of("dense", "w", w))
    check_float("dense", x=x, w=w, b=b)
    if x.ndim == 0 or w.ndim != 2 or x.shape[-1] != w.shape[0] or b.shape != (w.shape[1],):
        bias = "b None" if given is None else f"b {b.shape}"
        raise PtoShapeError(f"pj.nn.dense: x {x.shape}, w {w.shape}, {bias}: expected (..., K), (K, N), (N,) "
                            "or b None")
    if x.shape[-1] == 0:
        raise PtoShapeError(f"pj.nn.dense: x {x.shape} and w {w.shape} contract over an empty K; the product needs "
                            "one input feature at least")
    lead = x.shape[:-1]
    y = _dense2d(*vary_alike(x.reshape(-1, x.shape[-1]), w, b), activation, backend)
    return y.reshape(*lead, w.shape[1])


# -------------------------------------------------------------------------------------- swiglu
def _swiglu_fwd_kernel(x, wg, wu):
    with jax.named_scope("Gate"):
        a = matmul_f32(x, wg)
    with jax.named_scope("Up"):
        u = matmul_f32(x, wu)
    with tile(vec=ew_tile()), jax.named_scope("SwiGLU"):
        y = ops.silu(a) * u
        return y.astype(x.dtype), a.astype(x.dtype), u.astype(x.dtype)


def _swiglu_bwd_kernel(x, wg, wu, a, u, g):
    with tile(vec=ew_tile()), jax.named_scope("SwiGLU_grad"):
        a, u, g = a.astype(F32), u.astype(F32), g.astype(F32)
        s = jax.nn.sigmoid(a)
        du = (g * (a * s)).astype(x.dtype)
        da = (g * u * (s * (1.0 + a * (1.0 - s)))).astype(x.dtype)
    with jax.named_scope("dx"):
        dx = matmul_f32(da, wg, transpose_b=True) + matmul_f32(du, wu, transpose_b=True)
    with jax.named_scope("dw"):
        dwg = matmul_f32(x, da, transpose_a=True)
        dwu = matmul_f32(x, du, transpose_a=True)
    with tile(vec=ew_tile()):
        return dx.astype(x.dtype), dwg.astype(wg.dtype), dwu.astype(wu.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _swiglu2d(x, wg, wu, backend):
    return make("swiglu_fwd", _swiglu_fwd_kernel, backend)(x, wg, wu)[0]


def _swiglu2d_fwd(x, wg, wu, backend):
    y, a, u = make("swiglu_fwd", _swiglu_fwd_kernel, backend)(x, wg, wu)
    return y, (x, wg, wu, a, u)


def _swiglu2d_bwd(backend, res, g):
    return tuple(make("swiglu_bwd", _swiglu_bwd_kernel, backend)(*res, g))


_swiglu2d.defvjp(_swiglu2d_fwd, _swiglu2d_bwd)


def swiglu(x, w_gate, w_up, *, backend: str = "sim"):
    """``silu(x @ w_gate) * (x @ w_up)``; x (..., K), weights (K, F). Residuals: x, the weights and the
    two pre-activations (the products are not recomputed in the backward kernel)."""
    check_backend("swiglu", backend)
    check_float("swiglu", x=x, w_gate=w_gate, w_up=w_up)
    if x.ndim == 0 or w_gate.ndim != 2 or w_gate.shape != w_up.shape or x.shape[-1] != w_gate.shape[0]:
        raise PtoShapeError(f"pj.nn.swiglu: x {x.shape}, w_gate {w_gate.shape}, w_up {w_up.shape}: expected "
                            "(..., K), (K, F), (K, F)")
    if x.shape[-1] == 0:
        raise PtoShapeError(f"pj.nn.swiglu: x {x.shape} and w_gate {w_gate.shape} contract over an empty K; the "
                            "products need one input feature at least")
    lead = x.shape[:-1]
    y = _swiglu2d(*vary_alike(x.reshape(-1, x.shape[-1]), w_gate, w_up), backend)
    return y.reshape(*lead, w_gate.shape[1])
