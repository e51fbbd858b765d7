"""Regressions from a probe of threads, JAX settings and the kernel caches.

- ``pj.kernel(a).lower(x, z=w).compile()`` (``y`` left at its default) called as ``c(x, w)`` bound
  ``w`` to ``z``: ``x * w`` where ``a(x, w)`` is ``x + w``, silently. A call of another form is refused.
- A ``polymorphic_shapes`` compile was cached without the JAX settings that change a trace: compiled
  under rank promotion 'allow', it still ran under 'raise'.
- Threads racing on a kernel's first call each traced and compiled it (8 compiles of one signature).
- ``Lowered.compile()`` gave the compile of an earlier trace of the signature, not of its own.
- Every kernel failed under ``jax.checking_leaks()``: the lowering's tables held the traces' tracers.
"""
import threading
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np
import pytest

import ptojax as pj

X = np.ones((32, 64), np.float32)
W = np.full((32, 64), 3.0, np.float32)


def _a(x, y=None, z=None):
    r = x
    if y is not None:
        r = r + y
    if z is not None:
        r = r * z
    return r


def test_a_compile_lowered_with_a_gap_takes_calls_of_that_form_only():
    c = pj.kernel(_a).lower(X, z=W).compile()
    assert np.array_equal(np.asarray(c(X, z=W)), X * W)
    with pytest.raises(pj.PtoArgumentError, match=r"lowered for calls _a\(x, z=\.\.\.\), y left at its default"):
        c(X, W)
    with pytest.raises(pj.PtoArgumentError, match="lowered for calls"):
        c(X, y=W)


def test_a_polymorphic_compile_is_kept_per_rank_promotion_setting():
    row = np.arange(64, dtype=np.float32)
    poly = pj.kernel(lambda a, b: a + b, polymorphic_shapes=("m, 64", None))
    assert np.array_equal(np.asarray(poly(X, row)), X + row)
    with jax.numpy_rank_promotion("raise"), pytest.raises(ValueError, match="could not be broadcast"):
        poly(X, row)


@pytest.mark.parametrize("polymorphic", [False, True])
def test_threads_racing_on_a_first_call_compile_once(polymorphic):
    traces = []
    lock = threading.Lock()

    def f(a):
        with lock:
            traces.append(1)
        return a * 2.0

    k = pj.kernel(f, polymorphic_shapes=("m, 64",) if polymorphic else ())
    start = threading.Barrier(8)

    def call(_):
        start.wait()
        return np.asarray(k(X))

    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(call, range(8)))
    assert all(np.array_equal(o, X * 2.0) for o in outs)
    assert k.compiles == 1
    raced = len(traces)
    pj.kernel(f, polymorphic_shapes=("m, 64",) if polymorphic else ())(X)
    assert raced == len(traces) - raced                        # as many traces as one caller alone makes


SCALE = [2.0]


def _scaled(x):
    with pj.tile(vec=(32, 32)):
        return x * SCALE[0]


def test_lowered_compile_is_the_compile_of_its_own_trace():
    k = pj.kernel(_scaled)
    assert float(np.asarray(k(X))[0, 0]) == 2.0
    SCALE[0] = 3.0
    try:
        lowered = k.lower(X)
        compiled = lowered.compile()
        assert compiled.lowering is lowered.lowering and float(np.asarray(compiled(X))[0, 0]) == 3.0
        assert lowered.compile() is compiled and k.compiles == 2           # the same trace: the same compile
    finally:
        SCALE[0] = 2.0


@pytest.mark.parametrize("fn", [lambda x: x * 2.0, lambda x: jax.nn.softmax(x, -1),
                                lambda x: jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0 + 1.0, x),
                                lambda x: x.T @ x, lambda x: jax.numpy.cumsum(x, 0)],
                         ids=["scale", "softmax", "fori", "matmul", "cumsum"])
def test_kernels_hold_no_tracer_past_their_trace(fn):
    with jax.checking_leaks():
        got = np.asarray(pj.kernel(fn)(X))
    np.testing.assert_allclose(got, np.asarray(jax.jit(fn)(X)), rtol=2e-6, atol=1e-5)
