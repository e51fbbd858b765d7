"""PTO kernels compiled to host code: the interpreter's results bit for bit, and its errors."""
import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import fuzz
import ptojax as pj
from helpers import BF16, F16, SPECIAL_F32, rand, specials
from ptojax.ascend import asm
from ptojax.ascend.hostcode import host_kernel
from ptojax.ascend.interpreter import Core, PtoExecutionError, run
from ptojax.ascend.program import compile_kernel
from ptojax.execute import execute
from ptojax.lowering import CoreMemory
from ptojax.mpmd import executors
from kernels import KERNELS, seed_kernel, seed_program, short_view, wide_window


def _interpreted(code):
    """``code`` (an AscendKernel) with no host code: every block instance runs on the interpreter."""
    fresh = dataclasses.replace(code)
    fresh._host.update(dict.fromkeys(fresh.kernels))
    return fresh


def _same(got, want):
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8))


def _both(fn, args):
    """The kernel's outputs and traces with host code, and on the interpreter (one task at a time)."""
    code = pj.kernel(fn).compiled_for(*args)._code()
    assert all(code.host(key) is not None for key in code.kernels)           # every program has host code
    lowering = code.lowering
    host = execute(lowering, *args, compiled=code)
    smallest, executors.BATCH_MIN = executors.BATCH_MIN, 1 << 30
    try:
        return host, execute(lowering, *args, compiled=_interpreted(code))
    finally:
        executors.BATCH_MIN = smallest


@pytest.mark.parametrize("name,kernel,args", KERNELS, ids=[k[0] for k in KERNELS])
def test_host_code_equals_the_interpreter(name, kernel, args):
    (got, trace), (want, reference) = _both(kernel, args)
    _same(got, want)
    assert trace.rows == reference.rows


@settings(max_examples=60, derandomize=True, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fuzz.kernels(max_ops=6))
def test_random_kernels_host_code_equals_the_interpreter(spec):
    """Random op chains (tests/fuzz.py): every op family, tails, dtypes."""
    fn, args = fuzz.build(spec)
    (got, _), (want, _) = _both(fn, args)
    _same(got, want)


def test_host_code_is_python_that_reads_like_the_kernel():
    args = rand((64, 64), F16, 1), rand((64, 64), F16, 2), rand((64, 32), F16, 3)
    code = compile_kernel(pj.lower(seed_kernel, *args))
    source = code.host(("mul+add", (2, 2))).source
    assert source.startswith("def run(_T, _tiles, v_arg0, v_arg1, v_arg2):")
    assert source.index("v_v0 = v_arg0.reshape((64, 64,))") < source.index("for v_i0, v_i1, in _tiles:")
    assert "v_p3 = v_v0[v_o1:v_o1 + 32, v_o2:v_o2 + 32]" in source         # a window is a slice
    assert "v_t4[...] = v_p3\n" in source                                   # a tload of a window of the tile's shape
    assert "v_t4[...] = _np.multiply(v_t4.astype(_np.float32), _C" in source        # tmuls, tadd: widened, one ufunc,
    assert "v_t4[...] = _np.add(v_t4.astype(_np.float32), v_t9.astype(_np.float32))" in source   # over a dying tile
    assert "try:" not in source
    matmul = code.host(("matmul", (1, 1))).source                          # float16 operands, float32 product
    assert "v_t11[...] = _np.matmul(v_t5.astype(_np.float32), v_t10.astype(_np.float32))" in matmul
    text = pj.kernel(seed_kernel).lower(*args).compile().as_text("host")
    assert text.count("// program ") == text.count("def run(_T, _tiles, ") == 3


# ----------------------------------------------------------------------------------------- errors
def _error(call):
    with pytest.raises(PtoExecutionError) as err:
        call()
    return str(err.value)


def _bad_reshape(s):
    return dataclasses.replace(s, attrs=(("axes", (1,)), ("keepdims", False), ("shapes", ((33, 32),)))) \
        if isinstance(s, asm.Instr) and s.op == "tsum" else s


def _bad_axis(s):
    return dataclasses.replace(s, attrs=(("axes", (2,)), ("keepdims", False))) \
        if isinstance(s, asm.Instr) and s.op == "tsum" else s


