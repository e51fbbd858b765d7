"""The real-PTO-AS engine (``ptojax/ascend/engine.py``): instruction selection's text, parsed and run
block by block on NumPy GM arrays, against ``jax.jit`` of the same function."""
import dataclasses
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import PtoAsmError, PtoExecutionError, compile_kernel, engine

RNG = np.random.default_rng(0)


def tiled(fn, **tile):
    def g(*args):
        with pj.tile(**tile):
            return fn(*args)
    return g


def realized(fn, *args):
    """(lowering, compiled kernel, real PTO-AS module text) of ``fn``."""
    low = pj.lower(fn, *args)
    ak = compile_kernel(low)
    if hasattr(ak, "pto"):
        return low, ak, ak.pto()
    from ptojax.ascend import realize
    return low, ak, realize.module(list(ak.kernels.values()))


def func_name(program: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", program)


def run_single(fn, *args):
    """Run a one-program kernel over its grid; returns (GM outputs, jax.jit outputs)."""
    low, ak, text = realized(fn, *args)
    assert len(low.programs) == 1, [p.name for p in low.programs]
    ((program, _), kernel), = ak.kernels.items()
    module = engine.parse(text)
    func = module.function(func_name(program))
    expected = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    ptrs = [t for _, t in func.params]
    assert [t for _, t in kernel.params if t != "index"] == [f"!pto.ptr<{p.dtype}>" for p in ptrs]
    assert len(ptrs) == len(args) + len(expected)
    outs = [np.zeros(e.shape, e.dtype) for e in expected]
    engine.run_grid(module, func.name, [np.ascontiguousarray(a) for a in args] + outs, math.prod(kernel.grid))
    return outs, expected


def check(fn, *args):
    outs, expected = run_single(fn, *args)
    for got, want in zip(outs, expected):
        want = np.asarray(want)
        rtol = 1e-2 if want.dtype == np.float16 else 1e-5
        # atol: sums in another order (the cube's K loop vs XLA's dot) differ by ulps of the largest value
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=rtol,
                                   atol=rtol * float(np.abs(want).max()))


X = RNG.standard_normal((32, 64)).astype(np.float32)
Y = RNG.standard_normal((32, 64)).astype(np.float32)
A16 = RNG.standard_normal((64, 64)).astype(np.float16)
B16 = RNG.standard_normal((64, 32)).astype(np.float16)
BT16 = RNG.standard_normal((32, 64)).astype(np.float16)
BIAS = RNG.standard_normal(32).astype(np.float32)

CASES = {
    "add": (tiled(lambda x, y: x + y, vec=(16, 32)), X, Y),
    "row_sum": (tiled(lambda x: x.sum(axis=1), vec=(16, 64)), X),
    "layer_norm": (tiled(lambda x: pj.ops.layer_norm(x), vec=(16, 64)), X),
    "softmax": (tiled(lambda x: pj.ops.softmax(x), vec=(16, 64)), X),
    "compare_where": (tiled(lambda x, y: jnp.where(x > y, x, y * 2), vec=(16, 64)), X, Y),
    "cast_f16": (tiled(lambda x: x.astype(jnp.float16) * 2, vec=(16, 64)), X),
    "matmul_k_loop": (tiled(lambda a, b: pj.ops.matmul(a, b), cube=(32, 32, 32)), A16, B16),
    "matmul_dn_bias": (tiled(lambda a, b, c: pj.ops.matmul(a, b, transpose_b=True, bias=c), cube=(32, 32, 32)),
                       A16, BT16, BIAS),
    "matmul_f16_out": (tiled(lambda a, b: pj.ops.matmul(a, b, out_dtype=jnp.float16), cube=(32, 32, 32)),
                       A16, B16),
}


@pytest.mark.parametrize("name", list(CASES))
def test_single_program_matches_jax(name):
    fn, *args = CASES[name]
    check(fn, *args)


def test_parse_model():
    _, _, text = realized(*CASES["compare_where"])
    module = engine.parse(text)
    assert dict(module.attrs) == {"pto.target_arch": "a3"}
    func, = module.functions
    assert dict(func.attrs) == {"pto.kernel_kind": "vector"}
    assert all(isinstance(t, engine.PtrType) and t.dtype == "f32" for _, t in func.params)
    tcmp, = [s for s in func.body if isinstance(s, engine.Instr) and s.op == "tcmp"]
    assert dict(tcmp.attrs) == {"cmpMode": "gt"} and len(tcmp.ins) == 2
    assert isinstance(tcmp.out_types[0], engine.TileType) and tcmp.out_types[0].dtype == "i8"
    with pytest.raises(dataclasses.FrozenInstanceError):
        tcmp.op = "tadd"


