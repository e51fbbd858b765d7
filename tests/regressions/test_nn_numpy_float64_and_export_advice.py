"""``pj.nn`` ops take NumPy's float64 as JAX does (float32 unless ``jax_enable_x64``): ``softmax``,
``rms_norm``, ``layer_norm`` and ``dense`` refused it (and the norms warned first, building their default
scale in float64). ``jax.export`` of a ``pj.nn`` gradient with a symbolic batch on the default backend
advised dropping a ``polymorphic_shapes`` the user never passed; it names ``backend='xla'``, which exports."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 32))            # float64
W = RNG.normal(size=(32, 8))
LABELS = np.arange(4) % 32

OPS = {"softmax": lambda x: pj.nn.softmax(x),
       "rms_norm": lambda x: pj.nn.rms_norm(x, None),
       "layer_norm": lambda x: pj.nn.layer_norm(x, None, None),
       "dense": lambda x: pj.nn.dense(x, W),
       "softmax_cross_entropy": lambda x: pj.nn.softmax_cross_entropy(x, LABELS)}


@pytest.mark.parametrize("name", sorted(OPS))
def test_float64_numpy_input_is_float32_as_in_jax(name):
    fn = OPS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # no "float64 ... will be truncated" from a default built in it
        y = fn(X)
        g = jax.grad(lambda x: jnp.sum(fn(x)))(X)
    x32 = X.astype(np.float32)
    y32 = fn(x32) if name != "dense" else pj.nn.dense(x32, W.astype(np.float32))
    assert y.dtype == g.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(y), np.asarray(y32))


def test_export_of_a_gradient_on_sim_names_the_backend_that_exports():
    m, = jax.export.symbolic_shape("m")
    spec, g = jax.ShapeDtypeStruct((m, 32), jnp.float32), jnp.ones(32, jnp.float32)

    def grad(backend):
        return jax.jit(jax.grad(lambda x, g: jnp.sum(pj.nn.rms_norm(x, g, backend=backend) ** 2), argnums=(0, 1)))

    with pytest.raises(pj.PtoUnsupportedError) as err:
        jax.export.export(grad("sim"))(spec, g)
    msg = str(err.value)
    assert "rms_norm_bwd" in msg and "backend='xla'" in msg and "without polymorphic_shapes" not in msg
    exported = jax.export.export(grad("xla"))(spec, g)      # as the message says
    x = RNG.normal(size=(7, 32)).astype(np.float32)
    want = jax.grad(lambda x, g: jnp.sum(pj.nn.rms_norm(x, g, backend="xla") ** 2), argnums=(0, 1))(x, g)
    for a, b in zip(exported.call(x, g), want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
