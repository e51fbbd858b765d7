"""Plain-JAX references of DeepSeek-V3.2-Exp's indexer path, written from the published math.

No ``pj.ops`` here: these are the goldens the kernels in :mod:`.kernels` are checked against.
Sources (see ``shared/reference/deepseek_v32_and_ascend_hw.md`` §1-2):

- Indexer Prolog (CANN ``lightning_indexer_prolog``, W8A8 Q / C8 key cache), dtype chain of the
  PyPTO golden ``deepseekv32_lightning_indexer_prolog_quant.py``::

    q, q_scale = DynamicQuant(Hadamard(RoPE(DeQuant(q_norm_i8 @ wq_b_i8))))      # per token-head
    k, k_scale = DynamicQuant(Hadamard(RoPE(LayerNorm(x @ wk))))                  # per token, then
                                                                                  # scattered into the paged cache
    weights    = fp16((x @ weights_proj) * 64^-0.5 * 128^-0.5)

  RoPE acts on the first 64 dims of a head and is NOT interleaved (rotate-half, i <-> i+32;
  the 2025-11-17 erratum); DynamicQuant: ``s = 127 / max|v|``, ``v8 = rint(v * s)``, dequant scale
  ``1 / s`` stored as fp16.
- Lightning Indexer, int8 variant (``quant_lightning_indexer``)::

    I[t, s] = k_scale[s] * sum_h w[t, h] * q_scale[t, h] * ReLU(q8[t, h] . k8[s])

  over the paged key cache (``PA_BSND``, block_table, actual_seq_lengths_key), causal
  ``sparse_mode=3`` (query i of S1 sees keys < S2 - (S1 - 1 - i)), then top-k positions sorted by
  score (stable: ties keep the lower position), padded with -1 where fewer keys are visible.
- Sparse attention (MLA absorbed mode, one latent KV head): softmax over the selected entries only.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

F32, BF16, F16 = jnp.float32, jnp.bfloat16, jnp.float16
ROPE_DIM = 64


def hadamard_matrix(n: int = 128, dtype=np.float32) -> np.ndarray:
    """Normalised Sylvester Hadamard matrix ``H_n / sqrt(n)`` (symmetric, orthogonal)."""
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    assert h.shape[0] == n, "n must be a power of two"
    return (h / math.sqrt(n)).astype(dtype)


def rope_cos_sin(positions, dim: int = ROPE_DIM, theta: float = 10000.0):
    """Rotate-half (non-interleaved) RoPE tables ``cos, sin`` of shape ``positions.shape + (dim,)``."""
    inv = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    ang = np.asarray(positions, np.float64)[..., None] * inv
    ang = np.concatenate([ang, ang], -1)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def rope(x, cos, sin):
    """Non-interleaved RoPE on the last axis: ``x * cos + rotate_half(x) * sin`` in float32."""
    x = x.astype(F32)
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos.astype(F32) + rotated * sin.astype(F32)


def rope_head(x, cos, sin, out_dtype):
    """RoPE on the first 64 dims of each head (the indexer's rope part comes first)."""
    r = rope(x[..., :ROPE_DIM], cos, sin).astype(out_dtype)
    return jnp.concatenate([r, x[..., ROPE_DIM:].astype(out_dtype)], axis=-1)


def dynamic_quant(v):
    """Per-row symmetric int8: ``s = 127 / max|v|``, ``rint(v * s)``; returns (int8, fp16 ``1/s``)."""
    v = v.astype(F32)
    amax = jnp.max(jnp.abs(v), axis=-1, keepdims=True)
    s = 127.0 / amax
    q = jnp.clip(jnp.round(v * s), -128, 127).astype(jnp.int8)
    return q, (1.0 / s).astype(F16)


def layer_norm(x, gamma, beta, eps):
    x = x.astype(F32)
    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), -1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * gamma.astype(F32) + beta.astype(F32)


