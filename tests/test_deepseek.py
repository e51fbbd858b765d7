"""DeepSeek-V3.2-Exp indexer kernels (examples/deepseek_v32) against their plain-JAX references.

Small shapes: B=2, MTP1 (S1=2 -> T=4 tokens), h=256, q_lora=128, 4 heads x 128 (rope 64), paged KV up
to 512 (block 128), top-k 64. Tolerances (CANN's, hicann/pypto deepseekv32_lightning_indexer_prolog_quant):
int8 outputs within 1 LSB on at most 0.5% of the elements; fp16 scales and weights within
atol 2.5e-5 + rtol 1e-3 (one fp16 ulp: the scales here are O(0.1), where 2.5e-5 alone is below an
ulp); top-k indices exact (the published criterion is >= 99.9% overlap).
"""
import functools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from examples.deepseek_v32 import kernels as K  # noqa: E402
from examples.deepseek_v32 import reference as R  # noqa: E402
from deepseek_cases import B, D, H, MAX_BLOCKS, N, Q_LORA, S1, SEQ, TOPK, cann_close, sfa_ref  # noqa: E402
from deepseek_cases import fp16_close as _fp16_close, int8_close as _int8_close  # noqa: E402


@pytest.fixture(scope="module")
def prolog_case():
    args, table = R.prolog_inputs(B, S1, H, Q_LORA, N, SEQ, max_blocks=MAX_BLOCKS, seed=1)
    return args, R.indexer_prolog(*args, n_heads=N)


@pytest.mark.parametrize("backend", ["sim", "xla"])
def test_indexer_prolog(prolog_case, backend):
    args, (q_ref, qs_ref, w_ref, kc_ref, ks_ref) = prolog_case
    prolog = pj.kernel(functools.partial(K.indexer_prolog, n_heads=N), backend=backend)
    q, qs, w, kc, ks = prolog(*args)
    assert (q.shape, q.dtype, qs.shape, qs.dtype, w.shape, w.dtype) == (
        (B * S1, N, D), jnp.int8, (B * S1, N), jnp.float16, (B * S1, N), jnp.float16)
    _int8_close(q, q_ref)
    _fp16_close(qs, qs_ref)
    _fp16_close(w, w_ref)
    _int8_close(kc, kc_ref)
    _fp16_close(ks, ks_ref)
    slots = args[-1]                                          # the new keys landed, nothing else moved
    flat = np.asarray(kc).reshape(-1, D)
    untouched = np.setdiff1d(np.arange(flat.shape[0]), slots)
    np.testing.assert_array_equal(flat[untouched], np.asarray(args[13]).reshape(-1, D)[untouched])
    assert np.any(flat[slots] != np.asarray(args[13]).reshape(-1, D)[slots])


