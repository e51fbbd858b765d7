"""The catalogue of bad inputs across the stack: each is rejected with its ptojax error type and a
message that names the op and the offending values or limit, and no output is returned.

One parametrized table: ``(id, thunk, error type, message regex)``. A thunk performs the bad call and
returns whatever it produced; the test asserts the error and that nothing came back.
"""
import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from kernels import seed_kernel
from helpers import F16, rand
from ptojax.ascend import PtoAsmError, PtoExecutionError, asm, isa
from ptojax.ascend.program import AscendBackend, compile_kernel
from ptojax.ascend.targets import A3
from ptojax.execute import execute
from ptojax.lowering import CoreMemory
from ptojax.mpmd import (Machine, Plan, PtoTaskError, PtoTaskGraphError, Region, Task, TaskGraph, orchestrate,
                         run_threads, simulate)
from ptojax.mpmd.orchestrator import PtoOrchestrationError

O = pj.ops
S = jax.ShapeDtypeStruct
f32 = lambda *s: np.ones(s, np.float32)  # noqa: E731
f16 = lambda *s: np.ones(s, np.float16)  # noqa: E731
i8 = lambda *s: np.ones(s, np.int8)  # noqa: E731
i32 = lambda *s: np.ones(s, np.int32)  # noqa: E731
MACHINE = Machine((("AIC", 24), ("AIV", 48)), 6, 2e-6, 1e-6, 1.42e12, "a3")




SEED_ARGS = (rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1))
_SEED = {}


def _seed():
    if not _SEED:
        low = pj.lower(seed_kernel, *SEED_ARGS)
        _SEED["low"], _SEED["code"] = low, compile_kernel(low)
    return _SEED["low"], _SEED["code"]


def _tiled(fn, **tile):
    def kernel(*args):
        with pj.tile(**tile):
            return fn(*args)
    return kernel


def _lower(fn, *specs, **kw):
    return lambda: pj.lower(fn, *specs, **kw)


def _broken(key, replace):
    """The seed kernel's code with one program's body statements rewritten by ``replace``."""
    _, code = _seed()
    kernel = code.kernels[key]
    body = tuple(replace(s) for s in kernel.body)
    return dataclasses.replace(code, kernels={**code.kernels, key: dataclasses.replace(kernel, body=body)})


def _interpret(code):
    """Run broken code; the engine's PtoExecutionError surfaces as the cause of a PtoTaskError."""
    try:
        return execute(_seed()[0], *SEED_ARGS, compiled=code)
    except PtoTaskError as err:
        assert isinstance(err.__cause__, PtoExecutionError)
        raise err.__cause__ from None


def _bad_window(s):
    return dataclasses.replace(s, shape=("%c32", "%c32")) if isinstance(s, asm.MakeView) and s.name == "%v0" else s


def _pto_text(edit):
    _, code = _seed()
    return edit(code.text)


def _asm_line_error():
    lines = _pto_text(str.splitlines)
    n = next(i for i, line in enumerate(lines) if "pto.tadd" in line)
    return asm.parse("\n".join(lines[:n] + [lines[n].replace("ins(", "ins[", 1)] + lines[n + 1:]))


def _isa(text_edit, name):
    (parsed,) = [k for k in asm.parse(_pto_text(text_edit)) if k.name == name]
    return isa.verify(parsed)


def _cycle():
    a, b = Task(0, "a", "AIV", "", 1e-6, None), Task(1, "b", "AIV", "", 1e-6, None)
    graph = TaskGraph([a, b])
    a.preds, b.preds, a.succs, b.succs = [b], [a], [b], [a]
    return graph.validate()


def _ghost():
    a, b = Task(0, "a", "AIV", "", 1e-6, None), Task(1, "b", "AIV", "", 1e-6, None)
    graph = TaskGraph([a, b])
    a.preds = [Task(7, "ghost", "AIC", "", 1e-6, None)]
    return graph.validate()


def _failing_plan():
    def boom(_):
        raise FloatingPointError("injected")

    tasks = [Task(i, "work", "AIV", "L", 1e-6, lambda _: None, (), (Region(i, (0,), (1,)),), (i,)) for i in range(8)]
    tasks.append(Task(8, "bad", "AIC", "Faulty", 1e-6, boom, (Region(3, (0,), (1,)),), (Region(99, (0,), (1,)),), (0, 1)))
    tasks += [Task(9 + i, "after", "AIV", "", 1e-6, lambda _: None, (Region(99, (0,), (1,)),), ()) for i in range(3)]
    return Plan(TaskGraph(tasks), [], [], 1)


