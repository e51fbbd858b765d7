"""Causal flash attention: a forward kernel that saves the log-sum-exp and a backward kernel that
recomputes the score tiles block by block. Both loop over KV blocks with ``jax.lax.fori_loop`` and
``jax.lax.dynamic_slice`` (kept as loops by the lowering): no (seq x seq) matrix ever lives in GM —
the largest intermediate is one (heads, seq, block) score tile."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._jax import vary_alike
from ..errors import PtoArgumentError, PtoCapacityError, PtoShapeError
from ..lowering import tile
from ._common import F32, check_backend, check_float, check_static, check_static_dims, is_symbolic, make, matmul_f32

FRACTAL = 16               # KV rows per loop step come in multiples of the 16-row fractal
MAX_BLOCK = 512            # (16, 512) fp32 score tiles: a fused program's few live ones stay inside the UB
SCORE_BYTES = 64 << 20     # the (heads, seq, block) fp32 score tile in GM stays under this: a third of the
                           # A3's 192 MiB L2, so pricing its reads as L2 hits (the cost model's default) holds
SYMBOLIC_BLOCK = 128       # the default block of a sequence length known only at run time (jax.export)
_NEG = -1e30               # the causal mask's score: finite, so that exp(-1e30 - m) is 0 and never NaN


def default_block(heads: int, seq: int) -> int:
    """KV rows per loop step: the whole (padded) sequence up to :data:`MAX_BLOCK` rows, fewer where the
    (heads, seq, block) fp32 score tile would pass :data:`SCORE_BYTES`. Every step is a chain of
    dependent block calls, so few long steps beat many short ones on the chip and on the host
    (causal (4, 1024, 64) on the A3: 19 ms forward + backward with 16 rows, 1.2 ms with 512).
    A ``jax.export`` symbolic ``seq`` takes :data:`SYMBOLIC_BLOCK` rows; symbolic ``heads`` alone, the
    padded sequence up to :data:`MAX_BLOCK`."""
    if is_symbolic(seq):             # known at run time: a block that pads a short sequence little
        return SYMBOLIC_BLOCK
    padded = -(-seq // FRACTAL) * FRACTAL
    if is_symbolic(heads):           # the score tile's bytes unknown: the cap, as at few heads
        return max(FRACTAL, min(MAX_BLOCK, padded))
    fit = SCORE_BYTES // (4 * max(1, heads * seq)) // FRACTAL * FRACTAL
    return max(FRACTAL, min(MAX_BLOCK, padded, fit))


def _vec(d):
    """The vector tile of the (H, S, D) tensors and the (H, S) ones beside them: ``d`` rounded up to 16
    elements, so that on an (H, S) tensor, where it tiles S, a row is whole 32-byte blocks in any dtype."""
    return (16, -(-d // 16) * 16)


def _padded(x, sp):
    s = x.shape[1]
    if is_symbolic(sp - s):           # a run-time amount: zeros of it joined on (a pad takes static edges)
        return jnp.concatenate([x, jnp.zeros((x.shape[0], sp - s, x.shape[2]), x.dtype)], axis=1)
    return x if sp == s else jnp.pad(x, ((0, 0), (0, sp - s), (0, 0)))


def _kv_block(kp, vp, j, block):
    """Rows ``[j*block, (j+1)*block)`` of the padded K and V."""
    h, _, d = kp.shape
    return (jax.lax.dynamic_slice(kp, (0, j * block, 0), (h, block, d)),
            jax.lax.dynamic_slice(vp, (0, j * block, 0), (h, block, d)))


def _scores(q, kj, j, block, scale):
    """The (H, S, block) score tile of KV block ``j``, causally masked (padding rows lie past every query)."""
    h, s, d = q.shape
    st = matmul_f32(q, kj, transpose_b=True)
    with tile(vec=(16, block)):
        return jnp.where(_visible(s, j, block)[None], st * scale, _NEG)


def _visible(s, j, block):
    """The (S, block) causal mask of KV block ``j``: key ``j*block + c`` <= query ``r``."""
    if is_symbolic(s):                 # the query rows' iota made on the cores
        rows = jax.lax.broadcasted_iota(jnp.int32, (s, block), 0) - np.arange(block, dtype=np.int32)[None, :]
    else:
        rows = np.arange(s, dtype=np.int32)[:, None] - np.arange(block, dtype=np.int32)[None, :]
    return rows >= j * block


def _count(nb):
    """The loop's trip count: an int, or a traced one where the sequence length is symbolic."""
    return jnp.asarray(nb, jnp.int32) if is_symbolic(nb) else nb


