"""Regression: an L-layer model written as ``lax.scan(body, x, stacked_weights)`` (or a ``fori_loop``
reading ``ws[i]``) could not be lowered.

Each step read its slice of the stacked weights as a gather of one index whose row was the whole weight
matrix (a ``(256, 256)`` f32 layer: 256 KiB, more than the UB's 192 KiB), and was refused with
``PtoCapacityError: pto partition: block 'gather' (AIV) needs 262176 bytes of UB ... use a smaller vec
tile for this op (it loads tiles (1,))`` — advice the user cannot follow (the gather is ptojax's own and
its tile already one index). A stacked output (ys) of such rows had the same problem in its scatter.

A step now reads and writes its slice as ``lax.dynamic_slice`` / ``dynamic_update_slice`` at the loop
counter do, and a window whose rows are longer than a default tile moves them in chunks (the stacked
tensor reinterpreted as rows of at most ``CHUNK_BYTES``), so no index tile holds more than a tile's
bytes. Results match ``jax.jit(fn)``, eagerly and under ``jax.jit(pj.kernel(fn))``, and ``ptoas``
accepts the text."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from helpers import assert_eager_matches_jit
from program_check import check
from ptojax.lowering import gathers
from ptojax.lowering.memory import ASCEND_CORE
from vendor_tools import PTOAS

UB = ASCEND_CORE.ub


def scan_layers(x, ws):
    return lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)[0]


def fori_layers(x, ws):
    return lax.fori_loop(0, ws.shape[0], lambda i, h: jnp.tanh(h @ ws[i]), x)


def scan_with_ys(x, ws):          # stacked outputs as large as the inputs' rows, scanned in reverse
    return lax.scan(lambda h, w: (jnp.tanh(h @ w), jnp.tanh(w) * 0.5 + h.sum()), x, ws, reverse=True)


def scan_two_stacks(x, ws):       # two stacked inputs per step (a weight and a bias), odd row sizes
    return lax.scan(lambda h, wb: (jnp.tanh(h * wb[0]) + wb[1], wb[1] * 2), x, ws)


def _inputs(n, rows, cols, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(64, rows)).astype(dtype)
    ws = (rng.normal(size=(n, rows, cols)) / np.sqrt(rows)).astype(dtype)
    return x, ws


def _matches(fn, args, rtol=1e-4, atol=1e-5):
    want = jax.jit(fn)(*args)
    kernel = pj.kernel(fn)
    got = assert_eager_matches_jit(kernel, *args)             # eager and jax.jit(pj.kernel) bit for bit
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=rtol, atol=atol)
    return kernel.lower(*args).compile()


@pytest.mark.parametrize("fn", [scan_layers, fori_layers], ids=lambda f: f.__name__)
def test_the_probe_layers_lower_and_match_jax(fn):
    x, ws = _inputs(2, 256, 256)
    assert ws[0].nbytes > UB                                    # one layer's weights do not fit the UB
    compiled = _matches(fn, (x, ws))
    tensor = compiled.as_text("tensor")
    assert "f32[128,1024] = pto.reshape" in tensor             # the stack read as rows of 4 KiB chunks
    assert "f32[64,1024] = pto.gather" in tensor                # one step: 64 of them, not one row of 256 KiB
    if PTOAS:
        compiled.ptoas()                                        # the vendor's assembler accepts the text


def test_a_stacked_output_of_large_rows_matches_jax():
    x, ws = _inputs(3, 256, 256, seed=1)
    compiled = _matches(scan_with_ys, (x, ws))
    assert "pto.scatter_update" in compiled.as_text("tensor")
    if PTOAS:
        compiled.ptoas()


@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16], ids=lambda d: np.dtype(d).name)
def test_rows_without_an_aligned_divisor_and_two_stacks(dtype):
    """A (100, 333) row: 33 300 values, no chunk of a multiple of 32 bytes divides it (925 f32 values a chunk)."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(100, 333)).astype(dtype)
    ws = rng.normal(size=(3, 2, 100, 333)).astype(dtype)
    assert gathers._chunks((100, 333), np.float32) == (36, 925)
    compiled = _matches(scan_two_stacks, (x, ws), rtol=2e-2 if dtype == jnp.bfloat16 else 1e-5)
    if PTOAS:
        compiled.ptoas()


def test_a_window_update_at_a_traced_start_spanning_large_rows():
    """``lax.dynamic_update_slice`` of a whole layer at a traced start (as a decode step's cache update,
    with rows larger than the UB) writes the window without reading it first; a partial window reads,
    assembles and writes it back; both clamp the start as lax does."""
    rng = np.random.default_rng(3)
    cache = rng.normal(size=(4, 256, 256)).astype(np.float32)
    whole = rng.normal(size=(1, 256, 256)).astype(np.float32)
    part = rng.normal(size=(2, 100, 256)).astype(np.float32)
    for fn, update, starts in [(lambda c, u, i: lax.dynamic_update_slice(c, u, (i, 0, 0)), whole, (1, 9, -3)),
                               (lambda c, u, i: lax.dynamic_update_slice(c, u, (i, 64, 0)), part, (2, 5))]:
        kernel = pj.kernel(fn)
        for i in starts:
            got = kernel(cache, update, np.int32(i))
            np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.jit(fn)(cache, update, np.int32(i))))
    tensor = pj.kernel(lambda c, u, i: lax.dynamic_update_slice(c, u, (i, 0, 0))).lower(
        cache, whole, np.int32(0)).compile().as_text("tensor")
    assert "pto.gather" not in tensor and "pto.scatter_update" in tensor


def test_short_rows_still_move_whole():
    """Rows up to a default tile's bytes are unchanged: one index a step, the row whole."""
    assert gathers._chunks((64, 64), np.float32) == (1, 4096)
    x, ws = _inputs(3, 64, 64, seed=4)
    tensor = _matches(scan_layers, (x, ws)).as_text("tensor")
    assert "f32[1,64,64] = pto.gather" in tensor


@pytest.mark.skipif(PTOAS is None, reason="needs ptoas")
@pytest.mark.parametrize("fn,op", [(scan_layers, "mgather"), (scan_with_ys, "mscatter")], ids=["read", "write"])
def test_the_chunk_programs_match_the_reference_interpreter(fn, op, tmp_path):
    """The chunked row moves' realized text (``ptoas`` accepts it, A3 and A5) executed bit for bit as
    codegen's program says."""
    check(fn, _inputs(2, 256, 256, seed=5), op, tmp_path)
