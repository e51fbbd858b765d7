"""Regressions from a probe of the DeepSeek-V3.2 kernels' shapes and knobs.

- ``sparse_attention`` found a position's cache block as the float32 floor of ``pos * (1/bs)``, exact
  only where ``bs`` is a power of two: at ``bs=47`` position 47 went to block 0 (outputs off by 1.2,
  silently). The estimate is corrected by the offset's sign where ``bs`` is not a power of two.
- ``reference.indexer_prolog`` wrote a token with cache slot -1 into the last cache row (JAX wraps
  negative indices under ``mode="drop"``); the kernel writes nothing, as ``ops.scatter_update`` says.
- ``gather_l1`` with the default ``qk_l1`` refused top-k 97 (4 chunks per task cannot divide it); an
  explicit ``pv_l1`` split count was clamped to 1, silently, or accepted where it cannot divide.
- Malformed knob values (``q_rows=0``, a 2-long ``topk_vec``, ``qk_l1=(0, None, 4)``, ...) failed with
  ZeroDivisionError / IndexError / TypeError; they name the knob now.
- ``ops.scatter_update`` with no rows to write (a prolog of T=0 tokens) was refused as a zero-size
  operand; it returns the operand unchanged.
"""
import functools

import numpy as np
import pytest

import ptojax as pj
from deepseek_cases import K, R, cann_close, int8_close, sfa_ref


def _attention(tiles=None, backend="sim"):
    return pj.kernel(functools.partial(K.sparse_attention, scale_value=K.SOFTMAX_SCALE, tiles=tiles),
                     backend=backend)


@pytest.mark.parametrize("bs", [47, 48])
def test_positions_map_to_their_block_at_any_block_size(bs):
    assert int(np.floor(np.float32(47) * np.float32(1.0 / 47))) == 0      # the float32 estimate this guards
    args = list(R.attention_inputs(1, 1, 4, [3 * bs], 8, block_size=bs, dv=128, seed=5))
    args[3] = np.array([[2, 0, 1]], np.int32)          # logical block 0 -> physical 2, 1 -> 0, 2 -> 1
    idx = np.full((1, 1, 8), -1, np.int32)
    idx[0, 0, :5] = [bs, bs - 1, 2 * bs, 2 * bs + 1, 3]   # each side of a block's first row
    args[2] = idx
    want = sfa_ref(*args)
    np.testing.assert_allclose(np.asarray(_attention()(*args), np.float32), want, rtol=5e-3, atol=1e-4)
    cann_close(np.asarray(_attention({"gather_l1": True}, "xla")(*args), np.float32), want)


def test_reference_prolog_drops_a_token_without_a_cache_slot():
    args, _ = R.prolog_inputs(1, 2, 256, 128, 4, [300], max_blocks=4, seed=1)
    args = list(args)
    args[15] = np.array(args[15]).copy()
    args[15][0] = -1                                   # token 0: no cache slot
    got = pj.kernel(functools.partial(K.indexer_prolog, n_heads=4), backend="xla")(*args)
    want = R.indexer_prolog(*args, n_heads=4)
    before = np.asarray(args[13]).reshape(-1, 128)
    assert np.array_equal(np.asarray(want[3]).reshape(-1, 128)[-1], before[-1])
    int8_close(np.asarray(got[3]), np.asarray(want[3]))


def test_default_qk_split_takes_any_top_k_and_explicit_splits_are_kept_or_refused():
    args = R.attention_inputs(1, 1, 4, [400], 97, seed=5)
    cann_close(np.asarray(_attention({"gather_l1": True}, "xla")(*args), np.float32), sfa_ref(*args))
    args = R.attention_inputs(1, 1, 4, [400], 64, seed=5)
    text = lambda pv: pj.kernel(functools.partial(K.sparse_attention, scale_value=K.SOFTMAX_SCALE,  # noqa: E731
                                                  tiles={"gather_l1": True, "pv_l1": pv})).lower(*args).as_text("block")
    assert "f32[1,4,2,512] = block_call[gather_pv<AIC> x2]" in text((None, None, 2))
    assert "f32[1,4,1,512] = block_call[gather_pv<AIC> x1]" in text((None, None, 1))
    with pytest.raises(pj.PtoShapeError, match=r"tiles\['pv_l1'\] asks for 3 splits of 64 rows"):
        text((None, None, 3))


