"""Row rules of instruction selection (``isel/rows.py``): ``mgather`` / ``mscatter`` as row loops,
``tcumsum`` as row-block scans (along rows by doubling), ``tcumsum_carry`` from a carry.

Each program is realized to real PTO-AS, accepted by ``ptoas`` (A3 and A5, level2 and level3, when the
binary is present), and its text is EXECUTED by the real-text engine (``ptojax/ascend/engine.py``:
``scf.for`` / ``scf.if``, ``pto.tgetval`` / ``pto.tsetval``, ``pto.subset`` with PTOAS's run-time
valid shape, ``arith`` on ``index`` / ``i32``, ``pto.load_scalar``, atomic-add ``tstore``; compute
instructions are ``tile_semantics``) — and compared bit for bit with the tests' reference interpreter
of codegen's program (``tests/plan_interpreter.py``: NumPy ``gather`` / ``mscatter_into`` / ``cumsum``) on
the same GM tensors.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from program_check import check
from ptojax import ops as O
from ptojax.ascend import asm, engine
from ptojax.ascend import isel


# ------------------------------------------------------------------------------------ harness
def _tiled(vec, fn):
    def kernel(*a):
        with pj.tile(vec=vec):
            return fn(*a)
    return kernel


IDX = np.array([3, 1, -1, 36, 5, 5, 0, 2, 9, 10, 11], np.int32)


def _f(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16, np.int32])
def test_mgather_rows_out_of_range_rows_are_zero(dtype, tmp_path):
    x = (_f(37, 64) * 10).astype(dtype)
    progs = check(_tiled((8,), lambda x, i: O.gather(x, i, 0)), (x, IDX), "mgather", tmp_path)
    assert len(progs) == 2                             # 8 indices, then the 3 left


def test_mgather_slabs_of_a_3d_tensor(tmp_path):
    check(_tiled((8,), lambda x, i: O.gather(x, i, 0)), (_f(37, 3, 16), IDX), "mgather", tmp_path)


def test_mgather_on_a_middle_axis(tmp_path):
    check(_tiled((8,), lambda x, i: O.gather(x, i, 1)), (_f(3, 37, 20), IDX), "mgather", tmp_path)


@pytest.mark.parametrize("accumulate", [False, True])
def test_mscatter_rows_in_index_order(accumulate, tmp_path):
    op = O.index_add if accumulate else O.scatter_update
    progs = check(_tiled((8,), lambda x, i, u: op(x, i, u, 0)), (_f(37, 50), IDX, _f(11, 50, seed=1)),
                  "mscatter", tmp_path)
    text = isel.module(progs[:1])
    assert ("atomic_add" in text) == accumulate
    assert "pto.tgetval" in text and "arith.cmpi ult" in text and "pto.subset" in text


def test_mscatter_f16_accumulates(tmp_path):
    check(_tiled((8,), lambda x, i, u: O.index_add(x, i, u, 0)),
          (_f(37, 64, dtype=np.float16), IDX, _f(11, 64, dtype=np.float16, seed=1)), "mscatter", tmp_path)


@pytest.mark.parametrize("axis,reverse", [(0, False), (1, False), (0, True), (1, True)])
def test_cumsum_2d(axis, reverse, tmp_path):
    fn = _tiled((8, 16), lambda x: jax.lax.cumsum(x, axis, reverse=reverse))
    progs = check(fn, (_f(21, 30),), "tcumsum", tmp_path)
    text = isel.module(progs[:1])
    assert ("pto.ttrans" in text) == (axis == 1)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_cumsum_3d(axis, tmp_path):
    check(_tiled((2, 4, 16), lambda x: jnp.cumsum(x, axis)), (_f(3, 5, 30),), "tcumsum", tmp_path)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16, np.int32])
def test_cumsum_dtypes(dtype, tmp_path):
    x = (_f(21, 30) * 4).astype(dtype)
    check(_tiled((8, 16), lambda x: jnp.cumsum(x, 1)), (x,), "tcumsum", tmp_path)
    check(_tiled((8, 16), lambda x: jnp.cumsum(x, 0)), (x,), "tcumsum", tmp_path)


@pytest.mark.parametrize("dtype,reverse", [(np.float32, False), (np.float16, True), (np.int8, False)], ids=str)
def test_cumsum_carry_over_column_chunks(dtype, reverse, tmp_path):
    """A long row's scan from chunk to chunk (``tcumsum_carry``), its last chunk of one column."""
    x = (_f(16, 3073) * 4).astype(dtype)
    check(_tiled((8, 512), lambda x: jax.lax.cumsum(x, 1, reverse=reverse)), (x,), "tcumsum_carry", tmp_path)