def indexer_prolog(token_x, q_norm, q_norm_scale, wq_b, wq_b_scale, wk, weights_proj, ln_gamma_k, ln_beta_k,
                   cos_idx_rope, sin_idx_rope, hadamard_q, hadamard_k, idx_k_cache, idx_k_scale_cache,
                   idx_k_cache_index, layernorm_epsilon_k=1e-6, *, n_heads: int):
    """CANN ``npu_lightning_indexer_prolog`` (TND query, PA_BSND key cache).

    Shapes: token_x [T, h] bf16; q_norm [T, q_lora] int8; q_norm_scale [T, 1] f32; wq_b [q_lora, N*D]
    int8; wq_b_scale [N*D, 1] f32; wk [h, D] bf16; weights_proj [h, N] bf16; ln γ/β [D] bf16;
    cos/sin [T, 64] bf16; hadamard_q/k [D, D] bf16; idx_k_cache [blocks, bs, 1, D] int8;
    idx_k_scale_cache [blocks, bs, 1] fp16; idx_k_cache_index [T] int32 (flat slot).
    Returns ``(query [T, N, D] int8, query_scale [T, N] fp16, weights [T, N] fp16, idx_k_cache,
    idx_k_scale_cache)`` with the caches updated functionally.
    """
    t = token_x.shape[0]
    d = hadamard_q.shape[0]
    hi = jax.lax.Precision.HIGHEST
    # Q: W8A8 matmul (exact in int32), dequant per token and per channel, bf16
    acc = jnp.matmul(q_norm.astype(jnp.int32), wq_b.astype(jnp.int32))
    q = acc.astype(F32) * q_norm_scale.astype(F32) * wq_b_scale.astype(F32).reshape(1, -1)
    q = q.astype(BF16).reshape(t, n_heads, d)
    q = rope_head(q, cos_idx_rope[:, None, :], sin_idx_rope[:, None, :], BF16)
    q = jnp.matmul(q.astype(F32), hadamard_q.astype(F32), precision=hi).astype(BF16)
    query, query_scale = dynamic_quant(q)
    # K: bf16 linear, LayerNorm, RoPE, Hadamard, quant, scatter into the paged cache
    k = jnp.matmul(token_x.astype(F32), wk.astype(F32), precision=hi)
    k = layer_norm(k, ln_gamma_k, ln_beta_k, layernorm_epsilon_k).astype(BF16)
    k = rope_head(k, cos_idx_rope, sin_idx_rope, BF16)
    k = jnp.matmul(k.astype(F32), hadamard_k.astype(F32), precision=hi).astype(BF16)
    k8, k_scale = dynamic_quant(k)
    nb, bs = idx_k_cache.shape[:2]
    slots = jnp.asarray(idx_k_cache_index, jnp.int32)
    slots = jnp.where(slots < 0, nb * bs, slots)             # -1 (no slot): dropped, not the last row
    k_cache = jnp.asarray(idx_k_cache).reshape(nb * bs, d).at[slots].set(k8, mode="drop").reshape(idx_k_cache.shape)
    s_cache = jnp.asarray(idx_k_scale_cache).reshape(nb * bs).at[slots].set(k_scale[:, 0], mode="drop")
    # Weights: bf16 linear, scaled, fp16
    w = jnp.matmul(token_x.astype(F32), weights_proj.astype(F32), precision=hi).astype(BF16)
    weights = (w.astype(F32) * (n_heads ** -0.5) * (d ** -0.5)).astype(F16)
    return query, query_scale.reshape(t, n_heads), weights, k_cache, s_cache.reshape(idx_k_scale_cache.shape)


