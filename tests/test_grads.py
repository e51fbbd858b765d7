"""jax.test_util.check_grads (order 1 and 2, forward and reverse) for every differentiable op."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import ptojax as pj
from op_cases import CASES
from ptojax.primitives import OPS

# Ops whose outputs are low precision (cast to fp16) cannot be checked by finite differences here;
# cast has its own exact test below.
DIFFERENTIABLE = sorted(n for n, op in OPS.items() if op.differentiable and n != "cast")


def test_non_differentiable_ops_are_the_integer_and_boolean_ones_and_bitcast():
    assert {n for n, op in OPS.items() if not op.differentiable} == {
        "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "argmax", "argmin",
        "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right", "bitcast"}


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_check_grads(name):
    fn, args = CASES[name]
    check_grads(fn, args, order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", ["add", "mul", "matmul", "gather", "softmax", "expand", "view", "concat"])
def test_jit_vmap_grad_composes(name):
    fn, args = CASES[name]
    loss = lambda *a: jnp.sum(fn(*a) ** 2)
    batched = [jnp.stack([a, a * 0.5 + 0.1]) for a in args]
    got = jax.jit(jax.vmap(jax.grad(loss)))(*batched)
    want = jnp.stack([jax.grad(loss)(*[b[i] for b in batched]) for i in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_cast_between_floats_is_linear():
    # Multiples of 1/8 and a step of 1/4 are exact in fp16, so the finite differences are exact too.
    x = jnp.asarray(np.random.default_rng(0).integers(-32, 32, (3, 4)) / 8, jnp.float32)
    check_grads(lambda a: pj.ops.cast(a, jnp.float32), (x.astype(jnp.float16),), order=2,
                modes=("fwd", "rev"), eps=0.25)
    ct = jax.grad(lambda a: jnp.sum(pj.ops.cast(a, jnp.bfloat16).astype(jnp.float32) * 3.0))(x)
    np.testing.assert_array_equal(ct, np.full((3, 4), 3.0, np.float32))


def test_integer_outputs_have_zero_gradient():
    x = jnp.asarray(np.random.default_rng(1).standard_normal((3, 4)), jnp.float32)
    g = jax.grad(lambda a: jnp.sum(pj.ops.cast(pj.ops.argmax(a, 1), jnp.float32) * a[:, 0]))(x)
    np.testing.assert_array_equal(g[:, 1:], 0.0)
    g = jax.grad(lambda a: jnp.sum(pj.ops.cast(pj.ops.cast(a, jnp.int8), jnp.float32)))(x)
    np.testing.assert_array_equal(g, 0.0)


def test_grad_of_matmul_runs_in_pto_ops():
    a = jnp.ones((4, 8), jnp.float16)
    b = jnp.ones((8, 2), jnp.float16)
    jaxpr = jax.make_jaxpr(jax.grad(lambda a, b: pj.ops.sum(pj.ops.matmul(a, b), None), argnums=(0, 1)))(a, b)
    names = {e.primitive.name for e in jaxpr.jaxpr.eqns}
    assert "pto.matmul" in names and all(n.startswith("pto.") for n in names), names
    ga, gb = jax.grad(lambda a, b: pj.ops.sum(pj.ops.matmul(a, b), None), argnums=(0, 1))(a, b)
    assert ga.dtype == jnp.float16 and gb.dtype == jnp.float16
    np.testing.assert_array_equal(ga, np.full((4, 8), 2.0)), np.testing.assert_array_equal(gb, np.full((8, 2), 4.0))


LIST_INDICES = np.broadcast_to(np.arange(32, dtype=np.int32).reshape(1, 2, 16), (8, 2, 16))


@pytest.mark.parametrize("case", ["tanh", "x*x", "softmax", "rms_norm", "exp+x", "prod", "topk", "sort", "merge_topk"])
def test_a_kernel_of_a_grad_runs_on_the_sim_backend(case):
    """``pj.kernel(jax.grad(body))``: the cotangent sums autodiff writes (``add_any``) are adds; they had
    no translation, so a kernel of almost any gradient stopped. ``prod``'s derivative reshapes with a
    permutation (``lax.reshape(..., dimensions=)``), which was read as a plain reshape: wrong numbers.
    ``topk``'s and ``sort``'s derivatives scatter-add along the axis (take_along_axis's transpose; sort's
    permutes a uint32 iota), ``merge_topk``'s sorted by three keys: none had a translation. Its list
    indices, a closed-over ``np.broadcast_to`` view, reached the cores not C-contiguous."""
    x = np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32)
    g = np.random.default_rng(1).standard_normal((32,)).astype(np.float32)
    body = {"tanh": lambda v: jnp.sum(jnp.tanh(v)), "x*x": lambda v: jnp.sum(v * v),
            "softmax": lambda v: jnp.sum(pj.ops.softmax(v, axis=-1) * v),
            "rms_norm": lambda v: jnp.sum(pj.ops.rms_norm(v, g) * g),
            "exp+x": lambda v: jnp.sum(jnp.exp(v) + v),
            "prod": lambda v: jnp.sum(jnp.prod(v[:, :6], axis=-1)) + jnp.sum(jnp.prod(v.reshape(4, 64), axis=0)),
            "topk": lambda v: jnp.sum(pj.ops.topk(v, 4)[0] * jnp.arange(4.0)),
            "sort": lambda v: jnp.sum(jnp.sort(v, axis=-1) * jnp.arange(32.0)),
            "merge_topk": lambda v: jnp.sum(pj.ops.merge_topk(v.reshape(8, 2, 16), LIST_INDICES, 8)[0]
                                            * jnp.arange(8.0))}[case]
    grad = jax.grad(body)
    want = np.asarray(jax.jit(grad)(x), np.float64)
    for run in (pj.kernel(grad), jax.jit(pj.kernel(grad))):
        np.testing.assert_allclose(np.asarray(run(x)), want, rtol=2e-5, atol=2e-6)
