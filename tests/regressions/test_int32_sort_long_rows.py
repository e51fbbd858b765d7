"""int32 ``jnp.sort`` / ``jnp.argsort`` of rows past about 2 800 columns overfilled the UB in one tile (a late
``pto realize`` capacity error whose advice, fewer rows or columns, did not help: a sort keeps its row whole,
and int32 sorts by its 16-bit halves with more buffers than a float32 sort). Such a row now sorts as two
whole-row float32 sorts of its halves with gathers between them, equal to numpy's stable sort; a row past
what one tile sorts (8 192 columns) is refused up front with what to do instead."""
import os

import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend.ptoas import find_ptoas

INT = np.iinfo(np.int32)


def _rows(shape, seed, ties):
    rng = np.random.default_rng(seed)
    x = (rng.integers(-6, 6, shape) if ties else rng.integers(INT.min, INT.max, shape, dtype=np.int64)).astype(np.int32)
    flat = x.reshape(-1)
    flat[:8] = [INT.min, INT.max, INT.min, INT.max, 0, -1, 65536, -65536]
    flat[-3:] = [INT.max, INT.min, 65535]
    return x


def _descending_argsort(x):
    """Stable descending order (ties keep the lower index): jnp.argsort(descending=True)'s."""
    return np.flip(x.shape[-1] - 1 - np.argsort(np.flip(x, -1), -1, kind="stable"), -1)


@pytest.mark.parametrize("shape,ties", [((2, 3000), True), ((2, 4097), False), ((2, 8192), True)])
def test_sort_and_argsort_equal_numpy_stable(shape, ties):
    x = _rows(shape, shape[-1], ties)
    values, order = pj.kernel(lambda x: (jnp.sort(x, -1), jnp.argsort(x, -1)))(x)
    np.testing.assert_array_equal(np.asarray(values), np.sort(x, -1))
    np.testing.assert_array_equal(np.asarray(order), np.argsort(x, -1, kind="stable"))


def test_descending_and_take_along_axis():
    x = _rows((2, 4097), 1, ties=True)
    order, taken, values = pj.kernel(lambda x: (jnp.argsort(x, -1, descending=True),
                                                jnp.take_along_axis(x, jnp.argsort(x, -1), -1),
                                                pj.ops.sort(x, -1, descending=True)[0]))(x)
    np.testing.assert_array_equal(np.asarray(order), _descending_argsort(x))
    np.testing.assert_array_equal(np.asarray(taken), np.sort(x, -1))
    np.testing.assert_array_equal(np.asarray(values), -np.sort(-x.astype(np.int64), -1))


def test_under_a_vec_tile_and_ptoas_takes_it():
    x = _rows((3, 4097), 2, ties=True)

    def tiled(x):
        with pj.tile(vec=(1, 512)):
            return jnp.argsort(x, -1)

    compiled = pj.kernel(tiled).lower(x).compile()
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.argsort(x, -1, kind="stable"))
    if find_ptoas() or os.environ.get("CI") == "true":
        assert "pto.tsort32" in compiled.as_text("pto") and compiled.ptoas()


@pytest.mark.parametrize("dtype", [np.int32, np.float32, jnp.bfloat16])
def test_a_row_past_one_tiles_sort_is_refused_with_a_next_step(dtype):
    """Any dtype: a float row's refusal came at realize, advising fewer rows per tile, which no tile
    of 8 193 columns helps."""
    x = np.zeros((2, 8193), dtype)
    with pytest.raises(pj.PtoCapacityError) as err:
        pj.kernel(lambda x: jnp.sort(x, -1)).lower(x)
    msg = str(err.value)
    assert "pto.sort" in msg and "8193 columns" in msg and "(2, 8193)" in msg and "8192 columns" in msg, msg
    assert "lax.top_k" in msg and "outside the kernel" in msg, msg
