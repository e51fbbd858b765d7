"""DeepSeek-V3.2-Exp's indexer as ptojax kernels, with CANN's interfaces.

- :func:`indexer_prolog` — ``npu_lightning_indexer_prolog`` (W8A8 Q path, C8 key cache): three
  independent streams, labelled by stage as in the seed article's swimlanes —
  Q: ``QMatmul`` (int8 x int8 -> int32 on the cube) → ``Dequant`` → ``QRope`` → ``QHadamard``
  (cube) → ``QQuant``; K: ``KMatmul`` → ``LayerNorm`` → ``KRope`` → ``KHadamard`` → ``KQuant`` →
  ``Scatter`` (paged int8 cache and its fp16 scale cache); W: ``Weights`` (matmul) → ``WScale``.
- :func:`lightning_indexer` — ``npu_quant_lightning_indexer`` (int8, sparse_mode 3, PA_BSND key):
  ``Gather`` (key blocks by block_table) → ``Score`` (int8 QK^T on the cube, merged over the S1·N
  query rows of a batch) → ``Reduce`` (ReLU, w·q_scale head sum, k_scale, causal mask from
  ``actual_seq_lengths_key``) → ``TopK`` (two-stage past 2 048 columns: a partial top-k per chunk, then
  merges). The lengths are runtime inputs, so one compiled kernel
  serves every length up to the cache's (block_table width × block size).

The functions are ordinary JAX functions (``pj.tile`` is metadata outside lowering); wrap them with
``pj.kernel`` (:func:`make_kernels`) to run them on the simulated A3 or as XLA.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj
from ptojax import ops

F32, BF16, F16, I32 = jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32
ROPE_DIM = 64

# Tiles, tuned for ptojax (cube tiles m16, k512, as the seed's); ``kw_cube``: the K matmul's, ``w_cube``
# the weights-path matmul's.
PROLOG_TILES = dict(q_cube=(16, 512, 64), kw_cube=(16, 512, 64), w_cube=(16, 512, 64), had_cube=(64, 128, 128),
                    vec_dequant=(8, 1024), vec_head=(2, 64, 128), vec_quant=(64, 128), vec_row=(8, 128),
                    vec_w=(8, 64))
PROLOG_OPTIONS = {"tiles_per_block": {"QMatmul": 6}}
# topk_vec: the top-k's rows and chunk — a KV row wider than the chunk is selected in two stages
# (a partial top-k per chunk, then merges of four sorted lists); a row that fits is sorted whole.
INDEXER_TILES = dict(score_cube=(64, 128, 128), vec=(1, 8, 128), topk_vec=(1, 1, 2048),
                     gather_vec=(1, 8))          # 8 block-table entries per Gather block: 8 blocks of keys


def _tiles(kernel: str, defaults: dict, tiles) -> dict:
    """``defaults`` with the caller's ``tiles`` over them; a name that is not one of the kernel's tiles
    is refused (a misspelt knob would otherwise leave the kernel untuned, silently)."""
    unknown = sorted(set(tiles or {}) - set(defaults))
    if unknown:
        raise pj.PtoArgumentError(f"{kernel}: tiles {unknown} name none of its tiles; they are {sorted(defaults)}")
    return dict(defaults, **(tiles or {}))


def _knob(kernel: str, tl: dict, name: str, length: int, none: str = "") -> tuple:
    """``tl[name]``, a tuple of ``length`` positive ints (None where ``none`` says what it means); else a
    :class:`~ptojax.PtoArgumentError` naming the knob."""
    value = tl[name]
    ok = isinstance(value, (tuple, list)) and len(value) == length and all(
        (v is None and none) or (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0)
        for v in value)
    if not ok:
        raise pj.PtoArgumentError(f"{kernel}: tiles['{name}'] = {value!r}; expected {length} positive ints"
                                  + (f" or None ({none})" if none else ""))
    return tuple(value)


def _same(n, want) -> bool:
    try:
        return bool(n == want)
    except Exception:            # symbolic dims that cannot be compared here: the lowering checks them
        return True


def check_shapes(kernel: str, **args) -> dict:
    """Each ``name=(array, dims)``: ``dims`` ints or names, one value per name across the arguments; a
    mismatch is a :class:`~ptojax.PtoShapeError` naming the kernel, the argument and the dims bound so
    far. Returns the bound dims."""
    bound: dict = {}
    for name, (x, dims) in args.items():
        shape = tuple(np.shape(x))
        ok = len(shape) == len(dims) and all(_same(n, bound.setdefault(d, n) if isinstance(d, str) else d)
                                            for n, d in zip(shape, dims))
        if not ok:
            known = ", ".join(f"{k}={v}" for k, v in bound.items() if k in dims)
            raise pj.PtoShapeError(f"{kernel}: {name} has shape {shape}; expected [{', '.join(map(str, dims))}]"
                                   + (f" with {known}" if known else ""))
    if "B" in bound and _same(bound["B"], 0):
        raise pj.PtoShapeError(f"{kernel}: B=0 sequences; a batch needs at least one")
    if "T" in bound and "B" in bound and not _same(bound["T"] % bound["B"], 0):
        raise pj.PtoShapeError(f"{kernel}: T={bound['T']} tokens are not B={bound['B']} sequences of equal length")
    return bound


def _rope_head(x, cos, sin, out_dtype):
    """Rotate-half RoPE on the first 64 dims of the last axis (float32 math, ``out_dtype`` result)."""
    half = ROPE_DIM // 2
    r = ops.cast(x[..., :ROPE_DIM], F32)
    rotated = jnp.concatenate([-r[..., half:], r[..., :half]], axis=-1)
    r = r * ops.cast(cos, F32) + rotated * ops.cast(sin, F32)
    return jnp.concatenate([ops.cast(r, out_dtype), x[..., ROPE_DIM:]], axis=-1)


def indexer_prolog(token_x, q_norm, q_norm_scale, wq_b, wq_b_scale, wk, weights_proj, ln_gamma_k, ln_beta_k,
                   cos_idx_rope, sin_idx_rope, hadamard_q, hadamard_k, idx_k_cache, idx_k_scale_cache,
                   idx_k_cache_index, *, n_heads: int, layernorm_epsilon_k: float = 1e-6, tiles=None,
                   q_rows: int | None = None):
    """The Indexer Prolog (shapes as :func:`.reference.indexer_prolog`; ``idx_k_cache_index`` int32).

    ``q_rows``: the Q matmul's M per batch of tokens. None (the seed's tuned form) merges all
    T = B·S1 tokens into M; ``q_rows=S1`` runs one matmul per batch (M = S1 rows, the weights read
    once per batch) — the knob the seed turns by merging b·s1 into M.

    Returns ``(query int8 [T, N, D], query_scale fp16 [T, N], weights fp16 [T, N], idx_k_cache,
    idx_k_scale_cache)``.
    """
    d = hadamard_q.shape[0]
    check_shapes("indexer_prolog", token_x=(token_x, ("T", "h")), q_norm=(q_norm, ("T", "q_lora")),
                 q_norm_scale=(q_norm_scale, ("T", 1)), wq_b=(wq_b, ("q_lora", n_heads * d)),
                 wq_b_scale=(wq_b_scale, (n_heads * d, 1)), wk=(wk, ("h", "D")),
                 weights_proj=(weights_proj, ("h", n_heads)), ln_gamma_k=(ln_gamma_k, ("D",)),
                 ln_beta_k=(ln_beta_k, ("D",)), cos_idx_rope=(cos_idx_rope, ("T", ROPE_DIM)),
                 sin_idx_rope=(sin_idx_rope, ("T", ROPE_DIM)), hadamard_q=(hadamard_q, ("D", "D")),
                 hadamard_k=(hadamard_k, ("D", "D")), idx_k_cache=(idx_k_cache, ("blocks", "bs", 1, "D")),
                 idx_k_scale_cache=(idx_k_scale_cache, ("blocks", "bs", 1)),
                 idx_k_cache_index=(idx_k_cache_index, ("T",)))
    tl = _tiles("indexer_prolog", PROLOG_TILES, tiles)
    t = token_x.shape[0]
    if isinstance(d, int) and d < ROPE_DIM:
        raise pj.PtoShapeError(f"indexer_prolog: head dim D={d} (hadamard_q {tuple(hadamard_q.shape)}); RoPE "
                               f"rotates the first {ROPE_DIM} dims, so D >= {ROPE_DIM}")
    if q_rows is not None and (isinstance(q_rows, bool) or not isinstance(q_rows, (int, np.integer)) or q_rows < 1
                               or not _same(t % q_rows, 0)):
        raise pj.PtoArgumentError(f"indexer_prolog: q_rows={q_rows!r} must be a positive int dividing the T={t} "
                                  "tokens (S1: one Q matmul per batch), or None")
    # ---- Q stream
    with pj.tile(cube=tl["q_cube"]), jax.named_scope("QMatmul"):
        if q_rows is None:
            acc = ops.matmul(q_norm, wq_b)                                    # int32 [T, N*D]
        else:
            acc = ops.matmul(ops.reshape(q_norm, (t // q_rows, q_rows, -1)), wq_b)
            acc = ops.reshape(acc, (t, -1))
    with pj.tile(vec=tl["vec_dequant"]), jax.named_scope("Dequant"):
        q = ops.dequantize(acc, q_norm_scale * ops.reshape(wq_b_scale, (1, -1)))
        q = ops.cast(q, BF16)
    q = ops.reshape(q, (t, n_heads, d))
    with pj.tile(vec=tl["vec_head"]), jax.named_scope("QRope"):
        q = _rope_head(q, ops.reshape(cos_idx_rope, (t, 1, ROPE_DIM)), ops.reshape(sin_idx_rope, (t, 1, ROPE_DIM)),
                       BF16)
    with pj.tile(cube=tl["had_cube"]), jax.named_scope("QHadamard"):
        q = ops.matmul(ops.reshape(q, (t * n_heads, d)), hadamard_q, out_dtype=BF16)
    with pj.tile(vec=tl["vec_quant"]), jax.named_scope("QQuant"):
        query, q_scale = ops.quantize(q, axis=-1, scale_dtype=F16)
    # ---- K stream
    with pj.tile(cube=tl["kw_cube"]), jax.named_scope("KMatmul"):
        k = ops.matmul(token_x, wk)                                           # fp32 [T, D]
    with pj.tile(vec=tl["vec_row"]), jax.named_scope("LayerNorm"):
        k = ops.layer_norm(k, ops.cast(ln_gamma_k, F32), ops.cast(ln_beta_k, F32), eps=layernorm_epsilon_k)
        k = ops.cast(k, BF16)
    with pj.tile(vec=tl["vec_row"]), jax.named_scope("KRope"):
        k = _rope_head(k, cos_idx_rope, sin_idx_rope, BF16)
    with pj.tile(cube=tl["had_cube"]), jax.named_scope("KHadamard"):
        k = ops.matmul(k, hadamard_k, out_dtype=BF16)
    with pj.tile(vec=tl["vec_row"]), jax.named_scope("KQuant"):
        k8, k_scale = ops.quantize(k, axis=-1, scale_dtype=F16)
    nb, bs = idx_k_cache.shape[:2]
    with pj.tile(vec=(1, d)), jax.named_scope("Scatter"):
        k_cache = ops.scatter_update(ops.reshape(idx_k_cache, (nb * bs, d)), idx_k_cache_index, k8, axis=0)
        s_cache = ops.scatter_update(ops.reshape(idx_k_scale_cache, (nb * bs, 1)), idx_k_cache_index, k_scale,
                                     axis=0)
    # ---- weights stream
    with pj.tile(cube=tl["w_cube"]), jax.named_scope("Weights"):
        w = ops.matmul(token_x, weights_proj, out_dtype=BF16)
    with pj.tile(vec=tl["vec_w"]), jax.named_scope("WScale"):
        weights = ops.cast(ops.cast(w, F32) * np.float32(n_heads ** -0.5 * d ** -0.5), F16)
    return (ops.reshape(query, (t, n_heads, d)), ops.reshape(q_scale, (t, n_heads)), weights,
            ops.reshape(k_cache, idx_k_cache.shape), ops.reshape(s_cache, idx_k_scale_cache.shape))


def lightning_indexer(query, key, weights, query_dequant_scale, key_dequant_scale, actual_seq_lengths_key,
                      block_table, *, sparse_count: int, tiles=None):
    """The int8 Lightning Indexer with top-k (shapes as :func:`.reference.lightning_indexer`).

    Returns ``sparse_indices [T, 1, sparse_count]`` int32 (-1 padded).
    """
    check_shapes("lightning_indexer", query=(query, ("T", "N", "D")), key=(key, ("blocks", "bs", 1, "D")),
                 weights=(weights, ("T", "N")), query_dequant_scale=(query_dequant_scale, ("T", "N")),
                 key_dequant_scale=(key_dequant_scale, ("blocks", "bs", 1)),
                 actual_seq_lengths_key=(actual_seq_lengths_key, ("B",)), block_table=(block_table, ("B", "MB")))
    tl = _tiles("lightning_indexer", INDEXER_TILES, tiles)
    b, mb = block_table.shape
    nb, bs = key.shape[:2]
    t, n, d = query.shape
    s1, s2 = t // b, mb * bs
    with pj.tile(vec=tl["gather_vec"]), jax.named_scope("Gather"):
        k8 = ops.gather(ops.reshape(key, (nb, bs, d)), block_table, axis=0)           # [B, MB, bs, D]
    with pj.tile(vec=(1, 1, bs)), jax.named_scope("Gather"):
        ks = ops.gather(ops.reshape(key_dequant_scale, (nb, bs)), block_table, axis=0)  # [B, MB, bs]
    k8 = ops.reshape(k8, (b, s2, d))
    with pj.tile(cube=tl["score_cube"]), jax.named_scope("Score"):
        dots = ops.matmul(ops.reshape(query, (b, s1 * n, d)), k8, transpose_b=True)   # int32 [B, S1*N, S2]
    with pj.tile(vec=tl["vec"]), jax.named_scope("Reduce"):
        wq = ops.cast(weights, F32) * ops.cast(query_dequant_scale, F32)            # [T, N]
        p = ops.relu(ops.cast(dots, F32)) * ops.reshape(wq, (b, s1 * n, 1))
        score = ops.sum(ops.reshape(p, (b, s1, n, s2)), axis=2)                       # [B, S1, S2]
        score = score * ops.reshape(ops.cast(ks, F32), (b, 1, s2))
        limit = ops.reshape(actual_seq_lengths_key, (b, 1, 1)) - jnp.arange(s1 - 1, -1, -1, dtype=I32).reshape(1, s1, 1)
        visible = jnp.arange(s2, dtype=I32).reshape(1, 1, s2) < limit
        score = ops.where(visible, score, np.float32(-np.inf))
    *lead, chunk = _knob("lightning_indexer", tl, "topk_vec", 3, "the whole row, up to 2 048 columns")
    with pj.tile(vec=(*lead, min(s2, chunk or 2048))), jax.named_scope("TopK"):
        values, idx = ops.topk(score, sparse_count, axis=-1)
        idx = ops.where(values == np.float32(-np.inf), np.int32(-1), idx)
    return ops.reshape(idx, (t, 1, sparse_count))


def make_kernels(n_heads: int, sparse_count: int, backend: str = "sim", target: str = "a3", tiles=None,
                 donate_cache: bool = False):
    """``(prolog, indexer)`` as ``pj.kernel`` s for a configuration (``n_heads``, ``sparse_count``);
    ``tiles`` is ``{"prolog": ..., "indexer": ...}`` (each over :data:`PROLOG_TILES` / :data:`INDEXER_TILES`).

    With ``donate_cache`` the prolog updates ``idx_k_cache`` and ``idx_k_scale_cache`` in place, as
    CANN's operator does (the caller gives those arrays up), instead of writing a new copy."""
    tiles = _tiles("make_kernels", {"prolog": None, "indexer": None}, tiles)
    prolog = pj.kernel(functools.partial(indexer_prolog, n_heads=n_heads, tiles=tiles["prolog"]), backend=backend,
                       target=target, donate_argnums=(13, 14) if donate_cache else ())
    indexer = pj.kernel(functools.partial(lightning_indexer, sparse_count=sparse_count, tiles=tiles["indexer"]),
                        backend=backend, target=target)
    return prolog, indexer


