"""gather, index_add, scatter_update, topk, sort against independent NumPy goldens."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import (F32, FLOATS, I32, INTS, NUMERIC, assert_close, assert_eager_matches_jit,
                     assert_vmap_matches_loop, rand, rotate_dtypes)

ops = pj.ops
ALL = NUMERIC


def _exact_grid(x):
    """Round floats to multiples of 1/8 so sums of a few of them are exact in fp16/bf16.

    index_add accumulates in the operand dtype; on this grid every partial sum is representable, so
    the float64 golden is independent of the accumulation order and can be compared exactly.
    """
    if x.dtype in FLOATS:
        return (np.round(x.astype(np.float64) * 8) / 8).astype(x.dtype)
    return x


# ------------------------------------------------------------------------------------ NumPy goldens
def np_gather(x, idx, axis):
    x64 = np.asarray(x)
    n = x64.shape[axis]
    idx = np.asarray(idx)
    valid = (idx >= 0) & (idx < n)
    taken = np.take(x64, np.where(valid, idx, 0), axis=axis)
    mask = valid.reshape((1,) * axis + idx.shape + (1,) * (x64.ndim - axis - 1))
    return np.where(mask, taken, np.zeros((), x64.dtype)).astype(x.dtype)


def np_index_add(x, idx, src, axis):
    dtype = x.dtype
    wide = np.int64 if dtype in INTS else np.float64
    out = np.moveaxis(x.astype(wide), axis, 0).copy()
    k = np.asarray(idx).ndim
    s = np.moveaxis(src.astype(wide), tuple(range(axis, axis + k)), tuple(range(k)))
    flat_idx = np.asarray(idx).reshape(-1)
    s = s.reshape((flat_idx.size,) + out.shape[1:])
    for j, i in enumerate(flat_idx):
        if 0 <= i < out.shape[0]:
            out[i] += s[j]
    # float64 rounded once to dtype; int64 cast back wraps modulo 2**bits like int8/int32 accumulation
    return np.moveaxis(out, 0, axis).astype(dtype)


def np_scatter(x, idx, upd, axis):
    out = np.moveaxis(np.array(x), axis, 0).copy()
    u = np.moveaxis(np.asarray(upd), axis, 0)
    for j, i in enumerate(np.asarray(idx)):
        if 0 <= i < out.shape[0]:
            out[i] = u[j]  # sequential: the last write wins
    return np.moveaxis(out, 0, axis)


def np_select(x, k, axis, largest):
    """Stable order (ties: lower index first), NaN above +inf; padded with -1 / the extreme value."""
    x = np.asarray(x)
    xm = np.moveaxis(x, axis, -1)
    v64 = xm.astype(np.float64)
    nan = np.isnan(v64)
    key = np.where(nan, 0.0, v64)
    pos = np.broadcast_to(np.arange(xm.shape[-1]), xm.shape)
    if largest:
        order = np.lexsort((pos, -key, -nan.astype(np.int8)), axis=-1)
    else:
        order = np.lexsort((pos, key, nan.astype(np.int8)), axis=-1)
    n = xm.shape[-1]
    order = order[..., :min(k, n)]
    vals = np.take_along_axis(xm, order, axis=-1)
    if k > n:
        pad_shape = xm.shape[:-1] + (k - n,)
        if x.dtype in INTS:
            info = np.iinfo(x.dtype)
            fill = info.min if largest else info.max
        else:
            fill = -np.inf if largest else np.inf
        vals = np.concatenate([vals, np.full(pad_shape, fill, x.dtype)], axis=-1)
        order = np.concatenate([order, np.full(pad_shape, -1)], axis=-1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(order.astype(np.int32), -1, axis)


def _idx(values):
    return np.asarray(values, np.int32)




# ------------------------------------------------------------------------------------------- gather
GATHER_CASES = [
    # x shape, axis, indices (with out-of-range and -1 entries)
    ((7,), 0, _idx([3, -1, 0, 6, 7, 100, 3])),
    ((3, 5), 1, _idx([4, 0, -1])),
    ((3, 5), 0, _idx(2)),                              # rank-0 index drops the axis
    ((1, 13), -1, _idx([[12, -1], [5, 13], [0, 0]])),  # rank-2 indices
    ((4, 1, 6), 1, _idx([0, 0, -1])),                  # size-1 axis
    ((2, 3, 17), 2, _idx([[16, 1, -7]])),
]


@pytest.mark.parametrize("shape,axis,idx,dtype", rotate_dtypes(GATHER_CASES, ALL))
def test_gather_golden(shape, axis, idx, dtype):
    x = rand(shape, dtype, seed=1)
    got = assert_eager_matches_jit(lambda a, i: ops.gather(a, i, axis=axis), x, idx)
    ax = axis % len(shape)
    want = np_gather(x, idx, ax)
    assert got.dtype == dtype
    assert got.shape == shape[:ax] + idx.shape + shape[ax + 1:]
    # gather only moves values: exact for every dtype
    np.testing.assert_array_equal(np.asarray(got), want)


def test_gather_bool_and_invalid_selects_zero():
    x = np.array([[True, False], [True, True]])
    got = ops.gather(x, _idx([1, -1, 2]), axis=0)
    np.testing.assert_array_equal(np.asarray(got), [[True, True], [False, False], [False, False]])
    # -1 is not "last row": it selects zeros
    got = ops.gather(np.arange(1, 5, dtype=np.float32), _idx([-1, -2, 3]))
    np.testing.assert_array_equal(np.asarray(got), [0, 0, 4])


GATHER_VMAP = [
    # x shape (incl. batch), idx shape (incl. batch), in_axes, axis
    ((3, 4, 5), (3, 2), (0, 0), 1),        # batched data and batched indices
    ((4, 3, 5), (3, 2), (1, 0), 0),        # data batched at axis 1
    ((4, 5), (3, 2), (None, 0), 1),        # batched indices, unbatched data
    ((3, 4, 5), (2,), (0, None), 0),       # batched data, unbatched indices
    ((3, 4, 5), (3,), (0, 0), 1),          # rank-0 index per example
    ((3, 4, 5), (3, 2, 2), (0, 0), 0),     # rank-2 index per example
]


@pytest.mark.parametrize("xs,isz,in_axes,axis", GATHER_VMAP)
def test_gather_vmap(xs, isz, in_axes, axis):
    x = rand(xs, F32, seed=2)
    n = 5 if axis == 1 else 4
    idx = np.random.default_rng(3).integers(-1, n + 1, size=isz).astype(np.int32)
    assert_vmap_matches_loop(lambda a, i: ops.gather(a, i, axis=axis), (x, idx), in_axes)


# ---------------------------------------------------------------------------------------- index_add
INDEX_ADD_CASES = [
    ((7,), 0, _idx([3, 3, -1, 0, 3, 9])),
    ((3, 5), 1, _idx([4, 4, 0, -1])),
    ((1, 13), 0, _idx([0, 0, 0])),
    ((4, 1, 6), 0, _idx([[1, 1], [3, -1]])),  # rank-2 indices
    ((2, 3, 17), 1, _idx(2)),                 # rank-0 index
]


@pytest.mark.parametrize("mode", ["fill", "clip"])
@pytest.mark.parametrize("in_axes", [(0, 0), (1, 0), (2, 1)])
def test_vmap_of_a_kernel_taking_from_a_batched_table(in_axes, mode):
    """jax.vmap of a kernel whose ``jnp.take`` table is batched: JAX writes a gather with batching dims
    (it had no translation); out-of-range indices read NaN (fill) or the edge row (clip), as XLA."""
    def lookup(tab, idx):
        return jnp.take(tab, idx, axis=0, mode=mode) * 2.0

    rng = np.random.default_rng(0)
    tabs = np.moveaxis(rng.standard_normal((3, 30, 16)).astype(np.float32), 0, in_axes[0])
    idx = np.moveaxis(rng.integers(-2, 33, (3, 10)).astype(np.int32), 0, in_axes[1])
    for backend in ("sim", "xla"):
        got = jax.vmap(pj.kernel(lookup, backend=backend), in_axes)(tabs, idx)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.vmap(lookup, in_axes)(tabs, idx)))


def test_vmap_of_a_kernel_with_dynamic_slice():
    """jax.vmap of a kernel that picks row blocks with ``lax.dynamic_slice`` in a loop: JAX writes one
    window as a gather (it had no translation); starts past the end clamp, as lax clamps them."""
    def rowblocks(x):
        with pj.tile(vec=(8, 32)):
            def body(j, acc):
                return acc + jax.lax.dynamic_slice(x, (j * 8 + 3, 0), (8, 32))
            return jax.lax.fori_loop(0, 5, body, jnp.zeros((8, 32), jnp.float32))

    xs = np.random.default_rng(1).standard_normal((2, 32, 32)).astype(np.float32)
    for backend in ("sim", "xla"):
        got = jax.vmap(pj.kernel(rowblocks, backend=backend))(xs)
        np.testing.assert_allclose(np.asarray(got), np.asarray(jax.vmap(rowblocks)(xs)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape,axis,idx,dtype", rotate_dtypes(INDEX_ADD_CASES, NUMERIC))
def test_index_add_golden(shape, axis, idx, dtype):
    x = _exact_grid(rand(shape, dtype, seed=4))
    src_shape = shape[:axis] + idx.shape + shape[axis + 1:]
    src = _exact_grid(rand(src_shape, dtype, seed=5))
    got = assert_eager_matches_jit(lambda a, i, s: ops.index_add(a, i, s, axis=axis), x, idx, src)
    assert got.dtype == dtype
    assert_close(got, np_index_add(x, idx, src, axis), dtype)


def test_index_add_float32_random_accumulates():
    x = rand((6, 3), F32, seed=6)
    idx = _idx([2, 2, 2, 5, -1, 6])
    src = rand((6, 3), F32, seed=7)
    got = ops.index_add(x, idx, src)
    assert_close(got, np_index_add(x, idx, src, 0), F32)
    # the -1 / 6 rows added nothing: rows 0, 1, 3, 4 unchanged
    np.testing.assert_array_equal(np.asarray(got)[[0, 1, 3, 4]], x[[0, 1, 3, 4]])


def test_index_add_int8_wraps():
    x = np.array([100, 0], np.int8)
    got = ops.index_add(x, _idx([0, 0, 1]), np.array([20, 10, -128], np.int8))
    np.testing.assert_array_equal(np.asarray(got), np.array([130 - 256, -128], np.int8))


INDEX_ADD_VMAP = [
    # x shape, idx shape, src shape, in_axes (x, idx, src), axis
    ((3, 4, 5), (3, 4), (3, 4, 4), (0, 0, 0), 1),      # everything batched
    ((4, 5), (3, 4), (3, 4, 4), (None, 0, 0), 1),      # batched indices + src, unbatched data
    ((4, 5), (3, 4), (4, 4), (None, 0, None), 1),      # only indices batched
    ((3, 4, 5), (4,), (3, 4, 4), (0, None, 0), 1),     # batched data, unbatched indices
    ((4, 3, 5), (2, 3), (2, 3, 5), (1, 1, 1), 0),      # all batched at axis 1
    ((4, 3, 5), (3, 2), (2, 5), (1, 0, None), 0),      # data at axis 1, batched indices, shared src
]


@pytest.mark.parametrize("xs,isz,ss,in_axes,axis", INDEX_ADD_VMAP)
def test_index_add_vmap(xs, isz, ss, in_axes, axis):
    x = rand(xs, F32, seed=8)
    src = rand(ss, F32, seed=9)
    n = 5 if axis == 1 else 4
    idx = np.random.default_rng(10).integers(-1, n, size=isz).astype(np.int32)
    idx.flat[0] = idx.flat[1]  # at least one repeated index
    assert_vmap_matches_loop(lambda a, i, s: ops.index_add(a, i, s, axis=axis), (x, idx, src), in_axes)


# ------------------------------------------------------------------------------------ scatter_update
SCATTER_CASES = [
    # paged KV cache flattened: (num_blocks*block_size, heads, dim), slots along axis 0
    ((12, 2, 3), 0, _idx([5, -1, 0, 11, 5])),
    # (blocks, block_size, H, D) written along the block_size axis
    ((3, 4, 1, 5), 1, _idx([3, 0, -1])),
    # (blocks, block_size, H, D) written along the block axis
    ((3, 4, 1, 5), 0, _idx([2])),
    ((7,), 0, _idx([6, 6, 6, -1, 7])),
    ((1, 13), -1, _idx([12, 0, 12])),
]


@pytest.mark.parametrize("shape,axis,idx,dtype", rotate_dtypes(SCATTER_CASES, ALL))
def test_scatter_update_golden(shape, axis, idx, dtype):
    ax = axis % len(shape)
    x = rand(shape, dtype, seed=11)
    upd = rand(shape[:ax] + idx.shape + shape[ax + 1:], dtype, seed=12)
    got = assert_eager_matches_jit(lambda a, i, u: ops.scatter_update(a, i, u, axis=axis), x, idx, upd)
    assert got.dtype == dtype
    np.testing.assert_array_equal(np.asarray(got), np_scatter(x, idx, upd, ax))


def test_scatter_update_last_write_wins_and_minus_one_writes_nothing():
    cache = np.zeros((4, 2), np.float32)
    upd = np.array([[1, 1], [2, 2], [3, 3], [4, 4]], np.float32)
    got = ops.scatter_update(cache, _idx([1, -1, 1, 3]), upd)
    np.testing.assert_array_equal(np.asarray(got), [[0, 0], [3, 3], [0, 0], [4, 4]])


def _scatter_stage_edges(fn, *args):
    """Per scatter_update block call of ``pj.kernel(fn)`` run on ``args``: (tasks, edges between them)."""
    trace = pj.kernel(fn).compiled_for(*args).run(*args)[1]
    stages = {}
    for t in trace.graph.tasks:
        if t.name.startswith("scatter_update"):
            stages.setdefault(t.stage, []).append(t)
    return [(len(ts), sum(p in ts for t in ts for p in t.preds)) for ts in stages.values()]


def test_unique_index_scatters_need_no_order_within_a_call():
    """A dynamic_update_slice (a window: distinct rows) and ``unique_indices=True`` scatter index tiles
    in tasks with no dependencies on each other; a plain scatter_update (repeats: the last write wins)
    keeps its tasks in program order. Results equal XLA's / NumPy's either way."""
    rng = np.random.default_rng(20)
    cache, rows = rng.normal(size=(8, 512, 64)).astype(F32), rng.normal(size=(8, 128, 64)).astype(F32)

    def window(c, r, start):
        return jax.lax.dynamic_update_slice(c, r, (0, start, 0))

    start = np.int32(200)
    np.testing.assert_array_equal(np.asarray(pj.kernel(window)(cache, rows, start)),
                                  np.asarray(window(cache, rows, start)))
    calls = _scatter_stage_edges(window, cache, rows, start)
    assert calls and all(n > 1 and edges == 0 for n, edges in calls), calls

    flat, upd = cache.reshape(4096, 64), rows.reshape(1024, 64)
    idx = rng.permutation(4096)[:1024].astype(np.int32)
    for unique in (True, False):
        fn = lambda c, i, u, unique=unique: ops.scatter_update(c, i, u, unique_indices=unique)  # noqa: E731
        np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(flat, idx, upd)), np_scatter(flat, idx, upd, 0))
        calls = _scatter_stage_edges(fn, flat, idx, upd)
        assert all(n > 1 and (edges == 0) == unique for n, edges in calls), (unique, calls)
    at = lambda c, i, u: c.at[i].set(u, unique_indices=True)  # noqa: E731 - jnp's flag reaches the runtime
    np.testing.assert_array_equal(np.asarray(pj.kernel(at)(flat, idx, upd)), np_scatter(flat, idx, upd, 0))
    assert all(edges == 0 for _, edges in _scatter_stage_edges(at, flat, idx, upd))


SCATTER_VMAP = [
    # cache shape, idx shape, updates shape, in_axes (x, idx, upd), axis
    ((3, 8, 2, 3), (3, 4), (3, 4, 2, 3), (0, 0, 0), 0),      # per-sequence cache, slots, updates
    ((8, 2, 3), (3, 4), (3, 4, 2, 3), (None, 0, 0), 0),      # batched slots + updates, shared cache
    ((8, 2, 3), (3, 4), (4, 2, 3), (None, 0, None), 0),      # only slots batched
    ((3, 8, 2, 3), (4,), (3, 4, 2, 3), (0, None, 0), 0),     # batched cache, shared slots
    ((8, 3, 2), (3, 4), (4, 3, 2), (1, 0, 1), 0),            # cache batched at axis 1
    ((2, 3, 4, 5), (2, 3), (2, 3, 2, 5), (1, 1, 1), 1),      # (blocks, block_size, D), write block_size
]


@pytest.mark.parametrize("xs,isz,us,in_axes,axis", SCATTER_VMAP)
def test_scatter_update_vmap(xs, isz, us, in_axes, axis):
    x = rand(xs, F32, seed=13)
    upd = rand(us, F32, seed=14)
    dx = in_axes[0]
    n = [d for j, d in enumerate(xs) if j != dx][axis]
    idx = np.random.default_rng(15).integers(-1, n, size=isz).astype(np.int32)
    idx.flat[0] = idx.flat[1] = max(int(idx.flat[1]), 0)  # a repeated, valid index
    assert_vmap_matches_loop(lambda a, i, u: ops.scatter_update(a, i, u, axis=axis), (x, idx, upd), in_axes)


# ------------------------------------------------------------------------------------- topk and sort
TOPK_CASES = [
    # shape, k, axis, largest
    ((1,), 1, -1, True),
    ((7,), 3, 0, False),
    ((3, 5), 5, 1, True),
    ((3, 5), 2, 0, False),
    ((2, 3, 17), 4, -1, True),
    ((4, 1, 6), 3, 1, False),     # k > axis size 1: padded with -1 and +inf / int max
    ((1, 13), 16, -1, True),      # k > axis size: padded with -1 and -inf / int min
    ((1, 13), 2, 0, False),       # k > size-1 axis
]


def _with_ties(x):
    """Copy some values so ties appear (ties must keep the lower index first)."""
    x = np.array(x)
    flat = x.reshape(-1)
    if flat.size > 3:
        flat[1::3] = flat[0]
    return x


@pytest.mark.parametrize("shape,k,axis,largest,dtype", rotate_dtypes(TOPK_CASES, NUMERIC, per_case=2))
def test_topk_golden(shape, k, axis, largest, dtype):
    x = _with_ties(rand(shape, dtype, seed=16))
    vals, idx = assert_eager_matches_jit(lambda a: ops.topk(a, k, axis=axis, largest=largest), x)
    want_v, want_i = np_select(x, k, axis % len(shape), largest)
    assert vals.dtype == dtype and idx.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(idx), want_i)
    np.testing.assert_array_equal(np.asarray(vals), want_v)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_nan_sorts_above_inf(largest):
    x = np.array([1.0, np.inf, np.nan, -np.inf, np.nan, 2.0], np.float32)
    vals, idx = ops.topk(x, 8, largest=largest)
    want_v, want_i = np_select(x, 8, 0, largest)
    np.testing.assert_array_equal(np.asarray(idx), want_i)
    np.testing.assert_array_equal(np.asarray(vals), want_v)  # assert_array_equal treats NaN == NaN
    if largest:
        np.testing.assert_array_equal(np.asarray(idx)[:3], [2, 4, 1])
    else:
        np.testing.assert_array_equal(np.asarray(idx), [3, 0, 5, 1, 2, 4, -1, -1])


def test_topk_int_padding_limits():
    x = np.array([5, -3], np.int8)
    v, i = ops.topk(x, 4)
    np.testing.assert_array_equal(np.asarray(v), [5, -3, -128, -128])
    np.testing.assert_array_equal(np.asarray(i), [0, 1, -1, -1])
    v, i = ops.topk(x.astype(np.int32), 3, largest=False)
    np.testing.assert_array_equal(np.asarray(v), [-3, 5, np.iinfo(np.int32).max])
    np.testing.assert_array_equal(np.asarray(i), [1, 0, -1])


SORT_CASES = [((1,), -1, False), ((7,), 0, True), ((3, 5), 0, False), ((1, 13), 1, True),
              ((2, 3, 17), 1, False)]


@pytest.mark.parametrize("shape,axis,descending,dtype", rotate_dtypes(SORT_CASES, NUMERIC, per_case=2))
def test_sort_golden(shape, axis, descending, dtype):
    x = _with_ties(rand(shape, dtype, seed=17))
    vals, idx = assert_eager_matches_jit(lambda a: ops.sort(a, axis=axis, descending=descending), x)
    ax = axis % len(shape)
    want_v, want_i = np_select(x, shape[ax], ax, descending)
    assert vals.dtype == dtype and idx.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(idx), want_i)
    np.testing.assert_array_equal(np.asarray(vals), want_v)


def test_sort_stable_ties():
    x = np.array([2, 1, 2, 1, 2], np.int32)
    _, idx = ops.sort(x)
    np.testing.assert_array_equal(np.asarray(idx), [1, 3, 0, 2, 4])
    _, idx = ops.sort(x, descending=True)
    np.testing.assert_array_equal(np.asarray(idx), [0, 2, 4, 1, 3])


@pytest.mark.parametrize("in_axis,axis,k,largest", [(0, -1, 6, True), (1, 0, 2, False), (2, 0, 3, True)])
def test_topk_vmap(in_axis, axis, k, largest):
    x = _with_ties(rand((3, 4, 5), F32, seed=18))
    assert_vmap_matches_loop(lambda a: ops.topk(a, k, axis=axis, largest=largest), (x,), (in_axis,))


@pytest.mark.parametrize("in_axis,axis", [(1, 0), (2, -1)])
def test_sort_vmap(in_axis, axis):
    x = _with_ties(rand((3, 4, 5), I32, seed=19))
    assert_vmap_matches_loop(lambda a: ops.sort(a, axis=axis, descending=True), (x,), (in_axis,))


# ---------------------------------------------------------------------------------------- bad inputs
def _raises(cls, fn, *needles):
    with pytest.raises(cls) as info:
        fn()
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, (needle, msg)
    return msg


def test_gather_float_indices():
    x = np.zeros((3, 4), np.float32)
    _raises(pj.PtoDtypeError, lambda: ops.gather(x, np.array([0.0, 1.0], np.float32)),
            "pto.gather", "float32", "int32", "(2,)")


def test_gather_int8_indices():
    _raises(pj.PtoDtypeError, lambda: ops.gather(np.zeros(4, np.float32), np.array([1], np.int8)),
            "pto.gather", "int8")


def test_gather_axis_out_of_range():
    _raises(pj.PtoArgumentError, lambda: ops.gather(np.zeros((3, 4), np.float32), _idx([0]), axis=2),
            "pto.gather", "axis 2")


def test_index_add_source_wrong_shape():
    _raises(pj.PtoShapeError,
            lambda: ops.index_add(np.zeros((4, 5), np.float32), _idx([0, 1]), np.zeros((2, 4), np.float32)),
            "pto.index_add", "(2, 4)", "(2, 5)", "(4, 5)")


def test_index_add_dtype_mismatch():
    _raises(pj.PtoDtypeError,
            lambda: ops.index_add(np.zeros((4,), np.float32), _idx([0]), np.zeros((1,), np.float16)),
            "pto.index_add", "float32", "float16")


def test_scatter_update_2d_indices():
    _raises(pj.PtoShapeError,
            lambda: ops.scatter_update(np.zeros((8, 3), np.float32), _idx([[0, 1]]),
                                       np.zeros((1, 2, 3), np.float32)),
            "pto.scatter_update", "1-D", "(1, 2)")


def test_scatter_update_updates_wrong_shape():
    _raises(pj.PtoShapeError,
            lambda: ops.scatter_update(np.zeros((8, 2, 3), np.float32), _idx([0, 1]),
                                       np.zeros((2, 2, 4), np.float32)),
            "pto.scatter_update", "(2, 2, 4)", "(2, 2, 3)", "(8, 2, 3)")


def test_scatter_update_float_indices():
    _raises(pj.PtoDtypeError,
            lambda: ops.scatter_update(np.zeros((8,), np.float32), np.array([1.0], np.float32),
                                       np.zeros((1,), np.float32)),
            "pto.scatter_update", "float32")


@pytest.mark.parametrize("k", [0, -2, 1.5, True])
def test_topk_bad_k(k):
    _raises(pj.PtoArgumentError, lambda: ops.topk(np.zeros((4,), np.float32), k), "pto.topk", repr(k))


def test_topk_bool():
    _raises(pj.PtoDtypeError, lambda: ops.topk(np.zeros((4,), bool), 1), "pto.topk", "bool")


def test_sort_axis_out_of_range():
    _raises(pj.PtoArgumentError, lambda: ops.sort(np.zeros((4,), np.float32), axis=1), "pto.sort", "axis 1")


# ------------------------------------------------------------------------------------- merge_topk
MERGE_CASES = [
    # row shape (lead..., n), chunks (the lists), top-k per chunk, k merged, largest
    ((4, 32), 4, 8, 8, True),
    ((2, 3, 64), 4, 16, 5, False),
    ((3, 30), 3, 10, 10, True),         # each chunk sorted whole
    ((45,), 3, 15, 50, True),           # k past the 45 pairs: padded
]


def _chunked_topk(x, chunks, kk, largest):
    """Per-chunk top-``kk`` lists ``[..., chunks, kk]`` of the rows of ``x`` (the last axis cut into
    ``chunks``), indices offset to the row."""
    *lead, n = x.shape
    v, i = np_select(x.reshape(*lead, chunks, n // chunks), kk, len(lead) + 1, largest)
    return v, np.where(i >= 0, i + (np.arange(chunks) * (n // chunks)).reshape(chunks, 1), -1).astype(np.int32)


@pytest.mark.parametrize("shape,chunks,kk,k,largest,dtype", rotate_dtypes(MERGE_CASES, NUMERIC, per_case=2))
def test_merge_topk_of_chunk_lists_equals_topk_of_the_row(shape, chunks, kk, k, largest, dtype):
    x = _with_ties(rand(shape, dtype, seed=20))
    v, i = _chunked_topk(x, chunks, kk, largest)
    vals, idx = assert_eager_matches_jit(lambda a, b: ops.merge_topk(a, b, k, largest=largest), v, i)
    assert vals.shape == shape[:-1] + (k,) and vals.dtype == dtype and idx.dtype == np.int32
    want_v, want_i = np_select(x, k, len(shape) - 1, largest)
    np.testing.assert_array_equal(np.asarray(idx), want_i)
    np.testing.assert_array_equal(np.asarray(vals), want_v)


def test_merge_topk_nan_ties_and_padding_order():
    v = np.array([[[np.nan, 3.0, 1.0], [np.inf, 3.0, -np.inf]]], np.float32)
    i = np.array([[[5, 7, 2], [9, 1, -1]]], np.int32)
    vals, idx = ops.merge_topk(v, i, 8)
    np.testing.assert_array_equal(np.asarray(idx), [[5, 9, 1, 7, 2, -1, -1, -1]])
    np.testing.assert_array_equal(np.asarray(vals), [[np.nan, np.inf, 3, 3, 1, -np.inf, -np.inf, -np.inf]])
    vals, idx = ops.merge_topk(v, i, 6, largest=False)
    np.testing.assert_array_equal(np.asarray(idx), [[-1, 2, 1, 7, 9, 5]])


@pytest.mark.parametrize("in_axes", [(0, 0), (1, None), (2, 2)])
def test_merge_topk_vmap(in_axes):
    v = _with_ties(rand((3, 4, 2, 3), F32, seed=21))
    i = np.argsort(rand((3, 4, 2, 3), F32, seed=22), axis=-1).astype(np.int32)
    if in_axes[1] is None:
        i = i[:, 0]
    assert_vmap_matches_loop(lambda a, b: ops.merge_topk(a, b, 5), (v, i), in_axes)


def test_merge_topk_bad_inputs():
    v, i = np.zeros((2, 4), np.float32), np.zeros((2, 4), np.int32)
    _raises(pj.PtoShapeError, lambda: ops.merge_topk(v, i[:, :3], 2), "pto.merge_topk", "(2, 3)", "[..., lists, length]")
    _raises(pj.PtoShapeError, lambda: ops.merge_topk(v[0], i[0], 2), "pto.merge_topk", "[..., lists, length]")
    _raises(pj.PtoDtypeError, lambda: ops.merge_topk(v, v, 2), "pto.merge_topk", "indices")
    _raises(pj.PtoArgumentError, lambda: ops.merge_topk(v, i, 0), "pto.merge_topk", "positive int")


# ------------------------------------------------------------- indexed rows along an inner axis, in kernels
def _sim_and_xla(fn, *args):
    got = pj.kernel(fn)(*args)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(pj.kernel(fn, backend="xla")(*args)))
    return np.asarray(got)


@pytest.mark.parametrize("shape,axis", [((64, 40, 128), 1), ((3, 4, 9, 32), 2), ((5, 12, 16), 1)])
def test_inner_axis_gather_moves_rows_not_slabs(shape, axis):
    """The leading dims fold into the rows: a tile of 16 indices into (64, 40, 128) fp32 moves 16 x 128
    values per leading position — the (64, 16, 128) slab (512 KiB) would not fit the 192 KiB UB."""
    x = rand(shape, F32, seed=21)
    n = shape[axis]
    idx = _idx([n - 1, -1, 0, n, 3, 3, 1, n - 2, -5, 2, 0, 7 % n, 5, 6 % n, 1, 4])
    got = _sim_and_xla(lambda a, i: ops.gather(a, i, axis=axis), x, idx)
    np.testing.assert_array_equal(got, np_gather(x, idx, axis))     # out of range: zeros, never a neighbour's row


@pytest.mark.parametrize("op", ["scatter_update", "index_add"])
def test_inner_axis_scatter_folds_rows(op):
    x = _exact_grid(rand((48, 10, 128), F32, seed=22))
    idx = _idx([9, -1, 4, 4, 10, 0])                     # repeats, -1 and n: the last write wins / adds nothing
    src = _exact_grid(rand((48, 6, 128), F32, seed=23))
    got = _sim_and_xla(lambda a, i, s: getattr(ops, op)(a, i, s, axis=1), x, idx, src)
    want = np_scatter(x, idx, src, 1) if op == "scatter_update" else np_index_add(x, idx, src, 1)
    np.testing.assert_array_equal(got, want)


def test_dynamic_slices_along_an_inner_axis_of_many_heads():
    """lax.dynamic_slice / dynamic_update_slice on axis 1 of (64 heads, 48, 128) (flash attention's KV
    blocks): clamped starts as XLA clamps them, no UB overflow."""
    x = rand((64, 48, 128), F32, seed=24)
    upd = rand((64, 16, 128), F32, seed=25)

    def fn(a, u, j):
        return jax.lax.dynamic_slice(a, (0, j, 0), (64, 16, 128)), jax.lax.dynamic_update_slice(a, u, (0, j, 0))

    for j in (0, 17, 40):                                   # 40: clamped to 32
        start = min(j, 32)
        got_slice, got_update = pj.kernel(fn)(x, upd, np.int32(j))
        np.testing.assert_array_equal(np.asarray(got_slice), x[:, start:start + 16])
        want = x.copy()
        want[:, start:start + 16] = upd
        np.testing.assert_array_equal(np.asarray(got_update), want)


def test_take_along_axis_in_kernels():
    """jnp.take_along_axis (lax.gather with batching dims): negative indices wrap as in jnp, past the
    axis reads NaN (jnp's fill); a cross-entropy written with it matches."""
    rng = np.random.default_rng(26)
    x = rng.normal(size=(6, 50)).astype(F32)
    i = rng.integers(-3, 53, (6, 4)).astype(I32)
    f = lambda a, b: jax.numpy.take_along_axis(a, b, -1)  # noqa: E731
    np.testing.assert_array_equal(np.asarray(pj.kernel(f)(x, i)), np.asarray(f(x, i)))
    x4 = rng.normal(size=(2, 4, 10, 5)).astype(F32)
    i4 = rng.integers(0, 10, (2, 4, 3, 5)).astype(I32)
    g = lambda a, b: jax.numpy.take_along_axis(a, b, 2)  # noqa: E731
    np.testing.assert_array_equal(np.asarray(pj.kernel(g)(x4, i4)), np.asarray(g(x4, i4)))
    labels = rng.integers(0, 50, 6).astype(I32)
    h = lambda a, y: jax.numpy.mean(jax.nn.logsumexp(a, -1) - jax.numpy.take_along_axis(a, y[:, None], -1)[:, 0])  # noqa: E731
    np.testing.assert_allclose(float(pj.kernel(h)(x, labels)), float(h(x, labels)), rtol=1e-6)


@pytest.mark.parametrize("fn", [lambda x, i: x[i], lambda x, i: x.at[i].add(1.0),
                                lambda x, i: x.at[i].set(5.0, mode="drop"),
                                lambda x, i: jnp.take_along_axis(x, i, 0, mode="fill"),
                                lambda x, i: jax.ops.segment_sum(x[:5], jnp.abs(i) % 4, 4)])
def test_gathers_and_scatters_of_a_1d_array(fn):
    """A 1-D table has no other coordinate: the offsets' base summed nothing (AttributeError on an int)."""
    x, i = np.arange(33, dtype=np.float32), np.array([0, 3, 8, -1, 40], np.int32)
    want = np.asarray(jax.jit(fn)(x, i))
    for run in (pj.kernel(fn), jax.jit(pj.kernel(fn))):
        np.testing.assert_array_equal(np.asarray(run(x, i)), want)


@pytest.mark.parametrize("fn", [lambda x: jnp.argsort(x, descending=True),
                                lambda x: jnp.argsort(x, axis=0, descending=True),
                                lambda x: jnp.cumsum(x, 0), lambda x: jnp.sort(x, axis=0)])
def test_descending_argsort_and_default_tiles_of_a_whole_leading_axis(fn):
    """``argsort(descending=True)`` permutes a reversed iota (refused: 'one key'); a cumsum or sort along
    a leading axis of 129 took default tiles of 129 x 1000 f32, past the UB (PtoCapacityError)."""
    x = np.random.default_rng(0).integers(0, 9, (129, 1000)).astype(np.float32)
    want = np.asarray(jax.jit(fn)(x))
    for run in (pj.kernel(fn), jax.jit(pj.kernel(fn))):
        np.testing.assert_array_equal(np.asarray(run(x)), want)
