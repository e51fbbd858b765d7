"""``pj.kernel`` of a ``pj.kernel`` (what the CLI does with ``FILE:f`` where ``f = pj.kernel(fn)``)
takes its own target, backend and options: it copied the inner kernel's attributes over its own."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


def _fn(a, b):
    with pj.tile(vec=(32, 32)), jax.named_scope("Scale"):
        return jnp.sum(a * 2.0 + b, axis=-1)


ARGS = [np.ones((128, 128), np.float32), np.ones((128, 128), np.float32)]


def test_a_kernel_wrapped_again_takes_the_new_options_target_and_backend():
    inner = pj.kernel(_fn)
    outer = pj.kernel(inner, target="a2", backend="xla", options={"tiles": {"Scale": {"vec": (64, 64)}}})
    assert (outer.options.target, outer.options.backend) == ("a2", "xla")
    assert (inner.options.target, inner.options.backend) == ("a3", "sim")
    assert outer._cache is not inner._cache
    tiled = pj.kernel(inner, options={"tiles": {"Scale": {"vec": (64, 64)}}}).lower(*ARGS).compile()
    default = inner.lower(*ARGS).compile()
    assert tiled.as_text() != default.as_text()
    np.testing.assert_allclose(np.asarray(pj.kernel(inner, options={"tiles": {"Scale": {"vec": (64, 64)}}})(*ARGS)),
                               np.asarray(jax.jit(_fn)(*ARGS)), rtol=1e-6)


def test_a_misspelled_label_is_reported_for_a_wrapped_kernel():
    with pytest.raises(pj.PtoArgumentError, match="Scael"):
        pj.kernel(pj.kernel(_fn), options={"tiles": {"Scael": {"vec": (64, 64)}}}).lower(*ARGS)
