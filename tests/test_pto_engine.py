"""What ptoas takes is what runs: every lowering test kernel executed task by task from its real
PTO-AS text (``Compiled.run()``: the module parsed back, each instruction's semantics as
pto-isa's CPU simulator computes them) equals XLA's evaluation of the same function — exact for
integer and boolean results, within the per-dtype tolerance of the lowering checks for floats.

The grid points of a task or a batch run together (:mod:`ptojax.ascend.textbatch`); that equals
the engine's point-after-point interpretation (:func:`ptojax.ascend.engine.run`) bit for bit."""
import functools
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import engine, textbatch
from ptojax.lowering.pipeline import TOLERANCE
import fuzz
from helpers import rand
from kernels import KERNELS

REGRESSIONS = sorted((pathlib.Path(__file__).parent / "regressions").glob("fuzz_*.py"))


def _text_equals_xla(name, kernel, args):
    compiled = pj.kernel(kernel).lower(*args).compile()
    got, _ = compiled.run(*args)
    want = jax.jit(kernel)(*args)
    for i, (g, w) in enumerate(zip(jax.tree.leaves(got), jax.tree.leaves(want))):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {i}"
        if g.dtype not in TOLERANCE:
            np.testing.assert_array_equal(g, w, err_msg=f"{name} output {i}")
            continue
        rtol, atol = TOLERANCE[g.dtype]
        scale = float(np.max(np.abs(w.astype(np.float64)), initial=1.0))     # sums of many terms: a
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,  # reassociation error
                                   atol=atol * scale, err_msg=f"{name} output {i}")         # relative to the output


@pytest.mark.parametrize("name,kernel,args", KERNELS, ids=[k[0] for k in KERNELS])
def test_the_real_text_computes_what_xla_does(name, kernel, args):
    _text_equals_xla(name, kernel, args)


def test_flash_attention_backward_from_the_real_text():
    """The backward kernel's causal mask is a predicate that only selects read, broadcast over the
    heads: its bytes must be written from the compare's mask before the broadcast reads them."""
    from ptojax.nn import _attention as A

    h, s, d, block = 2, 24, 16, 16                       # two KV blocks, the last one padded
    q, k, v, do = (rand((h, s, d), np.float32, seed) for seed in range(4))
    o, lse = jax.jit(functools.partial(A._fa_fwd_kernel, block=block))(q, k, v)
    args = (q, k, v, np.asarray(o), np.asarray(lse), do)
    _text_equals_xla("flash_attention_bwd", functools.partial(A._fa_bwd_kernel, block=block), args)


def test_a_fault_in_the_text_names_the_function_and_line():
    x = np.ones((4, 8), np.float32)
    compiled = pj.kernel(lambda x: x * 2.0).lower(x).compile()
    compiled.code._pto["a3", "level2"] = compiled.code.pto().replace("pto.tmuls", "pto.tmulz", 1)
    with pytest.raises(pj.errors.PtoError, match=r"line \d+"):
        compiled.run(x)


def _point_by_point(module, name, args, blocks):
    for b in blocks:
        engine.run(module, name, args, int(b))
    return args


def _count_batches(monkeypatch, sizes):
    """Append the size of every batch that runs together to ``sizes``."""
    together = textbatch._together
    monkeypatch.setattr(textbatch, "_together", lambda f, a, blocks, guarded: sizes.append(len(blocks))
                        or together(f, a, blocks, guarded))


def _together_equals_point_by_point(kernel, args, monkeypatch):
    """The text run with its grid points together — recorded, then replayed from its tapes on other
    values (the inputs rolled by one) — and point by point: equal bit for bit."""
    compiled = pj.kernel(kernel).lower(*args).compile()
    rolled = [np.roll(np.asarray(a), 1) for a in args]
    got = [compiled.run(*args)[0], compiled.run(*rolled)[0]]
    monkeypatch.setattr(textbatch, "run", _point_by_point)
    want = [compiled.run(*args)[0], compiled.run(*rolled)[0]]
    for i, (g, w) in enumerate(zip(jax.tree.leaves(got), jax.tree.leaves(want))):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {i}"
        np.testing.assert_array_equal(g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8), err_msg=f"output {i}")


