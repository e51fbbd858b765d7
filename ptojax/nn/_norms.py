"""RMSNorm and LayerNorm over the last axis: forward and backward ptojax kernels."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._jax import vary_alike
from ..errors import PtoShapeError
from ..lowering import tile
from ._common import (F32, check_backend, check_eps, check_float, check_static_dims, col_reduce_tile, dtype_of,
                      make, row_tile)


def _colsum(x):
    with tile(vec=col_reduce_tile()):
        return jnp.sum(x, axis=0)


# ------------------------------------------------------------------------------------- rms_norm
def _rms_fwd_kernel(x, gamma, *, eps):
    with tile(vec=row_tile(x.shape[-1])), jax.named_scope("RMSNorm"):
        xf = x.astype(F32)
        rstd = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1) + eps)
        y = xf * rstd[:, None] * gamma.astype(F32)
        return y.astype(x.dtype), rstd


def _rms_bwd_kernel(x, gamma, rstd, g):
    with tile(vec=row_tile(x.shape[-1])), jax.named_scope("RMSNorm_dx"):
        xhat = x.astype(F32) * rstd[:, None]
        gf = g.astype(F32)
        dxhat = gf * gamma.astype(F32)
        dx = rstd[:, None] * (dxhat - xhat * jnp.mean(dxhat * xhat, axis=-1)[:, None])
        gx = gf * xhat
    with jax.named_scope("RMSNorm_dgamma"):
        dgamma = _colsum(gx)
    with tile(vec=row_tile(x.shape[-1])):
        return dx.astype(x.dtype), dgamma.astype(gamma.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _rms2d(x, gamma, eps, backend):
    return make("rms_norm_fwd", _rms_fwd_kernel, backend, eps=eps)(x, gamma)[0]


def _rms2d_fwd(x, gamma, eps, backend):
    y, rstd = make("rms_norm_fwd", _rms_fwd_kernel, backend, eps=eps)(x, gamma)
    return y, (x, gamma, rstd)


def _rms2d_bwd(eps, backend, res, g):
    return tuple(make("rms_norm_bwd", _rms_bwd_kernel, backend)(*res, g))


_rms2d.defvjp(_rms2d_fwd, _rms2d_bwd)


def _ones(op, x):
    """The scale of a norm given none: ones of ``x``'s last dim and dtype."""
    return jnp.ones(np.shape(x)[-1:], dtype_of(op, "x", x))


def _rows(op, x, *params):
    if np.ndim(x):
        check_static_dims(op, x=(x, (-1,)))
    if np.ndim(x) == 0 or x.shape[-1] == 0:
        raise PtoShapeError(f"pj.nn.{op}: x {np.shape(x)} has no features to normalise; the last axis needs one "
                            "element at least")
    for p in params:
        if p.shape != (x.shape[-1],):
            raise PtoShapeError(f"pj.nn.{op}: parameter shape {p.shape} does not match x {x.shape}'s last dim")
    return x.reshape(-1, x.shape[-1])


def rms_norm(x, gamma, eps: float = 1e-6, *, backend: str = "sim"):
    """``x * rsqrt(mean(x², -1) + eps) * gamma`` in fp32, rounded once (``gamma`` None: ones). Residuals:
    x, gamma and the per-row fp32 ``rstd``."""
    check_backend("rms_norm", backend)
    gamma = _ones("rms_norm", x) if gamma is None else gamma
    check_float("rms_norm", x=x, gamma=gamma)
    return _rms2d(*vary_alike(_rows("rms_norm", x, gamma), gamma), check_eps("rms_norm", eps),
                  backend).reshape(x.shape)


# ----------------------------------------------------------------------------------- layer_norm
def _ln_fwd_kernel(x, gamma, beta, *, eps):
    with tile(vec=row_tile(x.shape[-1])), jax.named_scope("LayerNorm"):
        xf = x.astype(F32)
        mean = jnp.mean(xf, axis=-1)
        xc = xf - mean[:, None]
        rstd = jax.lax.rsqrt(jnp.mean(xc * xc, axis=-1) + eps)
        y = xc * rstd[:, None] * gamma.astype(F32) + beta.astype(F32)
        return y.astype(x.dtype), mean, rstd


def _ln_bwd_kernel(x, gamma, mean, rstd, g):
    with tile(vec=row_tile(x.shape[-1])), jax.named_scope("LayerNorm_dx"):
        xhat = (x.astype(F32) - mean[:, None]) * rstd[:, None]
        gf = g.astype(F32)
        dxhat = gf * gamma.astype(F32)
        dx = rstd[:, None] * (dxhat - jnp.mean(dxhat, axis=-1)[:, None]
                              - xhat * jnp.mean(dxhat * xhat, axis=-1)[:, None])
        gx = gf * xhat
    with jax.named_scope("LayerNorm_dparams"):
        dgamma, dbeta = _colsum(gx), _colsum(gf)
    with tile(vec=row_tile(x.shape[-1])):
        return dx.astype(x.dtype), dgamma.astype(gamma.dtype), dbeta.astype(gamma.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _ln2d(x, gamma, beta, eps, backend):
    return make("layer_norm_fwd", _ln_fwd_kernel, backend, eps=eps)(x, gamma, beta)[0]


def _ln2d_fwd(x, gamma, beta, eps, backend):
    y, mean, rstd = make("layer_norm_fwd", _ln_fwd_kernel, backend, eps=eps)(x, gamma, beta)
    return y, (x, gamma, mean, rstd)


def _ln2d_bwd(eps, backend, res, g):
    return tuple(make("layer_norm_bwd", _ln_bwd_kernel, backend)(*res, g))


_ln2d.defvjp(_ln2d_fwd, _ln2d_bwd)


def layer_norm(x, gamma, beta, eps: float = 1e-5, *, backend: str = "sim"):
    """``(x - mean) * rsqrt(var + eps) * gamma + beta`` over the last axis, in fp32, rounded once
    (``gamma`` / ``beta`` None: ones / zeros). Residuals: x, gamma and the per-row fp32 mean and rstd."""
    check_backend("layer_norm", backend)
    gamma = _ones("layer_norm", x) if gamma is None else gamma
    beta = jnp.zeros_like(_ones("layer_norm", x)) if beta is None else beta
    check_float("layer_norm", x=x, gamma=gamma, beta=beta)
    return _ln2d(*vary_alike(_rows("layer_norm", x, gamma, beta), gamma, beta),
                 check_eps("layer_norm", eps), backend).reshape(x.shape)
