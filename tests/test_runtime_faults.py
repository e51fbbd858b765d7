"""Runtime faults and aliasing: a donated array passed twice is not updated in place; a custom op's
NumPy semantics gets read-only operands and must return the destination's shape; the threads executor
refuses a policy it does not run; a host loop driven by data stops at the task limit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from ptojax.mpmd import orchestrator

W32 = pj.tiles.window((32, 32))


def test_a_donated_array_passed_twice_is_not_updated_in_place():
    """``f(cache, new, idx, cache)``: the second argument's reader saw the scatter (512.0, not 0.0)."""
    def f(cache, new, idx, other):
        with pj.tile(vec=(8, 32)):
            return pj.ops.scatter_update(cache, idx, new), other * 2.0

    cache = np.zeros((64, 32), np.float32)
    new, idx = np.ones((8, 32), np.float32), np.arange(8, dtype=np.int32)
    for executor in ("simulated", "threads"):
        updated, doubled = pj.kernel(f, donate_argnums=0, executor=executor)(cache, new, idx, cache)
        assert float(np.asarray(doubled).sum()) == 0.0 and float(np.asarray(updated)[:8].sum()) == 256.0


@pytest.fixture
def custom_ops():
    # the engine's semantics (numpy=) disagree with the reference, which the trace checks
    pj.tiles.register_op("ttransposed_plus", reference=lambda t: t + 1, numpy=lambda t: (t + 1).T)

    def inc(t):
        t += 1
        return t

    pj.tiles.register_op("tinc_in_place", reference=lambda t: t + 1, numpy=inc)
    yield
    pj.tiles.unregister_op("ttransposed_plus")
    pj.tiles.unregister_op("tinc_in_place")


@pytest.mark.parametrize("op, match", [("ttransposed_plus", r"gave float32\[32, 16\] for a destination of "
                                                            r"float32\[16, 32\]"),
                                       ("tinc_in_place", "read-only")])
def test_custom_op_semantics_that_misbehave_fail_their_task(custom_ops, op, match):
    """A transposed result was reshaped into the tile (scrambled rows); an operand written in place
    changed the tile later instructions read (eager 2t+2, jit an error)."""
    w = pj.tiles.window((16, 32))

    def f(x):
        def body(i, ins, outs):
            t = pj.tiles.load(ins[0], i, w)
            return [pj.tiles.store(outs[0], pj.tiles.add(pj.tiles.compute(op, t), t), i, w)]
        return pj.tiles.grid(body, (2, 1), x, jax.ShapeDtypeStruct(x.shape, x.dtype))

    with pytest.raises(pj.PtoError, match=match):
        pj.kernel(f)(np.ones((32, 32), np.float32))


def test_the_threads_executor_refuses_a_barrier_policy():
    compiled = pj.kernel(lambda a: a * 2).lower(np.ones((64, 64), np.float32)).compile()
    with pytest.raises(pj.PtoArgumentError, match="threads executor runs policy 'mpmd' only"):
        compiled.run(np.ones((64, 64), np.float32), executor="threads", policy="spmd")


def test_a_host_loop_that_does_not_end_stops_at_the_task_limit(monkeypatch):
    monkeypatch.setattr(orchestrator, "MAX_TASKS", 500)

    def forever(x):
        with pj.tile(vec=(32, 32)):
            return lax.while_loop(lambda c: jnp.sum(c) > -1e30, lambda c: c + 1.0, x)

    with pytest.raises(pj.PtoError, match="made 500 tasks and goes on.*may not end"):
        pj.kernel(forever)(np.ones((32, 32), np.float32))


def test_a_fault_in_a_custom_ops_numpy_names_the_function_line_and_op_under_jit():
    """Eagerly the task fails with a PtoTaskError; under jax.jit the replay calls the NumPy semantics
    back, and the JaxRuntimeError carried only the user's traceback (no function, line or op)."""
    def boom(t):
        raise ValueError("boom")

    op = pj.tiles.register_op("tboom", reference=lambda t: t, numpy=boom)
    try:
        def f(x):
            def body(i, ins, outs):
                return [pj.tiles.store(outs[0], op(pj.tiles.load(ins[0], i, W32)), i, W32)]
            return pj.tiles.grid(body, (2, 1), x, jax.ShapeDtypeStruct(x.shape, x.dtype))

        x = np.ones((64, 32), np.float32)
        with pytest.raises(pj.PtoTaskError, match=r"function 'body' line \d+: pto.tboom failed: ValueError: boom"):
            pj.kernel(f)(x)
        with pytest.raises(Exception, match=r"function 'body' line \d+: pto.tboom failed: ValueError: boom"):
            jax.jit(pj.kernel(f))(x).block_until_ready()
    finally:
        pj.tiles.unregister_op("tboom")
