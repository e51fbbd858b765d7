"""Gathers and scatters whose rows are too long for an index tile of them in the UB (a paged KV cache's
32 KiB pages: eight of them at the least int32 index tile) move each row in chunks; equal to XLA bit for
bit (a copy), and the one refusal left names a remedy that works."""
import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend.ptoas import find_ptoas

BF16 = ml_dtypes.bfloat16


def _bits(a):
    a = np.asarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _same(got, want):
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_array_equal(_bits(g), _bits(w))


def _cache(pages, page=16, heads=8, d=128, seed=0, dtype=BF16):
    return np.random.default_rng(seed).standard_normal((pages, page, heads, d)).astype(dtype)


def _table(pages, shape, seed=1):
    return np.random.default_rng(seed).permutation(pages)[:int(np.prod(shape))].reshape(shape).astype(np.int32)


def test_page_gather_lowers_by_default_and_equals_xla():
    """The paged-decode page gather: bf16 pages of 32 KiB, the default tile; each page moves as chunks of
    a default tile's eighth, read from the cache as rows of them (a GM reinterpretation)."""
    kc, bt = _cache(80), _table(80, (2, 8))

    def fn(kc, bt):
        return kc[bt]

    compiled = pj.kernel(fn).lower(kc, bt).compile()
    _same(compiled(kc, bt), jax.jit(fn)(kc, bt))
    _same(jax.jit(pj.kernel(fn))(kc, bt), jax.jit(fn)(kc, bt))          # its replay under jit too
    graph = compiled.as_text("block").split("\n\n")[-1]
    assert "bf16[640,2048] = pto.reshape" in graph           # 80 pages of 16 384 elements as 8 chunks of 2 048
    assert "bf16[128,2048] = block_call[gather<AIV>" in graph
    gather = next(p for p in compiled.as_text("block").split("\n\n") if p.startswith("program gather "))
    used = int(gather.split("footprint(vec=")[1].split("B")[0])
    assert used <= 33 * 1024                                  # about a default tile, not eight pages
    if find_ptoas() or os.environ.get("CI") == "true":
        assert compiled.ptoas()


def test_page_of_256_kib_gathers():
    """Pages too long for the UB even one at a time (page 128, 8 heads, d 128, bf16)."""
    kc, bt = _cache(12, page=128), _table(12, (1, 3))
    fn = lambda kc, bt: kc[bt]                                # noqa: E731
    _same(pj.kernel(fn)(kc, bt), jax.jit(fn)(kc, bt))


@pytest.mark.parametrize("mode", ["clip", "fill0", "fill"])
def test_out_of_range_pages_read_as_xla(mode):
    kc = _cache(40)
    bt = np.array([[0, 39, -1, 3], [70, -60, 5, 5]], np.int32)
    fn = {"clip": lambda k, b: k[b],
          "fill0": lambda k, b: k.at[b].get(mode="fill", fill_value=0),
          "fill": lambda k, b: k.at[b].get(mode="fill")}[mode]
    got, want = np.asarray(pj.kernel(fn)(kc, bt)), np.asarray(jax.jit(fn)(kc, bt))
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))   # NaN fill: equal as NaN


def test_pj_ops_gather_and_inner_axis():
    """``pj.ops.gather`` straight (the tile pass chunks it, not jnp's translation), along axis 0 and along
    an inner axis whose slab (every leading position's row) would overfill the UB: leading dims folded
    into the rows first."""
    kc, bt = _cache(40), _table(40, (2, 8))
    _same(pj.kernel(lambda k, b: pj.ops.gather(k, b, 0))(kc, bt), jnp.take(kc, bt, axis=0))
    x = np.random.default_rng(2).standard_normal((2, 30, 16, 1024)).astype(np.float32)
    i = np.array([3, 1, 29, 0, 7, 7, 2, 9, 11], np.int32)
    _same(pj.kernel(lambda x, i: pj.ops.gather(x, i, 1))(x, i), jnp.take(x, i, axis=1))
    fn = lambda x, i: jnp.take(x, i, axis=1)                  # noqa: E731
    _same(pj.kernel(fn)(x, i), jax.jit(fn)(x, i))


def test_page_scatters_equal_xla():
    """The transpose: pages written (``.at[p].set``, drop mode out of range) and added with repeats."""
    kc = _cache(40)
    upd = _cache(8, seed=5)
    pages = np.array([4, 9, 0, 33, 12, 39, 2, 7], np.int32)
    for fn, p in [(lambda k, p, u: k.at[p].set(u), pages),
                  (lambda k, p, u: k.at[p].set(u, mode="drop"), np.array([4, -1, 0, 33, 70, 39, 2, 7], np.int32)),
                  (lambda k, p, u: k.astype(jnp.float32).at[p].add(u.astype(jnp.float32)),
                   np.array([4, 4, 0, 33, 4, 39, 2, 99], np.int32))]:
        _same(pj.kernel(fn)(kc, p, upd), jax.jit(fn)(kc, p, upd))


@pytest.mark.parametrize("vec", [(1, 8), (1, 64)])
def test_a_vec_tile_of_indices_takes_chunks_that_fit(vec):
    """Under a ``vec`` tile of many indices the chunks shrink until that many of them fit half the UB."""
    kc, bt = _cache(80), _table(80, (1, 64))

    def fn(kc, bt):
        with pj.tile(vec=vec):
            return kc[bt]

    _same(pj.kernel(fn)(kc, bt), jax.jit(lambda k, b: k[b])(kc, bt))


def test_vmapped_take_of_long_rows():
    x = np.random.default_rng(3).standard_normal((2, 20, 16, 512)).astype(np.float32)
    i = np.random.default_rng(4).integers(0, 20, (2, 8)).astype(np.int32)
    fn = jax.vmap(lambda k, b: k[b])
    _same(pj.kernel(fn)(x, i), jax.jit(fn)(x, i))


def test_rows_that_fit_stay_whole():
    """Token rows of 2 KiB (the same cache as rows of ``(heads, d)``): no chunks, no index arithmetic."""
    kc = _cache(40).reshape(640, 8, 128)
    tok = np.random.default_rng(6).integers(0, 640, (4, 32)).astype(np.int32)
    low = pj.lower(lambda k, t: k[t], kc, tok)
    graph = low.as_text("block").split("\n\n")[-1]
    assert "expand" not in graph and "2048]" not in graph
    _same(pj.kernel(lambda k, t: k[t])(kc, tok), jnp.take(kc, tok, axis=0))


def test_row_with_no_chunk_is_refused_with_a_remedy_that_works():
    """A row of a prime length (10 007 float32) has no chunk to move in: the refusal names the row, the
    index tile and a padding that does, and the padded gather equals XLA's."""
    x = np.random.default_rng(7).standard_normal((20, 10007)).astype(np.float32)
    b = np.random.default_rng(8).integers(0, 20, (2, 8)).astype(np.int32)
    with pytest.raises(pj.PtoCapacityError) as err:
        pj.kernel(lambda k, b: k[b]).lower(x, b)
    msg = str(err.value)
    assert "10007 x 4 bytes" in msg and "8 indices" in msg and "multiple of 1024 elements" in msg, msg
    padded = lambda k, b: jnp.pad(k, [(0, 0), (0, 10240 - 10007)])[b][..., :10007]   # noqa: E731
    _same(pj.kernel(padded)(x, b), jax.jit(lambda k, b: k[b])(x, b))