# ---------------------------------------------------------------------------------- sparse attention
SFA_TILES = dict(gather_vec=(1, 64), qk_cube=(128, 128, 128), softmax_vec=(1, 4, None),  # 4 x 2048 fp32: the
                 # fused scale-mask-softmax program's work tiles fit the UB (8 rows overfilled it at top-k 2048)
                 pv_cube=(128, 128, 128), slot_vec=(1, None), out_vec=(1, 8, None),
                 gather_l1=False, qk_l1=(None, None, 4), softmax_l1_vec=(1, 4, None), pv_l1=(None, None, 1),
                 out_l1_vec=(1, 32, None))
GATHER_ROWS = "tgather_rows"


def _gather_rows_abstract(table, idx):
    if len(table.shape) != 2:
        raise pj.PtoShapeError(f"pto.{GATHER_ROWS}: the GM table must be 2-D [rows, D], got shape {tuple(table.shape)}")
    if np.dtype(idx.dtype) != np.int32:
        raise pj.PtoDtypeError(f"pto.{GATHER_ROWS}: the index tile must be int32, got {np.dtype(idx.dtype).name}")
    return jax.ShapeDtypeStruct((int(np.prod(idx.shape, dtype=np.int64)), table.shape[1]), table.dtype)


def _gather_rows_reference(table, idx):
    flat = jnp.reshape(idx, (-1,))
    ok = (flat >= 0) & (flat < table.shape[0])
    rows = jnp.take(table, jnp.clip(flat, 0, table.shape[0] - 1), axis=0)
    return jnp.where(ok[:, None], rows, jnp.zeros((), table.dtype))


