"""Regression: a top-k over rows wider than a tile whose width the chunk does not divide (4 097
columns in chunks of 2 048) padded the whole input to whole chunks through GM first — two ``pad``
programs copying every row, 1 536 more tasks — and was predicted 1.4x slower than the top-k of 8 192
columns (1 198 vs 856 us for 512 rows). Now each chunk is a window its top-k reads in place, the last
one short; the result stays the one-stage top-k's (``lax.top_k``: ties keep the lower index)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


def _topk(k, largest=True):
    return lambda x: pj.ops.topk(x, k, largest=largest)


def _input(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = np.round(rng.uniform(-30, 30, shape)).astype(dtype) + np.dtype(dtype).type(0)   # ties, no -0.0
    x[..., 0, rng.integers(0, shape[-1], 3)] = -np.inf
    x[..., -1, rng.integers(0, shape[-1], 2)] = np.inf
    x[..., -1, -1] = 100                                  # the short chunk holds the row's maximum
    return x


def _programs(fn, *args):
    return [line.split()[1] for line in pj.lower(fn, *args).as_text("block").splitlines()
            if line.startswith("program ")]


@pytest.mark.parametrize("cols,k,dtype", [
    (4097, 8, np.float32),        # a short chunk of 1 column
    (5000, 64, np.float16),       # 904 columns
    (8193, 1000, np.float32),     # 5 chunks: 8 lists in the first merge round, then a merge of 2
    (8193, 8, np.float16),
])
@pytest.mark.parametrize("largest", [True, False])
def test_ragged_rows_equal_lax_top_k(cols, k, dtype, largest):
    x = _input((3, cols), dtype, cols + k)
    fn = _topk(k, largest)
    got_v, got_i = pj.kernel(fn)(x)
    want_v, want_i = jax.lax.top_k(x if largest else -x, k)
    np.testing.assert_array_equal(np.asarray(got_i), np.asarray(want_i))
    np.testing.assert_array_equal(np.asarray(got_v), np.asarray(want_v) if largest else -np.asarray(want_v))
    assert all("topk" in name for name in _programs(fn, x))       # no program copies (pads) x


@pytest.mark.parametrize("shape,k,vec", [
    ((2, 1000), 300, (1, 256)),   # k past the short chunk's 232 columns: its -1 stay -1
    ((2, 3, 2600), 40, None),     # leading dims
])
def test_ragged_rows_jitted_equal_xla(shape, k, vec):
    def fn(x):
        if vec is None:
            return pj.ops.topk(x, k)
        with pj.tile(vec=vec):
            return pj.ops.topk(x, k)

    x = _input(shape, np.float32, 1)
    want_v, want_i = jax.jit(fn)(x)
    for got_v, got_i in (pj.kernel(fn)(x), jax.jit(pj.kernel(fn))(x)):
        np.testing.assert_array_equal(np.asarray(got_i), np.asarray(want_i))
        np.testing.assert_array_equal(np.asarray(got_v), np.asarray(want_v))


def _makespan(cols, k, dtype):
    spec = jax.ShapeDtypeStruct((512, cols), dtype)
    return pj.kernel(_topk(k)).lower(spec).compile().profile().makespan_us


@pytest.mark.parametrize("k,dtype", [(8, jnp.float32), (64, jnp.float16)])
def test_fewer_columns_are_not_slower(k, dtype):
    """4 097 columns take at most about as long as 8 192 (were 1.4x), and a short chunk no more than
    a whole one (4 097 vs 6 144 columns)."""
    ms = {cols: _makespan(cols, k, dtype) for cols in (4097, 6144, 8192)}
    assert ms[4097] <= 1.05 * ms[8192], ms
    assert ms[4097] <= 1.0001 * ms[6144], ms