def paged_rows(cache, block_table, seq_len):
    """Logical rows ``[B, seq_len, ...]`` of a paged cache ``[blocks, bs, ...]`` (unused blocks -> 0)."""
    nb, bs = cache.shape[:2]
    pos = jnp.arange(seq_len)
    blocks = jnp.asarray(block_table)[:, pos // bs]                     # [B, S]
    slot = blocks * bs + pos % bs
    flat = cache.reshape((nb * bs,) + cache.shape[2:])
    return jnp.where((blocks >= 0).reshape(blocks.shape + (1,) * (flat.ndim - 1)),
                     flat[jnp.clip(slot, 0, nb * bs - 1)], 0)


def causal_visible(seq_lens_key, s1: int, s2: int):
    """``sparse_mode=3`` mask ``[B, S1, S2]``: query i sees key s iff s < len_b - (S1 - 1 - i)."""
    limit = jnp.asarray(seq_lens_key, jnp.int32)[:, None] - (s1 - 1 - jnp.arange(s1))[None, :]
    return jnp.arange(s2)[None, None, :] < limit[:, :, None]


def lightning_indexer_scores(query, key, weights, query_dequant_scale, key_dequant_scale, actual_seq_lengths_key,
                             block_table):
    """Index scores ``I [B, S1, S2]`` (float32; invisible positions -inf) of the int8 Lightning Indexer.

    query [T, N, D] int8 (T = B * S1, TND with equal S1 per batch); key [blocks, bs, 1, D] int8;
    weights, query_dequant_scale [T, N] fp16; key_dequant_scale [blocks, bs, 1] fp16;
    actual_seq_lengths_key [B] int32; block_table [B, max_blocks] int32.
    """
    b = block_table.shape[0]
    t, n, d = query.shape
    s1, s2 = t // b, block_table.shape[1] * key.shape[1]
    k8 = paged_rows(key[:, :, 0, :], block_table, s2).astype(jnp.int32)           # [B, S2, D]
    ks = paged_rows(key_dequant_scale[:, :, 0], block_table, s2).astype(F32)        # [B, S2]
    q8 = query.reshape(b, s1, n, d).astype(jnp.int32)
    dots = jnp.einsum("bihd,bsd->bihs", q8, k8)                                      # exact int32
    wq = (weights.astype(F32) * query_dequant_scale.astype(F32)).reshape(b, s1, n, 1)
    score = jnp.sum(wq * jnp.maximum(dots.astype(F32), 0.0), axis=2) * ks[:, None, :]
    return jnp.where(causal_visible(actual_seq_lengths_key, s1, s2), score, -jnp.inf)


def topk_indices(scores, k: int):
    """Positions of the ``k`` largest scores (stable descending), -1 where fewer are visible."""
    order = jnp.argsort(-scores, axis=-1, stable=True)[..., :k].astype(jnp.int32)
    picked = jnp.take_along_axis(scores, order, axis=-1)
    idx = jnp.where(jnp.isneginf(picked), -1, order)
    if idx.shape[-1] < k:
        idx = jnp.pad(idx, [(0, 0)] * (idx.ndim - 1) + [(0, k - idx.shape[-1])], constant_values=-1)
    return idx


def lightning_indexer(query, key, weights, query_dequant_scale, key_dequant_scale, actual_seq_lengths_key,
                      block_table, *, sparse_count: int):
    """CANN ``npu_quant_lightning_indexer`` (sparse_mode 3): ``sparse_indices [T, 1, sparse_count]`` int32."""
    scores = lightning_indexer_scores(query, key, weights, query_dequant_scale, key_dequant_scale,
                                      actual_seq_lengths_key, block_table)
    b, s1, _ = scores.shape
    return topk_indices(scores, sparse_count).reshape(b * s1, 1, sparse_count)


def sparse_attention(query, kv_cache, sparse_indices, block_table, actual_seq_lengths_kv, *, scale_value: float,
                     query_rope=None, kr_cache=None):
    """Sparse attention over the top-k entries (MLA absorbed mode: one latent head, key = value).

    query [T, N, Dv] (+ query_rope [T, N, Dr]); kv_cache [blocks, bs, 1, Dv] (+ kr_cache
    [blocks, bs, 1, Dr]); sparse_indices [T, 1, k] int32 positions into the logical sequence, -1
    skipped, as are positions past the query's causal limit (sparse_mode 3) or the block table's MB blocks. Scores in float32, softmax over the selected (and causally visible) entries, ``@ v``.
    Returns [T, N, Dv] in the query's dtype.
    """
    b = block_table.shape[0]
    t, n, dv = query.shape
    s1 = t // b
    s2 = block_table.shape[1] * kv_cache.shape[1]
    kv = paged_rows(kv_cache[:, :, 0, :], block_table, s2).astype(F32)             # [B, S2, Dv]
    idx = sparse_indices.reshape(b, s1, -1)
    limit = jnp.asarray(actual_seq_lengths_kv, jnp.int32)[:, None] - (s1 - 1 - jnp.arange(s1))[None, :]
    valid = (idx >= 0) & (idx < limit[:, :, None]) & (idx < s2)                     # sparse_mode 3
    safe = jnp.where(valid, idx, 0)
    sel = jax.vmap(lambda rows, i: rows[i])(kv, safe)                                # [B, S1, k, Dv]
    hi = jax.lax.Precision.HIGHEST
    logits = jnp.einsum("bihd,bikd->bihk", query.reshape(b, s1, n, dv).astype(F32), sel, precision=hi)
    if query_rope is not None:
        kr = paged_rows(kr_cache[:, :, 0, :], block_table, s2).astype(F32)
        selr = jax.vmap(lambda rows, i: rows[i])(kr, safe)
        logits = logits + jnp.einsum("bihd,bikd->bihk", query_rope.reshape(b, s1, n, -1).astype(F32), selr,
                                     precision=hi)
    logits = jnp.where(valid[:, :, None, :], logits * scale_value, -jnp.inf)
    p = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bihk,bikd->bihd", p, sel, precision=hi)
    return out.reshape(t, n, dv).astype(query.dtype)


# ------------------------------------------------------------------------------------- example inputs
def block_table_for(seq_lens, block_size: int, max_blocks: int, seed: int = 0):
    """A shuffled physical block assignment ``[B, max_blocks]`` int32 (-1 for blocks past each length)."""
    rng = np.random.default_rng(seed)
    need = [-(-int(s) // block_size) for s in seq_lens]
    perm = rng.permutation(sum(need)).astype(np.int32)
    table = np.full((len(seq_lens), max_blocks), -1, np.int32)
    at = 0
    for b, n in enumerate(need):
        table[b, :n] = perm[at:at + n]
        at += n
    return table, sum(need)


def prolog_inputs(b: int, s1: int, h: int, q_lora: int, n_heads: int, seq_lens, block_size: int = 128,
                  max_blocks=None, d: int = 128, seed: int = 0):
    """Inputs of :func:`indexer_prolog` for ``T = b * s1`` new tokens at the end of ``seq_lens`` (numpy).

    Returns ``(args, block_table)``; the new tokens of batch i sit at positions
    ``seq_lens[i] - s1 .. seq_lens[i] - 1``, and ``args[-1]`` holds their flat cache slots.
    """
    rng = np.random.default_rng(seed)
    t = b * s1
    max_blocks = max_blocks or -(-max(seq_lens) // block_size)
    table, nb = block_table_for(seq_lens, block_size, max_blocks, seed)
    u = lambda lo, hi, shape, dt: rng.uniform(lo, hi, shape).astype(dt)  # noqa: E731
    i8 = lambda shape: rng.integers(-128, 128, shape).astype(np.int8)  # noqa: E731
    pos = np.concatenate([np.arange(s - s1, s) for s in seq_lens]).astype(np.int64)
    cos, sin = rope_cos_sin(pos)
    slot = np.array([table[i // s1, p // block_size] * block_size + p % block_size for i, p in enumerate(pos)],
                    np.int32)
    bf = jnp.bfloat16
    args = (u(-1, 1, (t, h), bf), i8((t, q_lora)), u(0.5e-3, 1e-3, (t, 1), np.float32), i8((q_lora, n_heads * d)),
            u(0.5e-3, 1e-3, (n_heads * d, 1), np.float32), u(-1, 1, (h, d), bf) / np.sqrt(h).astype(bf),
            u(-1, 1, (h, n_heads), bf), u(0.8, 1.2, (d,), bf), u(-0.1, 0.1, (d,), bf), cos.astype(bf), sin.astype(bf),
            hadamard_matrix(d).astype(bf), hadamard_matrix(d).astype(bf), i8((nb, block_size, 1, d)),
            u(1e-3, 1e-2, (nb, block_size, 1), np.float16), slot)
    return args, table


def indexer_inputs(b: int, s1: int, n_heads: int, seq_lens, block_size: int = 128, max_blocks=None, d: int = 128,
                   seed: int = 0):
    """Inputs of :func:`lightning_indexer`: int8 q/k, fp16 weights and scales, lengths, block table (numpy)."""
    rng = np.random.default_rng(seed)
    t = b * s1
    max_blocks = max_blocks or -(-max(seq_lens) // block_size)
    table, nb = block_table_for(seq_lens, block_size, max_blocks, seed)
    query = rng.integers(-127, 128, (t, n_heads, d)).astype(np.int8)
    key = rng.integers(-127, 128, (nb, block_size, 1, d)).astype(np.int8)
    weights = rng.uniform(-0.002, 0.01, (t, n_heads)).astype(np.float16)
    q_scale = rng.uniform(1e-3, 1e-2, (t, n_heads)).astype(np.float16)
    k_scale = rng.uniform(1e-3, 1e-2, (nb, block_size, 1)).astype(np.float16)
    return (query, key, weights, q_scale, k_scale, np.asarray(seq_lens, np.int32), table)


def attention_inputs(b: int, s1: int, n_heads: int, seq_lens, sparse_count: int, block_size: int = 128,
                     max_blocks=None, dv: int = 512, dr: int = ROPE_DIM, seed: int = 0, indices: bool = True):
    """Inputs of :func:`sparse_attention` (bf16, MLA absorbed): ``(query, kv_cache, sparse_indices,
    block_table, actual_seq_lengths_kv, query_rope, kr_cache)`` (numpy). The indices are distinct
    random positions per token, some past the causal limit, the last few -1; ``indices=False``
    leaves them out (the DIA kernel computes them)."""
    rng = np.random.default_rng(seed)
    t = b * s1
    max_blocks = max_blocks or -(-max(seq_lens) // block_size)
    table, nb = block_table_for(seq_lens, block_size, max_blocks, seed)
    bf = jnp.bfloat16
    query = rng.normal(0, 1, (t, n_heads, dv)).astype(bf)
    query_rope = rng.normal(0, 1, (t, n_heads, dr)).astype(bf)
    kv = (rng.normal(0, 1, (nb, block_size, 1, dv)) * 0.5).astype(bf)
    kr = (rng.normal(0, 1, (nb, block_size, 1, dr)) * 0.5).astype(bf)
    lens = np.asarray(seq_lens, np.int32)
    if not indices:
        return query, kv, None, table, lens, query_rope, kr
    idx = np.full((t, 1, sparse_count), -1, np.int32)
    for i in range(t):
        n = min(sparse_count, int(lens[i // s1]))
        pos = rng.permutation(int(lens[i // s1]))[:n]
        idx[i, 0, :n - n // 8] = pos[:n - n // 8]                     # the last eighth stays -1
    return query, kv, idx, table, lens, query_rope, kr
