"""A 1-D argument of the symbolic rows m under ``polymorphic_shapes``: its default tile takes a power of two
of its entries up to 256, as a matrix's rows do (it took the whole 512-entry template, and the kernel was
refused as 'a reduction or scan along the symbolic row axis', which it did not have)."""
import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj


def test_an_elementwise_kernel_of_a_vector_of_m_rows():
    kernel = pj.kernel(lambda v: jnp.sin(v) * 2.0 + 1.0, polymorphic_shapes=("m",))
    for n in (1, 9, 257, 3000):
        v = np.random.default_rng(n).random(n).astype(np.float32)
        want = np.asarray(jax.jit(lambda v: jnp.sin(v) * 2.0 + 1.0)(v))
        np.testing.assert_allclose(np.asarray(kernel(v)), want, rtol=2e-7, atol=1e-7)
    np.testing.assert_allclose(np.asarray(jax.jit(kernel)(v)), want, rtol=2e-7, atol=1e-7)
    assert kernel.compiles == 1


def test_a_static_table_gathered_by_m_indices():
    """docs/dynamic_shapes.md: 'a gather of a static table by idx of m rows is fine' — x[idx] too."""
    kernel = pj.kernel(lambda idx, table: table[idx] * 2.0, polymorphic_shapes=("m", None))
    table = np.random.default_rng(0).random((50, 16)).astype(np.float32)
    for n in (3, 40, 700):
        idx = np.random.default_rng(n).integers(0, 50, n).astype(np.int32)
        np.testing.assert_array_equal(np.asarray(kernel(idx, table)), table[idx] * 2.0)
        np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(idx, table)), table[idx] * 2.0)
    assert kernel.compiles == 1
