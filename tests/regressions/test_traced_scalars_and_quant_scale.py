"""Regressions from a probe of mixed precision and quantization.

- ``pj.ops.add(x_f16, s)`` with ``s`` a Python number worked eagerly but, under ``jax.jit`` or
  ``pj.kernel``, ``s`` arrived as a traced weakly typed float32 and was refused ("operands must share one
  dtype, got float16[1, 32], float32[]"); a traced Python number takes the tensor's dtype now, as jnp's.
- ``pj.ops.quantize``'s reference (the op outside a kernel, ``backend="xla"``) divided ``amax / 127`` in
  XLA, which multiplies by a rounded ``1/127``: 1 ulp off the simulator's scale in some rows.
- An int8 einsum that sums an axis of one operand away (JAX sums it first, in int32) was told to cast
  both operands to int8, which runs and gives wrong numbers; the advice says to multiply first.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

H = np.linspace(-3, 3, 64, dtype=np.float16).reshape(2, 32)
X8 = np.arange(-32, 32, dtype=np.int8).reshape(2, 32)


@pytest.mark.parametrize("fn, x, s, want", [
    (lambda a, s: pj.ops.add(a, s), H, 2.5, lambda a, s: a + s),
    (lambda a, s: pj.ops.add(a, s), X8, 5, lambda a, s: a + s),
    (lambda a, s: pj.ops.where(a > 0, a, s), H, 1.5, lambda a, s: jnp.where(a > 0, a, s)),
    (lambda a, s: pj.ops.clip(a, -s, s), H, 1.5, lambda a, s: jnp.clip(a, -s, s)),
    (lambda a, s: pj.ops.lt(a, s), H, 1.5, lambda a, s: a < s),
], ids=["add-f16", "add-i8", "where", "clip", "lt"])
def test_a_traced_python_number_takes_the_tensor_dtype(fn, x, s, want):
    ref = np.asarray(want(x, s))
    for run in (fn, jax.jit(fn), pj.kernel(fn), jax.jit(pj.kernel(fn))):
        got = np.asarray(run(x, s))
        assert got.dtype == ref.dtype and np.array_equal(got, ref)


def test_a_traced_float_beside_an_int_tensor_is_refused():
    with pytest.raises(pj.PtoDtypeError, match="a float32 scalar cannot combine with a int8 tensor"):
        jax.jit(lambda a, s: pj.ops.add(a, s))(X8, 2.5)


def test_quantize_scale_is_the_correctly_rounded_quotient_on_every_path():
    x = np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32)
    exact = (np.abs(x).max(axis=1, keepdims=True).astype(np.float64) / 127).astype(np.float32)
    fn = lambda a: pj.ops.quantize(a)[1]                                 # noqa: E731
    for run in (fn, jax.jit(fn), pj.kernel(fn), pj.kernel(fn, backend="xla")):
        assert np.array_equal(np.asarray(run(x)), exact)


def test_int8_einsum_summing_an_axis_away_is_told_to_multiply_first():
    a = np.ones((8, 64), np.int8)
    b = np.ones((64, 16), np.int8)
    fn = lambda a, b: jnp.einsum("ij,jk->i", a, b, preferred_element_type=jnp.int32)    # noqa: E731
    with pytest.raises(pj.PtoUnsupportedError, match="multiply first, then sum the product"):
        pj.kernel(fn)(a, b)
