"""Top-k over rows wider than a tile: the tile pass selects them in stages (partial top-k per chunk,
then merges of four lists), and the result equals the one-stage top-k."""
import os

import jax
import ml_dtypes
import numpy as np
import pytest

import ptojax as pj
from helpers import rand
from ptojax.ascend.ptoas import find_ptoas

O = pj.ops


def _topk_kernel(k, vec, largest=True):
    def fn(x):
        with jax.named_scope("TopK"):
            if vec is None:
                return O.topk(x, k, largest=largest)
            with pj.tile(vec=vec):
                return O.topk(x, k, largest=largest)
    return fn


def _programs(fn, *args):
    return [line.split()[1] for line in pj.lower(fn, *args).as_text("block").splitlines()
            if line.startswith("program ")]


@pytest.mark.parametrize("shape,k,vec,largest,dtype", [
    ((3, 10000), 300, (1, 1024), True, np.float32),     # 10 chunks (tail of 784): two merge rounds
    ((2, 4096), 64, (2, 512), False, np.float32),       # 8 chunks, smallest first, 2 rows per tile
    ((2, 2, 1000), 200, (1, 1, 128), True, np.int32),   # k > chunk: chunks sorted whole, then merged
    ((1, 300), 320, (1, 64), True, np.float32),         # k > n: the tail is -1 / -inf, as one stage
    ((2, 5000), 40, None, True, np.float32),            # wider than a tile row: default chunk 2048
])
def test_staged_topk_equals_xla(shape, k, vec, largest, dtype):
    x = rand(shape, dtype, seed=3, low=-40, high=40)
    if dtype == np.float32:
        x = np.round(x) + 0.0                            # ties (no -0.0): the lower index comes first
    fn = _topk_kernel(k, vec, largest)
    got_v, got_i = pj.kernel(fn)(x)
    want_v, want_i = pj.kernel(fn, backend="xla")(x)
    np.testing.assert_array_equal(np.asarray(got_i), np.asarray(want_i))
    np.testing.assert_array_equal(np.asarray(got_v), np.asarray(want_v))
    ref_v, ref_i = jax.lax.top_k(-x if not largest else x, min(k, shape[-1]))
    np.testing.assert_array_equal(np.asarray(got_i)[..., :min(k, shape[-1])], np.asarray(ref_i))
    assert "merge_topk" in " ".join(_programs(fn, x))


@pytest.mark.parametrize("largest", [True, False])
def test_staged_int32_topk_over_the_whole_range(largest):
    """int32 rows longer than a tile: each chunk and the merge of their lists sort by 16-bit halves
    (values equal in one half, repeated values, the extremes), equal to XLA's, indices included."""
    rng = np.random.default_rng(11)
    x = rng.integers(-2 ** 31, 2 ** 31, (2, 3000), dtype=np.int64).astype(np.int32)
    x[0, ::7] = rng.integers(-2, 2, x[0, ::7].shape) * 65536 + rng.integers(0, 2, x[0, ::7].shape)
    x[1, :4] = [2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -2 ** 31]
    fn = _topk_kernel(70, (1, 512), largest)
    got = pj.kernel(fn)(x)
    wide = x.astype(np.int64)
    want = np.argsort(-wide if largest else wide, axis=-1, kind="stable")[:, :70]      # -INT32_MIN as int64
    np.testing.assert_array_equal(np.asarray(got[1]), want)
    np.testing.assert_array_equal(np.asarray(got[0]), np.take_along_axis(x, want, -1))
    assert "merge_topk" in " ".join(_programs(fn, x))


def test_a_row_that_fits_its_tile_is_sorted_in_one_stage():
    x = rand((2, 512), np.float32, seed=4)
    programs = _programs(_topk_kernel(16, (1, 512)), x)
    assert programs == ["topk"]


def test_the_chunk_is_a_per_label_override():
    """The same kernel, two chunk sizes from pass options: more chunks, more stage-1 tasks."""
    x = rand((2, 8192), np.float32, seed=5)
    fn = _topk_kernel(128, (1, 2048))
    tasks = {}
    for chunk in (2048, 512):
        compiled = pj.kernel(fn, options={"tiles": {"TopK": {"vec": (1, chunk)}}}).lower(x).compile()
        (v, i), trace = compiled.run(x)
        np.testing.assert_array_equal(np.asarray(i), np.asarray(jax.lax.top_k(x, 128)[1]))
        tasks[chunk] = sum(1 for t in trace.graph.tasks if t.name.startswith("topk"))
    assert tasks == {2048: 2 * 4, 512: 2 * 16}


def test_staged_topk_errors():
    x = np.zeros((1, 10000), np.float32)
    with pytest.raises(pj.PtoArgumentError, match=r"pto\.topk \(label 'TopK'\): k=5000 does not fit a tile row "
                                                  r"\(at most 4095 columns\)"):
        pj.lower(_topk_kernel(5000, (1, 2048)), x)
    with pytest.raises(pj.PtoArgumentError, match=r"pto\.topk \(label 'TopK'\): a staged top-k chunk of 100 x 4 "
                                                  r"bytes = 400 bytes must be a multiple of 32 bytes"):
        pj.lower(_topk_kernel(10, (1, 100)), x)


def test_deepseek_sized_topk_fits_its_default_tiles_and_ptoas_takes_it():
    """The indexer's top-2048 of 8192 bf16 scores per row, with no ``pj.tile``: ptojax picks tiles that
    fit the UB (the merge of four 2048-lists keeps one row per tile), the result is the sort's prefix,
    and the real PTO (tsort32 / tmrgsort / tgather) assembles."""
    x = rand((4, 8192), ml_dtypes.bfloat16, 7)
    compiled = pj.kernel(lambda s: O.topk(s, 2048)).lower(x).compile()
    values, indices = compiled(x)
    want = np.sort(np.asarray(x, np.float32), axis=-1)[:, ::-1][:, :2048]
    np.testing.assert_array_equal(np.asarray(values, np.float32), want)
    np.testing.assert_array_equal(np.take_along_axis(np.asarray(x, np.float32), np.asarray(indices), -1), want)
    if find_ptoas() or os.environ.get("CI") == "true":
        assert "pto.tsort32" in compiled.as_text("pto") and compiled.ptoas()


@pytest.mark.parametrize("shape,k,dtype", [
    ((2, 4097), 64, np.float16),      # a short chunk of one column: three lists, a fourth sorting last
    ((2, 20000), 16, np.float32),     # ten chunks: twelve lists, merged four at a time, then three
])
def test_a_short_last_chunk_is_read_in_place_and_ptoas_takes_it(shape, k, dtype):
    """Where the chunk does not divide the row, each chunk's top-k reads its window of the row (the
    last one short): no program copies the row into a padded tensor, and the lists' tensor is filled
    with what sorts last where no chunk stores. The result is the one-stage top-k's."""
    x = rand(shape, dtype, seed=6, low=-40, high=40)
    x = np.round(x) + dtype(0)
    fn = _topk_kernel(k, None)
    compiled = pj.kernel(fn).lower(x).compile()
    values, indices = compiled(x)
    want_v, want_i = jax.lax.top_k(x, k)
    np.testing.assert_array_equal(np.asarray(indices), np.asarray(want_i))
    np.testing.assert_array_equal(np.asarray(values), np.asarray(want_v))
    programs = _programs(fn, x)
    assert all("topk" in name for name in programs) and "merge_topk" in programs
    if find_ptoas() or os.environ.get("CI") == "true":
        assert compiled.ptoas()
