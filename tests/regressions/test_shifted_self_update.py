"""A kernel that writes a shifted copy of its input into it (``c.at[1:].set(c[:-1] * 2)``):

* under ``jax.jit`` the replay's first store into an input's own buffer was a ``dynamic_update_slice``
  of the reshaped parameter, which XLA:CPU (jaxlib 0.10) updates in place while reading the rows it
  has written (rows 2.. came out as ``2**r * c[0]``); the first store into an input is an element
  scatter (``strided.plain_store``);
* with ``donate_argnums`` the block call wrote the donated array in place although its tasks read rows
  that other tasks write; in place now only where each task reads just what it writes."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


def _shift(c):
    return c.at[1:].set(c[:-1] * 2.0)


def _transpose(c):
    return c.at[:].set(c.T)


def _bump(c):                                       # each tile read where it is written: in place
    return c.at[:].add(1.0)


@pytest.mark.parametrize("rows, dtype", [(128, np.float32), (256, np.float32), (128, jnp.bfloat16)])
def test_a_shifted_self_update_under_jit(rows, dtype):
    c = (np.arange(rows * 128, dtype=np.float32).reshape(rows, 128) / 1000).astype(dtype)
    got = np.asarray(jax.jit(pj.kernel(_shift))(c), np.float32)
    np.testing.assert_array_equal(got, np.asarray(jax.jit(_shift)(c), np.float32))


@pytest.mark.parametrize("fn", [_shift, _transpose, _bump])
def test_a_donated_array_is_updated_in_place_only_where_no_task_reads_another_ones_rows(fn):
    c = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    want = np.asarray(jax.jit(fn)(c))
    buffer = c.copy()
    got = np.asarray(pj.kernel(fn, donate_argnums=0)(buffer))
    np.testing.assert_array_equal(got, want)
    if fn is _bump:
        np.testing.assert_array_equal(buffer, want)      # still written in place: the donated array holds it
