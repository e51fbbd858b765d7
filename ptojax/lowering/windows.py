"""Windows of a tensor at the Tensor level: ``lax.pad`` (edge, negative and interior padding), strided
slices, and ``lax.reduce_window`` by ``lax.add`` / ``max`` / ``min`` (what ``avg_pool`` / ``max_pool`` and
the average pool's gradient emit), all as views, reshapes and pads of the operand; a max pool's gradient
and convolutions are refused with the rewrites that do translate.
"""
from __future__ import annotations

import numpy as np

from .. import ops
from .origin import unsupported
from .reduce import identity
from .walk import is_const


def strided(x, start, limit, strides):
    """``x[lo:hi:k]`` per dim: along a dim of stride ``k``, the rows of ``k`` from the one holding
    ``lo`` (padded where the last row runs past the dim), reshaped to (rows, ``k``), and the column of
    ``lo`` in its row (``x[..., 1::2]``: column 1 of ``x`` as (D/2, 2) pairs)."""
    for d, (lo, hi, k) in enumerate(zip(start, limit, strides)):
        n = x.shape[d]
        count = max(0, -(-(hi - lo) // k))
        first = lo - lo % k
        if k == 1 or count == 0:
            x = ops.view(x, [hi - lo if a == d else m for a, m in enumerate(x.shape)],
                         [lo if a == d else 0 for a in range(x.ndim)])
            continue
        end = min(n, first + k * count)
        x = ops.view(x, [end - first if a == d else m for a, m in enumerate(x.shape)],
                     [first if a == d else 0 for a in range(x.ndim)])
        if end - first < k * count:
            x = ops.pad(x, [(0, k * count - (end - first)) if a == d else (0, 0) for a in range(x.ndim)],
                        False if x.dtype == np.bool_ else 0)
        pairs = x.shape[:d] + (count, k) + x.shape[d + 1:]
        x = ops.view(ops.reshape(x, pairs), pairs[:d + 1] + (1,) + pairs[d + 2:],
                     [lo % k if a == d + 1 else 0 for a in range(len(pairs))])
        x = ops.reshape(x, pairs[:d + 1] + pairs[d + 2:])
    return x


def _interleave(x, axis, k, value):
    """``x`` with ``k`` copies of ``value`` between neighbours along ``axis``: each entry as a (1,) row
    padded to ``k + 1`` with ``value``, the rows merged, the trailing fill dropped."""
    n = x.shape[axis]
    if k == 0 or n <= 1:
        return x
    rows = x.shape[:axis] + (n, 1) + x.shape[axis + 1:]
    filled = ops.pad(ops.reshape(x, rows), [(0, k) if d == axis + 1 else (0, 0) for d in range(len(rows))], value)
    merged = ops.reshape(filled, x.shape[:axis] + (n * (k + 1),) + x.shape[axis + 1:])
    return ops.view(merged, [n + (n - 1) * k if d == axis else m for d, m in enumerate(x.shape)], [0] * x.ndim)


def padded(x, config, value):
    """``lax.pad(x, value, config)`` for a constant ``value``: interior padding first, then the edges; a
    negative edge (autodiff's shifts) cuts the interleaved operand. Padding that spreads the last dim's
    entries ``k`` apart from ``j`` (``(j, k - 1 - j, k - 1)``: the transpose of ``x[..., j::k]``) is one pad of
    each entry to ``k`` (an interleave with the fill, which the tile pass makes in UB for ``k`` 2 or 4)."""
    fill = np.asarray(value).item()
    *rest, (lo, hi, interior) = config
    k = interior + 1
    if x.ndim and k > 1 and lo >= 0 and hi >= 0 and lo + hi == interior and not any(a or b or c for a, b, c in rest):
        n = x.shape[-1]
        spread = ops.pad(ops.reshape(x, (*x.shape, 1)), [(0, 0)] * x.ndim + [(lo, hi)], fill)
        return ops.reshape(spread, (*x.shape[:-1], n * k))
    for d, (_, _, interior) in enumerate(config):
        x = _interleave(x, d, int(interior), fill)
    if any(lo < 0 or hi < 0 for lo, hi, _ in config):
        start = [max(-int(lo), 0) for lo, _, _ in config]
        x = ops.view(x, [n - a - max(-int(hi), 0) for n, a, (_, hi, _) in zip(x.shape, start, config)], start)
    return ops.pad(x, [(max(int(lo), 0), max(int(hi), 0)) for lo, hi, _ in config], fill)


def pad(eqn, x, value):
    """``lax.pad`` (``jnp.pad``, autodiff's shifts, ``lax.associative_scan``'s interleaving)."""
    if not is_const(value):
        raise unsupported(eqn, "is only translated with a constant padding value, not one computed in the "
                               "kernel: pad with a constant and jnp.where the computed value into the edges")
    shape = eqn.outvars[0].aval.shape
    if any(isinstance(n, int) and n == 0 for n in (*x.shape, *shape)):   # nothing of x survives: the fill
        return ops.expand(np.asarray(value, x.dtype), shape)
    return padded(x, eqn.params["padding_config"], value)


_WINDOW = {"reduce_window_sum": (ops.add, ops.sum, "sum"), "reduce_window_max": (ops.maximum, ops.amax, "amax"),
           "reduce_window_min": (ops.minimum, ops.amin, "amin")}


def _windows(eqn, x, kind):
    """The windows of ``eqn`` over ``x`` reduced by ``kind`` (a key of :data:`_WINDOW`): the operand dilated
    and padded with the reduction's identity (``padded``: it adds nothing, as XLA skips holes and edges),
    then reduced one dim at a time (the reduction is separable): a dim of non-overlapping windows (stride =
    window) as a reshape to (windows, window) and a reduction of the window axis, any other as its
    window's offsets — strided slices — combined pairwise."""
    combine, reduce, like = _WINDOW[kind]
    p, shape = eqn.params, eqn.outvars[0].aval.shape
    fill = np.asarray(identity(like, x.dtype), x.dtype)
    if any(isinstance(n, int) and n == 0 for n in shape):      # no window fits: an empty result
        return ops.expand(fill, shape)
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(p["padding"], p["base_dilation"])]
    if any(lo or hi or interior for lo, hi, interior in config):
        x = padded(x, config, fill)
    for d, (w, s, wd) in enumerate(zip(p["window_dimensions"], p["window_strides"], p["window_dilation"])):
        out = shape[d]
        if w == 1 and s == 1:
            continue
        if s == w and wd == 1:
            kept = ops.view(x, [out * w if a == d else m for a, m in enumerate(x.shape)], [0] * x.ndim)
            x = reduce(ops.reshape(kept, x.shape[:d] + (out, w) + x.shape[d + 1:]), d + 1)
            continue
        acc = None
        for j in range(w):
            lo = j * wd
            cut = strided(x, [lo if a == d else 0 for a in range(x.ndim)],
                          [lo + (out - 1) * s + 1 if a == d else m for a, m in enumerate(x.shape)],
                          [s if a == d else 1 for a in range(x.ndim)])
            acc = cut if acc is None else combine(acc, cut)
        x = acc
    return x


def as_bytes(rule):
    """``rule`` with bool operands as int8 (False < True; the vector units order numbers only), its
    results of them cast back to bool."""
    def on(eqn, *operands):
        if not any(_is_bool(x) for x in operands):
            return rule(eqn, *operands)
        outs = rule(eqn, *[(np.asarray(x, np.int8) if is_const(x) else ops.cast(x, np.int8)) if _is_bool(x) else x
                           for x in operands])
        listed = isinstance(outs, list)
        back = [ops.cast(y, np.bool_) if y.dtype == np.int8 else y for y in (outs if listed else [outs])]
        return back if listed else back[0]
    return on


def _is_bool(x) -> bool:
    return np.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype) == np.bool_