@pytest.mark.parametrize("name,kernel,args", KERNELS, ids=[k[0] for k in KERNELS])
def test_grid_points_together_equal_the_engine_point_by_point(name, kernel, args, monkeypatch):
    _together_equals_point_by_point(kernel, args, monkeypatch)


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_fuzz_regressions_together_equal_the_engine_point_by_point(path, monkeypatch):
    namespace = {}
    exec(path.read_text(), namespace)
    _together_equals_point_by_point(*fuzz.build(namespace["SPEC"]), monkeypatch)


def _tile(dtype):
    return (f"!pto.tile_buf<loc=vec, dtype={dtype}, rows=1, cols=8, v_row=1, v_col=8, blayout=row_major, "
            "slayout=none_box, fractal=512, pad=0>")


# block b looks up its 8 indices idx[8b : 8b+8] in the table (-1 where out of range): a branch per point
LOOKUP = f"""module attributes {{pto.target_arch = "a3"}} {{
  func.func @k(%idx: !pto.ptr<i32>, %table: !pto.ptr<f32>, %out: !pto.ptr<f32>) attributes {{pto.kernel_kind = #pto.kernel_kind<vector>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    %bid = pto.get_block_idx
    %b = arith.index_cast %bid : i64 to index
    %r = arith.muli %b, %c8 : index
    %vidx = pto.make_tensor_view %idx, shape = [%c32], strides = [%c1] : !pto.tensor_view<32xi32>
    %vout = pto.make_tensor_view %out, shape = [%c32], strides = [%c1] : !pto.tensor_view<32xf32>
    %pidx = pto.partition_view %vidx, offsets = [%r], sizes = [%c8] : !pto.tensor_view<32xi32> -> !pto.partition_tensor_view<8xi32>
    %pout = pto.partition_view %vout, offsets = [%r], sizes = [%c8] : !pto.tensor_view<32xf32> -> !pto.partition_tensor_view<8xf32>
    %n = arith.constant 5 : i32
    %miss = arith.constant -1.0 : f32
    %t = pto.alloc_tile : {_tile("i32")}
    %o = pto.alloc_tile : {_tile("f32")}
    pto.tload ins(%pidx : !pto.partition_tensor_view<8xi32>) outs(%t : {_tile("i32")})
    scf.for %i = %c0 to %c8 step %c1 {{
      %x = pto.tgetval ins(%t, %i : {_tile("i32")}, index) outs : i32
      %ok = arith.cmpi ult, %x, %n : i32
      scf.if %ok {{
        %ix = arith.index_cast %x : i32 to index
        %e = pto.load_scalar %table[%ix] : !pto.ptr<f32> -> f32
        pto.tsetval ins(%i, %e : index, f32) outs(%o : {_tile("f32")})
      }} else {{
        pto.tsetval ins(%i, %miss : index, f32) outs(%o : {_tile("f32")})
      }}
    }}
    pto.tstore ins(%o : {_tile("f32")}) outs(%pout : !pto.partition_tensor_view<8xf32>)
    return
  }}
}}
"""


def test_points_that_branch_apart_run_as_groups_that_agree(monkeypatch):
    """Four points branch on their own data: the batch splits (and splits again) into points that
    take the same branches, and ends as the engine ends point by point."""
    idx = np.random.default_rng(0).integers(-2, 8, 32).astype(np.int32)
    table = np.arange(10, 18, dtype=np.float32)
    module = engine.parse(LOOKUP)
    sizes = []
    _count_batches(monkeypatch, sizes)
    got = textbatch.run(module, "k", [idx, table, np.zeros(32, np.float32)], range(4))[2]
    want = _point_by_point(module, "k", [idx, table, np.zeros(32, np.float32)], range(4))[2]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, np.where((idx >= 0) & (idx < 5), table[np.clip(idx, 0, 7)], -1))
    assert sizes[0] == 4 and len(sizes) > 1