def _device_loop_bound():
    def kernel(x):
        with pj.tile(vec=(8, 64)):
            n = O.cast(O.sum(x[:1, :1], axis=(0, 1)), jnp.int32)
            return jax.lax.fori_loop(0, n, lambda i, c: c * 0.5 + x, x)
    x = f32(16, 64)
    low = pj.lower(kernel, x)            # orchestration only (no task runs): the host cannot read the bound
    backend = AscendBackend(compile_kernel(low), A3)
    return orchestrate(low.block.jaxpr, low.block.consts, [x], backend, execute=False)


def _compiled_seed():
    return pj.kernel(seed_kernel).lower(*SEED_ARGS).compile()


# (id, thunk, error, message regex)
CASES = [
    # ------------------------------------------------------------------ op shapes, dtypes, arguments
    ("matmul-k-mismatch", lambda: O.matmul(f16(8, 64), f16(32, 16)), pj.PtoShapeError,
     r"pto\.matmul: contracting dims differ: a \(8, 64\) gives K=64, b \(32, 16\) gives K=32"),
    ("matmul-rank-1", lambda: O.matmul(f16(64), f16(64, 16)), pj.PtoShapeError,
     r"pto\.matmul: operands need rank >= 2, got a \(64,\)"),
    ("matmul-int8-x-fp16", lambda: O.matmul(i8(8, 32), f16(32, 16)), pj.PtoDtypeError,
     r"pto\.matmul: a is int8\[8, 32\] but b is float16\[32, 16\]"),
    ("matmul-int32", lambda: O.matmul(i32(8, 8), i32(8, 8)), pj.PtoDtypeError,
     r"pto\.matmul: a has dtype int32 \(shape \(8, 8\)\); allowed: float32, float16, bfloat16, int8|"
     r"pto\.matmul: a has dtype int32"),
    ("matmul-out-dtype", lambda: O.matmul(f32(8, 8), f32(8, 8), out_dtype=jnp.float16), pj.PtoDtypeError,
     r"pto\.matmul: out_dtype float16 is not available for float32 operands; allowed: float32"),
    ("matmul-bias-dtype", lambda: O.matmul(f16(8, 8), f16(8, 8), bias=f16(8)), pj.PtoDtypeError,
     r"pto\.matmul: bias is float16; the float16 cube adds a float32 bias"),
    ("matmul-bias-shape", lambda: O.matmul(f16(8, 8), f16(8, 8), bias=f32(7)), pj.PtoShapeError,
     r"pto\.matmul: bias \(7,\) does not broadcast to the output \(8, 8\)"),
    ("add-no-broadcast", lambda: O.add(f32(3, 4), f32(5)), pj.PtoShapeError,
     r"pto\.add: shapes \(3, 4\), \(5,\) do not broadcast"),
    ("sub-mixed-dtypes", lambda: O.sub(f16(4), np.ones(4, jnp.bfloat16)), pj.PtoDtypeError,
     r"pto\.sub: operands must share one dtype, got float16\[4\], bfloat16\[4\]"),
    ("exp-of-int32", lambda: O.exp(i32(4)), pj.PtoDtypeError, r"pto\.exp: .*int32"),
    ("exp-of-uint8", lambda: O.exp(np.ones(3, np.uint8)), pj.PtoDtypeError,
     r"pto\.exp: operand of dtype uint8 \(shape \(3,\)\) is not supported"),
    ("complex-input", lambda: O.relu(np.ones(3, np.complex64)), pj.PtoDtypeError,
     r"pto\.relu: operand of dtype complex64 \(shape \(3,\)\) is not supported"),
    ("float-scalar-int-tensor", lambda: O.mul(i8(4), 0.5), pj.PtoDtypeError,
     r"pto\.mul: float scalar 0\.5 cannot combine with a int8 tensor"),
    ("nan-scalar-int-tensor", lambda: O.add(i32(4), float("nan")), pj.PtoDtypeError,
     r"pto\.add: float scalar nan cannot combine with a int32 tensor"),
    ("int-scalar-overflows-int8", lambda: O.add(i8(4), 300), pj.PtoArgumentError,
     r"pto\.add: scalar 300 does not fit int8 \[-128, 127\]"),
    ("scalars-only", lambda: O.add(1.0, 2.0), pj.PtoArgumentError, r"pto\.add: needs at least one tensor operand"),
    ("wrong-operand-count", lambda: O.mul(f32(2), f32(2), f32(2)), pj.PtoArgumentError, r"pto\.mul: takes 2 operands, got 3"),
    ("sum-axis-out-of-range", lambda: O.sum(f32(3, 4), axis=2), pj.PtoArgumentError,
     r"pto\.sum: axis 2 is out of range for a rank-2 operand"),
    ("sum-repeated-axis", lambda: O.sum(f32(3, 4), axis=(1, -1)), pj.PtoArgumentError, r"pto\.sum: repeated axis in \(1, -1\)"),
    ("argmax-empty-axis", lambda: O.argmax(f32(0, 4), axis=0), pj.PtoShapeError,
     r"pto\.argmax: cannot reduce the empty axis 0 of \(0, 4\)"),
    ("amax-empty-axis", lambda: O.amax(f32(3, 0), axis=1), pj.PtoShapeError, r"pto\.amax: .*empty.*\(3, 0\)"),
    ("gather-empty-axis", lambda: O.gather(f32(0, 4), i32(2), 0), pj.PtoShapeError,
     r"pto\.gather: cannot select from the empty axis 0 of \(0, 4\)"),
    ("gather-float-indices", lambda: O.gather(f32(5, 4), f32(2), 0), pj.PtoDtypeError,
     r"pto\.gather: indices has dtype float32 \(shape \(2,\)\); allowed: int32"),
    ("reshape-count", lambda: O.reshape(f32(3, 4), (5, 2)), pj.PtoShapeError,
     r"pto\.reshape: cannot reshape \(3, 4\) \(12 elements\) to \(5, 2\) \(10 elements\)"),
    ("reshape-two-minus-one", lambda: O.reshape(f32(3, 4), (-1, -1)), pj.PtoArgumentError,
     r"pto\.reshape: shape \(-1, -1\) may hold one -1"),
    ("permute-not-a-permutation", lambda: O.permute(f32(2, 3, 4), (0, 0, 1)), pj.PtoArgumentError,
     r"pto\.permute: dims \(0, 0, 1\) is not a permutation of the 3 axes"),
    ("transpose-rank-1", lambda: O.transpose(f32(5)), pj.PtoShapeError, r"pto\.transpose: needs rank >= 2, got shape \(5,\)"),
    ("expand-incompatible", lambda: O.expand(f32(3, 4), (3, 5)), pj.PtoShapeError, r"pto\.expand: .*\(3, 4\).*\(3, 5\)"),
    ("concat-ranks-differ", lambda: O.concat([f32(3, 4), f32(4)]), pj.PtoShapeError, r"pto\.concat: ranks differ"),
    ("concat-nothing", lambda: O.concat([]), pj.PtoArgumentError, r"pto\.concat: needs at least one tensor"),
    ("concat-mismatch", lambda: O.concat([f32(3, 4), f32(3, 5)], axis=0), pj.PtoShapeError,
     r"pto\.concat: shapes \[\(3, 4\), \(3, 5\)\] differ outside axis 0"),
    ("view-out-of-bounds", lambda: O.view(f32(8, 8), (4, 4), (6, 0)), pj.PtoShapeError,
     r"pto\.view: window dim 0: offset 6, valid 4, size 4 .* offset \+ valid <= 8"),
    ("pad-negative", lambda: O.pad(f32(4), [(-1, 2)]), pj.PtoArgumentError, r"pto\.pad: pads \(\(-1, 2\),\) must be non-negative"),
    ("pad-nan-into-int", lambda: O.pad(i32(4), [(1, 1)], float("nan")), pj.PtoArgumentError,
     r"pto\.pad: float pad value nan for a int32 tensor"),
    ("cast-to-uint16", lambda: O.cast(f32(4), np.uint16), pj.PtoDtypeError, r"pto\.cast: dtype uint16 is not supported"),
    ("cast-bad-rounding", lambda: O.cast(f32(4), jnp.int8, rounding="stochastic"), pj.PtoArgumentError,
     r"pto\.cast: rounding 'stochastic' is not one of"),
    ("topk-k-zero", lambda: O.topk(f32(8), 0), pj.PtoArgumentError, r"pto\.topk: k must be a positive int, got 0"),
    ("topk-k-inf", lambda: O.topk(f32(8), float("inf")), pj.PtoArgumentError, r"pto\.topk: k must be a positive int, got inf"),
    ("rms-norm-nan-eps", lambda: O.rms_norm(f32(4, 8), eps=float("nan")), pj.PtoArgumentError,
     r"pto\.rms_norm: eps must be a non-negative number, got nan"),
    ("where-cond-not-bool", lambda: O.where(f32(4), f32(4), f32(4)), pj.PtoDtypeError, r"pto\.where: .*float32"),
    # ------------------------------------------------------------------------------------- pj.tile
    ("tile-nothing", lambda: pj.tile().__enter__(), pj.PtoArgumentError, r"pj\.tile: give vec=\(\.\.\.\), cube=\(m, k, n\)"),
    ("tile-zero", lambda: pj.tile(vec=(0, 32)).__enter__(), pj.PtoArgumentError, r"pj\.tile: vec tile \(0, 32\) must be positive ints"),
    ("tile-nan", lambda: pj.tile(vec=(float("nan"), 32)).__enter__(), pj.PtoArgumentError,
     r"pj\.tile: vec tile must be a tuple of ints, got \(nan, 32\)"),
    ("tile-inf", lambda: pj.tile(vec=(float("inf"), 32)).__enter__(), pj.PtoArgumentError,
     r"pj\.tile: vec tile must be a tuple of ints, got \(inf, 32\)"),
    ("tile-bool", lambda: pj.tile(vec=(True, 32)).__enter__(), pj.PtoArgumentError,
     r"pj\.tile: vec tile must be a tuple of ints, got \(True, 32\)"),
    ("tile-str", lambda: pj.tile(vec=("16", 32)).__enter__(), pj.PtoArgumentError,
     r"pj\.tile: vec tile must be a tuple of ints, got \('16', 32\)"),
    ("tile-float", lambda: pj.tile(vec=(16.0, 32)).__enter__(), pj.PtoArgumentError,
     r"pj\.tile: vec tile must be a tuple of ints, got \(16\.0, 32\)"),
    ("tile-six-dims", lambda: pj.tile(vec=(1, 1, 1, 1, 1, 8)).__enter__(), pj.PtoArgumentError, r"has 6 dims; at most 5"),
    ("tile-too-wide", lambda: pj.tile(vec=(1, 8192)).__enter__(), pj.PtoArgumentError,
     r"pj\.tile: vec tile \(1, 8192\) has a last dim of 8192 columns; a tile row holds at most 4095"),
    ("tile-too-tall", lambda: pj.tile(vec=(3, 4096, 8)).__enter__(), pj.PtoArgumentError,
     r"pj\.tile: vec tile \(3, 4096, 8\) has 12288 rows \(its leading dims multiplied\); a tile holds at most 8192"),
    ("cube-two-dims", lambda: pj.tile(cube=(16, 16)).__enter__(), pj.PtoArgumentError, r"pj\.tile: cube tile \(16, 16\) must be 3 positive ints"),
    ("cube-not-fractal", lambda: pj.tile(cube=(64, 40, 32)).__enter__(), pj.PtoArgumentError,
     r"cube tile \(m=64, k=40, n=32\) must be multiples of the 16x16x16 fractal"),
    ("cube-oversize", lambda: pj.tile(cube=(256, 256, 256)).__enter__(), pj.PtoCapacityError,
     r"needs 262144 bytes of L0C even for int8 operands; L0C holds 131072 bytes"),
    # ------------------------------------------------------------------------------------ lowering
    ("vec-misaligned", _lower(_tiled(lambda x: x * 2, vec=(32, 8)), S((64, 64), jnp.float16)), pj.PtoArgumentError,
     r"pto\.mul: vec tile \(32, 8\) has a last dim of 8 x 2 bytes \(float16\) = 16 bytes; it must be a multiple of 32"),
    ("vec-misaligned-int8-cast", _lower(_tiled(lambda x: O.cast(x, jnp.int8), vec=(8, 16)), S((16, 64), jnp.float32)),
     pj.PtoArgumentError, r"pto\.cast: vec tile \(8, 16\) has a last dim of 16 x 1 bytes \(int8\) = 16 bytes"),
    ("cube-l0a-overflow", _lower(_tiled(O.matmul, cube=(256, 256, 64)), S((256, 512), jnp.float16), S((512, 64), jnp.float16)),
     pj.PtoCapacityError, r"block 'matmul' \(AIC\) needs 131072 bytes of L0A at its peak; L0A holds 65536 bytes"),
    ("ub-overflow-whole-axis", _lower(_tiled(lambda x: jnp.sort(x, -1), vec=(8, 64)), S((64, 65536), jnp.float32)),
     pj.PtoCapacityError, r"pto\.sort.*: a float32 row of 65536 columns \(shape \(64, 65536\)\) is longer than the "
                          r"8192 columns one tile sorts \(a row's sort keeps it whole in the UB, whatever the vec tile\)"),
    ("ub-overflow-sort-rows", _lower(_tiled(lambda x: jnp.sort(x, -1), vec=(64, 1024)), S((256, 1024), jnp.float32)),
     pj.PtoCapacityError, r"block 'sort' \(AIV\) needs 786432 bytes of UB.*its sort keeps its rows whole: only fewer "
                          r"rows per tile help \(at most about 16\)"),
    ("unsupported-primitive", _lower(jax.lax.lgamma, S((8, 8), jnp.float32)), pj.PtoUnsupportedError,
     r"primitive 'lgamma' has no ptojax translation"),
    ("unsupported-nextafter", _lower(lambda x: jnp.nextafter(x, 0.0), S((8,), jnp.float32)), pj.PtoUnsupportedError,
     r"primitive 'nextafter' has no ptojax translation"),
    ("unknown-pass-option", _lower(lambda x: x * 2, S((8, 8), jnp.float32), options={"l1_reuse": 2}), pj.PtoArgumentError,
     r"unknown pass options"),
    ("unknown-level", lambda: _seed()[0].level("pto-bin"), pj.PtoArgumentError, r"level 'pto-bin' is not one of"),
    ("unknown-text-level", lambda: _seed()[0].as_text("llvm"), pj.PtoArgumentError, r"no text for level 'llvm'"),
    ("evaluate-wrong-args", lambda: _seed()[0].evaluate("tile", *SEED_ARGS[:2]), pj.PtoArgumentError,
     r"pto lowering: arguments .* do not match the lowered signature"),
    ("verify-wrong-level", lambda: type(_seed()[0])(*[getattr(_seed()[0], f) for f in ("traced", "tensor", "tile")],
                                                    jax.make_jaxpr(lambda a, b, w: seed_kernel(a, b, w) + 1.0)(*SEED_ARGS),
                                                    _seed()[0].programs, _seed()[0].in_tree, _seed()[0].out_tree
                                                    ).verify(*SEED_ARGS),
     pj.PtoVerifyError, r"pto verify: level 'block' output 0 \(float32\[64\]\) differs from the level before"),
    # ----------------------------------------------------------------------------------- codegen
    ("codegen-ub-overflow", lambda: compile_kernel(_seed()[0], CoreMemory(ub=4096)), pj.PtoCapacityError,
     r"program 'sum' \(AIV\) cannot place a 128-byte tile in UB: 4096 of 4096 bytes are live"),
    ("asm-bad-token", _asm_line_error, PtoAsmError, r"pto-as:\d+:\d+: expected '\('"),
    ("asm-unknown-op", lambda: asm.parse("// program x <AIV> id=0 grid=1\nfunc.func @x() {\n  %a = pto.frobnicate %b\n"
                                         "  return\n}\n"), PtoAsmError, r"pto-as:3:\d+: unknown operation 'pto\.frobnicate'"),
    ("asm-module", lambda: asm.parse("module {\n}"), PtoAsmError, r"pto-as:1:1: expected 'func\.func', found 'module'"),
    ("asm-no-header", lambda: asm.parse("func.func @x() {\n  return\n}\n"), PtoAsmError,
     r"pto-as:1:1: 'func\.func' without a '// program' header"),
    ("isa-int8-times-fp16", lambda: _isa(lambda t: t.replace("loc=right, dtype=f16", "loc=right, dtype=i8"), "matmul"),
     PtoAsmError, r"pto\.tmatmul cannot multiply f16 by i8 into f32; the cube takes i8\*i8->i32"),
    ("isa-unknown-instruction", lambda: _isa(lambda t: t.replace("pto.tadd ins", "pto.taddx ins"), "mul+add"),
     pj.PtoUnsupportedError, r"unknown instruction 'pto\.taddx'"),
    ("plan-tile-outside-buffer",
     lambda: isa.verify(_broken(("mul+add", (2, 2)), lambda s: dataclasses.replace(s, addr=196608 - 1024)
                                if isinstance(s, asm.Alloc) else s).kernels[("mul+add", (2, 2))], _seed()[1].memory),
     pj.PtoCapacityError, r"program 'mul\+add': %t\d+, a tile of 2048 bytes at address 195584, does not fit the "
                          r"196608-byte vec buffer"),
    ("engine-window-outside-view", lambda: _interpret(_broken(("sum", (2, 1)), _bad_window)),
     PtoExecutionError, r"pto engine: function 'sum' line \d+: shape \[32, 32\] strides \[32, 1\] over a float32 "
                        r"pointer do not match"),
    # ------------------------------------------------------------------------------------ pj.kernel
    ("kernel-backend", lambda: pj.kernel(seed_kernel, backend="gpu"), pj.PtoArgumentError, r"backend 'gpu' is not one of"),
    ("kernel-target", lambda: pj.kernel(seed_kernel, target="a9"), pj.PtoArgumentError,
     r"unknown Ascend target .a9.; known targets: a2, a3"),
    ("kernel-executor", lambda: pj.kernel(seed_kernel, executor="gpu"), pj.PtoArgumentError, r"executor 'gpu' is not one of"),
    ("compiled-other-shapes", lambda: _compiled_seed()(SEED_ARGS[0][:32], *SEED_ARGS[1:]), pj.PtoArgumentError,
     r"argument 0 'a' is float16\[32, 64\], compiled for float16\[64, 64\]; call the kernel object itself"),
    ("compiled-other-dtypes", lambda: _compiled_seed()(*[a.astype(np.float32) for a in SEED_ARGS]), pj.PtoArgumentError,
     r"argument 0 'a' is float32\[64, 64\], compiled for float16\[64, 64\]; argument 1 'b' is float32\[64, 64\], "
     r"compiled for float16\[64, 64\]; argument 2 'w' is float32\[64, 32\], compiled for float16\[64, 32\]"),
    ("compiled-too-few-args", lambda: _compiled_seed()(*SEED_ARGS[:2]), pj.PtoArgumentError,
     r"called with 2 arguments \(float16\[64, 64\], float16\[64, 64\]\), compiled for 3: \(a: float16\[64, 64\], "
     r"b: float16\[64, 64\], w: float16\[64, 32\]\)"),
    ("compiled-too-many-args", lambda: _compiled_seed()(*SEED_ARGS, SEED_ARGS[0]), pj.PtoArgumentError,
     r"called with 4 arguments .*, compiled for 3"),
    ("run-other-shapes", lambda: _compiled_seed().run(SEED_ARGS[0][:32], *SEED_ARGS[1:]), pj.PtoArgumentError,
     r"argument 0 'a' is float16\[32, 64\]"),
    ("grad-of-kernel", lambda: jax.grad(lambda x: pj.kernel(lambda x: x * 2)(x).sum())(f32(8, 8)), pj.PtoUnsupportedError,
     r"has no automatic derivative: wrap forward and backward kernels in jax.custom_vjp"),
    ("execute-executor", lambda: execute(_seed()[0], *SEED_ARGS, executor="gpu"), pj.PtoArgumentError,
     r"executor 'gpu' is not 'simulated' or 'threads'"),
    ("execute-wrong-args", lambda: execute(_seed()[0], *SEED_ARGS[:2]), pj.PtoArgumentError,
     r"pto run: arguments .* do not match the lowered signature"),
    ("execute-wrong-shapes", lambda: execute(_seed()[0], SEED_ARGS[0][:, :32], *SEED_ARGS[1:]), pj.PtoArgumentError,
     r"pto run: argument 0 is float16\[64, 32\], lowered for float16\[64, 64\]"),
    ("evaluate-wrong-shapes", lambda: _seed()[0].evaluate("block", *SEED_ARGS[:2], SEED_ARGS[2][:8]),
     pj.PtoArgumentError, r"pto lowering: argument 2 is float16\[8, 32\], lowered for float16\[64, 32\]"),
    ("verify-wrong-dtype", lambda: _seed()[0].verify(SEED_ARGS[0].astype(np.float32), *SEED_ARGS[1:]),
     pj.PtoArgumentError, r"argument 0 is float32\[64, 64\], lowered for float16\[64, 64\]"),
    ("tiles-per-block-unknown-label", lambda: pj.lower(seed_kernel, *SEED_ARGS, options={"tiles_per_block": {"Sacle": 2}}),
     pj.PtoArgumentError, r"tiles_per_block options for \['Sacle'\] match no op's label; the labels in this kernel"),
    ("tile-override-of-the-wrong-kind", lambda: pj.lower(seed_kernel, *SEED_ARGS, options={"tiles": {"Linear": {
        "vec": (32, 32)}}}), pj.PtoArgumentError, r"the tile override for 'Linear' sets vec, but its ops take cube tiles"),
    ("row-loops-unknown-label", lambda: pj.lower(seed_kernel, *SEED_ARGS, options={"row_loops": {"Rowsm": False}}),
     pj.PtoArgumentError, r"row_loops options for \['Rowsm'\] match no op's label"),
    ("options-not-a-mapping", lambda: pj.kernel(seed_kernel, options=[("tiles", {})]), pj.PtoArgumentError,
     r"options must be a mapping of pass options"),
    ("tiles-not-a-mapping", lambda: pj.lower(seed_kernel, *SEED_ARGS, options={"tiles": {"DEFAULT": [64, 64]}}),
     pj.PtoArgumentError, r"tiles\['DEFAULT'\] takes a mapping of 'vec' and/or 'cube' tiles, got \[64, 64\]"),
    ("ptoas-arch", lambda: _seed()[1].pto(arch="A3"), pj.PtoArgumentError,
     r"arch must be 'a3' \(A2/A3, also 'a2'\) or 'a5', got 'A3'"),
    ("kernel-zero-size-max", lambda: pj.kernel(lambda x: pj.ops.amax(x, -1))(f32(4, 0)), pj.PtoShapeError,
     r"amax.*\(4, 0\)"),
    ("polymorphic-constraint-malformed", lambda: pj.kernel(lambda x: x * 2, polymorphic_shapes=("m, 8",),
                                                           polymorphic_constraints=("m >=",))(f32(4, 8)),
     pj.PtoArgumentError, r"polymorphic constraint 'm >=' is not '<expr> >= <expr>' \(or <=, ==\)"),
    ("polymorphic-constraint-unknown", lambda: pj.kernel(lambda x: x * 2, polymorphic_shapes=("m, 8",),
                                                         polymorphic_constraints=("n >= 2",))(f32(4, 8)),
     pj.PtoArgumentError, r"polymorphic constraint 'n >= 2' names n, not a symbol of the polymorphic shapes \('m, 8'\)"),
    ("polymorphic-profile-m-negative", lambda: pj.kernel(lambda x: x * 2, polymorphic_shapes=("m, 8",)).compiled_for(
        f32(4, 8)).profile(m=-3), pj.PtoArgumentError, r"profile\(m=-3\): m is a row count, an int >= 1"),
    ("polymorphic-profile-m-float", lambda: pj.kernel(lambda x: x * 2, polymorphic_shapes=("m, 8",)).compiled_for(
        f32(4, 8)).profile(m=2.5), pj.PtoArgumentError, r"profile\(m=2\.5\): m is a row count"),
    ("kernel-traced-axis", lambda: pj.kernel(lambda x, axis: jnp.sum(x, axis=axis))(f32(4, 8), 1), pj.PtoArgumentError,
     r"tracing needs the value of a traced argument from argument 1 'axis' \(ConcretizationTypeError: The axis "
     r"argument must be known statically\.\); a kernel's arguments are traced as under jax\.jit: .*functools\.partial"),
    ("kernel-traced-branch", lambda: pj.kernel(lambda x, n: x * 2 if n > 0 else x)(f32(4, 8), 1), pj.PtoArgumentError,
     r"from argument 1 'n' \(TracerBoolConversionError\); a kernel's arguments are traced"),
    ("kernel-realize-ub-names-label", lambda: pj.kernel(_labelled_column_sort).lower(
        jax.ShapeDtypeStruct((64, 256), jnp.bfloat16)), pj.PtoCapacityError,
     r"pto realize: function @sort \(label 'Act'\) needs 212992 bytes of UB .* UB holds 196608 bytes — .*fewer "
     r"columns for one along a leading axis"),
    ("kernel-traced-shape", lambda: pj.kernel(lambda x, n: x + jnp.zeros((n,)))(f32(4, 8), 8), pj.PtoArgumentError,
     r"from argument 1 'n' \(TypeError: Shapes must be 1D sequences of concrete values of integer type, got "
     r"\(a traced value,\)\.\); a kernel's arguments are traced as under jax\.jit"),
    ("kernel-traced-slice-bound", lambda: pj.kernel(lambda x, n: x[:n])(f32(4, 8), 2), pj.PtoArgumentError,
     r"tracing needs the value of a traced argument \(IndexError: Slice entries must be static integers"),
    ("donate-argnums-outside", lambda: pj.kernel(lambda x: x * 2, donate_argnums=3)(f32(4, 8)), pj.PtoArgumentError,
     r"donate_argnums \[3\] name no argument of the 1 given"),
    ("polymorphic-spec-rank", lambda: pj.kernel(lambda x: x * 2, polymorphic_shapes=("m, 8, 3",))(f32(4, 8)),
     pj.PtoArgumentError, r"polymorphic shape 'm, 8, 3' has 3 dims for argument 0 of shape \[4, 8\]"),
    ("vmap-batched-loop-bound", lambda: jax.vmap(pj.kernel(lambda a, n: jax.lax.fori_loop(0, n, lambda i, c: c + a, a)),
                                                 in_axes=(None, 0))(f32(8, 8), np.array([1, 3], np.int32)),
     pj.PtoUnsupportedError, r"a while / fori_loop whose condition is \(2,\) values \(a loop bound batched by jax.vmap\)"),
    # ------------------------------------------------------------------------------------ runtime
    ("graph-cycle", _cycle, PtoTaskGraphError, r"pto runtime: the task graph has a cycle; stuck: "),
    ("graph-missing-task", _ghost, PtoTaskGraphError, r"task 0 'a\(\)' on AIV waits on task 7 'ghost\(\)' on AIC, which is not in the graph"),
    ("unknown-core-kind", lambda: simulate(Plan(TaskGraph([Task(0, "x", "GPU", "", 1e-6, None)]), [], [], 1), MACHINE),
     pj.PtoArgumentError, r"needs a GPU core"),
    ("failing-task-simulated", lambda: simulate(_failing_plan(), MACHINE), PtoTaskError,
     r"task 8 'bad\(0,1\)' label 'Faulty' on AIC \(core .*\) failed: FloatingPointError: injected"),
    ("failing-task-threads", lambda: run_threads(_failing_plan(), MACHINE, workers=4), PtoTaskError,
     r"task 8 'bad\(0,1\)' label 'Faulty' on AIC \(core .*\) failed: FloatingPointError: injected"),
    ("failing-kernel-task", lambda: execute(_seed()[0], *SEED_ARGS, compiled=_broken(("sum", (2, 1)), _bad_window),
                                            executor="threads"),
     PtoTaskError, r"task \d+ 'sum\(\d,0\)' on AIV .* do not match ViewType"),
    ("device-loop-bound-unexecuted", _device_loop_bound, PtoOrchestrationError,
     r"pto runtime: .*depends on device data .*compute=False"),
]


