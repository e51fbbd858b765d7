"""The replay keeps IEEE's +0.0 for ``0.0 + -0.0`` where the zero is a kernel constant read from GM (a
loop's carry initialised with ``jnp.zeros``): XLA folded ``0 + x`` to ``x`` once the replay fed the
constant buffer into the ``tadd``, so ``jax.jit(kernel)`` gave -0.0 where the interpreter, the runtime
and ``jax.jit(fn)`` give +0.0."""
import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj


def test_zero_carry_plus_negative_zeros():
    def fn(a):
        return jax.lax.fori_loop(0, a.shape[0], lambda i, c: c + a[i], jnp.zeros(a.shape[1], a.dtype))

    a = np.full((2, 8), -0.0, np.float32)
    k = pj.kernel(fn)
    for got in (k(a), jax.jit(k)(a)):
        assert not np.signbit(np.asarray(got)).any()
