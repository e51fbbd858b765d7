"""Regression from a probe of the engine against pto-isa's CPU simulator: shift counts from data.

``x << y`` with ``y`` a tensor outside ``[0, bits)`` (negative, the width or more) gives 0 (``>>``: the
sign's fill) in JAX. The vector unit's ``tshl`` / ``tshr`` are C's ``<<`` / ``>>`` on ints, which leave
such a count undefined; pto-isa's simulator takes it modulo 32 after promotion (``14 << 32 == 14``).
Selection emitted a bare ``tshl`` / ``tshr`` for a count from data, and the engine modelled XLA's
answer: the engine said JAX's numbers, the vendor others. The ops now check a count from data before the
instruction (``tcmps`` + ``tsel``), and the engine models the instruction as the vendor computes it.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from ptojax.ascend import crosscheck as xc
from ptojax.ascend import cpusim, engine
from vendor_tools import needed, tools  # noqa: F401 - tools: autouse fixture

SHIFTS = {"jnp.left_shift": jnp.left_shift, "jnp.right_shift": jnp.right_shift,
          "lax.shift_right_logical": lax.shift_right_logical,
          "pj.ops.shift_left": pj.ops.shift_left, "pj.ops.shift_right": pj.ops.shift_right,
          "count broadcast along rows": lambda x, y: jnp.left_shift(x, y[:1]),
          "count of one column": lambda x, y: jnp.right_shift(x, y[:, :1])}


def _counts(dtype, shape):
    bits = 8 * np.dtype(dtype).itemsize
    edges = np.array([-100, -33, -1, 0, 1, bits - 1, bits, bits + 1, 32, 33, 40, 70, 100], np.int64)
    return np.resize(edges[(edges >= np.iinfo(dtype).min) & (edges <= np.iinfo(dtype).max)], shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int8])
@pytest.mark.parametrize("name", SHIFTS)
def test_counts_outside_the_width_compute_as_jax(name, dtype):
    fn = SHIFTS[name]
    x = np.resize(np.array([14, -1, 100, -61, 5, 7, 1, -128, 127, -2], dtype), (4, 40))
    y = _counts(dtype, (4, 40))
    np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x, y)), np.asarray(jax.jit(fn)(x, y)))


def test_a_constant_count_is_not_checked():
    """``x >> 1``: no compare in the program, and a polymorphic compile takes it (a check of the
    constant left scalar steps that a symbolic row count refused as host control flow)."""
    def shifts(x):
        with pj.tile(vec=(16, 32)):
            return (x >> 1) + (x << 2)
    x = np.random.default_rng(0).integers(-1000, 1000, (33, 32)).astype(np.int32)
    assert "tcmps" not in pj.kernel(shifts).lower(x).compile().code.pto("a3")
    np.testing.assert_array_equal(np.asarray(pj.kernel(shifts, polymorphic_shapes=("m, 32",))(x)),
                                  (x >> 1) + (x << 2))


@needed
def test_shifts_by_counts_from_data_compute_as_the_vendor():
    """Random integers in [-100, 100] (counts mostly outside the width): bit for bit on both sides."""
    jobs = [job for dtype in (np.int32, np.int8) for fn in SHIFTS.values()
            for job in xc.jobs_of(pj.kernel(fn).lower(np.ones((4, 40), dtype), np.ones((4, 40), dtype)).compile().code)]
    for result in xc.run(jobs, seed=3):
        assert result.status == "exact", (result.function, result.status, result.sim_error, result.engine_error)


TILE = "!pto.tile_buf<loc=vec, dtype={d}, rows=1, cols={c}, v_row=1, v_col={c}, blayout=row_major, slayout=none_box, fractal=512, pad=0>"
BARE = """module attributes {{pto.target_arch = "a3"}} {{
  func.func @k(%arg0: !pto.ptr<{d}>, %arg1: !pto.ptr<{d}>, %arg2: !pto.ptr<{d}>) attributes {{pto.kernel_kind = #pto.kernel_kind<vector>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = arith.constant {c} : index
    {views}
    %a = pto.alloc_tile : {t}
    %b = pto.alloc_tile : {t}
    %o = pto.alloc_tile : {t}
    pto.tload ins(%p0 : !pto.partition_tensor_view<1x{c}x{d}>) outs(%a : {t})
    pto.tload ins(%p1 : !pto.partition_tensor_view<1x{c}x{d}>) outs(%b : {t})
    pto.{op} ins(%a, %b : {t}, {t}) outs(%o : {t})
    pto.tstore ins(%o : {t}) outs(%p2 : !pto.partition_tensor_view<1x{c}x{d}>)
    return
  }}
}}
"""
VIEW = ("%v{i} = pto.make_tensor_view %arg{i}, shape = [%c1, %n], strides = [%n, %c1] : !pto.tensor_view<1x{c}x{d}>\n"
        "    %p{i} = pto.partition_view %v{i}, offsets = [%c0, %c0], sizes = [%c1, %n] : !pto.tensor_view<1x{c}x{d}> "
        "-> !pto.partition_tensor_view<1x{c}x{d}>")


@needed
@pytest.mark.parametrize("op", ["tshl", "tshr"])
@pytest.mark.parametrize("dtype", [np.int32, np.int8])
def test_the_engine_computes_a_bare_shift_as_the_vendor(op, dtype):
    """A hand-written ``tshl`` / ``tshr`` by counts outside the width: the count modulo 32 after promotion
    to ``int``, the result truncated (``14 << 32 == 14``, ``100 << 40 == 25600``), on both sides."""
    d, c = {np.int32: ("i32", 8), np.int8: ("i8", 32)}[dtype]
    text = BARE.format(d=d, c=c, op=op, t=TILE.format(d=d, c=c),
                       views="\n    ".join(VIEW.format(i=i, c=c, d=d) for i in range(3)))
    x = np.resize(np.array([14, -1, 100, -61, 5, 7, 1, -128], dtype), c)
    y = _counts(dtype, c)
    wide = x.astype(np.int64)
    model = (wide << (y.astype(np.int64) & 31)) if op == "tshl" else (wide >> (y.astype(np.int64) & 31))
    want = model.astype(dtype)                           # truncated to the type, as C's conversion
    got = engine.run(text, "k", [x, y, np.zeros(c, dtype)])[2]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(cpusim.run_module(text, "k", [x, y, np.zeros(c, dtype)])[2], want)
