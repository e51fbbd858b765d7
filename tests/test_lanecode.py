"""PTO kernels compiled to lane code: many grid points in one pass, with host code's bits and errors.

(tests/test_batched.py runs every test kernel and random kernels as lane code against one task at a
time; tests/test_hostcode.py checks host code against the interpreter.)"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import BF16, F16, batched_outputs, bits, rand, specials
from ptojax.ascend import asm, program
from ptojax.ascend.hostcode import host_kernel
from ptojax.ascend.interpreter import Core
from ptojax.ascend.lanecode import LaneFailure, lane_kernel
from ptojax.ascend.program import compile_kernel
from ptojax.execute import execute
from ptojax.mpmd import PtoTaskError, executors
from kernels import seed_kernel, seed_program, wide_window

SEED_ARGS = rand((64, 64), F16, 1), rand((64, 64), F16, 2), rand((64, 32), F16, 3)


def test_lane_code_reads_like_the_kernel():
    code = compile_kernel(pj.lower(seed_kernel, *SEED_ARGS))
    source = code.lanes(("mul+add", (2, 2))).source
    assert source.startswith("def run(_T, _n, _G, v_arg0, v_arg1, v_arg2):")
    assert "if ((_G < 0) | (_G >= _L" in source                  # the grid points are the grid's ...
    assert "_E.window" not in source                              # ... so the windows are inside: checked now
    assert "_r0 = _rows(v_v0, 32)" in source                      # a tensor's rows of the windows' width
    assert "v_t4 = _reg(v_p3[0][v_p3[1]], _D" in source          # every lane's window: one gather, its tile a
    assert "v_t4 = _reg(_np.multiply(v_t4.astype(_np.float32), _C" in source   # variable, whose array the result
    assert ", out=v_t9)\n        v_t9 = None" in source                  # takes where it is not read again
    assert "v_t4 = _np.add(v_t4.astype(_np.float32), v_t9.astype(_np.float32), out=v_t9)" in source
    assert "v_p12[0][v_p12[1]] = v_t4.reshape((_n, 32, 32))" in source           # one scatter
    rowsum = code.lanes(("sum", (2, 1))).source                    # the reduction along each lane's rows,
    assert "_np.cumsum(v_t4, axis=-1, dtype=_np.float32)[..., -1]" in rowsum      # left to right


def _gm(key):
    a, b, w = SEED_ARGS
    return {"mul+add": lambda: [a, b, np.zeros((64, 64), F16)],
            "matmul": lambda: [a, w, np.zeros((64, 32), np.float32)],
            "sum": lambda: [rand((64, 32), np.float32, 4), np.zeros(64, np.float32)]}[key[0]]()


@pytest.mark.parametrize("key", [("mul+add", (2, 2)), ("matmul", (1, 1)), ("sum", (2, 1))], ids=lambda k: k[0])
def test_lanes_in_any_grouping_give_host_codes_bits(key):
    """Every grid point once, as lanes of batches of several sizes (the lane buffers' views are kept per
    lane count), against host code one grid point after another."""
    code = compile_kernel(pj.lower(seed_kernel, *SEED_ARGS))
    points = list(np.ndindex(*code.kernels[key].grid))
    want, got = _gm(key), _gm(key)
    code.host(key)(Core(code.memory), points, want)
    lanes = code.lanes(key)
    for batch in filter(None, (points[::-1][:1], points[::-1][1:], points)):   # 1 lane, the rest, all again
        lanes(batch, got)
    np.testing.assert_array_equal(got[-1].view(np.uint8), want[-1].view(np.uint8))


def _product_offsets(s):
    """A window offset that is not affine in the grid indices: i0 * i1 (so checked per lane as it runs)."""
    return dataclasses.replace(s, lhs="%i0", rhs="%i1") if isinstance(s, asm.Arith) and s.name == "%o2" else s


def test_windows_not_affine_in_the_grid_are_checked_per_lane():
    kernel, memory = seed_program(("mul+add", (2, 2)), _product_offsets)
    host = host_kernel(kernel, memory)
    lanes = lane_kernel(host, memory)
    assert "_E.window()" in lanes.source
    points = list(np.ndindex(2, 2))
    want, got = _gm(("mul+add",)), _gm(("mul+add",))
    host(Core(memory), points, want)
    lanes(points, got)
    np.testing.assert_array_equal(got[-1].view(np.uint16), want[-1].view(np.uint16))


def test_a_failing_check_stops_the_lane_run():
    kernel, memory = seed_program(("sum", (2, 1)), wide_window)     # windows outside the grid's tensor
    lanes = lane_kernel(host_kernel(kernel, memory), memory)
    with pytest.raises(LaneFailure):
        lanes([(0, 0), (1, 0)], [np.zeros((64, 32), np.float32), np.zeros(64, np.float32)])


def test_a_failing_lane_run_reports_the_error_of_one_task_at_a_time():
    """The runtime reruns a failing batch task by task: the lane run's error is the one-by-one run's."""
    code = compile_kernel(pj.lower(seed_kernel, *SEED_ARGS))
    key = ("sum", (2, 1))
    broken = dataclasses.replace(code, kernels={**code.kernels, key: seed_program(key, wide_window)[0]})

    def error(batch_min):
        saved = executors.BATCH_MIN, program._LANE_CODE_MIN
        executors.BATCH_MIN, program._LANE_CODE_MIN = batch_min, 1
        try:
            with pytest.raises(PtoTaskError) as err:
                execute(code.lowering, *SEED_ARGS, compiled=dataclasses.replace(broken))
        finally:
            executors.BATCH_MIN, program._LANE_CODE_MIN = saved
        return str(err.value)

    assert broken.lanes(key) is not None
    batched, alone = error(1), error(1 << 30)
    assert "does not fill the destination's valid region 32x32" in batched
    assert batched == alone


def test_kernels_lane_code_cannot_take_run_on_host_code():
    """Indexed GM access and stores of every lane to one window: no lane code (host code runs them)."""
    def gather(table, idx):
        with pj.tile(vec=(8, 32)):
            return pj.ops.gather(table, idx, axis=0)

    args = rand((64, 32), np.float32, 5), np.arange(16, dtype=np.int32)[::-1].copy()
    code = pj.kernel(gather).compiled_for(*args)._code()
    assert [code.lanes(key) for key in code.kernels] == [None] * len(code.kernels)
    assert all(code.host(key) is not None for key in code.kernels)
    kernel, memory = seed_program(("mul+add", (2, 2)), lambda s: dataclasses.replace(s, offsets=("%c32", "%c32"))
                                  if isinstance(s, asm.PartitionView) and s.name == "%p12" else s)
    assert host_kernel(kernel, memory) is not None and lane_kernel(host_kernel(kernel, memory), memory) is None


def _add_the_clobbered_tile(s):
    """%t9 (b's window) placed at %t4's address: its load overwrites the bytes of 2a that tadd then
    reads as %t4."""
    if isinstance(s, asm.Alloc) and s.name == "%t9":
        return dataclasses.replace(s, addr=0)
    return s


def test_a_tile_read_through_another_tiles_bytes_keeps_the_lane_buffers():
    """Tiles are variables only where every read of a tile reads its own last write; here one reads the
    bytes another tile wrote (the interpreter's semantics: bytes), so the lanes keep their buffers."""
    kernel, memory = seed_program(("mul+add", (2, 2)), _add_the_clobbered_tile)
    host = host_kernel(kernel, memory)
    lanes = lane_kernel(host, memory)
    assert "_reg(" not in lanes.source and "v_t4, v_t9, = _T" in lanes.source
    points = list(np.ndindex(2, 2))
    want, got = _gm(("mul+add",)), _gm(("mul+add",))
    host(Core(memory), points, want)
    lanes(points, got)
    np.testing.assert_array_equal(got[-1].view(np.uint16), want[-1].view(np.uint16))
    _, b, _ = SEED_ARGS             # b + b: %t4 holds b's window (as variables, the tiles would give 2a + b)
    np.testing.assert_array_equal(want[-1], (b.astype(np.float32) + b.astype(np.float32)).astype(F16))


def test_windows_of_many_rows_move_lane_by_lane():
    """A window of 256 rows or more a lane moves by slicing, lane by lane (a row gather of short rows
    costs more): the same bits as one task at a time."""
    x = rand((512, 64), np.float32, 6)

    def f(x):
        with pj.tile(vec=(512, 16)):
            return jnp.sum(x, axis=0), x * 2.0

    compiled = pj.kernel(f).compiled_for(x)
    code = compiled._code()
    sources = "".join(code.lanes(key).source for key in code.kernels)
    assert "_load_slices(" in sources and "_store_slices(" in sources
    want, _, _ = batched_outputs(compiled, (x,), batched=False)
    got, _, _ = batched_outputs(compiled, (x,), batched=True)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(bits(g), bits(w))
    np.testing.assert_array_equal(got[1], x * 2)


@pytest.mark.parametrize("dtype", [np.float32, F16, BF16], ids=["f32", "f16", "bf16"])
def test_lanes_give_one_by_ones_bits_on_special_values(dtype):
    """NaN payloads, infinities, signed zeros, subnormals and rounding ties through elementwise math,
    selects, reductions, casts and matmuls, 16 lanes a batch: the bits of one task at a time (a NaN
    computed from two NaNs may carry the other one's payload: NaN there on both sides is enough)."""
    def fn(x, y, w):
        with pj.tile(vec=(8, 32)):
            z = jnp.where(x <= y, jnp.exp(x) * 2.0, y - jnp.max(x, axis=-1, keepdims=True))
            s = jnp.sum(z.astype(jnp.float32), axis=-1) + jax.nn.sigmoid(x[:, 0].astype(jnp.float32))
        with pj.tile(cube=(32, 32, 32)):
            p = pj.ops.matmul(z, w, out_dtype=jnp.float32)
        return z, s, p

    args = specials((128, 32), dtype, 1), specials((128, 32), dtype, 2), rand((32, 32), dtype, 3)
    compiled = pj.kernel(fn).compiled_for(*args)
    code = compiled._code()
    assert all(code.lanes(key) is not None for key in code.kernels)
    want, _, _ = batched_outputs(compiled, args, batched=False)
    got, _, _ = batched_outputs(compiled, args, batched=True)
    for w, g in zip(want, got):
        w, g = np.asarray(w), np.asarray(g)
        both_nan = np.isnan(w.astype(np.float32)) & np.isnan(g.astype(np.float32))
        np.testing.assert_array_equal(np.where(both_nan, 0, w.view(f"u{w.dtype.itemsize}")),
                                      np.where(both_nan, 0, g.view(f"u{g.dtype.itemsize}")))
    assert any(np.isnan(np.asarray(w, np.float32)).any() for w in want)      # the specials reached the outputs
