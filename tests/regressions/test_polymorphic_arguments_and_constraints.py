"""Findings of a probe of ``polymorphic_shapes`` (54 kernels at up to 14 row counts: no wrong result): a
Python number argument crashed inside ptojax and a float64 array was refused where a static kernel and
``jax.jit`` take both; constraints no size satisfies read as a broadcast error at the user's first op;
``lax.cond`` was refused as "a clamp step"; a polymorphic compile had no ``signature`` and would not print
``as_text("cpp")``; ``profile(compute="yes")`` passed; ``compiled_for`` took sizes the constraints refuse."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


def scale(x, s):
    with pj.tile(vec=(16, 64)):
        return x * s


def test_python_numbers_and_float64_arrays_are_taken_as_jax_jit_takes_them():
    k = pj.kernel(scale, polymorphic_shapes=("m, 64", None))
    x = np.linspace(-1, 1, 17 * 64, dtype=np.float32).reshape(17, 64)
    np.testing.assert_array_equal(k(x, 2.0), x * 2)
    got = k(x.astype(np.float64), np.float32(3.0))             # float64 is float32 while jax_enable_x64 is off
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x * 3)
    np.testing.assert_array_equal(k.compiled_for(x[:5], 2.0)(x[:5], 2.0), x[:5] * 2)
    assert k.compiles == 1


@pytest.mark.parametrize("constraints", [("m >= 8", "m <= 4"), ("m <= 0",)])
def test_constraints_no_size_satisfies_are_named(constraints):
    k = pj.kernel(lambda x: x * 2.0, polymorphic_shapes=("m, 64",), polymorphic_constraints=constraints)
    with pytest.raises(pj.PtoArgumentError, match=r"polymorphic_constraints .* admit no size: Unsatisfiable"):
        k(np.ones((8, 64), np.float32))


def test_a_cond_refusal_names_the_control_flow():
    def f(x, s):
        with pj.tile(vec=(16, 64)):
            return jax.lax.cond(s[0] > 0, lambda y: y * 2.0, lambda y: y - 1.0, x)
    with pytest.raises(pj.PtoUnsupportedError, match=r"control flow on the host.*\(cond in the Block graph\)"):
        pj.kernel(f, polymorphic_shapes=("m, 64", None))(np.ones((17, 64), np.float32), np.ones(1, np.float32))


def test_signature_cpp_text_and_a_checked_compute_flag():
    x = np.ones((17, 64), np.float32)
    c = pj.kernel(scale, polymorphic_shapes=("m, 64", None)).compiled_for(x, np.float32(2))
    name, shapes, target, _ = c.signature
    assert (name, shapes, target) == ("scale", ((("m", "64"), "float32"), ((), "float32")), "a3")
    assert "TLOAD" in c.as_text("cpp")
    with pytest.raises(pj.PtoArgumentError, match=r"compute=\.\.\.\) must be True or False, got 'yes'"):
        c.profile(m=40, compute="yes")
    with pytest.raises(pj.PtoArgumentError, match=r"compute=\.\.\.\) must be True or False, got 1"):
        pj.kernel(scale).lower(x, np.float32(2)).compile().profile(x, np.float32(2), compute=1)
    assert jnp.array_equal(c(x, np.float32(2)), x * 2)


def test_compiled_for_checks_the_constraints_as_a_call_does():
    k = pj.kernel(lambda x: x * 2.0, polymorphic_shapes=("m, 64",), polymorphic_constraints=("mod(m, 16) == 0",))
    with pytest.raises(pj.PtoArgumentError, match=r"m = 17 violates the constraint 'mod\(m, 16\) == 0'"):
        k.compiled_for(np.ones((17, 64), np.float32))
    assert k.compiled_for(np.ones((32, 64), np.float32)) is k.compiled_for(np.ones((48, 64), np.float32))