@pytest.mark.parametrize("kernel, kwargs, match", [
    ("prolog", {"q_rows": 0}, r"q_rows=0 must be a positive int dividing the T=2"),
    ("prolog", {"q_rows": 3}, r"q_rows=3 must be a positive int"),
    ("indexer", {"tiles": {"topk_vec": (1, 2048)}}, r"tiles\['topk_vec'\] = \(1, 2048\); expected 3 positive"),
    ("attention", {"tiles": {"gather_l1": True, "qk_l1": (0, None, 4)}}, r"tiles\['qk_l1'\] = \(0, None, 4\)"),
    ("attention", {"tiles": {"gather_l1": True, "pv_l1": (None, None, -2)}}, r"tiles\['pv_l1'\]"),
    ("attention", {"tiles": {"gather_l1": True, "out_l1_vec": (1, 32)}}, r"tiles\['out_l1_vec'\] = \(1, 32\)"),
])
def test_malformed_knob_values_name_the_knob(kernel, kwargs, match):
    if kernel == "prolog":
        args, _ = R.prolog_inputs(1, 2, 256, 128, 4, [300], max_blocks=4, seed=1)
        fn = functools.partial(K.indexer_prolog, n_heads=4, **kwargs)
    elif kernel == "indexer":
        args = R.indexer_inputs(1, 1, 4, [300], max_blocks=4, seed=2)
        fn = functools.partial(K.lightning_indexer, sparse_count=8, **kwargs)
    else:
        args = R.attention_inputs(1, 1, 4, [400], 64, seed=5)
        fn = functools.partial(K.sparse_attention, scale_value=K.SOFTMAX_SCALE, **kwargs)
    with pytest.raises(pj.PtoError, match=match):
        pj.kernel(fn).lower(*args)


def test_a_prolog_head_dim_below_the_rope_dims_is_refused():
    args, _ = R.prolog_inputs(1, 2, 256, 128, 4, [300], max_blocks=4, seed=1)
    args = [np.asarray(a) for a in args]
    d = 32
    args[3], args[4] = args[3][:, :4 * d], args[4][:4 * d]             # wq_b, wq_b_scale
    args[5], args[7], args[8] = args[5][:, :d], args[7][:d], args[8][:d]
    args[11], args[12] = args[11][:d, :d], args[12][:d, :d]
    args[13] = args[13][..., :d]
    with pytest.raises(pj.PtoShapeError, match="head dim D=32 .* so D >= 64"):
        pj.kernel(functools.partial(K.indexer_prolog, n_heads=4)).lower(*args)


def test_scatter_of_no_rows_returns_the_operand():
    x = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    fn = lambda x, i, u: pj.ops.scatter_update(x, i, u) + 0.0           # noqa: E731
    got = pj.kernel(fn)(x, np.zeros((0,), np.int32), np.zeros((0, 16), np.float32))
    assert np.array_equal(np.asarray(got), x)
    args, _ = R.prolog_inputs(1, 1, 128, 64, 2, [64], block_size=16, seed=1)
    args = [np.asarray(a) for a in args]
    for i in (0, 1, 2, 9, 10, 15):                                       # T = 0 tokens
        args[i] = args[i][:0]
    got = pj.kernel(functools.partial(K.indexer_prolog, n_heads=2))(*args)
    assert np.array_equal(np.asarray(got[3]), args[13]) and np.array_equal(np.asarray(got[4]), args[14])