def test_cumsum_1d(tmp_path):
    check(_tiled((16,), lambda x: jnp.cumsum(x)), (_f(40),), "tcumsum", tmp_path)


def test_mgather_elements_of_a_1d_table(tmp_path):
    """A lookup table (DeepSeek's block table): ``load_scalar`` + ``tsetval``, zero out of range."""
    progs = check(_tiled((8,), lambda t, i: O.gather(t, i, 0)), (_f(37), IDX), "mgather", tmp_path)
    assert "pto.load_scalar" in isel.module(progs[:1])


def test_single_elements_of_a_2d_tensor_fail_clearly():
    sel = isel.selector.Selector(asm.Kernel("k", "AIV", "", (), (), (), 0), "a3", "level2", None)
    sel.types.update({"%v": asm.ViewType((3, 37), "f32"), "%i": isel.vec_tile(1, 8, "i32"),
                      "%o": isel.vec_tile(1, 8, "f32")})
    instr = asm.Instr("mgather", (asm.Operand("%v", sel.types["%v"]), asm.Operand("%i", sel.types["%i"])),
                      (asm.Operand("%o", sel.types["%o"]),), (("axis", 1), ("shapes", ((8,),))))
    with pytest.raises(pj.PtoUnsupportedError, match="single elements"):
        sel.instr(instr)


def test_executor_follows_ptoas_subset_valid_rule():
    """A 2-row subset at row 2 of a tile with 3 valid rows: valid ``min(2, 3 - 2 % 3)`` = 1 row, both
    in the type PTOAS infers (constant offset) and at run time (loop-dependent offset, ``?``)."""
    parent = engine.TileType("vec", "f32", 8, 8, 3, 8)
    assert engine.subset_type(parent, (2, 0), (2, 8)).v_row == 1
    assert engine.subset_type(parent, (None, 0), (2, 8)).v_row is None
    t = "!pto.tile_buf<loc=vec, dtype=f32, rows={r}, cols=8, v_row={v}, v_col=8, blayout=row_major>"
    full, part = t.format(r=8, v=8), t.format(r=8, v=3)
    text = f"""module {{
  func.func @k(%arg0: !pto.ptr<f32>) {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c8 = arith.constant 8 : index
    %one = arith.constant 1.0 : f32
    %v = pto.make_tensor_view %arg0, shape = [%c8, %c8], strides = [%c8, %c1] : !pto.tensor_view<8x8xf32>
    %p = pto.partition_view %v, offsets = [%c0, %c0], sizes = [%c8, %c8]
      : !pto.tensor_view<8x8xf32> -> !pto.partition_tensor_view<8x8xf32>
    %t = pto.alloc_tile : {part}
    %s = pto.subset %t[%c2, %c0] sizes [2, 8] : {part}
    pto.texpands ins(%one : f32) outs(%s : {t.format(r=2, v=1)})
    scf.for %i = %c2 to %c3 step %c1 {{
      %d = pto.subset %t[%i, %c0] sizes [2, 8] : {part}
      pto.tadds ins(%d, %one : {t.format(r=2, v="?")}, f32) outs(%d : {t.format(r=2, v="?")})
    }}
    %all = pto.treshape %t : {part} -> {full}
    pto.tstore ins(%all : {full}) outs(%p : !pto.partition_tensor_view<8x8xf32>)
    return
  }}
}}"""
    out = engine.run(text, "k", [np.full((8, 8), 7, np.float32)])[0]
    assert (out[2] == 2).all() and (out[np.arange(8) != 2] == 0).all()      # row 2 only: 1 valid row
