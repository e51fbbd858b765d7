"""Regressions from a probe of pj.ops' arguments (~1 450 runs over every op): wrong input is a ptojax
error naming the op and the value, valid edge input computes as JAX does."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

O = pj.ops
X = jnp.arange(12.0).reshape(3, 4)
B = jnp.array([[True, False], [False, True]])


def test_an_int_scalar_does_not_become_a_bool():
    """``eq(b, 2)`` was ``b`` (2 made True); ``where(c, b, 2)`` returned True for 2."""
    for run in (lambda f: f(), lambda f: pj.kernel(lambda b: f())(B)):
        with pytest.raises(pj.PtoDtypeError, match=r"pto.eq: scalar 2 cannot combine with a bool tensor"):
            run(lambda: O.eq(B, 2))
    assert np.array_equal(O.eq(B, True), B)


@pytest.mark.parametrize("value, error, match", [
    (1 + 2j, pj.PtoDtypeError, r"operand of dtype complex64 \(shape \(\)\) is not supported"),
    (np.datetime64(1, "s"), pj.PtoDtypeError, r"of type datetime64 is not a bool, int or float"),
    (None, pj.PtoArgumentError, r"operand None is not an array or a number"),
    ("a", pj.PtoArgumentError, r"operand 'a' is not an array or a number"),
])
def test_operands_that_are_no_numbers(value, error, match):
    with pytest.raises(error, match=match):
        O.add(X, value)


def test_python_numbers_where_a_kernel_traces_literals():
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    for fn in (lambda x: O.where(True, x, 0.0), lambda x: O.gather(x, 1), lambda x: O.index_add(x, 1, x[0]),
               lambda x: O.matmul(x, x, bias=1.0)):
        np.testing.assert_allclose(np.asarray(pj.kernel(fn)(x)), np.asarray(fn(jnp.asarray(x))), rtol=1e-6)


def test_empty_inputs_eagerly():
    x = jnp.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(O.scatter_update(x, jnp.zeros((0,), jnp.int32), x[:0]), x)
    assert O.softmax(jnp.zeros((3, 0))).shape == (3, 0)
    with pytest.raises(pj.PtoShapeError, match=r"pto.quantize: cannot quantize over the empty axes \(1,\)"):
        O.quantize(jnp.zeros((3, 0)))


@pytest.mark.parametrize("call, match", [
    (lambda: O.cast(X, jnp.int32, rounding=["floor"]), r"rounding \['floor'\] is not one of"),
    (lambda: O.reshape(X, (2.7, 6)), r"must be a sequence of ints"),
    (lambda: O.expand(X, (2.5, 3, 4)), r"must be a sequence of ints"),
    (lambda: O.pad(X, ((1.5, 0), (0, 2))), r"pads must be \(low, high\) pairs of ints"),
    (lambda: O.pad(X.astype(jnp.int8), ((1, 0), (0, 0)), np.float32(2.5)), r"float pad value 2.5 for a int8 tensor"),
    (lambda: O.pad(X.astype(jnp.int8), ((1, 0), (0, 0)), 300), r"scalar 300 does not fit int8"),
    (lambda: O.pad(X, ((1, 0), (0, 0)), None), r"operand None is not an array or a number"),
    (lambda: O.sum(X, 1, keepdims="False"), r"pto.sum: keepdims must be True or False, got 'False'"),
    (lambda: O.cumsum(X, reverse="False"), r"reverse must be True or False"),
    (lambda: O.topk(X, 2, largest="False"), r"largest must be True or False"),
    (lambda: O.sort(X, descending="False"), r"descending must be True or False"),
    (lambda: O.cast(X, jnp.int8, saturate="False"), r"saturate must be True or False"),
    (lambda: O.matmul(X, X.T, transpose_a="False"), r"transpose_a must be True or False"),
    (lambda: O.rms_norm(X, eps=True), r"eps must be a non-negative number, got True"),
    (lambda: O.cast(X, None), r"None is not a dtype"),
    (lambda: O.add(X, X, X), r"pto.add: takes 2 operands, got 3"),
])
def test_parameters_of_the_wrong_kind(call, match):
    with pytest.raises(pj.PtoError, match=match):
        call()


def test_valid_forms_the_probe_found_refused():
    np.testing.assert_allclose(O.rms_norm(X, eps=np.float32(1e-5)), O.rms_norm(X, eps=1e-5))
    assert O.pad(jnp.float32(1), ()) == 1
    np.testing.assert_array_equal(O.add(x=X, y=X), X + X)
    assert str(inspect.signature(O.add)) == "(x, y)"
