"""Regressions from a probe of the engine against pto-isa's CPU simulator (each kernel here: its
result equals ``jax.jit``'s, and every program computes the same bit for bit on both sides).

* A column tile (``R x 1``, column-major) moves its rows along the window's second-to-last dim alone
  (pto-isa's ``CheckTileData``: ``DIM_3 == ValidRow``). A window whose rows lay along other dims — a
  ``(7, 1, 1)`` tensor, a ``(2, 8, 1)`` slice of ``(2, 16, 1)``, each half of a ``concatenate(axis=-2)``
  of ``(2, 16, 1)`` arrays — aborted the simulator's load, and its store wrote the rows as one run: the
  concatenation came out wrong, silently. The engine refuses such a transfer now; selection moves one
  run through a 2-D twin view, runs the same distance apart as a row-major alias of the column (one
  run per row), and runs whose rows take no multiple of 32 bytes one by one through a work row.
* A row gather / scatter on an ``(N, 1)`` table (the indexer prolog's ``idx_k_scale_cache``) took
  one-element subsets of a column tile, which pto-isa does not compile: they move element by element.
* ``fmod`` by a constant zero was a ``tfmods`` by 0, which pto-isa declares illegal (its simulator
  left the result unwritten): NaN for floats, ``x`` for integers (``lax.rem``), as the engine computes.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import crosscheck as xc
from ptojax.ascend import engine
from vendor_tools import needed, tools  # noqa: F401 - tools: autouse fixture

RNG = np.random.default_rng(0)
CONCAT = lambda a, b: jnp.concatenate([a, b], axis=-2)     # noqa: E731

CASES = {
    "concatenate (2, 16, 1) f32": (CONCAT, [(2, 16, 1)] * 2, np.float32),
    "concatenate (2, 7, 1) f32 (runs of 28 bytes)": (CONCAT, [(2, 7, 1)] * 2, np.float32),
    "concatenate (3, 16, 1) i8": (CONCAT, [(3, 16, 1)] * 2, np.int8),
    "concatenate (2, 3, 5, 1) f32": (CONCAT, [(2, 3, 5, 1)] * 2, np.float32),
    "slice (2, 16, 1) f32": (lambda a: a[:, 1:9, :] * 2, [(2, 16, 1)], np.float32),
    "slice (2, 16, 1) f16": (lambda a: a[:, 1:9, :] * 2, [(2, 16, 1)], np.float16),
    "add (7, 1, 1)": (lambda a, b: a + b, [(7, 1, 1)] * 2, np.float32),
    "a column of a (2, 3, 4, 5) tensor": (lambda a: a[:, :, 1:2, 3:4] * 2, [(2, 3, 4, 5)], np.float32),
    "strided rows of a (33, 13, 1) tensor": (lambda a: a[::11, 3:5, :] + 1, [(33, 13, 1)], np.float32),
    "pad (3, 16, 1)": (lambda a: jnp.pad(a, ((0, 0), (0, 4), (0, 0))), [(3, 16, 1)], np.float32),
    "gather of an (N, 1) table": (lambda c, i: pj.ops.gather(c, i, 0), [(64, 1), "idx"], np.float16),
    "scatter into an (N, 1) table": (lambda c, i, u: pj.ops.scatter_update(c, i, u, axis=0),
                                     [(64, 1), "idx", (4, 1)], np.float16),
    "fmod by 0 f32": (lambda a: pj.ops.fmod(a, 0), [(4, 32)], np.float32),
    "fmod by 0 i32": (lambda a: pj.ops.fmod(a, 0), [(4, 32)], np.int32),
    "integer remainder (no zero divisors drawn)": (lambda a, b: (a // b, a % b), [(4, 32)] * 2, np.int32),
}


def _args(shapes, dtype):
    return [np.array([3, 9, 0, 63], np.int32) if s == "idx" else RNG.uniform(-50, 50, s).astype(dtype) for s in shapes]


@needed
def test_column_transfers_compute_as_jax_and_as_the_vendor():
    jobs, names = [], []
    for name, (fn, shapes, dtype) in CASES.items():
        args = _args(shapes, dtype)
        if "remainder" not in name:
            for got, want in zip(jax.tree.leaves(pj.kernel(fn)(*args)), jax.tree.leaves(jax.jit(fn)(*args))):
                np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)
        for job in xc.jobs_of(pj.kernel(fn).lower(*args).compile().code):
            jobs.append(job)
            names.append(name)
    for name, result in zip(names, xc.run(jobs, seed=2)):
        assert result.status == "exact", (name, result.function, result.status, result.sim_error, result.engine_error)


TILE = ("!pto.tile_buf<loc=vec, dtype=f32, rows=32, cols=1, v_row=32, v_col=1, blayout=col_major, "
        "slayout=none_box, fractal=512, pad=0>")
SPREAD = f"""module attributes {{pto.target_arch = "a3"}} {{
  func.func @k(%arg0: !pto.ptr<f32>, %arg1: !pto.ptr<f32>) attributes {{pto.kernel_kind = #pto.kernel_kind<vector>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %v0 = pto.make_tensor_view %arg0, shape = [%c2, %c16, %c1], strides = [%c16, %c1, %c1] : !pto.tensor_view<2x16x1xf32>
    %v1 = pto.make_tensor_view %arg1, shape = [%c32, %c1], strides = [%c1, %c1] : !pto.tensor_view<32x1xf32>
    %p0 = pto.partition_view %v0, offsets = [%c0, %c0, %c0], sizes = [%c2, %c16, %c1] : !pto.tensor_view<2x16x1xf32> -> !pto.partition_tensor_view<2x16x1xf32>
    %t = pto.alloc_tile : {TILE}
    pto.tload ins(%p0 : !pto.partition_tensor_view<2x16x1xf32>) outs(%t : {TILE})
    %p1 = pto.partition_view %v1, offsets = [%c0, %c0], sizes = [%c32, %c1] : !pto.tensor_view<32x1xf32> -> !pto.partition_tensor_view<32x1xf32>
    pto.tstore ins(%t : {TILE}) outs(%p1 : !pto.partition_tensor_view<32x1xf32>)
    return
  }}
}}
"""


@needed
def test_the_engine_refuses_a_column_tile_whose_rows_are_not_the_windows_second_to_last_dim():
    """A (2, 16, 1) window into a 32 x 1 column tile: the vendor's load aborts, the engine says why."""
    from ptojax.ascend import cpusim

    x = np.arange(32, dtype=np.float32)
    with pytest.raises(Exception, match="CheckTileData|DIM_3"):
        cpusim.run_module(SPREAD, "k", [x.copy(), np.zeros(32, np.float32)])
    with pytest.raises(pj.PtoError, match=r"a col_major tile's 32 valid rows must be the window's second-to-last "
                                          r"dim .* but the window is \[2, 16, 1\]"):
        engine.run(SPREAD, "k", [x.copy(), np.zeros(32, np.float32)])
    fixed = SPREAD.replace("sizes = [%c2, %c16, %c1]", "sizes = [%c1, %c32, %c1]").replace(
        "2x16x1xf32> -> !pto.partition_tensor_view<2x16x1xf32>", "2x16x1xf32> -> !pto.partition_tensor_view<1x32x1xf32>")
    fixed = fixed.replace("ins(%p0 : !pto.partition_tensor_view<2x16x1xf32>)", "ins(%p0 : !pto.partition_tensor_view<1x32x1xf32>)")
    fixed = fixed.replace("shape = [%c2, %c16, %c1], strides = [%c16, %c1, %c1] : !pto.tensor_view<2x16x1xf32>",
                          "shape = [%c1, %c32, %c1], strides = [%c32, %c1, %c1] : !pto.tensor_view<1x32x1xf32>")
    fixed = fixed.replace("!pto.tensor_view<2x16x1xf32> ->", "!pto.tensor_view<1x32x1xf32> ->")
    np.testing.assert_array_equal(engine.run(fixed, "k", [x.copy(), np.zeros(32, np.float32)])[1], x)
    np.testing.assert_array_equal(cpusim.run_module(fixed, "k", [x.copy(), np.zeros(32, np.float32)])[1], x)