def _labelled_column_sort(x):
    """A sort along the rows' axis (of each column, whole): its work tiles overfill the UB (a sort along a
    leading axis is not run in pieces)."""
    with pj.tile(vec=(64, 128)), jax.named_scope("Act"):
        return jnp.sort(x, 0)


@pytest.mark.parametrize("name,thunk,error,message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_rejected(name, thunk, error, message):
    assert issubclass(error, pj.PtoError)
    result = None
    start = time.perf_counter()
    with pytest.raises(error, match=message):
        result = thunk()
    assert result is None                                   # no output came back
    assert time.perf_counter() - start < 60                 # and it did not hang


def test_the_catalogue_is_broad():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)
    assert len({c[2] for c in CASES}) >= 11                 # every error type of the stack


def test_ops_with_empty_results_compute_nothing():
    """An op whose results have no element makes no task (it raised 'zero-size operand or result'):
    the empty arrays jnp gives, on the sim and xla backends."""
    for backend in ("sim", "xla"):
        y = pj.nn.dense(f32(0, 32), f32(32, 8), backend=backend)
        assert (y.shape, y.dtype) == ((0, 8), np.float32)
        y = pj.kernel(jnp.exp, backend=backend)(f32(4, 0))
        assert (y.shape, y.dtype) == ((4, 0), np.float32)


