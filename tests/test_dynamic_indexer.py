"""The DeepSeek-V3.2 Lightning Indexer with a symbolic batch B at decode (one new token per sequence,
so the token count T = B): one compile serves every B.

The queries, weights and their scales have B rows, the block table and the key lengths one per
sequence; the key cache (a pool of 8 blocks of 128) stays static. The Gather tiles one table row per
block (``gather_vec`` (1, 8)) and fills its tile through an i16 alias of the i8 tile; the Score matmul
reads the gathered keys through a transposed ``[128, 512·B]`` view (``!pto.tensor_view<128x?xi8>``,
one sequence per block). The indices equal the plain-JAX reference's exactly (the static indexer's
criterion), ``ptoas`` accepts the dynamic module, and ``jax.export`` inlines its replay. (Sparse
attention and the DIA chain: ``test_dynamic_attention.py``.)
"""
import functools

import jax
import numpy as np
import pytest

import ptojax as pj
from deepseek_cases import MAX_BLOCKS, N, TOPK, K, R

POOL, BS, D = 8, 128, 128
TILES = {"gather_vec": (1, 8)}              # one block-table row per Gather block
# query, key, weights, query scale, key scale, key lengths, block table
POLY = ("b, 4, 128", None, "b, 4", "b, 4", None, "b", f"b, {MAX_BLOCKS}")


def _inputs(b):
    """``b`` sequences of one new token each, their blocks drawn from a static pool (the first one 40
    keys long: fewer than the top-k, so its row ends in -1)."""
    rng = np.random.default_rng(b)
    lens = rng.integers(1, MAX_BLOCKS * BS + 1, b).astype(np.int32)
    lens[0] = 40
    return (rng.integers(-127, 128, (b, N, D)).astype(np.int8),
            rng.integers(-127, 128, (POOL, BS, 1, D)).astype(np.int8),
            rng.uniform(-0.002, 0.01, (b, N)).astype(np.float16),
            rng.uniform(1e-3, 1e-2, (b, N)).astype(np.float16),
            rng.uniform(1e-3, 1e-2, (POOL, BS, 1)).astype(np.float16),
            lens, rng.integers(0, POOL, (b, MAX_BLOCKS)).astype(np.int32))


def _indexer(**options):
    return pj.kernel(functools.partial(K.lightning_indexer, sparse_count=TOPK, tiles=TILES), **options)


@pytest.fixture(scope="module")
def indexer():
    return _indexer(polymorphic_shapes=POLY)


def _check(indexer, b):
    args = _inputs(b)
    got = np.asarray(indexer(*args))
    assert got.shape == (b, 1, TOPK)
    np.testing.assert_array_equal(got, np.asarray(R.lightning_indexer(*args, sparse_count=TOPK)))
    assert (got[0, 0] >= 0).sum() == 40


def test_one_compile_serves_every_batch(indexer):
    """The indices at B = 3 and 17; at 17 the tasks of the static indexer compiled for 17 sequences."""
    _check(indexer, 3)
    _check(indexer, 17)
    args = _inputs(17)
    static = _indexer().lower(*args).compile()
    assert indexer.compiled_for(*args).profile(m=17).tasks == static.profile(*args, compute=False).tasks
    assert indexer.compiles == 1


@pytest.mark.slow
@pytest.mark.parametrize("b", (1, 64, 130, 1000))
def test_one_compile_serves_more_batches(indexer, b):
    _check(indexer, b)
    assert indexer.compiles == 1


def test_the_dynamic_indexer_is_real_pto(indexer):
    compiled = indexer.compiled_for(*_inputs(3))
    assert set(compiled.dynamic.rows.values()) == {1, 8}           # one sequence per block; the W·q-scale rows
    text = compiled.as_text("pto")
    assert "%dyn_m512 = arith.muli %dyn_m, %dyn_k512 : index" in text          # 512 keys per sequence
    assert "shape = [%c128, %dyn_m512]" in text and "{layout = #pto.layout<dn>} : !pto.tensor_view<128x?xi8>" in text
    assert "!pto.tensor_view<?x4x128x128xi8>" in text                            # the gathered keys
    cpp = compiled.ptoas()                                                       # Huawei's ptoas accepts it
    assert "AICORE void matmul(" in cpp and "int32_t" in cpp.split("AICORE void matmul(")[1].split(")")[0]


@pytest.mark.slow
def test_the_indexer_exports_with_a_symbolic_batch():
    """One export, no host callback; the artifact's indices equal the reference's at a size of its own."""
    specs = jax.export.symbolic_args_specs(_inputs(3), POLY)
    exported = jax.export.export(jax.jit(_indexer()))(*specs)
    assert "callback" not in exported.mlir_module()
    args = _inputs(9)
    np.testing.assert_array_equal(np.asarray(exported.call(*args)),
                                  np.asarray(R.lightning_indexer(*args, sparse_count=TOPK)))
