"""Findings of a probe of odd and large sizes (over 6 000 cases, no wrong result):

- ``jnp.cumsum`` along axis 0 of an int8 ``(3, 1000, 17)`` was refused ("use a smaller vec tile") with no
  tile set: the default tile's 642 rows per slice left room for one entry of the scan per stage. Default
  tiles now take as few rows as let a stage hold the whole axis (or as many entries as fit).
- ``lax.top_k`` of an int32 ``(8, 2050)`` with ``k = 1`` failed to lower (an internal ``(3, 1)`` tile of
  4-byte rows): the chunk lists of one entry interleave in whole 32-byte rows now.
- int32 ``lax.top_k`` with ``k`` past one pass took minutes on the host (``(129, 2049)``, ``k = 2049``: 366 s;
  ``(17, 8191)``, ``k = 1000``: 49 s) and ``(8, 2049)``, ``k = 2049`` failed to lower: a row one tile sorts
  takes its sort's first ``k`` now (``test_topk_large_k.py``)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


@pytest.mark.parametrize("shape", [(3, 1000, 17), (5, 1000, 33), (2, 3, 700, 17)])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float16])
def test_cumsum_along_a_leading_axis_under_default_tiles(shape, dtype):
    x = np.random.default_rng(sum(shape)).integers(-100, 100, shape).astype(dtype)
    for axis in range(len(shape) - 1):
        got = pj.kernel(lambda a: jnp.cumsum(a, axis=axis))(x)
        want = np.cumsum(x.astype(np.float32 if dtype == np.float16 else np.int64), axis=axis).astype(dtype)
        np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("m", [3, 8, 13])
def test_int32_top_1_of_a_staged_row(m):
    x = np.random.default_rng(m).integers(-30, 30, (m, 2050)).astype(np.int32)
    got = pj.kernel(lambda a: jax.lax.top_k(a, 1))(x)
    for g, w in zip(got, jax.lax.top_k(x, 1)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_a_staged_leading_axis_cumsum_keeps_default_tiles_for_its_other_stages():
    """(The first fix forced the scan's tile on every stage: a (3, 9000, 5) float16 cumsum's casts and carry
    adds took 27 000 one-row tasks, 27 ms of profile, where default tiles make about a hundred.)"""
    x = jax.ShapeDtypeStruct((3, 9000, 5), np.float16)
    profile = pj.kernel(lambda a: jnp.cumsum(a, axis=1)).lower(x).compile().profile()
    assert profile.tasks < 300, profile.tasks
