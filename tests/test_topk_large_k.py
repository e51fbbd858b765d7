"""Top-k along a long row with k past what one staged pass's merges hold in the UB (2 048; 512 for int32):
the first k of the row's sort where one tile sorts the row (at most 8 192 columns), else selected in passes
over the row compacted past the entries taken; equal to XLA's ``lax.top_k``, ties and ``-inf`` included; a k
past a tile row is refused up front with what to do instead."""
import os

import jax
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from ptojax.ascend.ptoas import find_ptoas
from ptojax.lowering.topk import PASS_K, PASS_K_INT32, pass_k


def _equal(got, want):
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _top(k, largest=True):
    def fn(x):
        v, i = lax.top_k(x if largest else -x, k)
        return (v if largest else -v), i
    return fn


def test_pass_limits():
    assert pass_k(np.float32) == pass_k(ml_dtypes.bfloat16) == pass_k(np.float16) == PASS_K == 2048
    assert pass_k(np.int32) == PASS_K_INT32 == 512


def test_k_past_one_pass_equals_xla_with_ties_and_inf():
    """k = 2 100 of 8 300 columns (past the 8 192 one tile sorts): a pass of 2 048, then 52 from the row with
    those removed. Row 0 has fewer finite entries than k (its -inf entries tie with what the compaction leaves
    at the end) and row 1 many ties: the indices still follow XLA's (lower first)."""
    x = np.random.default_rng(0).standard_normal((2, 8300)).astype(np.float32)
    x[0, 50:8000] = -np.inf
    x[1] = np.round(x[1] * 2) + 0.0          # no -0.0: XLA orders it below +0.0, tsort32 does not (docs/ops.md)
    fn = _top(2100)
    compiled = pj.kernel(fn).lower(x).compile()
    _equal(compiled(x), jax.jit(fn)(x))
    graph = compiled.as_text("block").split("\n\n")[-1]
    assert "scatter_update" in graph and "cumsum" in graph and "concat" in graph
    if find_ptoas() or os.environ.get("CI") == "true":
        assert compiled.ptoas()


def test_one_pass_stays_one_pass():
    x = np.random.default_rng(1).standard_normal((1, 9000)).astype(np.float32)
    graph = pj.lower(_top(2048), x).as_text("block").split("\n\n")[-1]
    assert "scatter_update" not in graph and "concat" not in graph and "sort" not in graph


@pytest.mark.slow
def test_smallest_k_with_inf_ties():
    x = np.random.default_rng(2).standard_normal((2, 8300)).astype(np.float32)
    x[0, 100:8000] = np.inf
    fn = _top(2200, largest=False)
    _equal(pj.kernel(fn)(x), jax.jit(fn)(x))


@pytest.mark.slow
def test_int32_passes_of_512():
    x = np.random.default_rng(3).integers(-40, 40, (1, 8300)).astype(np.int32)
    fn = _top(600)
    _equal(pj.kernel(fn)(x), jax.jit(fn)(x))


@pytest.mark.parametrize("dtype,n,k", [(np.float32, 5000, 2100), (np.float32, 8192, 8192), (np.int32, 3000, 600),
                                       (np.int32, 2049, 2049), (np.int32, 8191, 1000)])
def test_k_past_one_pass_of_a_row_one_tile_sorts_is_its_sort(dtype, n, k):
    """A row of at most 8 192 columns with k past one pass (2 048; int32 512) takes its sort's first k (one
    sort; an int32 row past 2 048 columns by its 16-bit halves) instead of passes over the compacted row,
    whose scalar scatters took minutes on the host (129 x 2 049 int32, k = 2 049: 366 s); ties, -inf and
    the row's extremes keep XLA's order, largest and smallest."""
    rng = np.random.default_rng(n + k)
    if dtype == np.int32:
        x = rng.integers(-40, 40, (3, n)).astype(np.int32)
        x[0, :2] = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    else:
        x = np.round(rng.standard_normal((3, n)) * 2).astype(np.float32) + np.float32(0.0)
        x[1, 50:n // 2] = -np.inf
    for largest in (True, False):
        fn = _top(k, largest)
        compiled = pj.kernel(fn).lower(x).compile()
        graph = compiled.as_text("block").split("\n\n")[-1]
        assert "sort" in graph and "scatter_update" not in graph and "cumsum" not in graph
        _equal(compiled(x), jax.jit(fn)(x))


@pytest.mark.parametrize("n,k", [(3000, 8), pytest.param(4000, 1024, marks=pytest.mark.slow)])
def test_int32_rows_past_2048_columns_are_staged(n, k):
    """An int32 row sorts by its 16-bit halves in twice the tiles: a row of 2 049 to 4 095 columns
    overfilled the UB in one tile (a late 'pto realize' capacity error); it is staged as a longer row is."""
    x = np.random.default_rng(n).integers(-1000, 1000, (4, n)).astype(np.int32)
    want = jax.jit(_top(k))(x)
    _equal(pj.kernel(_top(k))(x), want)
    _equal(jax.jit(pj.kernel(_top(k)))(x), want)


def test_under_a_vec_tile_and_past_the_row():
    """A 3 000-column row under a 1 024-column tile (k = 2 500) sorts whole as a sort does, whatever the tile;
    ``pj.ops.topk``'s k past the row pads with -1 / -inf as its one-stage form does."""
    x = np.random.default_rng(4).standard_normal((2, 3000)).astype(ml_dtypes.bfloat16)

    def tiled(x):
        with pj.tile(vec=(1, 1024)):
            return lax.top_k(x, 2500)

    _equal(pj.kernel(tiled)(x), jax.jit(lambda x: lax.top_k(x, 2500))(x))

    def past(x):
        with pj.tile(vec=(1, 1024)):
            return pj.ops.topk(x, 3100)

    _equal(pj.kernel(past)(x), pj.ops.topk(x, 3100))


def test_merge_topk_of_one_int32_list():
    """merge_topk of int32 candidates in one list per row (the dense layout; it had no list pitch)."""
    rng = np.random.default_rng(5)
    v = rng.integers(-5, 5, (2, 1, 200)).astype(np.int32)
    i = rng.permutation(400).astype(np.int32).reshape(2, 1, 200)
    i[0, 0, :3] = -1
    fn = lambda v, i: pj.ops.merge_topk(v, i, 40)            # noqa: E731
    _equal(pj.kernel(fn)(v, i), fn(v, i))


@pytest.mark.parametrize("k", [4096, 32000])
def test_k_past_a_tile_row_is_refused_with_a_next_step(k):
    x = np.zeros((4, 32000), np.float32)
    with pytest.raises(pj.PtoArgumentError) as err:
        pj.kernel(lambda x: lax.top_k(x, k)).lower(x)
    msg = str(err.value)
    assert f"pto.topk: k={k} does not fit a tile row (at most 4095 columns)" in msg and "here 32000 columns" in msg, msg
    assert "lax.top_k(x, 4095)" in msg and "outside the kernel" in msg, msg