@as_bytes
def reduce_window(eqn, x):
    """``reduce_window_sum`` / ``max`` / ``min``: ``lax.reduce_window`` by ``lax.add`` / ``max`` / ``min``
    from its identity (what ``avg_pool`` / ``max_pool`` and their gradients emit)."""
    return _windows(eqn, x, eqn.primitive.name)


_MONOIDS = {"add": "reduce_window_sum", "max": "reduce_window_max", "min": "reduce_window_min"}


@as_bytes
def reduce_window_general(eqn, x, init):
    """``lax.reduce_window`` by ``lax.add`` / ``max`` / ``min`` from another init value (or a typed one,
    ``jnp.float16(0)``, which JAX does not recognise as the identity): the windows reduced as from the
    identity, then combined once with the init value, as XLA applies it."""
    body = eqn.params["jaxpr"]
    body = getattr(body, "jaxpr", body)
    step = body.eqns[0] if len(body.eqns) == 1 else None
    if (eqn.params["consts"] or step is None or step.primitive.name not in _MONOIDS
            or set(step.invars) != set(body.invars) or list(body.outvars) != list(step.outvars)):
        raise unsupported(eqn, "(lax.reduce_window by a computation other than lax.add / lax.max / lax.min) has no "
                               "ptojax translation: reduce the window's strided slices (x[i::s]) with that "
                               "computation instead")
    kind = _MONOIDS[step.primitive.name]
    out = _windows(eqn, x, kind)                  # (a list: the primitive has one result per operand)
    if is_const(init) and np.asarray(init) == identity(_WINDOW[kind][2], x.dtype):
        return [out]
    return [_WINDOW[kind][0](out, np.asarray(init, x.dtype) if is_const(init) else ops.expand(init, out.shape))]


def pool_gradient(eqn, *_):
    """The gradient of a max / min ``lax.reduce_window`` (``select_and_scatter_add``): refused, with the
    rewrite whose gradient translates."""
    raise unsupported(eqn, f"(the gradient of a max / min pool: windows {tuple(eqn.params['window_dimensions'])}, "
                           f"strides {tuple(eqn.params['window_strides'])}) has no ptojax translation; write the pool "
                           "instead as a reshape and jnp.max / jnp.min (non-overlapping windows: "
                           "x.reshape(n, h // 2, 2, w // 2, 2).max(axis=(2, 4))) or as jnp.maximum / jnp.minimum of "
                           "the window's strided slices (x[:, i:i + 2 * m:2, j:j + 2 * m:2]), whose gradients "
                           "translate")


def conv(eqn, lhs, rhs):
    """``lax.conv_general_dilated`` (``jnp.convolve``, ``conv_general_dilated_patches``): refused, with the
    rewrites that translate."""
    raise unsupported(eqn, f"(a convolution of {tuple(lhs.shape)} by a window of {tuple(rhs.shape)}, "
                           f"feature_group_count {eqn.params['feature_group_count']}) has no ptojax translation; "
                           "write it with slices instead: a short 1-D or depthwise conv as a sum of shifted "
                           "slices times weights (xp = jnp.pad(x, ((K - 1, 0), (0, 0))); "
                           "sum(xp[j:j + T] * w[j] for j in range(K))), any other as an im2col — the K shifted "
                           "slices stacked and reshaped to (T, K * C_in) — then a matmul by the weights reshaped "
                           "to (K * C_in, C_out)")


RULES = {"pad": pad, **{name: reduce_window for name in _WINDOW}, "reduce_window": reduce_window_general,
         "select_and_scatter_add": pool_gradient, "conv_general_dilated": conv}