def test_indexer_prolog_with_a_head_dim_equal_to_the_rope_dim():
    """d = 64 = the rope dim: the head's non-rope part ``x[..., 64:]`` is empty (the concat of the rope and
    that part raised 'zero-size operand'); the empty operand is dropped, the numbers are the reference's."""
    args, _ = R.prolog_inputs(1, 1, 128, 64, 2, [64], block_size=16, d=64)
    want = R.indexer_prolog(*args, n_heads=2)
    got = pj.kernel(functools.partial(K.indexer_prolog, n_heads=2))(*args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("step", [1, 2, 3])
def test_indexer_prolog_with_pyptos_step_tiles(prolog_case, step):
    """Each of PyPTO's published tuning steps (benchmarks/deepseek_v32.py: its cube tiles, the separate
    weights-path ``w_cube``, L1 reuse), caches updated in place, computes the reference's outputs."""
    from benchmarks.deepseek_v32 import PYPTO_PROLOG_STEPS

    args, want = prolog_case
    _, _, tiles, options = PYPTO_PROLOG_STEPS[step - 1]
    prolog = pj.kernel(functools.partial(K.indexer_prolog, n_heads=N, tiles=tiles), options=options,
                       donate_argnums=(13, 14))
    got = prolog(*[np.array(a, copy=True) for a in args])
    for close, g, w in zip((_int8_close, _fp16_close, _fp16_close, _int8_close, _fp16_close), got, want):
        close(g, w)


def test_indexer_prolog_profile_has_the_stage_labels(prolog_case):
    args, _ = prolog_case
    prolog = pj.kernel(functools.partial(K.indexer_prolog, n_heads=N), options=K.PROLOG_OPTIONS)
    prof = prolog.lower(*args).compile().profile(*args)
    assert prof.makespan_us >= prof.lower_bound_us > 0
    want = {"QMatmul", "Dequant", "QRope", "QHadamard", "QQuant", "KMatmul", "LayerNorm", "KRope", "KHadamard",
            "KQuant", "Scatter", "Weights", "WScale"}
    assert want <= set(prof.label_us)


@pytest.mark.parametrize("backend", ["sim", "xla"])
def test_lightning_indexer_one_kernel_two_lengths(backend):
    indexer = pj.kernel(functools.partial(K.lightning_indexer, sparse_count=TOPK), backend=backend)
    args = list(R.indexer_inputs(B, S1, N, SEQ, max_blocks=MAX_BLOCKS, seed=2))
    for lens in (SEQ, [40, 257]):                          # 40 visible keys < top-k: -1 padding
        args[5] = np.asarray(lens, np.int32)
        got = np.asarray(indexer(*args))
        want = np.asarray(R.lightning_indexer(*args, sparse_count=TOPK))
        assert got.shape == (B * S1, 1, TOPK) and got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
        visible = [lens[t // S1] - (S1 - 1 - t % S1) for t in range(B * S1)]
        assert [int((row >= 0).sum()) for row in got[:, 0]] == [min(v, TOPK) for v in visible]
    assert indexer.compiles == 1


@pytest.mark.parametrize("batch", [3, 8])
def test_lightning_indexer_default_tiles_at_larger_batches(batch):
    """The example's default Gather tile at batches past the tests' (it tiled the (B, MB) block table
    by (32, 128): every row of keys in one block, past the UB from B = 3)."""
    args = R.indexer_inputs(batch, 1, 4, [500] * batch, max_blocks=4, seed=0)
    got = pj.kernel(functools.partial(K.lightning_indexer, sparse_count=64))(*args)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(R.lightning_indexer(*args, sparse_count=64)))


def test_prolog_feeds_indexer_end_to_end():
    """Indexer Prolog -> Lightning Indexer on the simulated A3 vs the references chained."""
    args, table = R.prolog_inputs(B, S1, H, Q_LORA, N, SEQ, max_blocks=MAX_BLOCKS, seed=3)
    prolog, indexer = K.make_kernels(N, TOPK)
    q, qs, w, kc, ks = prolog(*args)
    got = np.asarray(indexer(q, kc, w, qs, ks, np.asarray(SEQ, np.int32), table))
    rq, rqs, rw, rkc, rks = R.indexer_prolog(*args, n_heads=N)
    want = np.asarray(R.lightning_indexer(rq, rkc, rw, rqs, rks, np.asarray(SEQ, np.int32), table,
                                          sparse_count=TOPK))
    overlap = np.mean([len(np.intersect1d(g[g >= 0], r[r >= 0])) / max((r >= 0).sum(), 1)
                       for g, r in zip(got[:, 0], want[:, 0])])
    assert overlap >= 0.999


def test_reference_pieces():
    h = R.hadamard_matrix(128)
    np.testing.assert_allclose(h @ h, np.eye(128), atol=1e-6)            # orthonormal, symmetric
    x = np.random.default_rng(0).normal(size=(3, 64)).astype(np.float32)
    cos, sin = R.rope_cos_sin(np.array([0, 1, 7]))
    y = np.asarray(R.rope(x, cos, sin))
    np.testing.assert_allclose(y[0], x[0], rtol=1e-6)                   # position 0: identity
    pair = lambda v: np.hypot(v[:, :32], v[:, 32:])                     # noqa: E731  rotate-half pairs i, i+32
    np.testing.assert_allclose(pair(y), pair(x), rtol=1e-5)


def test_sparse_attention_reference_with_every_key_is_dense_causal():
    rng = np.random.default_rng(4)
    seq, bs, dv = [200, 130], 128, 64
    table, nb = R.block_table_for(seq, bs, 2)
    q = rng.normal(size=(B * S1, N, dv)).astype(np.float32)
    kv = rng.normal(size=(nb, bs, 1, dv)).astype(np.float32)
    idx = np.tile(np.arange(256, dtype=np.int32), (B * S1, 1, 1))
    got = np.asarray(R.sparse_attention(q, kv, idx, table, seq, scale_value=0.1))
    rows = np.asarray(R.paged_rows(kv[:, :, 0], table, 256))
    for t in range(B * S1):
        b, i = divmod(t, S1)
        vis = seq[b] - (S1 - 1 - i)                                     # sparse_mode 3 for the query
        keys = rows[b, :vis]
        p = jax.nn.softmax(q[t] @ keys.T * 0.1, axis=-1)
        np.testing.assert_allclose(got[t], np.asarray(p @ keys), rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ sparse attention and the DIA chain
@pytest.mark.parametrize("backend", ["sim", "xla"])
def test_sparse_attention(backend):
    """Latent 512 + rope 64, 4 heads, top-k 64 with -1 padding and entries past the causal limit."""
    args = R.attention_inputs(B, S1, N, SEQ, TOPK, max_blocks=MAX_BLOCKS, seed=5)
    sfa, _ = K.make_dsa_kernels(N, TOPK, backend=backend)
    got = sfa(*args)
    assert got.shape == (B * S1, N, 512) and got.dtype == jnp.bfloat16
    cann_close(got, sfa_ref(*args))
    # float32 in and out: every element within rtol 5e-3
    a32 = [a.astype(np.float32) if a.dtype == jnp.bfloat16 else a for a in args]
    np.testing.assert_allclose(np.asarray(sfa(*a32)), sfa_ref(*a32), rtol=5e-3, atol=1e-4)


def test_sparse_attention_past_one_vector_tile_of_top_k():
    """Top-k 4 096: the default tiles take the whole top-k as columns only up to 2 048 (a (1, 4096) tile
    exceeded a vector tile's 4 095 columns, an error at ``pj.tile``)."""
    args = R.attention_inputs(1, 1, 2, [4608], 4096, dv=128, seed=4)
    got = pj.kernel(functools.partial(K.sparse_attention, scale_value=K.SOFTMAX_SCALE))(*args)
    cann_close(got, sfa_ref(*args))


def test_sparse_attention_profile_has_the_stage_labels():
    args = R.attention_inputs(B, S1, N, SEQ, TOPK, max_blocks=MAX_BLOCKS, seed=5)
    sfa, _ = K.make_dsa_kernels(N, TOPK)
    prof = sfa.lower(*args).compile().profile(*args)
    assert prof.makespan_us >= prof.lower_bound_us > 0
    assert {"Gather", "QK", "Softmax", "PV"} <= set(prof.label_us)


def test_dia_one_kernel_end_to_end():
    """Indexer Prolog -> Lightning Indexer + top-k -> sparse attention as one kernel vs the references chained."""
    pargs, table = R.prolog_inputs(B, S1, H, Q_LORA, N, SEQ, max_blocks=MAX_BLOCKS, seed=3)
    q, kv, _, _, lens, qr, kr = R.attention_inputs(B, S1, N, SEQ, TOPK, max_blocks=MAX_BLOCKS, seed=6, indices=False)
    _, dia = K.make_dsa_kernels(N, TOPK)
    out, idx, kc, ks = dia(*pargs, table, lens, q, qr, kv, kr)
    rq, rqs, rw, rkc, rks = R.indexer_prolog(*pargs, n_heads=N)
    ridx = np.asarray(R.lightning_indexer(rq, rkc, rw, rqs, rks, lens, table, sparse_count=TOPK))
    idx = np.asarray(idx)
    assert idx.shape == ridx.shape == (B * S1, 1, TOPK)
    overlap = np.mean([len(np.intersect1d(g[g >= 0], r[r >= 0])) / max((r >= 0).sum(), 1)
                       for g, r in zip(idx[:, 0], ridx[:, 0])])
    assert overlap >= 0.999
    cann_close(out, sfa_ref(q, kv, ridx, table, lens, qr, kr))
    _int8_close(kc, rkc)
    _fp16_close(ks, rks)
    prof = dia.lower(*pargs, table, lens, q, qr, kv, kr).compile().profile(*pargs, table, lens, q, qr, kv, kr)
    assert {"QMatmul", "Score", "TopK", "Gather", "QK", "Softmax", "PV"} <= set(prof.label_us)


@pytest.mark.parametrize("make", [
    lambda: pj.lower(functools.partial(K.lightning_indexer, sparse_count=TOPK, tiles={"topk_vek": (1, 1, 64)}),
                     *R.indexer_inputs(1, 1, N, [100], seed=1)),
    lambda: pj.lower(functools.partial(K.sparse_attention, scale_value=0.1, tiles={"gather_L1": True}),
                     *R.attention_inputs(1, 1, N, [100], 16, dv=128, seed=1)),
    lambda: K.make_dsa_kernels(N, TOPK, tiles={"gather_l1": True}),
    lambda: K.make_kernels(N, TOPK, tiles={"topk_vec": (1, 1, 64)}),
], ids=["indexer", "attention", "dsa level missing", "indexer level missing"])
def test_a_misspelt_or_misplaced_tile_knob_is_refused(make):
    """A tile name none of the kernel's (or a level missing) would leave the kernel untuned, silently."""
    with pytest.raises(pj.PtoArgumentError, match=r"tiles \['\w+'\] name none of its tiles; they are \["):
        make()


def test_the_tuning_example_accepts_near_ties_in_another_order_only():
    """examples/deepseek_tuning.py checks indices against the float32 reference: entries whose scores
    tie to float32 rounding may trade places (sums in another order), nothing else may differ."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from deepseek_tuning import _same_selection
    scores = np.array([[0.5, 0.36053222, 0.36053225, 0.1, -np.inf]], np.float32)
    want = np.array([[[0, 2, 1, -1]]])
    assert _same_selection(want, want, scores)
    assert _same_selection(np.array([[[0, 1, 2, -1]]]), want, scores)          # a near tie swapped
    assert not _same_selection(np.array([[[0, 3, 1, -1]]]), want, scores)      # another entry
    assert not _same_selection(np.array([[[2, 0, 1, -1]]]), want, scores)      # distinct scores swapped
    assert not _same_selection(np.array([[[0, 2, 1, 3]]]), want, scores)       # -1 padding differs
