"""Regression: an elementwise op whose vec tiles overfill the UB by their own count ran in no pieces.

docs/tuning.md says "an elementwise op whose tiles overfill the UB even alone computes each tile in 2,
4, … pieces one after another", but ``a + b`` over f32 [1024, 1024] under ``pj.tile(vec=(64, 512))``
(three 128 KiB tiles: 384 KiB of the 192 KiB UB) raised ``PtoCapacityError: block 'add' (AIV) needs
262144 bytes of UB at its peak``; so did f16 ``add`` under (128, 512) and ``exp(a * 2 + b) * 0.5`` in
f32 under (32, 1024).

Cause: the partition counted a program's live tiles (``memory.footprint``) first and raised there; only
a program that passed that count but not the backend's plan of its real text was tried in pieces.

Fix: ``_Partitioner.program`` tries pieces (``_Partitioner.pieces``: 2, 4, 8, … of each tile, the
fewest whose count and plan both fit) whichever count overfills; and a fused group of elementwise ops
that overfills is one program computing each tile in pieces before it is split into programs. A
program that cannot be cut into pieces (a reduction reading whole rows) is still the capacity error.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend.isel import liveness
from ptojax.ascend.ptoas import find_ptoas
from ptojax.lowering.memory import ASCEND_CORE

needs_ptoas = pytest.mark.skipif(not find_ptoas() and os.environ.get("CI") != "true",
                                 reason="no ptoas: set PTOAS to Huawei's PTO assembler (hw-native-sys/PTOAS)")


def _add_f32(a, b):
    with pj.tile(vec=(64, 512)):            # 128 KiB tiles: a, b and a + b overfill the UB
        return a + b


def _add_f16(a, b):
    with pj.tile(vec=(128, 512)):
        return a + b


def _chain_f32(a, b):
    with pj.tile(vec=(32, 1024)):
        return jnp.exp(a * 2 + b) * 0.5


def _chain_fits(a, b):                      # the same math, tiles that fit whole: the unsplit computation
    with pj.tile(vec=(8, 1024)):
        return jnp.exp(a * 2 + b) * 0.5


CASES = [("add f32 (64, 512)", _add_f32, np.float32, "add", 16 * 2),
         ("add f16 (128, 512)", _add_f16, np.float16, "add", 8 * 2),
         ("exp chain f32 (32, 1024)", _chain_f32, np.float32, "mul+add+exp+mul", 32)]


def _args(dtype):
    rng = np.random.default_rng(0)
    return [rng.uniform(-2, 2, (1024, 1024)).astype(dtype) for _ in range(2)]


def _bits(x):
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


@pytest.mark.parametrize("name, fn, dtype, program, tasks", CASES, ids=[c[0] for c in CASES])
def test_tiles_that_overfill_the_ub_alone_are_computed_in_pieces(name, fn, dtype, program, tasks):
    a, b = _args(dtype)
    compiled = pj.kernel(fn).lower(a, b).compile()              # PtoCapacityError before
    (prog,) = compiled.lowering.programs                        # one program: not split, in pieces
    assert prog.name == program and "each tile in 2 pieces" in prog.note, prog.note
    assert dict(prog.footprint)["vec"] <= ASCEND_CORE.ub
    assert all(liveness.ub_plan(t) <= ASCEND_CORE.ub for t in liveness.functions(compiled.code.pto()).values())
    assert compiled.profile().tasks == tasks                    # the grid you chose
    # bit for bit the unsplit computation: XLA's for add, the same math under tiles that fit for exp
    want = jax.jit(fn)(a, b) if fn is not _chain_f32 else pj.kernel(_chain_fits)(a, b)
    for got in (compiled(a, b), pj.kernel(fn)(a, b), jax.jit(pj.kernel(fn))(a, b)):
        np.testing.assert_array_equal(_bits(got), _bits(want))
    if fn is _chain_f32:                                        # and XLA's exp to an ulp
        np.testing.assert_allclose(np.asarray(compiled(a, b)), np.asarray(jax.jit(fn)(a, b)), rtol=3e-7, atol=0)


@needs_ptoas
@pytest.mark.parametrize("name, fn, dtype, program, tasks", CASES, ids=[c[0] for c in CASES])
def test_ptoas_accepts_the_pieces(name, fn, dtype, program, tasks):
    a, b = _args(dtype)
    pj.kernel(fn).lower(a, b).compile().ptoas()                # the vendor assembler places every tile


def test_tiles_whose_rows_pieces_do_not_divide_are_cut_with_a_shorter_last_piece():
    """Under (48, 1000) the 997-row edge tile has 37 rows (odd) and 1000 columns (500 f32 columns are
    not 32-byte aligned): two pieces of 19 and 18 rows, bit for bit the unsplit computation."""
    def chain(a, b):
        with pj.tile(vec=(48, 1000)):
            return jnp.exp(a * 2 + b) * 0.5

    a, b = (x[:997, :1000] for x in _args(np.float32))
    compiled = pj.kernel(chain).lower(a, b).compile()             # PtoCapacityError (edge 'add') before
    assert all("each tile in 2 pieces" in p.note for p in compiled.lowering.programs)
    assert compiled.profile().tasks == 21
    np.testing.assert_array_equal(_bits(compiled(a, b)), _bits(pj.kernel(_chain_fits)(a, b)))


def test_a_reduction_whose_rows_overfill_the_ub_reduces_them_in_pieces():
    def row_max(a, b):
        with pj.tile(vec=(32, 1024)):                           # whole rows: cut by rows, each reduced whole
            return jnp.max(a * b, 1)

    a, b = _args(np.float32)
    compiled = pj.kernel(row_max).lower(a[:64], b[:64]).compile()
    assert all("pieces" in p.note for p in compiled.lowering.programs)
    np.testing.assert_array_equal(np.asarray(compiled(a[:64], b[:64])), np.max(a[:64] * b[:64], 1))


def test_a_tile_larger_than_the_ub_by_itself_is_still_the_capacity_error():
    def add(a, b):
        with pj.tile(vec=(256, 256)):                          # one f32 tile is 256 KiB: no piece of it is placed
            return a + b

    s = jax.ShapeDtypeStruct((512, 512), jnp.float32)
    with pytest.raises(pj.PtoCapacityError, match=r"block 'add' \(AIV\) needs 524288 bytes of UB at its peak; "
                                                  r"UB holds 196608 bytes — use a smaller vec tile"):
        pj.kernel(add).lower(s, s)
