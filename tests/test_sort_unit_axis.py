"""Sort, argsort and top-k along an axis of length 1: a copy, its indices 0 (``isel/sort.py``), eagerly
and under ``jax.jit``, equal to ``jax.jit`` of the plain function bit for bit. Under ``jax.jit`` the
selection's old per-row sort of such a tile failed in the replay (a ``treshape`` of a ``subset`` at a
loop counter's offset, which the engine and pto-isa's CPU simulator run): the drivers agree on that
text now, and both refuse an alias that does not start at a whole element of its dtype, with the same
words. A top-k past the data (``k > n``) keeps its ``-1`` indices under ``jax.jit`` (the replay's NaN
guard no longer rewrites the index words of the sort's structs)."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from ptojax.errors import PtoExecutionError
from vendor_tools import needed

DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "i32": np.int32}

CASES = {
    "jnp.sort axis 0 of [1, n]": (lambda a: jnp.sort(a, axis=0), lambda n: (1, n)),
    "jnp.sort axis -1 of [n, 1]": (lambda a: jnp.sort(a, axis=-1), lambda n: (n, 1)),
    "lax.top_k 1 of [n, 1]": (lambda a: lax.top_k(a, 1), lambda n: (n, 1)),
    "jnp.argsort axis 0 of [1, n]": (lambda a: jnp.argsort(a, axis=0), lambda n: (1, n)),
    "pj.ops.sort axis 0 of [1, n]": (lambda a: pj.ops.sort(a, axis=0), lambda n: (1, n)),
    "pj.ops.topk 1 axis 0 of [1, n]": (lambda a: pj.ops.topk(a, 1, axis=0), lambda n: (1, n)),
    "jnp.sort axis 1 of [2, 1, n]": (lambda a: jnp.sort(a, axis=1), lambda n: (2, 1, n)),
}


def _data(shape, dtype, seed=0):
    x = np.random.default_rng(seed).uniform(-5, 5, shape)
    if dtype == "i32":
        return np.round(x * 4e8).astype(np.int32)
    x = x.astype(DTYPES[dtype])
    x.reshape(-1)[:3] = [np.nan, -0.0, np.inf]          # moved as they are, as XLA's sort moves them
    return x


def _bits(x):
    x = np.asarray(x)
    return x.dtype, x.shape, np.ascontiguousarray(x).view(np.uint8).tobytes()


def _assert_same(got, want):
    got, want = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert _bits(g) == _bits(w), (np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("width", [7, 1000])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_along_a_unit_axis_equals_xla_eagerly_and_under_jit(case, dtype, width):
    fn, shape = CASES[case]
    x = _data(shape(width), dtype)
    want = jax.jit(fn)(x)
    _assert_same(pj.kernel(fn)(x), want)
    _assert_same(jax.jit(pj.kernel(fn))(x), want)


def test_the_selection_copies():
    """No sort row, no loop: one ``tmov`` for the values, ``texpands`` of 0 for the indices."""
    x = _data((1, 7), "f32")
    text = pj.kernel(lambda a: pj.ops.topk(a, 1, axis=0)).lower(x).as_text("pto")
    for absent in ("tsort32", "tgather", "scf.for", "pto.subset"):
        assert absent not in text
    assert "pto.tmov" in text and "pto.texpands" in text


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("shape,axis", [((7, 1), -1), ((1, 7), 0), ((2, 5), -1)])
def test_top_k_past_the_data_keeps_its_minus_one_indices_under_jit(shape, axis, dtype):
    x = _data(shape, dtype, seed=1)
    x.reshape(-1)[:3] = 1                              # no NaN: a top-k orders them by no rule of XLA's
    fn = lambda a: pj.ops.topk(a, 3 if shape[axis] == 1 else 8, axis=axis)   # noqa: E731
    eager = pj.kernel(fn)(x)
    _assert_same(jax.jit(pj.kernel(fn))(x), eager)
    indices = np.moveaxis(np.asarray(eager[1]), axis, -1)
    n = shape[axis]
    assert (indices[..., n:] == -1).all() and (np.sort(indices[..., :n], -1) == np.arange(n)).all()


# ------------------------------------------------ the drivers on one text: a treshape at a loop's offset
def _tile(dtype, rows, cols, v_row=None, v_col=None, layout="row_major"):
    v_row, v_col = rows if v_row is None else v_row, cols if v_col is None else v_col
    return (f"!pto.tile_buf<loc=vec, dtype={dtype}, rows={rows}, cols={cols}, v_row={v_row}, v_col={v_col}, "
            f"blayout={layout}, slayout=none_box, fractal=512, pad=0>")


_BYTES = {"f32": 4, "i32": 4, "i16": 2}


def _rows_text(src, dst, rows=4, col=0):
    """A ``rows x 32 bytes`` subset (``rows x 64`` from column ``col`` > 0) at the loop counter's row ``r``,
    seen through a ``treshape`` as ``dst`` whose first half is doubled (``tmuls``) or incremented."""
    width, dcols = 32 // _BYTES[src], 32 // _BYTES[dst]
    cols = 2 * width if col else width
    op = "tmuls" if dst == "f32" else "tadds"
    k = "2.0 : f32" if dst == "f32" else f"1 : {dst}"
    view = f"!pto.tensor_view<{rows}x{cols}x{src}>"
    part = f"!pto.partition_tensor_view<{rows}x{cols}x{src}>"
    lines = [f"%c{n} = arith.constant {n} : index" for n in sorted({0, 1, col, rows, cols})] + [
        f"%k = arith.constant {k}",
        *(f"%v{p} = pto.make_tensor_view %{p}, shape = [%c{rows}, %c{cols}], strides = [%c{cols}, %c1] : {view}\n"
          f"    %p{p} = pto.partition_view %v{p}, offsets = [%c0, %c0], sizes = [%c{rows}, %c{cols}] : {view} -> {part}"
          for p in ("x", "y")),
        f"%t = pto.alloc_tile : {_tile(src, rows, cols)}",
        f"pto.tload ins(%px : {part}) outs(%t : {_tile(src, rows, cols)})",
        f"scf.for %r = %c0 to %c{rows} step %c1 {{",
        f"  %s = pto.subset %t[%r, %c{col}] sizes [1, {width}] : {_tile(src, rows, cols)}",
        f"  %a = pto.treshape %s : {_tile(src, 1, width, '?')} -> {_tile(dst, 1, dcols, 1, dcols // 2)}",
        f"  pto.{op} ins(%a, %k : {_tile(dst, 1, dcols, 1, dcols // 2)}, {dst}) "
        f"outs(%a : {_tile(dst, 1, dcols, 1, dcols // 2)})",
        "}",
        f"pto.tstore ins(%t : {_tile(src, rows, cols)}) outs(%py : {part})"]
    body = "\n".join("    " + line for line in lines)
    return (f'module attributes {{pto.target_arch = "a3"}} {{\n  func.func @k(%x: !pto.ptr<{src}>, '
            f"%y: !pto.ptr<{src}>) attributes {{pto.kernel_kind = #pto.kernel_kind<vector>}} {{\n{body}\n"
            "    return\n  }\n}\n")


def _engine(text, x):
    from ptojax.ascend import engine
    return engine.run(text, "k", [x.copy(), np.zeros_like(x)])[1]


def _replay(text, x):
    """The replay of ``text`` as ``jax.jit`` runs it: the loop a ``fori_loop`` with a traced counter."""
    from ptojax.ascend import engine
    from ptojax.ascend.replay_graph import call

    func = engine.parse(text).function("k")
    run = jax.jit(lambda a: call(func, {0: a.reshape(-1), 1: jnp.zeros(a.size, a.dtype)}, (0, 1), np.arange(1))[1])
    return np.asarray(run(x)).reshape(x.shape)


def _expected(x, src, dst):
    want = x.copy()
    half = want.view(DTYPES.get(dst, np.int16))[:, :32 // _BYTES[dst] // 2]
    half[...] = half * 2 if dst == "f32" else half + 1
    return want


@pytest.mark.parametrize("src,dst", [("f32", "f32"), ("i32", "i16"), ("i16", "i32")])
def test_the_engine_and_the_replay_agree_on_a_treshape_at_a_loop_counters_offset(src, dst):
    """The form the old selection printed for a sort along a unit axis (``%xa = pto.treshape %xs``, ``%xs``
    a row of the tile at the loop's row): the replay refused it, the engine ran it; both run it now, into
    a narrower dtype (the offset scaled), the same one and a wider one (the loop unrolled, each offset
    checked)."""
    x = np.random.default_rng(2).integers(-1000, 1000, (4, 32 // _BYTES[src])).astype(DTYPES.get(src, np.int16))
    text = _rows_text(src, dst)
    want = _expected(x, src, dst)
    np.testing.assert_array_equal(_engine(text, x), want)
    np.testing.assert_array_equal(_replay(text, x), want)


def test_both_drivers_refuse_an_alias_that_does_not_start_at_a_whole_element():
    x = np.zeros((4, 32), np.int16)
    text = _rows_text("i16", "i32", col=1)
    line = next(i + 1 for i, s in enumerate(text.splitlines()) if "pto.treshape" in s)
    rule = (rf"function 'k' line {line}: a treshape to i32 must start a multiple of 4 bytes \(i32's size\) into "
            r"its tile's buffer, but %s starts at byte 2 in `%a = pto.treshape")
    with pytest.raises(PtoExecutionError, match="pto engine: " + rule):
        _engine(text, x)
    with pytest.raises(PtoExecutionError, match="pto replay: " + rule):
        _replay(text, x)


@needed
def test_the_vendor_simulator_runs_the_treshape_at_a_loop_counters_offset_as_the_engine():
    """ptoas takes the text and pto-isa's CPU simulator runs it (a same-type alias: its ``treshape``
    refuses f16/f32 and float/integer pairs), bit for bit the engine's."""
    from ptojax.ascend import crosscheck as xc

    x = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    (r,) = xc.run([(_rows_text("f32", "f32"), "k", 1)], inputs=[[x, np.zeros_like(x)]])
    assert r.status == "exact", r.sim_error or r.engine_error or r.errors()
    np.testing.assert_array_equal(r.sim[1].reshape(x.shape), _expected(x, "f32", "f32"))
