"""Fusion as PyPTO partitions: row kernels written as a user would lower to one vector program per row
block (tasks == row blocks), with the row whole in a tile or looping over column tiles inside the
program; a matmul's row epilogue is one vector program per output tile; a batched M = 1 matmul is
merged along M. Numbers equal XLA and ptoas accepts the fused programs. Shapes and tiles here are not
the benchmark's (``benchmarks/fusion.py``)."""
import os
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend.isel import liveness
from ptojax.ascend.ptoas import find_ptoas
from ptojax.lowering.memory import ASCEND_CORE
from ptojax.lowering.rowform import plan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fusion as F  # noqa: E402

HAVE_PTOAS = bool(find_ptoas()) or os.environ.get("CI") == "true"
ROWS, COLS, BLOCK = 40, 768, 8


def compiled_and_profile(fn, args):
    compiled = pj.kernel(fn).lower(*args).compile()
    return compiled, compiled.profile(*args, compute=False)


def vector_calls(compiled):
    """The vector block calls of the Block graph: (program names, instances) per call."""
    return [[(p.program.name, p.instances) for p in e.params["spec"].parts]
            for e in compiled.lowering.block.jaxpr.eqns
            if e.primitive.name == "pto.block_call" and e.params["spec"].parts[0].program.core == "AIV"]


