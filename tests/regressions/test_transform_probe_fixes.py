"""Kernels under JAX's transformations and placement, as ``jax.jit(fn)`` of the plain function."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

X = np.random.default_rng(0).normal(size=(16, 64)).astype(np.float32)


def _fn(a, b):
    return jnp.tanh(a) * b + 1.0


def test_an_eager_kernel_leaves_its_results_where_jit_puts_them():
    k, device = pj.kernel(_fn), jax.devices()[1]
    a, b = jax.device_put(X, device), jax.device_put(X, device)
    out, ref = k(a, b), jax.jit(_fn)(a, b)
    assert out.devices() == ref.devices() == {device} and out.committed and ref.committed
    np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_an_eager_kernel_of_sharded_arguments_keeps_their_sharding():
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("d",))
    spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d"))
    a, b = jax.device_put(X, spec), jax.device_put(X, spec)
    out = pj.kernel(_fn)(a, b)
    assert out.sharding.is_equivalent_to(jax.jit(_fn)(a, b).sharding, 2)
    total = pj.kernel(lambda a: jnp.sum(a, axis=-1))(a)        # another shape: on the same devices
    assert total.sharding.device_set == set(jax.devices()[:2])


def test_arguments_committed_to_different_devices_are_refused_as_by_jit():
    a, b = jax.device_put(X, jax.devices()[0]), jax.device_put(X, jax.devices()[1])
    with pytest.raises(ValueError, match="incompatible devices"):
        jax.jit(_fn)(a, b)
    with pytest.raises(pj.PtoArgumentError, match=r"'_fn': arguments committed to different devices \(\[0\], \[1\]\)"):
        pj.kernel(_fn)(a, b)


@pytest.mark.parametrize("polymorphic", [None, ["m, 64"]], ids=["static", "polymorphic"])
def test_integer_results_have_zero_tangents_under_grad(polymorphic):
    argmax = pj.kernel(lambda l: jnp.argmax(l, axis=-1), polymorphic_shapes=polymorphic)

    def loss(a):
        return jnp.sum(a ** 2), argmax(a)                   # a metric beside the loss, as has_aux

    for grad in (jax.grad(loss, has_aux=True), jax.jit(jax.grad(loss, has_aux=True))):
        g, aux = grad(X)
        np.testing.assert_allclose(g, 2 * X, rtol=1e-6)
        np.testing.assert_array_equal(aux, np.argmax(X, axis=-1))
    assert jax.jvp(argmax, (X,), (X,))[1].dtype == jax.dtypes.float0


@pytest.mark.parametrize("polymorphic", [None, ["m, 64"]], ids=["static", "polymorphic"])
def test_a_float_result_still_has_no_derivative_and_the_message_says_what_works(polymorphic):
    k = pj.kernel(jnp.exp, polymorphic_shapes=polymorphic)
    with pytest.raises(pj.PtoUnsupportedError, match=r"or stop the gradient at its inputs where its result needs "
                       r"none \(kernel\(jax.lax.stop_gradient\(x\)\)\); jax.custom_vjp has no forward mode"):
        jax.grad(lambda a: jnp.sum(k(a)))(X)
    g = jax.grad(lambda a: jnp.sum(a * k(jax.lax.stop_gradient(a))))(X)
    np.testing.assert_allclose(g, np.exp(X), rtol=1e-6)


def test_none_is_no_polymorphic_shapes_constraints_or_donation():
    k = pj.kernel(_fn, polymorphic_shapes=None, polymorphic_constraints=None, donate_argnums=None)
    assert k.options.polymorphic_shapes == k.options.polymorphic_constraints == k.options.donate_argnums == ()
    np.testing.assert_allclose(k(X, X), jax.jit(_fn)(X, X), rtol=1e-6)
