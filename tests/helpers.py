"""Shared test utilities: dtype grids, random inputs, per-dtype tolerances, composition checks,
bit-for-bit comparisons, float32 special values."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np


F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
I8, I32, BOOL = np.dtype(np.int8), np.dtype(np.int32), np.dtype(np.bool_)
FLOATS = (F32, F16, BF16)
INTS = (I8, I32)
NUMERIC = FLOATS + INTS

# Shapes with size-1 and odd/prime sizes.
SHAPES = [(1,), (7,), (3, 5), (1, 13), (4, 1, 6), (2, 3, 17)]

# Relative/absolute tolerance per dtype for a single op vs a float64 NumPy golden rounded to dtype.
TOL = {F32: (1e-5, 1e-6), F16: (2e-3, 1e-3), BF16: (1.6e-2, 1e-2), I8: (0, 0), I32: (0, 0), BOOL: (0, 0)}


def rand(shape, dtype, seed=0, low=-3.0, high=3.0):
    """NumPy array of ``dtype``: uniform floats in [low, high), ints over a range that exercises wrap."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype in INTS:
        info = np.iinfo(dtype)
        lo, hi = (info.min, info.max + 1) if dtype == I8 else (-1000, 1000)
        return rng.integers(lo, hi, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def assert_close(actual, golden, dtype=None, rtol=None, atol=None):
    """Compare with the per-dtype tolerance; integer and bool results must match exactly."""
    actual = np.asarray(actual)
    golden = np.asarray(golden)
    dtype = np.dtype(dtype or golden.dtype)
    assert actual.shape == golden.shape, (actual.shape, golden.shape)
    r, a = TOL.get(dtype, (1e-5, 1e-6))
    r, a = (rtol if rtol is not None else r), (atol if atol is not None else a)
    if r == 0 and a == 0:
        np.testing.assert_array_equal(actual, golden)
    else:
        np.testing.assert_allclose(actual.astype(np.float64), golden.astype(np.float64), rtol=r, atol=a)


def assert_eager_matches_jit(fn, *args):
    """``fn`` gives bit-identical results eagerly and under ``jax.jit``."""
    eager = fn(*args)
    jitted = jax.jit(fn)(*args)
    jax.tree.map(lambda e, j: np.testing.assert_array_equal(np.asarray(e), np.asarray(j)), eager, jitted)
    return eager


def assert_vmap_matches_loop(fn, args, in_axes, rtol=1e-6, atol=1e-6):
    """``jax.vmap(fn, in_axes)`` equals stacking ``fn`` over a Python loop of the mapped slices."""
    axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    size = next(np.shape(a)[d] for a, d in zip(args, axes) if d is not None)
    out = jax.vmap(fn, in_axes=tuple(axes))(*args)
    looped = [fn(*[a if d is None else jnp.take(a, i, axis=d) for a, d in zip(args, axes)]) for i in range(size)]
    expected = jax.tree.map(lambda *xs: jnp.stack(xs), *looped)
    jax.tree.map(lambda o, e: np.testing.assert_allclose(np.asarray(o, np.float64), np.asarray(e, np.float64),
                                                         rtol=rtol, atol=atol), out, expected)
    return out


def rotate_dtypes(cases, dtypes, per_case=2):
    """Each case with ``per_case`` dtypes taken in rotation: every dtype is hit, compiles stay few."""
    import pytest

    out, j = [], 0
    for case in cases:
        for _ in range(per_case):
            dtype = dtypes[j % len(dtypes)]
            out.append(pytest.param(*case, dtype, id=f"{len(out)}-{np.dtype(dtype).name}"))
            j += 1
    return out


def bits(x):
    """A float or 16-bit array as unsigned integers of its bits (to compare bit for bit)."""
    x = np.asarray(x)
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.kind == "f" or x.dtype.itemsize == 2 else x


def same_bits(got, want):
    """Equal bits, but for which NaN a NaN is (IEEE leaves the payload of NaN op NaN open)."""
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        g, w = np.asarray(g).reshape(-1), np.asarray(w).reshape(-1)
        differ = g.view(np.uint8).reshape(g.size, -1) != w.view(np.uint8).reshape(w.size, -1)
        differ = differ.any(axis=1) if g.size else differ.reshape(0)
        if g.dtype.kind == "f" or g.dtype == BF16:
            differ &= ~(np.isnan(g.astype(np.float32)) & np.isnan(w.astype(np.float32)))
        assert not differ.any(), (g[differ][:5], w[differ][:5])


# float32 bit patterns the fast paths must get right: zeros, infinities, NaNs of several payloads
# (quiet, signalling, negative), subnormals, the largest finite, ties of float16 / bfloat16 rounding.
SPECIAL_F32 = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FA00000, 0xFFC00001, 0x7F800001, 1,
                         0x80000001, 0x3F800000, 0x7F7FFFFF, 0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001,
                         0x3F808000, 0x3F818000], np.uint32)