@pytest.mark.parametrize("edit,index,arrays,message", [
    (wide_window, (1, 0), ((64, 32), (64,)), r"window offsets \[32, 0\] sizes \[64, 32\] fall outside the tensor \[64, 32\]"),
    (wide_window, (0, 0), ((64, 32), (64,)), r"result of shape \[64, 32\] does not fill the destination's valid region 32x32"),
    (short_view, (0, 0), ((64, 32), (64,)), r"GM tensor float32\[64, 32\] does not match the view"),
    (_bad_reshape, (0, 0), ((64, 32), (64,)), r"ValueError: cannot reshape array of size 1024 into shape \(33,32\)"),
    (_bad_axis, (0, 0), ((64, 32), (64,)), r"AxisError: axis 2 is out of bounds for array of dimension 2"),
    (lambda s: s, (0, 0), ((64, 16), (64,)), r"GM tensor float32\[64, 16\] does not match the view"),
], ids=["window", "fill", "view", "compute", "axis", "argument"])
def test_host_code_raises_the_interpreters_errors(edit, index, arrays, message):
    kernel, memory = seed_program(("sum", (2, 1)), edit)
    host = host_kernel(kernel, memory)
    assert host is not None
    gm = [np.zeros(shape, np.float32) for shape in arrays]
    want = _error(lambda: run(kernel, index, gm, Core(memory), verified=True))
    got = _error(lambda: host(Core(memory), [index], gm))
    assert got == want
    assert re.search(message, got), got


def test_kernels_host_code_cannot_take_run_on_the_interpreter():
    """A tile outside its buffer: no host code; the interpreter reports it when the kernel runs."""
    kernel, memory = seed_program(("mul+add", (2, 2)), lambda s: dataclasses.replace(s, addr=196608 - 1024)
                                  if isinstance(s, asm.Alloc) else s)
    assert host_kernel(kernel, memory) is None
    assert host_kernel(*seed_program(("mul+add", (2, 2)), lambda s: s)) is not None
    with pytest.raises(PtoExecutionError, match="does not fit the 196608-byte vec buffer"):
        run(kernel, (0, 0), [np.zeros((64, 64), F16)] * 3, Core(CoreMemory()), verified=True)


def test_host_code_with_missing_arguments_reports_as_the_interpreter():
    kernel, memory = seed_program(("sum", (2, 1)), lambda s: s)
    host = host_kernel(kernel, memory)
    with pytest.raises(PtoExecutionError, match="expects a GM tensor for %arg1"):
        host(Core(memory), [(0, 0)], [np.zeros((64, 32), np.float32)])
    with pytest.raises(PtoExecutionError, match="expects 2 grid indices"):
        host(Core(memory), [(0,)], [np.zeros((64, 32), np.float32), np.zeros(64, np.float32)])


def _float32_bits(count, repeat=1):
    """``count`` random float32 bit patterns, then each special one ``repeat`` times."""
    rng = np.random.default_rng(0)
    return np.concatenate([rng.integers(0, 2**32, count, dtype=np.uint64).astype(np.uint32),
                           np.repeat(SPECIAL_F32, repeat)])


