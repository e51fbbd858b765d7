"""Programs whose tiles the user chose overfill the UB as ptoas plans them, computed in pieces of rows:
reductions, sorts and top-k along the last axis and ops on a row broadcast over the rows (a weight) cut
by rows as elementwise ops are. They were refused at realize (``function @amax needs 233 728 bytes``
for f32 max over (100, 304) under vec (64, 304); bf16 ``x * w`` under (32, 1000) needed 323 552), while
sum / prod under the same tiles compiled. A last-axis cumsum under the user's tile stages where its
tiles as isel emits them overfill (a smaller tile was refused where a larger one, staged, compiled)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend.isel import liveness
from ptojax.lowering.memory import ASCEND_CORE

RNG = np.random.default_rng(7)


def _fits(compiled):
    return all(liveness.ub_plan(t) <= ASCEND_CORE.ub for t in liveness.functions(compiled.code.pto()).values())


ROWS = {"max": lambda x, w: jnp.max(x, -1),
        "argmax": lambda x, w: jnp.argmax(x, -1),
        "logsumexp": lambda x, w: jax.nn.logsumexp(x, -1),
        "softmax": lambda x, w: jax.nn.softmax(x, -1),
        "sort": lambda x, w: jnp.sort(x, -1),
        "argsort": lambda x, w: jnp.argsort(x, -1),
        "top_k": lambda x, w: jax.lax.top_k(x, 8),
        "x * w": lambda x, w: x * w,
        "max(x * w)": lambda x, w: jnp.max(x * w, -1)}
CASES = [("max", (100, 304), (64, 304), np.float32), ("argmax", (100, 304), (64, 512), np.float32),
         ("logsumexp", (100, 304), (64, 304), np.float32), ("softmax", (100, 304), (64, 304), np.float32),
         ("max", (100, 300), (100, 304), jnp.bfloat16), ("sort", (32, 1000), (16, 1000), jnp.bfloat16),
         ("argsort", (96, 1000), (32, 1000), np.float32), ("top_k", (96, 1000), (32, 1000), np.float32),
         ("x * w", (96, 1000), (32, 1000), jnp.bfloat16), ("max(x * w)", (96, 1000), (64, 1000), jnp.bfloat16)]


@pytest.mark.parametrize("name, shape, vec, dtype", CASES, ids=[f"{c[0]} {c[2]} {np.dtype(c[3]).name}" for c in CASES])
def test_equals_xla_and_fits_the_plan(name, shape, vec, dtype):
    def fn(x, w):
        with pj.tile(vec=vec):
            return ROWS[name](x, w)

    x = RNG.normal(size=shape).astype(dtype)
    w = RNG.normal(size=shape[-1:]).astype(dtype)
    compiled = pj.kernel(fn).lower(x, w).compile()
    assert _fits(compiled)
    for got, want in zip(jax.tree.leaves(compiled(x, w)), jax.tree.leaves(jax.jit(fn)(x, w))):
        if name in ("logsumexp", "softmax"):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


BROADCAST = [("x * s, s of the rows", (70, 1000), (70, 1), (33, 1000), jnp.bfloat16),
             ("x * s, 3-d", (2, 96, 1024), (2, 96, 1), (1, 48, 1024), np.float32),
             ("x * y, y over the batch", (4, 32, 1000), (32, 1000), (2, 32, 1000), jnp.bfloat16),
             ("x * y, y over the batch, f32", (6, 40, 512), (40, 512), (2, 40, 512), np.float32)]


@pytest.mark.parametrize("name, xs, ys, vec, dtype", BROADCAST, ids=[c[0] for c in BROADCAST])
def test_an_operand_broadcast_into_the_tile_is_cut_with_it_or_read_whole(name, xs, ys, vec, dtype):
    """Elementwise programs with an operand broadcast into the tile (an R×1 column, a row block shared by
    the batch) overfilling the UB: each piece cuts it where it spans the cut dim, else reads it whole (they
    were refused at realize: ``function @mul needs 331 680 bytes``)."""
    def fn(x, y):
        with pj.tile(vec=vec):
            return x * y, jnp.argsort(x * y, -1, descending=True)

    x, y = RNG.normal(size=xs).astype(dtype), RNG.normal(size=ys).astype(dtype)
    compiled = pj.kernel(fn).lower(x, y).compile()
    assert _fits(compiled)
    for got, want in zip(compiled(x, y), jax.jit(fn)(x, y)):
        np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


def test_a_tile_larger_than_the_ub_is_still_refused_naming_the_rows_that_fit():
    def fn(x):
        with pj.tile(vec=(64, 1000)):          # 256 000 bytes of f32: no piece of it is ever loaded whole
            return jax.lax.top_k(x, 8)

    with pytest.raises(pj.PtoCapacityError, match=r"block 'topk' .* only fewer rows per tile help"):
        pj.kernel(fn).lower(jax.ShapeDtypeStruct((96, 1000), np.float32))


@pytest.mark.parametrize("shape, vec, dtype", [((100, 304), (64, 304), np.float32), ((100, 304), (64, 512), np.float32),
                                               ((33, 1000), (16, 256), np.float16),
                                               ((33, 1000), (16, 256), jnp.bfloat16), ((8, 2049), (5, 1024), np.float16),
                                               ((11, 2049), (8, 1024), np.int8)])
def test_a_last_axis_cumsum_under_the_users_tile_fits_or_stages(shape, vec, dtype):
    def fn(x):
        with pj.tile(vec=vec):
            return jnp.cumsum(x, -1)

    x = (RNG.normal(size=shape) * (3 if np.dtype(dtype).kind == "f" else 9)).astype(dtype)
    compiled = pj.kernel(fn).lower(x).compile()
    assert _fits(compiled)
    got = np.asarray(compiled(x)).astype(np.float64)
    if np.dtype(dtype).kind == "i":         # wraps as XLA's int8 adds do
        np.testing.assert_array_equal(got, np.asarray(jax.jit(fn)(x)).astype(np.float64))
    else:                                   # accumulated in float32, rounded once (XLA adds in the dtype)
        want = np.cumsum(np.asarray(x, np.float64), -1)
        np.testing.assert_allclose(got, want, rtol=2 * float(jnp.finfo(dtype).eps), atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("fn", [lambda x: jnp.max(x, -1), lambda x: jnp.min(x, -1), lambda x: jnp.sum(x, -1)],
                         ids=["max", "min", "sum"])
def test_a_row_reduction_under_a_tile_larger_than_the_ub_loops_with_or_without_keepdims(fn):
    """int32 (100, 512) under vec (100, 512), a tile of 204 800 bytes: with keepdims the reduction
    looped over column chunks, without it it was refused; both loop now, equal to XLA."""
    def kernel(x):
        with pj.tile(vec=(100, 512)):
            return fn(x), fn(x)[:, None] + 1

    x = RNG.integers(-1000, 1000, (100, 512)).astype(np.int32)
    for got, want in zip(pj.kernel(kernel)(x), jax.jit(kernel)(x)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