def test_parse_constants_attributes_and_views():
    t16, t32 = (f"!pto.tile_buf<loc=vec, dtype={d}, rows=4, cols=4, v_row=4, v_col=4, blayout=row_major, "
                "slayout=none_box, fractal=512, pad=0>" for d in ("f16", "f32"))
    view = "!pto.tensor_view<4x4xf16>"
    text = f"""module attributes {{pto.target_arch = "a3"}} {{
  func.func @k(%arg0: !pto.ptr<f16>) attributes {{pto.kernel_kind = #pto.kernel_kind<vector>}} {{
    %a = arith.constant 0xFF800000 : f32
    %b = arith.constant 0x7C00 : f16
    %c = arith.constant true : i1
    %d = arith.constant -2 : i8
    %e = arith.constant 1.0e-05 : f32
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    %v = pto.make_tensor_view %arg0, shape = [%c4, %c4], strides = [%c1, %c4] {{layout = #pto.layout<dn>}} : {view}
    %t = pto.alloc_tile : {t16}
    %u = pto.alloc_tile : {t32}
    %p = pto.partition_view %v, offsets = [%c1, %c1], sizes = [%c1, %c1] : {view} -> !pto.partition_tensor_view<1x1xf16>
    pto.tcvt ins(%t {{rmode = #pto<round_mode RINT>, sat_mode = #pto<saturation_mode ON>}} : {t16}) outs(%u : {t32})
    return
  }}
}}
"""
    func, = engine.parse(text).functions
    consts = {s.result: s.value for s in func.body if isinstance(s, engine.Const)}
    assert consts["%a"] == -np.inf and consts["%b"] == np.inf and consts["%c"] is True
    assert consts["%d"] == -2 and consts["%e"] == 1e-5
    view, = [s for s in func.body if isinstance(s, engine.View) and s.op == "make_tensor_view"]
    assert dict(view.attrs) == {"layout": "dn"}
    cvt = func.body[-2]
    assert dict(cvt.attrs) == {"rmode": "RINT", "sat_mode": "ON"}
    engine.run(text, "k", [np.zeros((4, 4), np.float16)], 0)


def test_multi_function_module_by_name():
    """jax.nn.softmax lowers to four programs in one module; run them one by one, by name."""
    low, ak, text = realized(tiled(jax.nn.softmax, vec=(16, 64)), X)
    module = engine.parse(text)
    assert [f.name for f in module.functions] == [func_name(p.name) for p in low.programs]
    assert len(module.functions) == 4
    grid = {func_name(k[0]): math.prod(v.grid) for k, v in ak.kernels.items()}
    m, m2 = np.zeros(32, np.float32), np.zeros(32, np.float32)
    e, s, y = np.zeros_like(X), np.zeros(32, np.float32), np.zeros_like(X)
    engine.run_grid(module, "amax", [X, m], grid["amax"])
    engine.run_grid(module, "maximum", [m, m2], grid["maximum"])
    engine.run_grid(module, "sub_exp_sum", [X, m2, e, s], grid["sub_exp_sum"])
    engine.run_grid(module, "div", [e, s, y], grid["div"])
    np.testing.assert_allclose(m, X.max(axis=1), rtol=0)
    np.testing.assert_allclose(y, np.asarray(jax.nn.softmax(X)), rtol=1e-5, atol=1e-7)


def test_malformed_text_names_line_and_column():
    _, _, text = realized(*CASES["add"])
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if "pto.tload" in line)
    col = lines[i].index("outs(") + 1
    lines[i] = lines[i].replace("outs(", "outz(", 1)
    with pytest.raises(PtoAsmError, match=rf"pto-as:{i + 1}:{col}: expected 'outs'"):
        engine.parse("\n".join(lines))
    with pytest.raises(PtoAsmError, match=r"pto-as:3:7: unknown operation 'arith.frob'"):
        engine.parse("module {\n func.func @f() {\n %x = arith.frob %a : index\n return\n }\n}")


def test_window_outside_the_tensor_names_function_and_instruction():
    _, ak, text = realized(*CASES["add"])
    out = np.zeros_like(X)
    with pytest.raises(PtoExecutionError, match=r"function 'add' line \d+: window offsets \[32, 0\] sizes "
                                               r"\[16, 32\] fall outside the tensor \[32, 64\] in `%p\d+ = "
                                               r"pto.partition_view"):
        engine.run(text, "add", [X, Y, out], block_idx=4)       # the grid is 2 x 2


def test_execution_faults():
    _, _, text = realized(*CASES["add"])
    out = np.zeros_like(X)
    with pytest.raises(PtoExecutionError, match=r"argument %arg0: f32 pointer needs a C-contiguous f32 array"):
        engine.run(text, "add", [X.astype(np.float16), Y, out], 0)
    with pytest.raises(PtoExecutionError, match=r"no function 'nope' in the module \(has \['add'\]\)"):
        engine.run(text, "nope", [X, Y, out], 0)
    with pytest.raises(PtoExecutionError, match=r"function 'add' line \d+: no semantics for pto.tfrob in `pto.tfrob"):
        engine.run(text.replace("pto.tadd ", "pto.tfrob "), "add", [X, Y, out], 0)
    with pytest.raises(PtoExecutionError, match=r"function 'add' line \d+: GM float32 does not match the tile's "
                                               r"float16 in `pto.tload"):
        engine.run(text.replace("dtype=f32", "dtype=f16"), "add", [X, Y, out], 0)
    with pytest.raises(PtoExecutionError, match=r"window \[16, 32\] and valid region \[16, 16\] hold different"):
        engine.run(text.replace("v_col=32", "v_col=16"), "add", [X, Y, out], 0)