def _gather_rows_numpy(table, idx):
    flat = np.asarray(idx).reshape(-1)
    ok = (flat >= 0) & (flat < table.shape[0])
    out = np.zeros((flat.size, table.shape[1]), table.dtype)
    out[ok] = table[flat[ok]]
    return out


def gather_rows(table, idx):
    """``pto.tgather_rows``: rows ``idx`` (an int32 tile in L1, flattened) of GM tensor ``table``
    [rows, D] straight into an L1 (``mat``) tile [idx.size, D] on a cube core, for a matmul to read;
    an index outside ``[0, rows)`` gives a zero row. A user-defined tile op (``pj.tiles.register_op``
    with ``reads_gm=True``), registered on first use, priced like ``mgather`` on MTE2."""
    if GATHER_ROWS not in pj.tiles.CUSTOM:
        pj.tiles.register_op(GATHER_ROWS, reference=_gather_rows_reference, numpy=_gather_rows_numpy,
                             abstract=_gather_rows_abstract, reads_gm=True, loc="mat",
                             summary="rows of a GM table selected by an index tile, into L1 (out of range: zeros)")
    return pj.tiles.compute(GATHER_ROWS, table, idx)


L0AB_BYTES, L0C_BYTES = 64 * 1024, 128 * 1024       # a cube operand tile (L0A / L0B), the accumulator (L0C)


