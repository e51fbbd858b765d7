"""Ascend codegen: PTO-AS round trips, runs against XLA, and errors with line:col."""
import dataclasses

import jax
import numpy as np
import pytest

import ptojax as pj
from helpers import F16, rand
from ptojax.ascend import asm, isa
from ptojax.ascend.program import compile_kernel
from ptojax.execute import execute
from ptojax.mpmd import PtoTaskError
from ptojax.lowering import CoreMemory
from ptojax.lowering.pipeline import TOLERANCE
from kernels import KERNELS, seed_kernel


@pytest.mark.parametrize("name,kernel,args", KERNELS, ids=[k[0] for k in KERNELS])
def test_round_trip_and_the_run_match_xla(name, kernel, args):
    compiled = compile_kernel(pj.lower(kernel, *args))
    for parsed in compiled.kernels.values():
        text = asm.emit(parsed)
        assert asm.emit(asm.parse(text)[0]) == text
    assert [asm.emit(k) for k in asm.parse(compiled.text)] == [asm.emit(k) for k in compiled.kernels.values()]
    got = jax.tree.leaves(execute(compiled.lowering, *args, compiled=compiled)[0])
    want = jax.tree.leaves(jax.jit(kernel)(*args))
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        rtol, atol = TOLERANCE.get(np.dtype(w.dtype), (0, 0))  # integers exact; floats per dtype (x2: two levels)
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=2 * rtol, atol=2 * atol)


def _seed():
    args = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    return compile_kernel(pj.lower(seed_kernel, *args)), args


def test_seed_kernel_text_has_the_dps_form():
    compiled, _ = _seed()
    text = compiled.text
    assert text.count("func.func @") == 3
    assert "// program mul+add <AIV> id=0 grid=2x2" in text and '// program matmul <AIC> id=1 label="Linear" grid=1x1' in text
    for piece in ("pto.make_tensor_view %arg0, shape = [%c64, %c64], strides = [%c64, %c1] : !pto.tensor_view<64x64xf16>",
                  "pto.tmuls ins(", "pto.tadd ins(", "pto.tmatmul ins(", "loc=left", "loc=right", "loc=acc",
                  "pto.tsum ins(", "axes = [1]", "pto.tstore ins("):
        assert piece in text, piece


def test_memory_planning_reuses_dead_tiles_and_never_overlaps_live_ones():
    def f(a, b):       # int32: results get tiles of their own (only float results overwrite operands)
        with pj.tile(vec=(32, 32)):
            return a * 3 + b * 5
    a, b = (np.arange(64 * 64, dtype=np.int32).reshape(64, 64) + i for i in range(2))
    (kernel,) = pj.kernel(f).lower(a, b).compile().code.kernels.values()
    allocs = {s.name: s for s in kernel.body if isinstance(s, asm.Alloc)}
    addrs = [s.addr for s in allocs.values()]
    assert len(set(addrs)) < len(addrs)                  # a dead tile's space is reused
    assert all(addr % 32 == 0 for addr in addrs)
    (add,) = [s for s in kernel.body if isinstance(s, asm.Instr) and s.op == "tadd"]
    x, y = (allocs[o.name] for o in add.ins)             # a*3 and b*5 are live together at the add
    size = x.type.rows * x.type.cols * 4
    assert abs(x.addr - y.addr) >= size


def test_malformed_text_names_line_and_column():
    compiled, _ = _seed()
    lines = compiled.text.splitlines()
    n = next(i for i, line in enumerate(lines) if "pto.tadd" in line)
    bad = lines[n].replace("ins(", "ins[", 1)
    with pytest.raises(asm.PtoAsmError, match=rf"pto-as:{n + 1}:\d+: expected '\('"):
        asm.parse("\n".join(lines[:n] + [bad] + lines[n + 1:]))
    with pytest.raises(asm.PtoAsmError, match=r"pto-as:3:\d+: unknown operation 'pto\.frobnicate'"):
        asm.parse("// program x <AIV> id=0 grid=1\nfunc.func @x() {\n  %a = pto.frobnicate %b\n  return\n}\n")
    with pytest.raises(asm.PtoAsmError, match=r"pto-as:1:1: expected 'func\.func', found 'module'"):
        asm.parse("module {\n}")


def test_tiles_that_overflow_ub_at_codegen():
    args = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    low = pj.lower(seed_kernel, *args)
    with pytest.raises(pj.PtoCapacityError, match=r"program 'sum' \(AIV\) cannot place a 128-byte tile in UB: "
                                                   r"4096 of 4096 bytes are live"):
        compile_kernel(low, CoreMemory(ub=4096))


def test_cube_rejects_int8_times_fp16():
    compiled, _ = _seed()
    text = compiled.text.replace("loc=right, dtype=f16", "loc=right, dtype=i8")
    (parsed,) = [k for k in asm.parse(text) if k.name == "matmul"]
    with pytest.raises(asm.PtoAsmError, match=r"pto\.tmatmul cannot multiply f16 by i8 into f32; the cube takes "
                                              r"i8\*i8->i32"):
        isa.verify(parsed)


def test_a_plan_with_a_tile_outside_its_buffer_is_rejected():
    compiled, _ = _seed()
    kernel = compiled.kernels[("mul+add", (2, 2))]
    isa.verify(kernel, compiled.memory)                          # the plan codegen made fits
    body = tuple(dataclasses.replace(s, addr=196608 - 1024) if isinstance(s, asm.Alloc) else s for s in kernel.body)
    with pytest.raises(pj.PtoCapacityError, match=r"program 'mul\+add': %t\d+, a tile of 2048 bytes at address 195584, "
                                                  r"does not fit the 196608-byte vec buffer"):
        isa.verify(dataclasses.replace(kernel, body=body), compiled.memory)


def test_the_engine_rejects_a_view_that_is_not_its_tensor():
    compiled, args = _seed()
    key = ("sum", (2, 1))
    kernel = compiled.kernels[key]
    body = tuple(dataclasses.replace(s, shape=("%c32", "%c32")) if isinstance(s, asm.MakeView) and s.name == "%v0" else s
                 for s in kernel.body)
    broken = dataclasses.replace(compiled, kernels={**compiled.kernels, key: dataclasses.replace(kernel, body=body)})
    with pytest.raises(PtoTaskError, match=r"task \d+ 'sum\(0,0\)'.*pto engine: function 'sum' line \d+: shape \[32, 32\] "
                                           r"strides \[32, 1\] over a float32 pointer do not match"):
        execute(broken.lowering, *args, compiled=broken)


def test_unknown_instruction_is_rejected():
    compiled, _ = _seed()
    (parsed,) = [k for k in asm.parse(compiled.text.replace("pto.tadd ins", "pto.taddx ins")) if k.name == "mul+add"]
    with pytest.raises(pj.PtoUnsupportedError, match=r"unknown instruction 'pto\.taddx'"):
        isa.verify(parsed)


def test_int8_matmul_accumulates_exactly_in_int32():
    a = np.full((33, 640), 127, np.int8)
    b = np.full((640, 48), -128, np.int8)

    def kernel(a, b):
        with pj.tile(cube=(16, 64, 16)):
            return pj.ops.matmul(a, b)

    out, _ = execute(pj.lower(kernel, a, b), a, b)
    np.testing.assert_array_equal(out, np.full((33, 48), 127 * -128 * 640, np.int32))
