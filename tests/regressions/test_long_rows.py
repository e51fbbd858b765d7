"""Regression: rows wider than a tile row (4 095 columns) under a ``vec`` tile that splits them.

A last-axis reduction over more than ``max_cols`` columns was staged at the Tile level (chunks of a
reshaped tensor) before partition, so a softmax or layer norm of such rows never formed the row loop
that narrower rows form: softmax (64, C) f32 under vec (4, 1024) was 1 program / 16 tasks / 16.0 us at
C = 4000 and 6 programs / 288 tasks / 98.3 us at C = 4096, and ``row_loops=False`` changed nothing.
Such a reduction now stays whole at the Tile level and partition loops over the column tiles (one
program per row block; a reduction with no chain around it loops over column chunks), so time grows
about linearly with C; ``row_loops`` off keeps the staged form.

Also here: a vec tile the user chose that overfills the UB is the capacity error (``Kernel.lower``
halved the *default* tiles, which also re-staged the user's reductions: 4 programs, 144 tasks); the
partition's capacity error for a whole-row reduction names the tile and that only fewer rows help; the
staged form (``row_loops`` off) of a softmax whose whole rows overfill the UB reduces fewer rows per
stage instead of failing.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.lowering.memory import ASCEND_CORE


def tiled(fn, vec, label="S"):
    def kernel(x):
        with pj.tile(vec=vec), jax.named_scope(label):
            return fn(x)
    kernel.__name__ = fn.__name__
    return kernel


def check_numbers(kernel, args, rtol=1e-5, atol=1e-5, options=None):
    got = np.asarray(pj.kernel(kernel, options=options)(*args))
    want = np.asarray(jax.jit(kernel)(*args))           # pj.tile is metadata outside pj.kernel: plain XLA
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def vector_calls(compiled):
    """The vector block calls of the Block graph: (program names, instances) per call."""
    return [[(p.program.name, p.instances) for p in e.params["spec"].parts]
            for e in compiled.lowering.block.jaxpr.eqns
            if e.primitive.name == "pto.block_call" and e.params["spec"].parts[0].program.core == "AIV"]


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def layer_norm(x):
    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, -1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5)


def row_sum(x):
    return jnp.sum(x, -1)


def row_max(x):
    return jnp.max(x, -1, keepdims=True)


def row_mean(x):
    return jnp.mean(x, -1)


def logsumexp(x):
    return jax.nn.logsumexp(x, -1)


def compiled(kernel, shape, options=None):
    return pj.kernel(kernel, options=options).lower(jax.ShapeDtypeStruct(shape, np.float32)).compile()


def test_softmax_past_4095_columns_is_a_row_loop_whose_time_grows_with_the_row():
    """The probe's numbers: C = 4096 and 8192 are one program of 16 tasks (a task per 4-row block),
    not 6 programs of 288 / 416 tasks; 8192 columns cost less than 3x 4000."""
    kernel = tiled(softmax, (4, 1024))
    spans = {}
    for cols in (4000, 4096, 8192):
        comp = compiled(kernel, (64, cols))
        prof = comp.profile(compute=False)
        assert len(comp.lowering.programs) == 1 and prof.tasks == 64 // 4, (cols, prof.tasks)
        spans[cols] = prof.makespan_us
    assert spans[4096] < 1.2 * spans[4000]
    assert spans[8192] < 3 * spans[4000]
    staged = compiled(kernel, (64, 8192), {"row_loops": {"S": False}})
    assert len(staged.lowering.programs) > 1 and staged.profile(compute=False).tasks > 64 // 4
    x = np.random.default_rng(0).uniform(-4, 4, (64, 8192)).astype(np.float32)
    check_numbers(kernel, [x], rtol=1e-5, atol=1e-6)
    check_numbers(kernel, [x], rtol=1e-5, atol=1e-6, options={"row_loops": {"S": False}})


@pytest.mark.parametrize("fn", [softmax, layer_norm, row_sum, row_max, row_mean, logsumexp],
                         ids=lambda f: f.__name__)
def test_row_kernels_over_5000_columns_are_one_program_per_row_block(fn):
    """24 rows of 5 000 columns under vec (8, 1024): four full column tiles and a tail of 904 in the
    loop, a task per 8-row block, the numbers of XLA; a row reduction alone (no chain around it) loops
    over column chunks, as rows of at most 4 095 columns are one whole-row program."""
    kernel = tiled(fn, (8, 1024))
    comp = compiled(kernel, (24, 5000))
    assert len(comp.lowering.programs) == 1 and comp.profile(compute=False).tasks == 3
    assert [n for call in vector_calls(comp) for n in call] == [(comp.lowering.programs[0].name, 3)]
    x = np.random.default_rng(1).uniform(0.5, 4, (24, 5000)).astype(np.float32)
    check_numbers(kernel, [x], rtol=1e-5, atol=1e-5)


def test_a_row_tail_keeps_a_task_per_row_block():
    """20 rows in blocks of 8: two full row blocks and a tail of 4, each one looping task."""
    kernel = tiled(softmax, (8, 1024))
    comp = compiled(kernel, (20, 6000))
    assert comp.profile(compute=False).tasks == 3
    x = np.random.default_rng(2).uniform(-4, 4, (20, 6000)).astype(np.float32)
    check_numbers(kernel, [x], rtol=1e-5, atol=1e-6)


def test_a_user_tile_that_overfills_the_ub_is_cut_in_pieces_not_a_restaged_kernel():
    """Softmax (64, 2048) f32 under the user's vec (8, 2048) needs a little more UB than a core has:
    its 8-row tiles are computed in pieces of rows, one program of 8 tasks (was: three halvings of the
    default tile size re-staged the user's reductions, 4 programs and 144 tasks; then a capacity error)."""
    x = np.random.default_rng(5).uniform(-4, 4, (64, 2048)).astype(np.float32)
    for vec in ((8, 2048), (8, 1024)):
        comp = pj.kernel(tiled(softmax, vec)).lower(x).compile()
        assert len(comp.lowering.programs) == 1 and comp.profile(compute=False).tasks == 8
        np.testing.assert_allclose(np.asarray(comp(x)), np.asarray(jax.nn.softmax(x, -1)), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape, vec", [((64, 2048), (8, 2048)), ((64, 8192), (4, 1024)), ((16, 2000), (16, 512))])
def test_halving_the_default_tile_size_leaves_the_users_tiles_as_they_are(shape, vec):
    x = jax.ShapeDtypeStruct(shape, np.float32)
    for options in (None, {"row_loops": {"S": False}}):
        base = pj.lower(tiled(softmax, vec), x, options=options).as_text("tile")
        for tile_bytes in (16 * 1024, 4 * 1024, 2 * 1024):
            small = dataclasses.replace(ASCEND_CORE, tile_bytes=tile_bytes)
            assert pj.lower(tiled(softmax, vec), x, options=options, memory=small).as_text("tile") == base


@pytest.mark.parametrize("fn", [row_sum, lambda x: jnp.max(x, -1)])
def test_a_lone_row_reduction_whose_whole_row_tile_overfills_loops_over_column_chunks(fn):
    """jnp.sum / jnp.max over rows of (64, 2000) f32 under vec (16, 512): a whole-row tile (16 x 2000 x
    4 B, and a tmp tile as large, and the max's NaN pass) overfills the UB; with row loops on the
    reduction loops over column chunks of its rows in one program (it was refused), with row loops off
    the capacity error says what a row loop would do."""
    x = np.random.default_rng(3).uniform(-1, 1, (64, 2000)).astype(np.float32)
    compiled = pj.kernel(tiled(fn, (16, 512), "R")).lower(x).compile()
    assert len(compiled.lowering.programs) == 1 and "scf.for" in compiled.as_text("pto")
    np.testing.assert_allclose(np.asarray(compiled(x)), np.asarray(fn(x)), rtol=1e-5, atol=1e-5)
    with pytest.raises(pj.PtoCapacityError, match=r"\(16, 2000\).*row_loops is off for label 'R'"):
        _overfilled_staged_sum()


def _overfilled_staged_sum():
    """The same block with row loops off for its label (the tile pass now cuts a staged reduction's
    rows to fit, so the block is built by hand): the advice says what a row loop would do."""
    from ptojax.lowering.partition import _program
    from ptojax.primitives import tile as T

    def body(i, j, x, out):
        t = T.tload(x, [i, j], T.Window((16, 2000), (0, -1), (16, 0), (0, 0)))
        y = T.compute("sum", t, axes=(1,), keepdims=True)
        return [T.tstore(out, y, [i, j], T.Window((16, 1), (0, -1), (16, 0), (0, 0)))]

    i32 = jax.ShapeDtypeStruct((), np.int32)
    closed = jax.make_jaxpr(body)(i32, i32, jax.ShapeDtypeStruct((64, 2000), np.float32),
                                  jax.ShapeDtypeStruct((64, 1), np.float32))
    _program(("sum",), "vector", closed, "R", ASCEND_CORE, row_loops=False)


def test_the_staged_form_of_a_softmax_whose_rows_overfill_the_ub_reduces_fewer_rows_per_stage():
    """Softmax (64, 2000) f32 under vec (16, 512) with row_loops off (the staged form): the amax and sum
    stages reduce 8 whole rows at a time (16 did not fit: a PtoCapacityError); the row loop is one
    program of 4 tasks."""
    x = np.random.default_rng(3).uniform(-4, 4, (64, 2000)).astype(np.float32)
    kernel = tiled(softmax, (16, 512))
    fused = pj.kernel(kernel).lower(x).compile()
    assert len(fused.lowering.programs) == 1 and fused.profile(compute=False).tasks == 4
    options = {"row_loops": {"S": False}}
    staged = pj.kernel(kernel, options=options).lower(x).compile()
    assert len(staged.lowering.programs) > 1
    calls = dict(n for call in vector_calls(staged) for n in call)
    assert calls["amax+maximum"] == calls["sum"] == 64 // 8
    check_numbers(kernel, [x], rtol=1e-5, atol=1e-6, options=options)


def test_a_default_tile_override_that_changes_nothing_is_an_error_as_a_labels_is():
    """tiles={"DEFAULT": ...} applies to the ops with no tile setting of their own: a cube tile on a
    kernel with no matmul, or a vec tile where every op has its own, would change nothing (it was
    accepted silently, while the same under a label is an error)."""
    def fn(x):
        with pj.tile(vec=(16, 128)), jax.named_scope("L"):
            return jnp.tanh(x * 2.0)

    x = jax.ShapeDtypeStruct((256, 512), np.float32)
    with pytest.raises(pj.PtoArgumentError, match=r"'DEFAULT' sets cube, but the kernel's ops take vec tiles only"):
        pj.lower(fn, x, options={"tiles": {"DEFAULT": {"cube": (16, 16, 16)}}})
    with pytest.raises(pj.PtoArgumentError, match=r"'DEFAULT' sets vec, but every op that takes a vec tile has its own"):
        pj.lower(fn, x, options={"tiles": {"DEFAULT": {"vec": (8, 128)}}})

    def mixed(x):
        with pj.tile(vec=(16, 128)), jax.named_scope("L"):
            y = jnp.tanh(x * 2.0)
        return y + 1.0                                   # no tile setting of its own: DEFAULT's applies

    low = pj.lower(mixed, x, options={"tiles": {"DEFAULT": {"vec": (8, 128)}}})
    assert "8x128" in low.as_text("tile") or "[8*i0:+8" in low.as_text("tile")


@pytest.mark.parametrize("vec", [(64, 64), (16, 128)])
def test_a_row_reduction_without_keepdims_fuses_into_one_row_loop(vec):
    """sum(tanh(x), -1) over (64, 1024) under a vec tile that splits the row: one program looping over
    the column tiles, as with ``keepdims=True`` (it was refused under (64, 64), two programs meeting in GM
    under (16, 128): only rows past a tile row took the keepdims form a row loop accumulates)."""
    x = np.random.default_rng(4).uniform(-1, 1, (64, 1024)).astype(np.float32)

    def fn(a):
        return jnp.sum(jnp.tanh(a), axis=-1)
    compiled = pj.kernel(tiled(fn, vec)).lower(x).compile()
    assert [p.name for p in compiled.lowering.programs] == ["tanh+sum"]
    np.testing.assert_allclose(np.asarray(compiled(x)), np.asarray(fn(x)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(33, 13, 1), (4, 13, 1), (5, 33, 13, 1)])
@pytest.mark.parametrize("reduce", [jnp.max, jnp.min, jnp.sum, jnp.prod])
def test_a_reduction_over_a_unit_last_axis_without_keepdims(shape, reduce):
    """Over (33, 13, 1) the result (33, 13) is the tile's rows laid out as another tile's: selection had
    no copy of the 1 x 429 row into a 33 x 13 tile. It reduces with keepdims, then drops the unit dim."""
    x = np.random.default_rng(5).uniform(-2, 2, shape).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(lambda a: reduce(a, -1))(x)), np.asarray(reduce(x, -1)))
