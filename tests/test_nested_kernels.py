"""A pj.kernel (or a pj.nn op, a custom_vjp of kernels) called inside another kernel: the inner kernel's
function is inlined into the outer one's graph, with its tile hints, labels and tile overrides; errors
name the user's line, never a ptojax file."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.lowering import tensor


def _rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _at(fn, offset: int) -> str:
    """``file:line (name)`` of the line ``offset`` lines below ``fn``'s ``def``."""
    return f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno + offset} ({fn.__name__})"


def inner(x):
    with pj.tile(vec=(16, 64)), jax.named_scope("Inner"):
        return jnp.tanh(x) * 2.0


def _ref(x):
    return np.tanh(x) * 2.0 + 1.0


@pytest.fixture
def k_inner():
    return pj.kernel(inner)


def test_a_kernel_inside_a_kernel_matches_plain_jax_eager_and_jitted(k_inner):
    outer = pj.kernel(lambda x: k_inner(x) + 1.0)
    x = _rand((32, 128))
    np.testing.assert_allclose(outer(x), _ref(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.jit(outer)(x), _ref(x), rtol=1e-5, atol=1e-6)


def test_the_inner_kernel_is_inlined_with_its_tile_hint_and_label(k_inner):
    lowered = pj.kernel(lambda x: k_inner(x) + 1.0).lower(_rand((32, 128)))
    assert "pto_call" not in lowered.as_text("tensor")
    assert "pto.tanh(%0)    # vec=16x64 label=Inner" in lowered.as_text("tensor")
    block = lowered.as_text("block")
    assert "program tanh+mul <AIV> label=Inner" in block           # the inner's ops fused into one program
    assert "window=[16*i0:+16, 64*i1:+64]" in block                # on the inner's 16x64 tiles


def test_the_inner_kernels_tile_overrides_are_kept_and_the_outers_win(k_inner):
    tuned = pj.kernel(inner, options={"tiles": {"Inner": {"vec": (8, 64)}}})
    x = _rand((32, 128))
    block = pj.kernel(lambda x: tuned(x) + 1.0).lower(x).as_text("block")
    assert "window=[8*i0:+8, 64*i1:+64]" in block
    outer = pj.kernel(lambda x: tuned(x) + 1.0, options={"tiles": {"Inner": {"vec": (32, 64)}}})
    assert "window=[32*i0:+32, 64*i1:+64]" in outer.lower(x).as_text("block")
    np.testing.assert_allclose(outer(x), _ref(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("how", [dict(backend="xla"), dict(target="a2"), dict(interpret=True)])
def test_how_an_inner_kernel_runs_on_its_own_is_the_outer_kernels_to_say(how):
    other = pj.kernel(inner, **how)
    x = _rand((32, 128))
    outer = pj.kernel(lambda x: other(x) + 1.0)
    assert "label=Inner" in outer.lower(x).as_text("block")
    np.testing.assert_allclose(outer(x), _ref(x), rtol=1e-5, atol=1e-6)


def test_two_calls_of_one_inner_kernel_compile_it_once_and_both_inline(k_inner):
    outer = pj.kernel(lambda x, y: k_inner(x) - k_inner(y))
    x, y = _rand((32, 128), 1), _rand((32, 128), 2)
    assert outer.lower(x, y).as_text("tensor").count("pto.tanh") == 2
    np.testing.assert_allclose(outer(x, y), np.tanh(x) * 2.0 - np.tanh(y) * 2.0, rtol=1e-5, atol=1e-6)
    assert k_inner.compiles == 1


def test_a_kernel_inside_a_kernel_inside_a_kernel(k_inner):
    middle = pj.kernel(lambda x: k_inner(x) * 3.0)
    outer = pj.kernel(lambda x: middle(x) + 1.0)
    x = _rand((32, 128))
    np.testing.assert_allclose(outer(x), np.tanh(x) * 6.0 + 1.0, rtol=1e-5, atol=1e-6)


def test_a_vmapped_kernel_inside_a_kernel(k_inner):
    x = _rand((2, 16, 64))
    np.testing.assert_allclose(pj.kernel(jax.vmap(k_inner))(x), np.tanh(x) * 2.0, rtol=1e-5, atol=1e-6)


def test_pj_nn_ops_inside_a_kernel():
    x, gamma = _rand((32, 128)), _rand((128,), 3)

    def outer(x, gamma):
        return pj.nn.softmax(x) + pj.nn.rms_norm(x, gamma)

    ref = jax.nn.softmax(x) + x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * gamma
    kernel = pj.kernel(outer)
    text = kernel.lower(x, gamma).as_text("tensor")
    assert "label=Softmax" in text and "label=RMSNorm" in text
    np.testing.assert_allclose(kernel(x, gamma), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(jax.jit(kernel)(x, gamma), ref, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------- errors name the user's line
def test_an_error_in_an_inner_kernels_op_names_the_users_line():
    def bad(x):
        return jax.lax.lgamma(x)

    k_bad = pj.kernel(bad)

    def outer(x):
        return k_bad(x) + 1.0

    with pytest.raises(pj.PtoUnsupportedError) as err:
        pj.kernel(outer).lower(_rand((16, 64)))
    assert str(err.value) == f"lax.lgamma at {_at(bad, 1)}: primitive 'lgamma' has no ptojax translation"


def test_an_error_met_inlining_a_kernel_names_the_inner_kernels_line(k_inner, monkeypatch):
    x = _rand((16, 64))
    k_inner.lower(x)                                         # compiled before the rule goes
    monkeypatch.delitem(tensor.RULES, "tanh")

    def outer(x):
        return k_inner(x) + 1.0

    with pytest.raises(pj.PtoUnsupportedError) as err:
        pj.kernel(outer).lower(x)
    assert str(err.value) == f"at {_at(inner, 2)}: primitive 'tanh' has no ptojax translation"


def test_an_error_in_a_pj_nn_op_names_the_users_call_not_a_ptojax_file(monkeypatch):
    x = _rand((8, 96))
    pj.nn.softmax(x)                                         # its kernel compiled here, on another line
    monkeypatch.delitem(tensor.RULES, "exp")

    def outer(x):
        return pj.nn.softmax(x) + 1.0

    with pytest.raises(pj.PtoUnsupportedError) as err:
        pj.kernel(outer).lower(x)
    assert str(err.value) == f"pj.nn.softmax at {_at(outer, 1)}: primitive 'exp' has no ptojax translation"

    with pytest.raises(pj.PtoUnsupportedError) as err:      # a shape its kernel first compiles for, inside
        pj.kernel(outer).lower(_rand((8, 80)))
    assert str(err.value) == f"pj.nn.softmax at {_at(outer, 1)}: primitive 'exp' has no ptojax translation"


def test_an_inner_kernel_with_polymorphic_shapes_is_refused_at_the_users_line():
    poly = pj.kernel(inner, polymorphic_shapes=("m, 64",))

    def outer(x):
        return poly(x) + 1.0

    with pytest.raises(pj.PtoUnsupportedError) as err:
        pj.kernel(outer).lower(_rand((32, 64)))
    assert str(err.value).startswith(f"at {_at(outer, 1)}: a pj.kernel with polymorphic_shapes cannot run inside "
                                     "another kernel")