def test_ops_over_no_element_give_their_identity():
    """A sum or product over an empty axis and a K = 0 matmul have elements to give (0, 1, the bias):
    the backward of pj.nn.dense on an empty batch (dw = xᵀ g over no row) raised 'zero-size operand'."""
    x, w, bias = f32(0, 8), f32(8, 4), np.arange(4, dtype=np.float32) - 1.5
    for backend in ("sim", "xla"):
        np.testing.assert_array_equal(np.asarray(pj.kernel(lambda a: (jnp.sum(a, 0), jnp.prod(a, 0)), backend=backend)(
            x)), np.stack([np.zeros(8, np.float32), np.ones(8, np.float32)]))
        k0 = pj.kernel(lambda a, b, c: pj.ops.matmul(a, b, bias=c), backend=backend)(f32(3, 0), f32(0, 4), bias)
        np.testing.assert_array_equal(np.asarray(k0), np.broadcast_to(bias, (3, 4)))
        dw = jax.grad(lambda w: jnp.sum(pj.nn.dense(x, w, backend=backend)))(w)
        np.testing.assert_array_equal(np.asarray(dw), np.zeros((8, 4), np.float32))
    g = np.ones(8, np.float32)
    for norm in (lambda g: pj.nn.rms_norm(x, g), lambda g: pj.nn.layer_norm(x, g, None)):
        np.testing.assert_array_equal(np.asarray(jax.grad(lambda g: jnp.sum(norm(g)))(g)), np.zeros(8, np.float32))
