"""Rows past a tile row's 4095 columns under the default tiles: every op of a row-loop chain over the
shape takes the same rows, whatever its dtype, so the chain is one program, a row a task while there
are fewer rows than vector cores. Before: a 3-row softmax had 4-row reduction tiles (6 programs,
60.8 us), bf16 chains split where the float32 sum took other rows than the bf16 ops (8 programs), a
compare mask's bool tile split a masked softmax (6 programs), and pj.ops.softmax's reference kept its
reshapes apart (4 programs)."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ptojax as pj

BF16 = ml_dtypes.bfloat16


def _rms(x):
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + 1e-6)).astype(x.dtype)


CASES = {
    "softmax 3x32000": (lambda x: jax.nn.softmax(x, -1), (3, 32000), np.float32),
    "softmax 17x50257": (lambda x: jax.nn.softmax(x, -1), (17, 50257), np.float32),
    "softmax (2,3,32000)": (lambda x: jax.nn.softmax(x, -1), (2, 3, 32000), np.float32),
    "softmax bf16 17x32000": (lambda x: jax.nn.softmax(x, -1), (17, 32000), BF16),
    "rms bf16 17x32000": (_rms, (17, 32000), BF16),
    "masked softmax 17x32000": (lambda x: jax.nn.softmax(jnp.where(x > 1.0, x, -1e30), -1), (17, 32000), np.float32),
    "pj.ops.softmax 40x32000": (lambda x: pj.ops.softmax(x), (40, 32000), np.float32),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_wide_row_chain_is_one_program_a_row_a_task(name):
    fn, shape, dtype = CASES[name]
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    compiled = pj.kernel(fn).lower(x).compile()
    assert len(compiled.lowering.programs) == 1, [p.name for p in compiled.lowering.programs]
    assert compiled.profile(x, compute=False).tasks == int(np.prod(shape[:-1]))
    got = np.asarray(compiled(x), np.float64)
    want = np.asarray(jax.jit(fn)(x), np.float64)
    tol = 1e-6 if dtype == np.float32 else 2 ** -7
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("rows,tasks", [(64, 32), (100, 25), (256, 64)])
def test_more_rows_than_vector_cores_take_more_rows_a_tile(rows, tasks):
    """As few rows a tile as spread the rows over the 48 vector cores at once, a power of two, at most
    four: 64 rows in 32 tasks of two (one round: 64 tasks of one row took 26.2 us against 18.2 for the
    softmax over 4 096 columns), 100 in 25 of four, 256 in 64 of four (not 256 of one)."""
    x = np.random.default_rng(1).standard_normal((rows, 8192)).astype(np.float32)
    compiled = pj.kernel(_rms).lower(x).compile()
    assert len(compiled.lowering.programs) == 1 and compiled.profile(x, compute=False).tasks == tasks
