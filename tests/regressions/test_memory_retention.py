"""Regression: three caches kept memory they should not (a service building kernels per request, on
many shapes, grew without bound).

- A kernel used under ``jax.vmap`` was never freed: ``ptojax.kernel._BATCHED`` was a plain dict keyed by
  ``(Compiled, in_axes)`` holding the kernel, its function and closure, and the batched inner kernel
  (30 re-created vmapped kernels kept +7.9 MB). It is now weakly keyed by the ``Compiled``, and its
  values do not refer back to it.
- The scratch-array pool (``ptojax.mpmd.orchestrator._POOL``) kept up to 4 freed arrays for every
  (shape, dtype) ever seen, per thread, after the kernels were gone (60 shapes: 60.5 MB). It now keeps
  at most ``POOL_BYTES`` in all (shared by all threads), least recently used given up first.
- The tape cache (``ptojax.ascend.textbatch``) charged each tape its tile buffers only, not the int64
  per-point index arrays its GM loads and stores keep (about as much again for f32): dropping the tapes
  freed 1.64x what they were charged. A tape is now charged every array it keeps.
"""
import gc
import importlib
import tracemalloc
import weakref

import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj
from kernels import seed_kernel
from ptojax.ascend import textbatch
from ptojax.mpmd import orchestrator

kernel_mod = importlib.import_module("ptojax.kernel")      # ``ptojax.kernel`` the attribute is the function


# ------------------------------------------------------------------------------- vmapped kernels
def _scaled(const):
    def fn(a):
        with pj.tile(vec=(16, 64)):
            return a * const
    return fn


def _vmapped_once():
    """A vmapped kernel closing over a constant, called and dropped: weak references to both."""
    const = np.full((64, 64), 2.0, np.float32)
    f = pj.kernel(_scaled(const))
    out = jax.vmap(f)(np.ones((3, 64, 64), np.float32))
    np.testing.assert_array_equal(np.asarray(out), 2.0)
    return weakref.ref(const), weakref.ref(f)


def test_vmapped_kernel_is_freed():
    refs = [_vmapped_once() for _ in range(3)]
    gc.collect()
    assert all(const() is None and f() is None for const, f in refs)


def test_batched_cache_does_not_grow_and_is_reused():
    _vmapped_once()
    gc.collect()
    before = len(kernel_mod._BATCHED)
    for _ in range(4):
        _vmapped_once()
    gc.collect()
    assert len(kernel_mod._BATCHED) <= before

    f = pj.kernel(_scaled(np.full((64, 64), 3.0, np.float32)))
    x = np.ones((2, 64, 64), np.float32)
    jax.vmap(f)(x)
    call = f.compiled_for(x[0])
    inner, _ = kernel_mod._BATCHED[call][(0,)]
    np.testing.assert_array_equal(np.asarray(jax.vmap(f)(x)), 3.0)
    assert kernel_mod._BATCHED[call][(0,)][0] is inner and inner.compiles == 1     # kept: not traced again


# ---------------------------------------------------------------------------------- scratch pool
def test_pool_bytes_never_above_cap(monkeypatch):
    monkeypatch.setattr(orchestrator, "POOL_BYTES", 1 << 20)
    pool = orchestrator._Pool()
    for rows in range(100, 300):                          # 200 shapes, 25 KiB .. 75 KiB each, 10 MB in all
        pool.give([np.empty((rows, 64), np.float32) for _ in range(2)])
        held = sum(a.nbytes for free in pool.free.values() for a in free)
        assert held == pool.nbytes <= orchestrator.POOL_BYTES
    assert pool.take((299, 64), np.float32) is not None     # the latest kept, the oldest given up
    assert pool.take((100, 64), np.float32) is None
    assert pool.take((200, 64), np.float64) is None
    assert pool.nbytes <= orchestrator.POOL_BYTES


def test_pool_reuses_scratch_and_stays_bounded_after_many_shapes(monkeypatch):
    monkeypatch.setattr(orchestrator, "_POOL", orchestrator._Pool())
    monkeypatch.setattr(orchestrator, "POOL_BYTES", 1 << 20)
    pool, w = orchestrator._POOL, np.ones((64, 32), np.float32)
    f = pj.kernel(seed_kernel)                            # its matmul's result meets the row sum in GM scratch
    a = np.ones((224, 64), np.float32)
    f(a, a, w)
    first = {id(x) for free in pool.free.values() for x in free}
    assert first, "the kernel has no GM scratch: pick another"
    for _ in range(3):                                    # a steady workload: the same arrays every call
        np.testing.assert_allclose(np.asarray(f(a, a, w)), 3.0 * 64 * 32, rtol=1e-6)
        assert {id(x) for free in pool.free.values() for x in free} == first
    for rows in range(256, 256 + 32 * 24, 32):            # many shapes: the pool keeps at most its cap
        f(np.ones((rows, 64), np.float32), np.ones((rows, 64), np.float32), w)
        assert pool.nbytes <= orchestrator.POOL_BYTES


# ---------------------------------------------------------------------------------------- tapes
def _tanh(a, b):
    with pj.tile(vec=(16, 32)):
        return jnp.tanh(a * 2.0 + b)


def test_tape_bytes_counted_are_what_dropping_them_frees(monkeypatch):
    monkeypatch.setattr(textbatch, "_TAPES", textbatch.collections.OrderedDict())
    f = pj.kernel(_tanh)
    f(np.ones((32, 32), np.float32), np.ones((32, 32), np.float32))   # compile and trace outside the count
    textbatch._TAPES.clear()
    gc.collect()
    tracemalloc.start()
    try:
        for rows in (256, 320, 384):
            a = np.ones((rows, 256), np.float32)
            f(a, a)
        del a
        gc.collect()
        counted = sum(e[3] for e in textbatch._TAPES.values())
        before = tracemalloc.get_traced_memory()[0]
        textbatch._TAPES.clear()
        gc.collect()
        freed = before - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert counted > 0
    assert 0.9 * counted <= freed <= 1.1 * counted, (counted, freed)


def test_tape_bytes_include_gm_index_arrays():
    """Where the points' GM windows are not evenly spaced, a load keeps an int64 index per element."""
    from ptojax.ascend import engine

    gm = engine._Gm(0, np.zeros(4096, np.float32), np.array([0, 7, 100, 1000]), (16, 32), (64, 1))
    load = gm.loader(4)
    store = gm.storer(4)
    index_bytes = 4 * 16 * 32 * 8
    assert index_bytes <= textbatch._kept_bytes([load]) < index_bytes + 1024
    assert textbatch._kept_bytes([load, load]) == textbatch._kept_bytes([load])       # counted once
    assert 2 * index_bytes <= textbatch._kept_bytes([load, store]) < 2 * index_bytes + 1024