def specials(shape, dtype, seed):
    """Random values of ``dtype`` with the float32 special values (NaN payloads, infinities, signed zeros,
    subnormals, ties) among them."""
    x = rand(shape, np.float32, seed).reshape(-1)
    x.view(np.uint32)[:len(SPECIAL_F32)] = SPECIAL_F32
    with np.errstate(invalid="ignore", over="ignore"):
        return np.random.default_rng(seed).permutation(x).reshape(shape).astype(dtype)


def in_threads(work, count: int) -> list:
    """Run ``work(k)`` for ``k`` in ``range(count)`` in threads at once; the exceptions they raised."""
    import threading

    errors = []

    def guarded(k):
        try:
            work(k)
        except Exception as exc:  # noqa: BLE001 - reported to the caller
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


# ------------------------------------------------------------------ float64 goldens of composite ops
def np_softmax(x, axis):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_quantize(x, axes):
    """float64 golden: (unrounded q = x * 127 / amax, scale = amax / 127) with amax over ``axes``."""
    x = np.asarray(x, np.float64)
    amax = np.max(np.abs(x), axis=axes, keepdims=True)
    safe = np.where(amax > 0, amax, 1.0)
    raw = np.where(amax > 0, x * (127.0 / safe), 0.0)
    return raw, amax / 127.0


def assert_quantized(q, raw):
    """int8 ``q`` equals rint(raw) clipped to int8 exactly, except next to a .5 tie.

    ptojax computes ``x * (127 / amax)`` in float32, so where the float64 golden lies within 1e-6 of
    a .5 tie the rounding may go either way: there (and only there) a difference of 1 is accepted.
    """
    q = np.asarray(q)
    assert q.dtype == np.int8
    want = np.clip(np.rint(raw), -128, 127)
    diff = np.abs(q.astype(np.int64) - want)
    near_tie = np.abs(np.abs(raw - np.trunc(raw)) - 0.5) < 1e-6
    bad = (diff > 1) | ((diff == 1) & ~near_tie)
    assert not bad.any(), (q[bad], raw[bad])


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per element, how many representable values of the dtype lie between ``got`` and ``want`` (NaN
    against NaN: 0)."""
    it = {2: np.int16, 4: np.int32, 8: np.int64}[got.dtype.itemsize]

    def ordered(x):
        bits = np.atleast_1d(x).view(it).astype(np.int64)
        return np.where(bits < 0, np.iinfo(it).min - bits, bits)

    far = np.abs(ordered(got) - ordered(want))
    both_nan = np.isnan(np.atleast_1d(got).astype(np.float32)) & np.isnan(np.atleast_1d(want).astype(np.float32))
    return np.where(both_nan, 0, far)


def assert_replay_matches(got, want, where=""):
    for i, (g, w) in enumerate(zip(jax.tree.leaves(got), jax.tree.leaves(want))):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{where} output {i}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        if np.issubdtype(g.dtype, np.floating) or g.dtype == ml_dtypes.bfloat16:
            far = ulps(g, w)
            assert far.max(initial=0) <= 1, f"{where} output {i}: {int(far.max())} ulps at {np.argmax(far)}"
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{where} output {i}")
