"""Regression: the L2's footprint of a tensor was the box spanning the regions calls read, so reads of
interleaved parts (``x[::2]``, then ``x[1::2]``; RoPE's even and odd columns) shared one footprint:
the second part's first reads were L2 hits, and a 256 x 128 f32 input read whole in two strided halves
was charged 66 048 bytes of HBM, not its 131 072. The footprint is now the bytes the calls read."""
import jax
import jax.numpy as jnp
import pytest

import ptojax as pj


def _hbm(fn, shape) -> int:
    profile = pj.kernel(fn).lower(jax.ShapeDtypeStruct(shape, jnp.float32)).compile().profile(compute=False)
    assert profile.makespan_us >= profile.lower_bound_us
    return sum(t.hbm for t in profile.trace.graph.tasks)


@pytest.mark.parametrize("name, fn", [
    ("rows", lambda x: (x[::2] * 2, x[1::2] + 1)),
    ("columns", lambda x: (x[:, ::2] * 2, x[:, 1::2] + 1)),
    ("rope", lambda x: jnp.concatenate([x[:, ::2] * 2 - x[:, 1::2], x[:, 1::2] * 2 + x[:, ::2]], -1)),
    ("thirds", lambda x: (x[::3] * 2, x[1::3] + 1, x[2::3] - 1)),
])
def test_reading_a_tensor_in_interleaved_parts_pays_hbm_for_all_of_it(name, fn):
    shape = (258, 128)
    assert _hbm(fn, shape) >= shape[0] * shape[1] * 4, name


def test_a_part_read_twice_pays_once():
    shape = (256, 128)
    once = _hbm(lambda x: x[::2] * 2, shape)
    assert once >= 128 * 128 * 4
    assert _hbm(lambda x: (x[::2] * 2, x[::2] + 1), shape) == once