def test_float32_instructions_run_as_ufuncs_only_where_that_is_their_semantics():
    """Each of ``_UFUNCS`` is its instruction's semantics: on float32 the ufunc gives the semantics'
    bits on any operands (NaN payloads, infinities, subnormals) and broadcast ones (a column or a row
    against the destination's region), assigned to the destination; on float16 / bfloat16 the ufunc
    on the operands widened to float32, rounded by the assignment: the same bits on every 16-bit
    pattern (not NumPy's own float16 loops, which choose other NaN payloads)."""
    from ptojax.ascend.inline import _UFUNCS
    from ptojax.ascend.semantics import SEMANTICS

    bits = _float32_bits(20000, repeat=200)
    a, b = bits.view(np.float32), np.roll(bits, 7).view(np.float32)
    with np.errstate(all="ignore"):
        for name, ufunc in _UFUNCS.items():
            grid, column, row = a.reshape(-1, 8), b.reshape(-1, 8)[:, :1], b[:8].reshape(1, 8)
            for x, y in ((a, b), (b, a), (a, np.asarray(np.float32(np.nan))), (a, np.asarray(np.float32(-0.0))),
                         (grid, column), (grid, row)):
                ins = (x, y)[:getattr(np, ufunc).nin]
                want = SEMANTICS[name](*ins)
                out = np.empty_like(x)
                out[...] = getattr(np, ufunc)(*ins)
                np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32), err_msg=name)

    for dtype in (F16, BF16):
        every = np.arange(2**16, dtype=np.uint16)
        a, b = every.view(dtype), np.roll(every, 12345).view(dtype)
        nan = np.asarray(np.uint16(0x7E01 if dtype == F16 else 0x7FC1).view(dtype))
        with np.errstate(all="ignore"):
            for name, ufunc in _UFUNCS.items():
                for x, y in ((a, b), (a, np.asarray(2.0, dtype)), (a, nan), (a.reshape(-1, 8), b[:8])):
                    ins = (x, y)[:getattr(np, ufunc).nin]
                    want = SEMANTICS[name](*ins)
                    out = np.empty_like(x)
                    out[...] = getattr(np, ufunc)(*[i.astype(np.float32) for i in ins])
                    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16), err_msg=name)

    def add(x, y):
        with pj.tile(vec=(8, 32)):
            return x + y

    for dtype in (np.float32, F16, BF16):
        x = rand((16, 32), dtype, 1)
        for y in (x, rand((16, 1), dtype, 2), rand((1, 32), dtype, 3)):
            code = pj.kernel(add).compiled_for(x, y)._code()
            assert any("_np.add(" in code.host(key).source for key in code.kernels)
    for dtype in (np.int32, np.int8):                   # integers wrap in NumPy as in the semantics
        info = np.iinfo(dtype)
        x, y = rand((16, 32), dtype, 4), rand((16, 32), dtype, 5)
        x[0, :3], y[0, :3] = [info.max, info.min, info.min], [1, -1, info.min]
        (got, _), (want, _) = _both(add, (x, y))
        _same(got, want)
        code = pj.kernel(add).compiled_for(x, y)._code()
        assert any("_np.add(v_t" in code.host(key).source for key in code.kernels)


def test_float_casts_run_as_the_assignment_with_the_semantics_bits():
    """tcvt between float32, float16 and bfloat16 is the assignment into the destination tile (half to
    half through float32): the semantics' bits on every 16-bit pattern and on float32 specials
    (NaN payloads, infinities, overflow, subnormals, ties)."""
    from ptojax.ascend.semantics import SEMANTICS

    every = np.arange(2**16, dtype=np.uint16)
    sources = {F16: every.view(F16), BF16: every.view(BF16),
               np.dtype(np.float32): _float32_bits(50000).view(np.float32)}
    with np.errstate(all="ignore"):
        for src, x in sources.items():
            for dst in sources:
                want = SEMANTICS["tcvt"](x, dtype=dst, rounding="rint", saturate=True)
                out = np.empty(x.shape, dst)
                out[...] = x.astype(np.float32) if {src, dst} == {F16, BF16} else x
                np.testing.assert_array_equal(out.view(f"u{dst.itemsize}"), want.view(f"u{dst.itemsize}"),
                                              err_msg=f"{src} -> {dst}")

    def to(dtype):
        def cast(x):
            with pj.tile(vec=(8, 32)):
                return pj.ops.cast(x, dtype)
        return cast

    for src, dst, line in ((np.float32, BF16, "] = v_t"), (F16, BF16, ".astype(_np.float32)"),
                           (BF16, np.float32, "] = v_t")):
        x = rand((16, 32), src, 1)
        code = pj.kernel(to(dst)).compiled_for(x)._code()
        source = "".join(code.host(key).source for key in code.kernels)
        assert line in source and "_F" not in source, source                # no semantics call