def test_a_fault_in_a_batch_names_the_function_and_line():
    idx = np.full(32, 9, np.int32)                       # 9 < 10 passes the test; the table has 8 elements
    text = LOOKUP.replace("arith.constant 5 : i32", "arith.constant 10 : i32")
    with pytest.raises(pj.errors.PtoError, match=r"function 'k' line \d+: offset 9 is outside the 8-element "
                                                 r"tensor in `%e = pto.load_scalar"):
        textbatch.run(text, "k", [idx, np.zeros(8, np.float32), np.zeros(32, np.float32)], range(4))


def test_a_batch_runs_again_from_its_tape(monkeypatch):
    """The second run of the same blocks and shapes interprets nothing: it replays the first's tape
    (on the new values)."""
    def kernel(x):
        with pj.tile(vec=(16, 16)):
            return jnp.exp(x) * 2.0
    x = rand((64, 64), np.float32, 0)
    compiled = pj.kernel(kernel).lower(x).compile()
    walks, block = [], engine._Run.block
    monkeypatch.setattr(engine._Run, "block", lambda self, body: walks.append(self.n) or block(self, body))
    compiled.run(x)
    assert walks == [16]
    got, _ = compiled.run(x + 1)
    assert walks == [16]
    want = np.exp((x + 1).astype(np.float64)).astype(np.float32) * 2     # the simulator's texp: double, rounded
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.uint32])
def test_integer_rules_evaluated_on_numpy_equal_xla(dtype):
    """Shifts (counts past the width, negative ones), remainders (by 0, by -1 of the minimum) and
    integer sums / maxima / minima: NumPy's evaluation of the jaxpr equals XLA's."""
    from jax import lax
    from ptojax.ascend import npeval

    info = np.iinfo(dtype)
    rng = np.random.default_rng(1)
    x = rng.integers(info.min, info.max, (6, 40), dtype=np.int64, endpoint=True).astype(dtype)
    x[0, :4] = [info.min, info.max, 0, 1]
    s = rng.integers(info.min, info.max, (6, 40), dtype=np.int64, endpoint=True).astype(dtype)
    s[1] = np.arange(40) % (np.dtype(dtype).itemsize * 8 + 3)          # counts around the width
    s[2, :3] = [0, -1 if info.min < 0 else 0, 1]

    def f(x, s):
        return (lax.shift_left(x, s), lax.shift_right_logical(x, s), lax.shift_right_arithmetic(x, s),
                lax.rem(x, s), jnp.sum(x, axis=1, dtype=dtype), jnp.max(x, axis=0), jnp.min(x, axis=1))
    closed = jax.make_jaxpr(f)(x, s)
    assert npeval.evaluable(closed.jaxpr)
    got = npeval.evaluator(closed.jaxpr, closed.consts)([x, s])
    for i, (g, w) in enumerate(zip(got, jax.jit(f)(x, s))):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=f"result {i}")


def test_a_tape_that_read_data_replays_only_while_the_data_agree(monkeypatch):
    """A point that branches on values it reads is replayed from its tape while those values are the
    recorded ones; other values stop the replay and the point runs from the text again."""
    idx = np.random.default_rng(2).integers(-2, 8, 32).astype(np.int32)
    table = np.arange(10, 18, dtype=np.float32)
    module = engine.parse(LOOKUP)
    walks, block = [], engine._Run.block
    monkeypatch.setattr(engine._Run, "block", lambda self, body: (body is self.func.body and walks.append(1))
                        or block(self, body))
    for values, walked in ((idx, 1), (idx, 1), (np.roll(idx, 3), 2), (np.roll(idx, 3), 2)):
        got = textbatch.run(module, "k", [values, table, np.zeros(32, np.float32)], [2])[2]
        counted = len(walks)
        want = _point_by_point(module, "k", [values, table, np.zeros(32, np.float32)], [2])[2]
        del walks[counted:]                                                 # the reference's own walk
        np.testing.assert_array_equal(got, want)
        assert len(walks) == walked