def _fa_fwd_kernel(q, k, v, *, block):
    h, s, d = q.shape
    nb = -(-s // block)
    kp, vp = _padded(k, nb * block), _padded(v, nb * block)
    scale = float(1.0 / np.sqrt(d))

    def step(j, carry):
        m, l, acc = carry
        kj, vj = _kv_block(kp, vp, j, block)
        with jax.named_scope("QK"):
            st = _scores(q, kj, j, block, scale)
        with tile(vec=(16, block)), jax.named_scope("OnlineSoftmax"):
            m2 = jnp.maximum(m, jnp.max(st, axis=-1))
            p = jnp.exp(st - m2[..., None])
            corr = jnp.exp(m - m2)
            l2 = l * corr + jnp.sum(p, axis=-1)
        with jax.named_scope("PV"):
            pv = matmul_f32(p.astype(v.dtype), vj)
        with tile(vec=_vec(d)):
            acc2 = acc * corr[..., None] + pv
        return m2, l2, acc2

    with tile(vec=_vec(d)):
        m0 = jnp.full((h, s), _NEG, F32)
        l0 = jnp.zeros((h, s), F32)
        a0 = jnp.zeros((h, s, d), F32)
    m, l, acc = jax.lax.fori_loop(0, _count(nb), step, (m0, l0, a0))
    with tile(vec=_vec(d)), jax.named_scope("Normalize"):
        o = acc / l[..., None]
        lse = m + jnp.log(l)
        return o.astype(q.dtype), lse


def _fa_bwd_kernel(q, k, v, o, lse, do, *, block):
    h, s, d = q.shape
    nb = -(-s // block)
    sp = nb * block
    kp, vp = _padded(k, sp), _padded(v, sp)
    scale = float(1.0 / np.sqrt(d))
    with tile(vec=_vec(d)), jax.named_scope("Delta"):
        delta = jnp.sum(do.astype(F32) * o.astype(F32), axis=-1)      # rowsum(dO * O), (H, S)

    def step(j, carry):
        dq, dk, dv = carry
        kj, vj = _kv_block(kp, vp, j, block)
        with jax.named_scope("QK"):
            st = _scores(q, kj, j, block, scale)
        with tile(vec=(16, block)), jax.named_scope("P"):
            p = jnp.exp(st - lse[..., None])
            p_in = p.astype(q.dtype)
        with jax.named_scope("dV"):
            dvj = matmul_f32(p_in, do, transpose_a=True)                          # (H, block, D)
        with jax.named_scope("dP"):
            dp = matmul_f32(do, vj, transpose_b=True)                             # (H, S, block)
        with tile(vec=(16, block)), jax.named_scope("dS"):    # masked: 0, as through jnp.where (NaN rows too)
            ds = jnp.where(_visible(q.shape[1], j, block)[None], p * (dp - delta[..., None]) * scale, 0.0)
            ds = ds.astype(q.dtype)
        with jax.named_scope("dQ"):
            dq2 = dq + matmul_f32(ds, kj)
        with jax.named_scope("dK"):
            dkj = matmul_f32(ds, q, transpose_a=True)
        dk = jax.lax.dynamic_update_slice(dk, dkj, (0, j * block, 0))
        dv = jax.lax.dynamic_update_slice(dv, dvj, (0, j * block, 0))
        return dq2, dk, dv

    with tile(vec=_vec(d)):
        dq0 = jnp.zeros((h, s, d), F32)
        dkv0 = jnp.zeros((h, sp, d), F32)
    dq, dk, dv = jax.lax.fori_loop(0, _count(nb), step, (dq0, dkv0, dkv0))
    with tile(vec=_vec(d)):
        return dq.astype(q.dtype), dk[:, :s].astype(k.dtype), dv[:, :s].astype(v.dtype)


def _run(name, fn, backend, block, *args):
    """The kernel ``name`` with KV blocks of ``block`` rows on ``args``; a block whose tiles overfill
    the UB or pass a tile's columns is named as the knob to turn (the vector tiles are (16, block))."""
    try:
        return make(name, fn, backend, block=block)(*args)
    except PtoCapacityError as err:
        raise PtoCapacityError(f"pj.nn.flash_attention: block {block} needs more on-chip memory than the core "
                               f"has; use a smaller block ({err})") from None
    except PtoArgumentError as err:
        if not str(err).startswith("pj.tile:"):
            raise
        raise PtoArgumentError(f"pj.nn.flash_attention: block {block} makes (16, {block}) vector tiles wider than "
                               f"the core's; use a smaller block ({err})") from None


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _fa3(q, k, v, block, backend):
    return _run("flash_attention_fwd", _fa_fwd_kernel, backend, block, q, k, v)[0]


def _fa3_fwd(q, k, v, block, backend):
    o, lse = _run("flash_attention_fwd", _fa_fwd_kernel, backend, block, q, k, v)
    return o, (q, k, v, o, lse)


def _fa3_bwd(block, backend, res, do):
    return tuple(_run("flash_attention_bwd", _fa_bwd_kernel, backend, block, *res, do))


_fa3.defvjp(_fa3_fwd, _fa3_bwd)


def flash_attention(q, k, v, *, block: int | None = None, backend: str = "sim"):
    """Causal ``softmax(q kᵀ / sqrt(d)) v`` with shapes (heads, seq, dim) or (batch, heads, seq, dim).

    The forward kernel runs an online softmax over KV blocks of ``block`` rows and saves the per-row
    fp32 log-sum-exp; residuals are q, k, v, the output and that log-sum-exp (O(seq) per head). The
    backward kernel recomputes each block's scores and probabilities from the log-sum-exp.
    ``block`` (default :func:`default_block`) need not divide ``seq`` (K and V are zero-padded and the
    padding is masked); a larger one is cut, as the default, to ``seq`` padded to 16 rows."""
    check_backend("flash_attention", backend)
    check_float("flash_attention", q=q, k=k, v=v)
    if q.ndim not in (3, 4) or q.shape != k.shape or q.shape != v.shape:
        raise PtoShapeError(f"pj.nn.flash_attention: q {q.shape}, k {k.shape}, v {v.shape}: expected equal shapes "
                            "(heads, seq, dim) or (batch, heads, seq, dim)")
    shape = q.shape
    if 0 in shape:
        raise PtoShapeError(f"pj.nn.flash_attention: q, k, v {shape} are empty; attention needs a query, a key "
                            "and a feature at least")
    check_static_dims("flash_attention", q=(q, (-1,)))
    q3, k3, v3 = (x.reshape(-1, *shape[-2:]) for x in (q, k, v))
    check_static("flash_attention", "block", block, "int")
    if block is None:
        block = default_block(q3.shape[0], q3.shape[1])
    elif not isinstance(block, (int, np.integer)) or isinstance(block, bool) or block < 1:
        raise PtoArgumentError(f"pj.nn.flash_attention: block {block!r}: the KV rows per loop step must be a "
                               "positive int")
    if not is_symbolic(q3.shape[1]):        # a symbolic sequence keeps the block asked for
        block = min(int(block), -(-q3.shape[1] // FRACTAL) * FRACTAL)
    block = int(block)
    return _fa3(*vary_alike(q3, k3, v3), block, backend).reshape(shape)