def check_numbers(fn, args, rtol=1e-5, atol=1e-5):
    got = np.asarray(pj.kernel(fn)(*args))
    want = np.asarray(jax.jit(fn)(*args))             # pj.tile is metadata outside pj.kernel: plain XLA
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", list(F.ROW_KERNELS))
@pytest.mark.parametrize("vec", [(BLOCK, COLS), (BLOCK, COLS // 3)], ids=["whole-row", "third-row"])
def test_row_kernels_are_one_vector_program_per_row_block(name, vec):
    args = F.row_args(name, ROWS, COLS, seed=3)
    fn = F.tiled(F.ROW_KERNELS[name], vec)
    compiled, prof = compiled_and_profile(fn, args)
    calls = vector_calls(compiled)
    assert len(calls) == 1 and len(calls[0]) == 1, calls       # one program, one block call
    assert [p.core for p in compiled.lowering.programs] == ["AIV"]
    assert prof.tasks == ROWS // BLOCK
    looped = "scf.for" in compiled.as_text("pto")
    assert looped == (vec[1] < COLS), "a row wider than the tile loops over its column tiles inside the program"
    check_numbers(fn, args)
    if HAVE_PTOAS:
        compiled.ptoas()


def test_a_weight_cast_traced_between_a_norms_ops_leaves_one_program_with_both_input_casts():
    """A residual RMSNorm in bf16: ``x`` and ``r`` cast to f32, summed, normed, times ``g`` cast to f32
    only at its use. The weight's cast moves out of the program, to just after what it reads: moved
    just before the program (the add's), it stood between that and the cast of ``x`` and kept them two
    programs, a float32 copy of ``x`` written to GM and read back (2x the tasks)."""
    f32 = jnp.float32

    def residual_rms_norm(x, r, g):
        h = x.astype(f32) + r.astype(f32)
        return (h * jax.lax.rsqrt(jnp.mean(h * h, -1, keepdims=True) + 1e-6) * g.astype(f32)).astype(x.dtype)

    rng = np.random.default_rng(8)
    x, r = (rng.standard_normal((ROWS, COLS)).astype(jnp.bfloat16) for _ in range(2))
    g = rng.standard_normal(COLS).astype(jnp.bfloat16)
    compiled, prof = compiled_and_profile(residual_rms_norm, (x, r, g))
    calls = vector_calls(compiled)
    full = [c for c in calls if c[0][1] > 1]
    assert len(full) == 1 and "cast+cast+add" in full[0][0][0], calls
    assert prof.tasks == full[0][0][1] + 1                     # the row blocks and the weight's cast
    got = np.asarray(pj.kernel(residual_rms_norm)(x, r, g), np.float32)
    want = np.asarray(jax.jit(residual_rms_norm)(x, r, g), np.float32)       # one bf16 rounding apart at most
    np.testing.assert_allclose(got, want, rtol=2.0 ** -7, atol=0)


@pytest.mark.parametrize("rows", [36, 12])
def test_row_tails_keep_one_task_per_row_block(rows):
    """36 rows in blocks of 8: four full blocks and a tail of 4 rows, each one task of the fused chain;
    12 rows: one full block and a tail, whose grids have one shape (that chain was taken for column
    tiles and kept as stages: 12 tasks for 2)."""
    x = np.random.default_rng(4).standard_normal((rows, 512)).astype(np.float32)
    for vec in [(8, 512), (8, 128)]:
        fn = F.tiled(F.softmax_nn, vec)
        compiled, prof = compiled_and_profile(fn, [x])
        (call,) = vector_calls(compiled)
        assert [n for _, n in call] == [rows // 8, 1] and prof.tasks == rows // 8 + 1
        check_numbers(fn, [x])


def test_half_precision_rows_fuse_and_match_xla():
    x = np.random.default_rng(5).standard_normal((32, 256)).astype(np.float16)
    for vec in [(16, 256), (16, 128)]:
        fn = F.tiled(F.softmax, vec)
        compiled, prof = compiled_and_profile(fn, [x])
        assert len(compiled.lowering.programs) == 1 and prof.tasks == 2
        check_numbers(fn, [x], rtol=1e-2, atol=1e-3)


def test_reduced_results_used_as_rows_stay_in_the_program():
    """A reduction read by elementwise ops (a scaled row sum, where with constants) and a reshape to
    the R×1 shape: no separate program for the reduced shape, the output reshaped for free."""
    def fn(x):
        with pj.tile(vec=(8, 384)):
            s = jnp.sum(x, axis=-1) * 0.5
            return jnp.where(s > 0, s, 0.0), x / s[:, None]

    x = np.random.default_rng(6).standard_normal((24, 384)).astype(np.float32) + 0.5
    compiled, prof = compiled_and_profile(fn, [x])
    assert len(compiled.lowering.programs) == 1 and prof.tasks == 3
    for got, want in zip(pj.kernel(fn)(x), jax.jit(fn)(x)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_shape, axis, y_shape", [((1, 24, 16), 1, (8, 16)), ((8, 1, 32), -1, (8, 5))],
                         ids=["over-rows", "over-columns"])
def test_a_reduced_value_broadcast_to_more_elements_is_read_in_its_reduced_shape(x_shape, axis, y_shape):
    """A reduced value with a unit dimension ((1, 16), (8, 1)) that an elementwise op broadcasts to more
    elements: its ``keepdims`` form serves the op that keeps its shape (``s * 2``), the broadcasting
    op reads it in its reduced shape and its result is not put in the reduction's row form."""
    def fn(x, y):
        with pj.tile(vec=(8, 16)):
            s = jnp.max(x, axis=axis)
            return jnp.clip(s / (jnp.abs(y) + 1), -1.5, 0.0), s * 2.0

    rng = np.random.default_rng(8)
    x, y = rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(y_shape).astype(np.float32)
    tensor = pj.lower(fn, x, y).tensor.jaxpr
    kept = {e.primitive.name: shape for e in tensor.eqns for v, shape in plan(tensor).items() if v in e.outvars}
    row = tuple(1 if d == axis % len(x_shape) else n for d, n in enumerate(x_shape))   # keepdims shape
    assert kept == {"pto.amax": row, "pto.mul": row}
    for got, want in zip(pj.kernel(fn)(x, y), jax.jit(fn)(x, y)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_matmul_row_epilogue_is_one_vector_program_per_output_tile():
    def fn(x, w, b):
        with pj.tile(cube=(16, 64, 96), vec=(16, 96)):
            y = jax.nn.gelu(pj.ops.matmul(x, w) + b, approximate=True)
            return y * jax.lax.rsqrt(jnp.mean(y * y, axis=-1, keepdims=True) + 1e-6)

    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((48, 64)).astype(np.float16), rng.standard_normal((64, 96)).astype(np.float16)
    b = rng.standard_normal(96).astype(np.float32)
    compiled, prof = compiled_and_profile(fn, [x, w, b])
    assert sorted(p.core for p in compiled.lowering.programs) == ["AIC", "AIV"]
    assert prof.tasks == 3 + 3                                  # 3 output tiles: a cube and a vector task each
    check_numbers(fn, [x, w, b], rtol=2e-3, atol=2e-3)
    if HAVE_PTOAS:
        compiled.ptoas()


def test_batched_m1_matmul_with_a_shared_operand_is_merged_along_m():
    def fn(a, w):
        with pj.tile(cube=(16, 128, 64)):
            return pj.ops.matmul(a, w)

    rng = np.random.default_rng(8)
    a, w = rng.standard_normal((24, 1, 512)).astype(np.float16), rng.standard_normal((512, 64)).astype(np.float16)
    compiled, prof = compiled_and_profile(fn, [a, w])
    assert prof.tasks == 2                                      # M = 24 in two 16-row tiles, not 24 tasks
    want = np.einsum("bmk,kn->bmn", a.astype(np.float32), w.astype(np.float32))
    np.testing.assert_allclose(np.asarray(pj.kernel(fn)(a, w)), want, rtol=1e-3, atol=1e-2)


def test_batched_matmul_with_its_own_right_operands_is_not_merged():
    def fn(a, w):
        with pj.tile(cube=(16, 128, 64)):
            return pj.ops.matmul(a, w)

    rng = np.random.default_rng(9)
    a, w = rng.standard_normal((4, 1, 128)).astype(np.float16), rng.standard_normal((4, 128, 64)).astype(np.float16)
    _, prof = compiled_and_profile(fn, [a, w])
    assert prof.tasks == 4
    want = np.einsum("bmk,bkn->bmn", a.astype(np.float32), w.astype(np.float32))
    np.testing.assert_allclose(np.asarray(pj.kernel(fn)(a, w)), want, rtol=1e-3, atol=1e-2)


def test_a_fused_chain_that_overfills_the_ub_recomputes_instead_of_keeping_rows():
    """RMS norm on 16 x 1024 f32 rows: x kept for the output, x * x and the row sum's tmp tile would be
    three 64 KiB tiles at once (more than the 192 KiB UB); the program loads x again instead."""
    args = F.row_args("RMS norm", 32, 1024, seed=10)
    fn = F.tiled(F.rms_norm, (16, 1024))
    compiled, prof = compiled_and_profile(fn, args)
    (program,) = compiled.lowering.programs
    assert dict(program.footprint)["vec"] <= 192 * 1024 and prof.tasks == 2
    assert compiled.as_text("pto").count("pto.tload ins(") >= 2      # x loaded again for the output
    check_numbers(fn, args)
    if HAVE_PTOAS:
        compiled.ptoas()


def test_a_tile_too_large_for_its_reduction_computes_its_rows_in_pieces():
    """A row reduction needs a tmp tile as large as its source: two 96 KiB tiles and the result overfill
    the UB, so each tile's rows are reduced in pieces (it was refused), whose plan fits."""
    def fn(x):
        with pj.tile(vec=(24, 1024)):
            return jnp.max(x, axis=-1)

    x = np.random.default_rng(4).normal(size=(48, 1024)).astype(np.float32)
    compiled = pj.kernel(fn).lower(x).compile()
    (program,) = compiled.lowering.programs
    assert "pieces" in program.note and compiled.profile().tasks == 2          # the 24-row tiles chosen
    assert all(liveness.ub_plan(t) <= ASCEND_CORE.ub for t in liveness.functions(compiled.code.pto()).values())
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.max(x, -1))


def test_a_chain_that_would_overfill_the_ub_as_written_is_a_row_loop_with_a_note():
    """Layer norm with weights on 16 x 1024 f32 rows: keeping x - mean for the output needs more UB
    than a core has; the program recomputes it per pass instead, and says so."""
    args = F.row_args("layer norm", 32, 1024, seed=11)
    fn = F.tiled(F.layer_norm, (16, 1024))
    compiled, prof = compiled_and_profile(fn, args)
    (program,) = compiled.lowering.programs
    assert "recomputes whole-row tensors" in program.note and "bytes of UB" in program.note
    assert f"# {program.note}" in compiled.lowering.as_text("block")
    assert prof.tasks == 2
    check_numbers(fn, args)


def test_row_loops_false_asks_for_the_split_form_by_label():
    """The knob: a label's long rows in stages through GM (column tiles over more cores, reductions a
    step of their own): more tasks, the same numbers; other labels keep their row loops."""
    def fn(x, y):
        with pj.tile(vec=(8, 128)):
            with jax.named_scope("Split"):
                a = F.softmax(x)
            with jax.named_scope("Fused"):
                b = F.softmax(y)
        return a, b

    rng = np.random.default_rng(12)
    x, y = rng.standard_normal((16, 512)).astype(np.float32), rng.standard_normal((16, 512)).astype(np.float32)
    split = pj.kernel(fn, options={"row_loops": {"Split": False}})
    fused_calls = vector_calls(pj.kernel(fn).lower(x, y).compile())
    split_calls = vector_calls(split.lower(x, y).compile())
    assert len(fused_calls) == 2 and len(split_calls) == 1 + 4            # Split: amax, sub+exp, sum, div
    assert split.lower(x, y).compile().profile(x, y, compute=False).tasks == 2 + (2 + 8 + 2 + 8)
    for got, want in zip(split(x, y), jax.jit(fn)(x, y)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    with pytest.raises(pj.PtoArgumentError, match=r"row_loops\['Split'\] must be True or False, got 'no'"):
        pj.lower(fn, x, y, options={"row_loops": {"Split": "no"}})


@pytest.mark.parametrize("name", ["jax.nn.softmax", "layer norm"])
def test_a_row_the_column_tile_does_not_divide_loops_then_takes_its_tail(name):
    """700 columns in tiles of 256: two full column tiles in the loop, then a tail of 188."""
    args = F.row_args(name, 24, 700, seed=13)
    fn = F.tiled(F.ROW_KERNELS[name], (8, 256))
    compiled, prof = compiled_and_profile(fn, args)
    assert [p.core for p in compiled.lowering.programs] == ["AIV"] and prof.tasks == 3
    text = compiled.lowering.as_text("block")
    assert "+512:+188]" in text and "scan[" in text
    check_numbers(fn, args)
    if HAVE_PTOAS:
        compiled.ptoas()


def test_the_demo_softmax_is_one_program_per_row_block():
    from ptojax.demo import softmax_rows
    x = np.random.default_rng(14).uniform(-4, 4, (48, 1000)).astype(np.float32)
    compiled, prof = compiled_and_profile(softmax_rows, [x])
    assert len(compiled.lowering.programs) == 1 and prof.tasks == 3
    check_numbers(softmax_rows, [x])


@pytest.mark.skipif(not HAVE_PTOAS, reason="ptoas not found")
def test_a_result_written_over_its_dying_operand_keeps_ptoas_rules():
    """A fused chain writes ``1 / x`` over ``x``'s tile where ``x`` dies (fewer tiles); A3's ``trecip``
    wants its destination apart from its source, so selection writes a tile of its own and copies
    back (the erf form of gelu has such a reciprocal)."""
    x = np.random.default_rng(3).standard_normal((16, 64)).astype(np.float32)
    fn = lambda x: jax.nn.gelu(x, approximate=False)                   # noqa: E731
    compiled = pj.kernel(fn).lower(x).compile()
    for arch in ("a3", "a5"):
        compiled.ptoas(arch=arch)
    np.testing.assert_allclose(np.asarray(compiled.run(x)[0]), np.asarray(fn(x)), rtol=2e-6, atol=2e-6)


def test_a_column_member_not_split_like_the_reduction_row_blocks_is_not_a_row_loop():
    """``maximum`` in one (4, 16) tile over 3 rows, then a sum in row blocks of 2 (a block and a tail):
    the column member's one part does not follow the reduction's two row regions, so this is no row
    loop and the stages stay apart (``rowloop.fuse`` raised a TypeError on that None)."""
    def fn(x):
        with pj.tile(vec=(4, 16)):
            y = jnp.maximum(x, 0)
        with pj.tile(vec=(2, 16)):
            return y - jnp.sum(y, -1, keepdims=True)

    x = np.random.default_rng(15).uniform(-2, 2, (3, 16)).astype(np.float32)
    compiled = pj.kernel(fn).lower(x).compile()
    assert [p.name for p in compiled.lowering.programs] == ["maximum", "sum+sub", "sum+sub#2"]
    check_numbers(fn, [x], rtol=1e-6, atol=1e-6)
    if HAVE_PTOAS:
        compiled.ptoas()


@pytest.mark.parametrize("name, fn, shape", [
    ("row", lambda x: jnp.tanh(x[3] * 2.0), (24, 96)),
    ("middle", lambda x: x[:, 2, :] * 2.0 + 1.0, (6, 5, 40)),
    ("two rows", lambda x: x[1] + x[4], (8, 64)),
    ("element row of 3-d", lambda x: jnp.exp(x[1, 2]), (3, 4, 48)),
])
def test_an_indexed_row_is_read_by_the_program_that_uses_it(name, fn, shape):
    """``x[i]`` is a one-row window and a squeeze: read at the squeezed rank (``x`` flattened
    around it), it joins its reader's program instead of a copy of its own through GM."""
    x = np.random.default_rng(len(name)).standard_normal(shape).astype(np.float32)
    compiled = pj.kernel(fn).lower(x).compile()
    assert len(vector_calls(compiled)) == 1, (name, vector_calls(compiled))
    check_numbers(fn, (x,))


def test_an_indexed_last_dim_keeps_its_copy_and_its_numbers():
    fn = lambda x: x[:, 5] * 2.0 + x[:, 0]            # noqa: E731 - a column: no flat window holds it
    x = np.random.default_rng(3).standard_normal((16, 8)).astype(np.float32)
    check_numbers(fn, (x,))