@pytest.mark.parametrize("dtype", [np.float32, F16, BF16], ids=["f32", "f16", "bf16"])
def test_float_reductions_run_inline_with_the_interpreters_bits(dtype):
    """tsum / tamax / tamin on float tiles run inline on a float32 copy (no semantics call): tsum as the
    last of float32 prefix sums (left to right), tamax / tamin as the ufunc's reduce: the interpreter's
    bits on values with NaNs of several payloads, infinities and signed zeros."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(16, 64)).astype(np.float32)
    bits = x.view(np.uint32)
    bits[0, :4] = [0x7FC00001, 0xFFC00002, 0x7F800000, 0xFF800000]
    bits[1, :3] = [0x80000000, 0, 0x7FA00003]
    with np.errstate(invalid="ignore"):
        x = x.astype(dtype)

    def reductions(x):
        with pj.tile(vec=(8, 64)):
            return jnp.sum(x, axis=-1), jnp.max(x, axis=-1, keepdims=True), jnp.min(x, axis=0)

    (got, _), (want, _) = _both(reductions, (x,))
    _same(got, want)
    code = pj.kernel(reductions).compiled_for(x)._code()
    source = "".join(code.host(key).source for key in code.kernels)
    for call in ("_np.cumsum(", "_np.maximum.reduce(", "_np.minimum.reduce("):
        assert call in source


@pytest.mark.parametrize("dtype", [np.float32, F16, BF16], ids=["f32", "f16", "bf16"])
def test_batched_tiles_run_inline_with_the_interpreters_bits(dtype):
    """Instructions on (heads, rows, cols) tensors carry logical shapes with a leading 1 (each tile is
    one head's): elementwise ops, comparisons, ``tsel``, ``texpand`` and matmuls with transposed
    operands still run inline (no semantics call) with the interpreter's bits, on NaNs, infinities and
    signed zeros too."""
    def fn(x, y, w):
        with pj.tile(vec=(16, 32)):
            masked = jnp.where(x <= y, x * 2.0, y - jnp.max(x, axis=-1, keepdims=True))
        with pj.tile(cube=(16, 32, 32)):
            scores = pj.ops.matmul(masked, w, transpose_b=True, out_dtype=jnp.float32)
            grad = pj.ops.matmul(x, w, transpose_a=True, out_dtype=jnp.float32)
        return masked, scores, grad

    x, y, w = specials((2, 32, 32), dtype, 1), specials((2, 32, 32), dtype, 2), rand((2, 32, 32), dtype, 3)
    (got, trace), (want, reference) = _both(fn, (x, y, w))
    _same(got, want)
    assert trace.rows == reference.rows
    code = pj.kernel(fn).compiled_for(x, y, w)._code()
    assert any(stmt.attr("shapes") for kernel in code.kernels.values() for stmt in kernel.body
               if isinstance(stmt, asm.Instr))                           # the logical shapes this is about
    source = "".join(code.host(key).source for key in code.kernels)
    for line in ("_np.less_equal(", "_np.where(", ".swapaxes(-1, -2).astype(_np.float32)"):
        assert line in source, line
    assert "_F" not in source, source                                    # no semantics call left


def test_logical_shapes_that_broadcast_otherwise_keep_the_semantics_call():
    """A tile whose logical shape is not its region with leading 1s (here a (1, 32) row tile read as
    a (32, 1) column) runs through the semantics: broadcasting the regions would give other values.
    Operands of one logical shape over regions of one shape broadcast nothing: inline either way."""
    from ptojax.ascend.inline import InlineForms

    row = asm.TileBuf(loc="vec", dtype="f32", rows=1, cols=32, v_row=1, v_col=32, blayout="row_major",
                      slayout="none_box", fractal=512, pad=0)
    full = dataclasses.replace(row, rows=32, v_row=32)
    writer = InlineForms()
    writer.tiles = {"%a": full, "%b": row, "%c": full, "%o": full}
    for b, shapes, inline in (("%b", ((32, 32), (1, 32)), True), ("%b", ((1, 32, 32), (32,)), True),
                              ("%b", ((32, 32), (32, 1)), False), ("%b", ((32, 32), (1, 1, 32)), True),
                              ("%c", ((2, 16, 32), (2, 16, 32)), True), ("%c", ((2, 16, 32), (1, 16, 32)), False),
                              ("%b", ((2, 16, 32), (2, 16, 32)), False)):
        operands = (asm.Operand("%a", full), asm.Operand(b, writer.tiles[b]))
        stmt = asm.Instr("tadd", operands, (asm.Operand("%o", full),), (("shapes", shapes),))
        assert writer.regions_broadcast(stmt) is inline, shapes


@pytest.mark.parametrize("src", [np.int32, np.int8], ids=["i32", "i8"])
def test_integer_to_float_casts_run_as_the_assignment_with_the_interpreters_bits(src):
    """tcvt from int32 / int8 to float32 / float16 / bfloat16 (also on (heads, rows, cols) tiles) is the
    assignment: the interpreter's bits on values that round (past 2**24, past bfloat16's 8 bits) and
    overflow float16."""
    info = np.iinfo(src)
    x = np.random.default_rng(5).integers(info.min, info.max, size=(2, 16, 32), endpoint=True).astype(src)
    x.reshape(-1)[:4] = [info.min, info.max, 0, -1]

    def casts(x):
        with pj.tile(vec=(16, 32)):
            return tuple(pj.ops.cast(x, d) for d in (jnp.float32, jnp.float16, jnp.bfloat16))

    (got, _), (want, _) = _both(casts, (x,))
    _same(got, want)
    code = pj.kernel(casts).compiled_for(x)._code()
    source = "".join(code.host(key).source for key in code.kernels)
    assert "_F" not in source, source


def test_float_expressions_are_their_semantics_bit_for_bit():
    """rsqrt / recip / sigmoid / silu / relu / clip run inline as the semantics' own NumPy steps: the same
    bits on float32 specials (NaN payloads, infinities, subnormals) and on every float16 / bfloat16
    pattern (widened, computed, rounded once by the assignment); in kernels no semantics call is left."""
    from ptojax.ascend.inline import _ARITY, _EXPRESSIONS
    from ptojax.ascend.semantics import SEMANTICS

    bits = _float32_bits(20000, repeat=50)
    every = np.arange(2**16, dtype=np.uint16)
    inputs = {np.dtype(np.float32): bits.view(np.float32), F16: every.view(F16), BF16: every.view(BF16)}
    with np.errstate(all="ignore"):
        for dtype, x in inputs.items():
            operands = [x, np.roll(x, 7), np.roll(x, 1234)]
            for name, text in _EXPRESSIONS.items():
                ins = operands[:_ARITY[name]]
                want = SEMANTICS[name](*ins)
                got = np.empty_like(x)
                got[...] = eval(text.format(*(f"ins[{i}].astype(np.float32)" for i in range(len(ins)))),  # noqa: S307
                                {"_np": np, "np": np, "ins": ins})
                np.testing.assert_array_equal(got.view(f"u{dtype.itemsize}"), want.view(f"u{dtype.itemsize}"),
                                              err_msg=f"{name} {dtype}")

    def activations(x, lo, hi):
        with pj.tile(vec=(8, 32)):
            return (jax.lax.rsqrt(x), 1.0 / x, jax.nn.sigmoid(x), jax.nn.silu(x), jax.nn.relu(x),
                    jnp.clip(x, lo, hi), x ** 3.0)

    for dtype in (np.float32, F16, BF16):
        x = specials((16, 32), dtype, 4)
        lo, hi = rand((16, 32), dtype, 5, -1, 0), rand((16, 32), dtype, 6, 0, 1)
        (got, _), (want, _) = _both(activations, (x, lo, hi))
        _same(got, want)
        code = pj.kernel(activations).compiled_for(x, lo, hi)._code()
        source = "".join(code.host(key).source for key in code.kernels)
        assert "_F" not in source, source


@pytest.mark.parametrize("dtype", [np.float32, F16, BF16, np.int8], ids=["f32", "f16", "bf16", "i8"])
def test_k_chains_accumulate_inline_with_the_interpreters_bits(dtype):
    """A K-tiled matmul is a tmatmul then tmatmul_accs into a float32 (int32) accumulator: inline (one
    BLAS product, exact for int8, one add each), transposed operands and (heads, rows, cols) tiles too."""
    acc = jnp.int32 if dtype == np.int8 else jnp.float32

    def chains(a, b):
        with pj.tile(cube=(32, 32, 32)):
            return (pj.ops.matmul(a, b, out_dtype=acc),
                    pj.ops.matmul(b, a, transpose_a=True, transpose_b=True, out_dtype=acc))

    a = rand((2, 32, 128), dtype, 7) if dtype == np.int8 else specials((2, 32, 128), dtype, 7)
    b = rand((2, 128, 32), dtype, 8)
    (got, _), (want, _) = _both(chains, (a, b))
    _same(got, want)
    code = pj.kernel(chains).compiled_for(a, b)._code()
    def ops(body):
        return {op for stmt in body for op in (ops(stmt.body) if isinstance(stmt, asm.For) else {
            getattr(stmt, "op", None)})}

    assert "tmatmul_acc" in set().union(*(ops(kernel.body) for kernel in code.kernels.values()))
    source = "".join(code.host(key).source for key in code.kernels)
    assert "_np.add(" in source and "_F" not in source, source


def test_nan_plus_nan_takes_the_interpreters_payload_on_every_layout():
    """NumPy's float32 vector loops give a NaN + NaN the first operand's payload in the loop's body and
    the second's in its remainder, so the payload follows the layout: host code computes on copies of
    the valid regions, as the interpreter reads them, into fresh results — the interpreter's bits on
    regions narrower than their tiles (one loop per row otherwise), and for a 1x1 accumulator (NumPy's
    in-place one-element loop)."""
    def add(x, y):
        with pj.tile(vec=(2, 32)):
            return x + y, x * y, jax.nn.silu(x)

    def add_default(x, y):
        return x + y

    def k_chain(a, b):
        with pj.tile(cube=(16, 32, 16)):
            return pj.ops.matmul(a, b, out_dtype=jnp.float32)

    nan1, nan2 = np.uint32(0x7FC00001), np.uint32(0xFFC00002)
    x, y = (np.full((2, 17), bits).view(np.float32) for bits in (nan1, nan2))
    x3, y3 = (np.full((3, 33), bits).view(np.float32) for bits in (nan1, nan2))
    a, b = np.zeros((1, 64), np.float32), np.ones((64, 1), np.float32)
    a.view(np.uint32)[0, [0, 32]] = [nan2, nan1]              # the K steps' products: two NaNs
    a2, b2 = np.zeros((2, 64), np.float32), np.ones((64, 17), np.float32)
    a2.view(np.uint32)[:, 0], a2.view(np.uint32)[:, 32] = nan2, nan1
    for fn, args in ((add, (x, y)), (add_default, (x3, y3)), (add_default, (x3, y3[:, :1])),
                     (k_chain, (a, b)), (k_chain, (a2, b2))):
        (got, _), (want, _) = _both(fn, args)
        _same(got, want)


def test_texpand_to_fewer_dims_raises_the_interpreters_error():
    """A texpand whose operand's logical shape has more dims than its ``shape`` (a hand-edited kernel):
    NumPy cannot broadcast it, and host code reports that as the interpreter does (no inline copy)."""
    def f(x, y):
        with pj.tile(vec=(16, 32)):
            return jnp.broadcast_to(x, y.shape) + y

    x, y = np.ones((1, 16, 32), np.float32), np.ones((2, 16, 32), np.float32)
    code = pj.kernel(f).compiled_for(x, y)._code()
    kernel = next(iter(code.kernels.values()))
    assert any(isinstance(s, asm.Instr) and s.op == "texpand" for s in kernel.body)
    kernel = dataclasses.replace(kernel, body=tuple(
        dataclasses.replace(s, attrs=(("shape", (16, 32)), ("shapes", ((1, 16, 32),))))
        if isinstance(s, asm.Instr) and s.op == "texpand" else s for s in kernel.body))
    gm = [x.copy(), y.copy(), np.zeros((2, 16, 32), np.float32)]
    want = _error(lambda: run(kernel, (0, 0, 0), gm, Core(code.memory), verified=True))
    got = _error(lambda: host_kernel(kernel, code.memory)(Core(code.memory), [(0, 0, 0)], gm))
    assert got == want and "more dimensions" in got, got