def _l1_split(knob, what, total, size, count, budget, adapt=False):
    """``(size, count)`` with ``size * count`` dividing ``total``. ``size`` None: the most rows that fit
    ``budget = (bytes, bytes per row)`` with ``size * count`` dividing ``total`` -- with ``adapt`` (the
    knob's default), where ``count`` cannot, the most ``count`` below it that can; a ``count`` given, or a
    ``size``, must divide ``total``."""
    if size is None:
        fit = max(1, min(total, budget[0] // budget[1]))
        for count in range(count, 0 if adapt else count - 1, -1):
            size = next((r for r in range(min(fit, total // count), 0, -1) if total % (r * count) == 0), None)
            if size is not None:
                break
    if size is None:
        raise pj.PtoShapeError(f"sparse_attention(gather_l1): tiles['{knob}'] asks for {count} "
                               f"{what.split(' x ')[-1]} of {total} rows; {count} does not divide {total}")
    if total % (size * count):
        raise pj.PtoShapeError(f"sparse_attention(gather_l1): tiles['{knob}'] gives {what} {size} x {count}, which "
                               f"does not divide {total}")
    return size, count


def _qk_l1(query, query_rope, kv, kr, slot, tl):
    """``QK`` as a hand-written cube grid over (token, top-k block): the selected latent and rope rows
    are gathered straight into L1, moved to L0B once, and multiplied by the L1-resident query heads;
    rope and latent accumulate in one L0C tile. Returns fp32 logits [T, N, k]."""
    t, n, dv = query.shape
    dr, kk = query_rope.shape[-1], slot.shape[-1]
    knob = _knob("sparse_attention", tl, "qk_l1", 3, "as many as fit")
    if knob[2] is None:
        raise pj.PtoArgumentError(f"sparse_attention: tiles['qk_l1'] = {knob!r}; its chunks per task is an int")
    heads, _ = _l1_split("qk_l1", "heads per tile", n, knob[0], 1, (L0AB_BYTES, dv * query.dtype.itemsize))
    rows, chunks = _l1_split("qk_l1", "top-k rows x chunks per task", kk, knob[1], knob[2],
                             (L0AB_BYTES, dv * kv.dtype.itemsize), adapt=knob == SFA_TILES["qk_l1"])
    span = rows * chunks
    T = pj.tiles

    def head_tile(d, h):
        return T.window((1, heads, d), index=(0, None, None), base=(0, h * heads, 0))

    def qk(index, ins, outs):
        q, qr, kv_rows, kr_rows, slots = ins
        out = outs[0]
        qs = [T.load(q, index, head_tile(dv, h), "mat") for h in range(n // heads)]
        qrs = [T.load(qr, index, head_tile(dr, h), "mat") for h in range(n // heads)]
        for c in range(chunks):
            idx = T.load(slots, index, T.window((1, rows), index=(0, 1), stride=(1, span), base=(0, c * rows)), "mat")
            latent = T.mov(gather_rows(kv_rows, idx), "right")
            accs = [T.matmul(T.mov(x, "left"), latent, transpose_b=True) for x in qs]
            rope = T.mov(gather_rows(kr_rows, idx), "right")
            accs = [T.matmul_acc(a, T.mov(x, "left"), rope, transpose_b=True) for a, x in zip(accs, qrs)]
            for h, a in enumerate(accs):
                w = T.window((1, heads, rows), index=(0, None, 1), stride=(1, 0, span), base=(0, h * heads, c * rows))
                out = T.store(out, a, index, w)
        return [out]

    return T.grid(qk, (t, kk // span), (query, query_rope, kv, kr, slot), jax.ShapeDtypeStruct((t, n, kk), F32),
                  name="gather_qk")


def _pv_l1(ps, kv, slot, tl):
    """``PV`` as a hand-written cube grid over (token, head tile, top-k split): a K chain over the
    split's selected rows, each block of them gathered straight into L1 and moved to L0B, times every
    P part (``ps``: P, or its high and low halves in the value dtype). Returns fp32 partial sums
    [T, N, splits, Dv]."""
    t, n, kk = ps[0].shape
    dv = kv.shape[-1]
    knob = _knob("sparse_attention", tl, "pv_l1", 3, "as many as fit")
    if knob[2] is None:
        raise pj.PtoArgumentError(f"sparse_attention: tiles['pv_l1'] = {knob!r}; its splits is an int")
    heads, _ = _l1_split("pv_l1", "heads per tile", n, knob[0], 1, (L0C_BYTES, dv * 4))
    rows, splits = _l1_split("pv_l1", "top-k rows x splits", kk, knob[1], knob[2],
                             (L0AB_BYTES, dv * kv.dtype.itemsize))
    span = kk // splits
    T = pj.tiles
    # The split is a dim of its own (GM views), so every window follows one index: (t, h, split, step).
    ps = [ops.reshape(p, (t, n, splits, span)) for p in ps]
    slot = ops.reshape(slot, (t, splits, span))

    def pv(index, ins, outs):
        *parts, kv_rows, slots = ins

        def step(j, acc):
            at = (*index, j)
            idx = T.load(slots, at, T.window((1, 1, rows), index=(0, 2, 3)), "mat")
            v = T.mov(gather_rows(kv_rows, idx), "right")
            for p in parts:     # a [1, heads, 1, rows] tile: heads rows of P times the gathered rows
                left = T.mov(T.load(p, at, T.window((1, heads, 1, rows), index=(0, 1, 2, 3)), "mat"), "left")
                acc = T.matmul(left, v) if acc is None else T.matmul_acc(acc, left, v)
            return acc

        acc = step(jnp.int32(0), None)
        if span > rows:
            acc = jax.lax.fori_loop(1, span // rows, step, acc)
        return [T.store(outs[0], acc, index, T.window((1, heads, 1, dv), index=(0, 1, 2, None)))]

    return T.grid(pv, (t, n // heads, splits), (*ps, kv, slot), jax.ShapeDtypeStruct((t, n, splits, dv), F32),
                  name="gather_pv")


def sparse_attention(query, kv_cache, sparse_indices, block_table, actual_seq_lengths_kv, query_rope, kr_cache, *,
                     scale_value: float, p_dtype=F32, tiles=None):
    """Sparse attention, MLA absorbed mode (CANN ``npu_sparse_flash_attention``, TND query, PA_BSND cache,
    sparse_mode 3, sparse_block_size 1; shapes as :func:`.reference.sparse_attention`).

    query [T, N, Dv] and query_rope [T, N, Dr] (bf16); kv_cache [blocks, bs, 1, Dv] and kr_cache
    [blocks, bs, 1, Dr] (key = value: one latent head); sparse_indices [T, 1, k] int32 (-1 skipped, as
    are positions past the query's causal limit or past the block table's MB·bs); block_table [B, MB];
    actual_seq_lengths_kv [B] int32.
    Stages: ``Gather`` (flat cache slot of every selected position via block_table, then the latent
    and rope rows; masked entries select zeros) → ``QK`` (q·kᵀ on the cube, latent + rope parts) →
    ``Softmax`` (scaled, masked, over the selected entries only; fp32) → ``PV`` (P·V on the cube;
    with ``p_dtype=float32``, the default, the gathered rows are cast to fp32 for it: CANN's tolerance
    rtol 5e-3 on 99.5 % of the elements holds; ``p_dtype=None`` keeps P in the value dtype — faster, but
    about 15 % of bf16 outputs then differ by more than 5e-3). Returns [T, N, Dv] in the query's dtype.

    Tile option ``gather_l1=True`` replaces ``Gather`` of the rows, ``QK`` and ``PV`` by hand-written cube
    grids that load the selected rows straight into L1 with the custom tile op :func:`gather_rows`
    (``qk_l1 = (heads, rows, chunks)``: heads per L0A tile, rows per gather (None: as many as fit
    L0A / L0B / L0C and divide k), gathers per task (the default 4: the most up to 4 that divide k; a
    count given must divide k);
    ``softmax_l1_vec``; ``pv_l1 = (heads, rows, splits)``: split-K over the top-k, the fp32 partial
    sums added by a vector stage; ``out_l1_vec``); with fp32 ``p_dtype`` and bf16 rows, P is split into a bf16 high and
    low part, both multiplied on the cube (fp32-accurate, the same cube time as an fp32 P·V).
    """
    check_shapes("sparse_attention", query=(query, ("T", "N", "Dv")), kv_cache=(kv_cache, ("blocks", "bs", 1, "Dv")),
                 sparse_indices=(sparse_indices, ("T", 1, "k")), block_table=(block_table, ("B", "MB")),
                 actual_seq_lengths_kv=(actual_seq_lengths_kv, ("B",)), query_rope=(query_rope, ("T", "N", "Dr")),
                 kr_cache=(kr_cache, ("blocks", "bs", 1, "Dr")))
    if sparse_indices.shape[-1] == 0:
        raise pj.PtoShapeError(f"sparse_attention: sparse_indices has shape {tuple(sparse_indices.shape)}: "
                               "k=0 selected entries per token; at least one is needed")
    tl = _tiles("sparse_attention", SFA_TILES, tiles)
    b, mb = block_table.shape
    nb, bs = kv_cache.shape[:2]
    t, n, dv = query.shape
    dr = query_rope.shape[-1]
    s1, kk = t // b, sparse_indices.shape[-1]
    # None: the whole last dim, up to 2 048 columns (a vector tile holds at most 4 095)
    fill = lambda tile, last: tuple(min(last, 2048) if v is None else v for v in tile)  # noqa: E731
    # None: k rounded up to 8 int32s (32 bytes): the batch offsets' iota takes this tile where B is symbolic
    with pj.tile(vec=fill(tl["slot_vec"], -(-kk // 8) * 8)), jax.named_scope("Gather"):
        idx = ops.reshape(sparse_indices, (b, s1, kk))
        limit = ops.reshape(actual_seq_lengths_kv, (b, 1, 1)) - jnp.arange(s1 - 1, -1, -1, dtype=I32).reshape(1, s1, 1)
        # a position past the block table's MB blocks has no cache row of its sequence: skipped too
        valid = ops.logical_and(ops.logical_and(idx >= 0, idx < limit), idx < mb * bs)   # [B, S1, k]
        safe = ops.where(valid, idx, np.int32(0))
        # position -> (logical block, offset): the float32 floor of pos * (1/bs) is exact where bs is a
        # power of two, else at most one off (positions below 2**24): corrected by the offset's sign
        if isinstance(mb * bs, int) and mb * bs > 2 ** 24:
            raise pj.PtoShapeError(f"sparse_attention: {mb} blocks of {bs} rows per sequence; positions past "
                                   "2**24 are not exact in the float32 block arithmetic")
        blk_pos = ops.cast(ops.cast(safe, F32) * np.float32(1.0 / bs), I32, rounding="floor")
        if bs & (bs - 1):
            off = safe - blk_pos * np.int32(bs)
            blk_pos = blk_pos + ops.cast(off >= np.int32(bs), I32) - ops.cast(off < np.int32(0), I32)
        row = blk_pos + jnp.arange(b, dtype=I32).reshape(b, 1, 1) * np.int32(mb)
        blk = ops.gather(ops.reshape(block_table, (b * mb,)), row, axis=0)            # [B, S1, k]
        slot = blk * np.int32(bs) + (safe - blk_pos * np.int32(bs))
        slot = ops.where(ops.logical_and(valid, blk >= 0), slot, np.int32(nb * bs))  # out of range -> zeros
        slot = ops.reshape(slot, (t, kk))
    if tl["gather_l1"]:
        return _sparse_attention_l1(query, ops.reshape(kv_cache, (nb * bs, dv)), slot, valid, query_rope,
                                    ops.reshape(kr_cache, (nb * bs, dr)), scale_value, p_dtype, tl)
    with pj.tile(vec=tl["gather_vec"]), jax.named_scope("Gather"):     # a tile of indices
        sel = ops.gather(ops.reshape(kv_cache, (nb * bs, dv)), slot, axis=0)          # [T, k, Dv]
    with pj.tile(vec=tl["gather_vec"]), jax.named_scope("Gather"):
        selr = ops.gather(ops.reshape(kr_cache, (nb * bs, dr)), slot, axis=0)         # [T, k, Dr]
    with pj.tile(cube=tl["qk_cube"]), jax.named_scope("QK"):
        logits = ops.matmul(query, sel, transpose_b=True)                             # fp32 [T, N, k]
        logits_r = ops.matmul(query_rope, selr, transpose_b=True)
    with pj.tile(vec=fill(tl["softmax_vec"], kk)), jax.named_scope("Softmax"):
        z = (logits + logits_r) * np.float32(scale_value)
        z = ops.where(ops.reshape(valid, (t, 1, kk)), z, np.float32(-np.inf))
        p = ops.cast(ops.softmax(z, axis=-1), p_dtype or kv_cache.dtype)
    if p_dtype is not None and p_dtype != kv_cache.dtype:
        with pj.tile(vec=(1, 32, dv)), jax.named_scope("PV"):
            sel = ops.cast(sel, p_dtype)
    with pj.tile(cube=tl["pv_cube"]), jax.named_scope("PV"):
        out = ops.matmul(p, sel)                                                      # fp32 [T, N, Dv]
    with pj.tile(vec=fill(tl["out_vec"], dv)), jax.named_scope("PV"):
        return ops.cast(out, query.dtype)


def _sparse_attention_l1(query, kv, slot, valid, query_rope, kr, scale_value, p_dtype, tl):
    """:func:`sparse_attention` after the cache slots, with the rows gathered straight into L1 by
    :func:`gather_rows` in the QK and PV cube grids (no [T, k, D] GM intermediate)."""
    t, n, dv = query.shape
    kk = slot.shape[-1]
    # None: the whole last dim, up to 2 048 columns (a vector tile holds at most 4 095)
    fill = lambda tile, last: tuple(min(last, 2048) if v is None else v for v in tile)  # noqa: E731
    mask = ops.reshape(valid, (t, 1, kk))        # before the logits, so the Softmax grids fuse
    with jax.named_scope("QK"):
        logits = _qk_l1(query, query_rope, kv, kr, slot, tl)                           # fp32 [T, N, k]
    p_dtype = np.dtype(p_dtype or kv.dtype)
    if p_dtype not in (np.dtype(F32), np.dtype(kv.dtype)):
        raise pj.PtoArgumentError(f"sparse_attention(gather_l1): p_dtype {p_dtype.name} must be float32 or the "
                                  f"value dtype {np.dtype(kv.dtype).name}: the gathered rows stay in L1 as they are")
    split = p_dtype != np.dtype(kv.dtype)          # fp32 P on bf16/fp16 rows: P = hi + lo in the value dtype
    with pj.tile(vec=fill(tl["softmax_l1_vec"], kk)), jax.named_scope("Softmax"):
        z = logits * np.float32(scale_value)
        z = ops.where(mask, z, np.float32(-np.inf))
        p = ops.softmax(z, axis=-1)
        if split:
            hi = ops.cast(p, kv.dtype)
            ps = (hi, ops.cast(p - ops.cast(hi, F32), kv.dtype))
        else:
            ps = (p if p_dtype == np.dtype(F32) else ops.cast(p, p_dtype),)
    with jax.named_scope("PV"):
        out = _pv_l1(ps, kv, slot, tl)                                       # fp32 [T, N, splits, Dv]
    lead, rows, _ = fill(_knob("sparse_attention", tl, "out_l1_vec", 3, "the whole last dim"), dv)
    splits = out.shape[2]
    with pj.tile(vec=(lead, max(1, rows // splits), splits, dv)), jax.named_scope("PV"):
        if out.shape[2] > 1:
            out = ops.sum(out, axis=2, keepdims=True)
        return ops.reshape(ops.cast(out, query.dtype), (t, n, dv))


def dia(token_x, q_norm, q_norm_scale, wq_b, wq_b_scale, wk, weights_proj, ln_gamma_k, ln_beta_k, cos_idx_rope,
        sin_idx_rope, hadamard_q, hadamard_k, idx_k_cache, idx_k_scale_cache, idx_k_cache_index, block_table,
        actual_seq_lengths, query, query_rope, kv_cache, kr_cache, *, n_heads: int, sparse_count: int,
        scale_value: float, layernorm_epsilon_k: float = 1e-6, tiles=None):
    """The whole DeepSeek Sparse Attention chain in one kernel: Indexer Prolog → Lightning Indexer +
    top-k → sparse attention (the functions above, composed; one ``pj.kernel`` lets the runtime overlap
    their parts, e.g. the prolog's Q/W streams with the indexer's key ``Gather``).

    Arguments 0-15 are :func:`indexer_prolog`'s; ``block_table`` / ``actual_seq_lengths`` serve both
    the indexer key cache and the MLA caches (same paging); ``query`` [T, N1, Dv] / ``query_rope``
    [T, N1, Dr] are MLA's absorbed query; ``kv_cache`` / ``kr_cache`` its latent and rope caches.
    Returns ``(attention_out [T, N1, Dv], sparse_indices [T, 1, k], idx_k_cache, idx_k_scale_cache)``.
    """
    tiles = _tiles("dia", {"prolog": None, "indexer": None, "attention": None}, tiles)
    q, q_scale, weights, k_cache, s_cache = indexer_prolog(
        token_x, q_norm, q_norm_scale, wq_b, wq_b_scale, wk, weights_proj, ln_gamma_k, ln_beta_k, cos_idx_rope,
        sin_idx_rope, hadamard_q, hadamard_k, idx_k_cache, idx_k_scale_cache, idx_k_cache_index, n_heads=n_heads,
        layernorm_epsilon_k=layernorm_epsilon_k, tiles=tiles.get("prolog"))
    idx = lightning_indexer(q, k_cache, weights, q_scale, s_cache, actual_seq_lengths, block_table,
                            sparse_count=sparse_count, tiles=tiles.get("indexer"))
    out = sparse_attention(query, kv_cache, idx, block_table, actual_seq_lengths, query_rope, kr_cache,
                           scale_value=scale_value, tiles=tiles.get("attention"))
    return out, idx, k_cache, s_cache


SOFTMAX_SCALE = 0.1352338      # MLA softmax scale of DeepSeek-V3.2 (192^-0.5 * mscale_yarn^2)


def make_dsa_kernels(n_heads: int, sparse_count: int, scale_value: float = SOFTMAX_SCALE, backend: str = "sim",
                     target: str = "a3", tiles=None, options=None, donate_cache: bool = False):
    """``(sparse_attention, dia)`` as ``pj.kernel`` s (sibling of :func:`make_kernels`). ``tiles`` for
    ``dia`` is ``{"prolog": ..., "indexer": ..., "attention": ...}``; ``donate_cache`` donates the index
    key cache and its scale cache (arguments 13, 14) to ``dia``."""
    tiles = _tiles("make_dsa_kernels", {"prolog": None, "indexer": None, "attention": None}, tiles)
    sfa = pj.kernel(functools.partial(sparse_attention, scale_value=scale_value, tiles=tiles["attention"]),
                    backend=backend, target=target, options=options)
    full = pj.kernel(functools.partial(dia, n_heads=n_heads, sparse_count=sparse_count, scale_value=scale_value,
                                       tiles=tiles), backend=backend, target=target, options=options,
                     donate_argnums=(13, 14) if donate_cache else ())
    return sfa, full
