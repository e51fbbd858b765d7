"""Softmax and softmax cross-entropy: forward and backward ptojax kernels."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import PtoArgumentError, PtoDtypeError, PtoShapeError
from ..lowering import tile
from ._common import (F32, WIDE_COLS, check_axis, check_backend, check_float, check_static_dims, is_symbolic, make,
                      row_tile)


# -------------------------------------------------------------------------------------- softmax
def _softmax_fwd_kernel(x):
    with tile(vec=row_tile(x.shape[-1])), jax.named_scope("Softmax"):
        xf = x.astype(F32)
        e = jnp.exp(xf - jnp.max(xf, axis=-1, keepdims=True))
        return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(x.dtype)


def _softmax_bwd_kernel(y, g):
    with tile(vec=row_tile(y.shape[-1])), jax.named_scope("Softmax_grad"):
        yf, gf = y.astype(F32), g.astype(F32)
        return (yf * (gf - jnp.sum(gf * yf, axis=-1, keepdims=True))).astype(y.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _softmax2d(x, backend):
    return make("softmax_fwd", _softmax_fwd_kernel, backend)(x)


def _softmax2d_fwd(x, backend):
    y = make("softmax_fwd", _softmax_fwd_kernel, backend)(x)
    return y, y                               # the output alone


def _softmax2d_bwd(backend, y, g):
    return (make("softmax_bwd", _softmax_bwd_kernel, backend)(y, g),)


_softmax2d.defvjp(_softmax2d_fwd, _softmax2d_bwd)


def softmax(x, axis: int = -1, *, backend: str = "sim"):
    """Softmax along ``axis`` (fp32 inside, rounded once). Residual: the output."""
    check_backend("softmax", backend)
    check_float("softmax", x=x)
    ndim = np.ndim(x)
    axis = check_axis("softmax", axis, ndim)
    check_static_dims("softmax", x=(x, (axis,)))
    if np.size(x) == 0:
        return jnp.asarray(x)          # nothing to normalise (as jax.nn.softmax)
    xt = jnp.moveaxis(x, axis, -1)
    y = _softmax2d(xt.reshape(-1, xt.shape[-1]), backend).reshape(xt.shape)
    return jnp.moveaxis(y, -1, axis)


# ------------------------------------------------------------------------ softmax cross-entropy
def _onehot(labels, c):
    return labels[:, None] == np.arange(c, dtype=np.int32)[None, :]


def _xent_fwd_kernel(logits, labels):
    n, c = logits.shape
    with tile(vec=row_tile(c)), jax.named_scope("CrossEntropy"):
        x = logits.astype(F32)
        m = jnp.max(x, axis=-1)
        m = jnp.where(jnp.isfinite(m), m, 0.0)        # as jax.nn.logsumexp: a +inf logit makes lse +inf, not NaN
        lse = m + jnp.log(jnp.sum(jnp.exp(x - m[:, None]), axis=-1))
        picked = jnp.sum(jnp.where(_onehot(labels, c), x, 0.0), axis=-1)
    with tile(vec=(WIDE_COLS if is_symbolic(n) else min(max(n, 1), WIDE_COLS),)), jax.named_scope("Mean"):
        # (1,), not 0-d: the runtime keeps 0-d ops on the orchestrator, which cannot read GM results
        loss = jnp.sum(lse - picked, keepdims=True) * _inverse(n)
        return loss, lse


def _inverse(n):
    """``1 / n`` of the batch rows: a Python float, or a traced one where ``n`` is symbolic (known at run
    time: a ``jax.export`` batch)."""
    return 1.0 / jnp.asarray(n, F32) if is_symbolic(n) else 1.0 / n


def _xent_bwd_kernel(logits, labels, lse, g):
    n, c = logits.shape
    with tile(vec=row_tile(c)), jax.named_scope("CrossEntropy_grad"):
        p = jnp.exp(logits.astype(F32) - lse[:, None])
        d = (p - jnp.where(_onehot(labels, c), 1.0, 0.0)) * (g * _inverse(n))     # g: (1, 1)
        return d.astype(logits.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _xent(logits, labels, backend):
    return make("xent_fwd", _xent_fwd_kernel, backend)(logits, labels)[0].reshape(())


def _xent_fwd(logits, labels, backend):
    loss, lse = make("xent_fwd", _xent_fwd_kernel, backend)(logits, labels)
    return loss.reshape(()), (logits, labels, lse)


def _xent_bwd(backend, res, g):
    logits, labels, lse = res
    d = make("xent_bwd", _xent_bwd_kernel, backend)(logits, labels, lse, g.astype(jnp.float32).reshape(1, 1))
    return d, None


_xent.defvjp(_xent_fwd, _xent_bwd)


def softmax_cross_entropy(logits, labels, *, backend: str = "sim"):
    """Mean over the batch of ``logsumexp(logits) - logits[label]``; logits (..., C), labels int32 of the
    logits' leading dims (``logits.shape[:-1]``: (N,) for (N, C)). Returns a float32 scalar. Residuals: logits, labels and the
    per-row fp32 log-sum-exp."""
    check_backend("softmax_cross_entropy", backend)
    check_float("softmax_cross_entropy", logits=logits)
    labels = jnp.asarray(labels)
    if labels.dtype != np.int32:
        raise PtoDtypeError(f"pj.nn.softmax_cross_entropy: labels have dtype {labels.dtype}; expected int32")
    if labels.shape != logits.shape[:-1]:
        raise PtoShapeError(f"pj.nn.softmax_cross_entropy: labels {labels.shape} do not match logits {logits.shape}: "
                            f"labels take the logits' leading dims, {logits.shape[:-1]}")
    if logits.ndim == 0 or 0 in logits.shape:
        raise PtoShapeError(f"pj.nn.softmax_cross_entropy: logits {logits.shape} hold no row of classes; the mean "
                            "over the batch needs one row and one class at least")
    check_static_dims("softmax_cross_entropy", logits=(logits, (-1,)))
    c = logits.shape[-1]
    known = None if isinstance(labels, jax.core.Tracer) else np.asarray(labels)   # checked on the host
    if known is not None and not ((0 <= known) & (known < c)).all():
        bad = known[(known < 0) | (known >= c)]
        raise PtoArgumentError(f"pj.nn.softmax_cross_entropy: labels {sorted(set(bad.tolist()))[:8]} are outside "
                               f"[0, {c}) (a traced label out of range picks no logit: its row's loss is the "
                               "log-sum-exp alone)")
    return _xent(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), backend)
