"""Regression: a row reduction under a user vec tile that splits the row raised a PtoCapacityError
whose advice said "only fewer rows per tile help ..., not fewer columns" where the row-loop program at
the tile's column chunk overfilled the UB (bf16 ``jnp.sum(a * b, -1)`` and f32 ``jax.nn.softmax`` over
(33, 1000) under vec (64, 512); f16/bf16 ``pj.ops.softmax`` under vec (16, 512)), though the docs say
such a reduction loops over the row's column tiles in one program however long the row, and vec
(64, 256) compiled.

Cause: partition dropped a row loop whose program overfilled the UB and fell back to the whole-row
reduction; a row-wise composite kept its whole rows under a splitting tile however many bytes its
float32 work on them took.

Fix: partition retries the row loop over narrower column chunks (``rowloop.narrower``: the width
halved while 32-byte aligned; ``rowloop.fuse(chunk=)`` re-windows the column-tiled members) and keeps
the widest that fits; a composite whose whole rows under a splitting tile overfill lowers as its
reference's ops (a row loop); the advice no longer says "not fewer columns" with row loops on.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend.ptoas import assemble, find_ptoas

RNG = np.random.default_rng(0)


def _tiled(body, vec):
    def kernel(a):
        with pj.tile(vec=vec):
            return body(a)
    return kernel


CASES = {
    "sum(a*a) bf16 vec (64, 512)": (lambda a: jnp.sum(a * a, -1), jnp.bfloat16, (33, 1000), (64, 512), 3e-2),
    "jax.nn.softmax f32 vec (64, 512)": (lambda a: jax.nn.softmax(a, -1), np.float32, (33, 1000), (64, 512), 1e-6),
    "pj.ops.softmax f16 vec (16, 512)": (lambda a: pj.ops.softmax(a, -1), np.float16, (33, 1000), (16, 512), 1e-3),
    "pj.ops.softmax bf16 vec (16, 512)": (lambda a: pj.ops.softmax(a, -1), jnp.bfloat16, (33, 1000), (16, 512), 1e-2),
}


def _case(name):
    body, dtype, shape, vec, tol = CASES[name]
    a = RNG.uniform(-1, 1, shape).astype(dtype)
    return _tiled(body, vec), body, a, tol


@pytest.mark.parametrize("name", list(CASES))
def test_the_row_loops_in_one_program_and_matches_jax(name):
    kernel, body, a, tol = _case(name)
    compiled = pj.kernel(kernel).lower(a).compile()           # PtoCapacityError before
    programs = compiled.lowering.programs
    assert len({p.name.split("#")[0] for p in programs}) == 1, [p.name for p in programs]
    assert all("loop" in p.note for p in programs), [p.note for p in programs]
    got = np.asarray(compiled(a), np.float32)
    want = np.asarray(body(jnp.asarray(a, jnp.float32)), np.float32)
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


def test_the_chain_loops_in_narrower_chunks_where_the_tiles_overfill():
    kernel, _, a, _ = _case("sum(a*a) bf16 vec (64, 512)")
    (program,) = pj.kernel(kernel).lower(a).compile().lowering.programs
    assert "column chunks of 256" in program.note and dict(program.footprint)["vec"] <= 196608


@pytest.mark.skipif(not find_ptoas(), reason="no ptoas: set PTOAS to Huawei's PTO assembler")
@pytest.mark.parametrize("name", list(CASES)[:2])
def test_ptoas_takes_the_narrower_row_loop(name):
    kernel, _, a, _ = _case(name)
    assert "AICORE" in assemble(pj.kernel(kernel).lower(a).compile().code.pto("a3"), arch="a3")


@pytest.mark.parametrize("keepdims", [False, True])
def test_a_tile_holding_the_rows_whole_that_overfills_still_compiles(keepdims):
    """bf16 max over (100, 300) under vec (100, 304) keeps its rows whole (the tile does not split
    them) and overfills the UB as ptoas plans it: it loops over column chunks as with keepdims, or computes
    its rows in pieces (it was refused without keepdims); under a tile that splits the row the reduction
    loops over column chunks."""
    a = RNG.uniform(-1, 1, (100, 300)).astype(jnp.bfloat16)
    for vec in ((100, 304), (100, 256)):
        y = pj.kernel(_tiled(lambda x: jnp.max(x, -1, keepdims=keepdims), vec))(a)
        np.testing.assert_array_equal(np.asarray(y, np.float32), np.asarray(jnp.max(a, -1, keepdims=keepdims), np.float32))
