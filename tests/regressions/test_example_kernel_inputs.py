"""The example kernels (DeepSeek-V3.2, the MoE layer) on inputs at their edges: a key past the block
table's span is skipped, not read from another sequence's cache; an empty batch, no selected entries,
no tokens and mismatched expert weights are errors naming the kernel and the values; the benchmark
refuses an unknown section by name."""
import functools
import sys
from pathlib import Path

import numpy as np
import pytest

import ptojax as pj

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from examples import moe_router as M  # noqa: E402
from examples.deepseek_v32 import kernels as K  # noqa: E402
from examples.deepseek_v32 import reference as R  # noqa: E402
from benchmarks import deepseek_v32 as bench  # noqa: E402


def _attention(*args, **tiles):
    fn = functools.partial(K.sparse_attention, scale_value=K.SOFTMAX_SCALE, tiles=tiles or None)
    return np.asarray(pj.kernel(fn)(*args), np.float32)


@pytest.mark.parametrize("gather_l1", [False, True])
def test_a_key_past_the_block_table_is_skipped(gather_l1):
    """Sequence 0 claims 5 000 keys, its block table holds 4 blocks (512 keys): its key 700 has no
    cache row of its own (the flat table's next entries are sequence 1's). Token 0 selects 700 and 10,
    so its softmax has one entry: its output is key 10's latent row; token 1 selects 700 alone: NaN."""
    q, kv, _, table, _, qr, kr = R.attention_inputs(2, 2, 2, [512, 300], 8, dv=128, seed=1)
    lens = np.array([5000, 300], np.int32)
    idx = np.full((4, 1, 8), -1, np.int32)
    idx[0, 0, :2] = (700, 10)
    idx[1, 0, 0] = 700
    idx[2, 0, :2] = (10, 20)
    idx[3, 0, 0] = 5
    args = (q, kv, idx, table, lens, qr, kr)
    got = _attention(*args, gather_l1=gather_l1)
    key10 = np.asarray(kv[table[0, 0], 10, 0], np.float32)
    np.testing.assert_allclose(got[0], np.broadcast_to(key10, got[0].shape), rtol=1e-2, atol=1e-2)
    assert np.isnan(got[1]).all() and not np.isnan(got[[0, 2, 3]]).any()
    want = np.asarray(R.sparse_attention(*args[:5], scale_value=K.SOFTMAX_SCALE, query_rope=qr, kr_cache=kr),
                      np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_an_empty_batch_or_no_selected_entries_is_an_error():
    a = list(R.indexer_inputs(2, 1, 4, [1000, 300], seed=1))
    for i in (0, 2, 3, 5, 6):
        a[i] = a[i][:0]
    with pytest.raises(pj.PtoShapeError, match="lightning_indexer: B=0 sequences"):
        pj.kernel(functools.partial(K.lightning_indexer, sparse_count=50))(*a)
    s = list(R.attention_inputs(2, 1, 2, [500, 300], 32, dv=128, seed=1))
    with pytest.raises(pj.PtoShapeError, match=r"sparse_attention: sparse_indices has shape \(2, 1, 0\): k=0"):
        _attention(*s[:2], s[2][..., :0], *s[3:])
    for i in (0, 2, 3, 4, 5):
        s[i] = s[i][:0]
    with pytest.raises(pj.PtoShapeError, match="sparse_attention: B=0 sequences"):
        _attention(*s)


def test_moe_router_names_a_bad_token_count_or_expert_weight():
    x, wr, bias, wg, wu, wd = M.inputs()
    d, f = wg[0].shape
    with pytest.raises(pj.PtoShapeError, match="moe_router: 0 tokens is not a positive multiple"):
        pj.kernel(M.moe_router)(x[:0], wr, bias, wg, wu, wd)
    with pytest.raises(pj.PtoShapeError, match=rf"moe_router: w_up\[0\] has shape \({d}, {f}\); expected "
                                               rf"\({d}, {f // 2}\)"):
        pj.kernel(M.moe_router)(x, wr, bias, [w[:, :f // 2] for w in wg], wu, wd)
    with pytest.raises(pj.PtoShapeError, match=r"moe_router: w_down\[1\] has shape"):
        pj.kernel(M.moe_router)(x, wr, bias, wg, wu, [wd[0], wd[1][:, :d // 2], *wd[2:]])


def test_the_benchmark_names_an_unknown_section(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--only", "indexr", "--out", ""])
    assert e.value.code == 2
    assert "--only: ['indexr'] name no section; they are ['prolog', 'indexer', 'attention', 'dia']" in capsys.readouterr().err
