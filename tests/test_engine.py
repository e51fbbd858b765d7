"""The real-PTO-AS engine (``ptojax/ascend/engine.py``): instruction selection's text, parsed and run
block by block on NumPy GM arrays, against ``jax.jit`` of the same function."""
import dataclasses
import math
import os
import re
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import PtoAsmError, PtoExecutionError, compile_kernel, cpusim, engine
from vendor_tools import needed as needs_vendor

RNG = np.random.default_rng(0)
PTOAS = os.environ.get("PTOAS", "/work/shared/tools/ptoas/bin/ptoas")


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


def test_instructions_run_on_numpy_or_jitted_with_the_bits_of_the_eager_semantics(monkeypatch):
    """Each instruction's semantics is traced once per mnemonic, attributes and shapes (vmapped over
    the points): run on NumPy where every operation of it is exact there, else as one jitted call;
    the sums, extrema, the 16-bit matmuls and the double-rounded ``texp``/``trsqrt`` run their NumPy forms
    (``tile_semantics.ON_NUMPY``) — all with the same bits as the semantics run operation by
    operation, point by point."""
    names = ("softmax", "layer_norm", "cast_f16", "compare_where", "matmul_dn_bias")
    fast = {name: run_single(CASES[name][0], *CASES[name][1:])[0] for name in names}
    kinds = {key[0]: kind for key, (kind, _) in engine._VPLANS.items()}
    assert kinds["tmul"] == kinds["trowexpanddiv"] == kinds["tcvt"] == "numpy", kinds
    assert not {"trowsum", "trowmax", "tmatmul.bias", "texp", "trsqrt"} & set(kinds), kinds    # ON_NUMPY
    pj.kernel(lambda x: pj.ops.topk(x, 4))(RNG.standard_normal((8, 64)).astype(np.float32))
    assert {key[0]: kind for key, (kind, _) in engine._VPLANS.items()}["tsort32"] == "jit"
    src = np.sort(RNG.standard_normal((1, 256)).astype(np.float32))[:, ::-1].copy()   # an operand that fixes
    spec = jax.ShapeDtypeStruct(src.shape, src.dtype)                                # shapes: jitted per value
    for block in (np.asarray(64, np.int64), np.asarray(32, np.int64)):
        merged = engine._apply("tmrgsort", engine.SEMANTICS["tmrgsort"], [src, block], spec, ())
        np.testing.assert_array_equal(merged, engine.SEMANTICS["tmrgsort"](src, block, out=spec))
    assert engine._PLANS["tmrgsort", (), spec, (((1, 256), src.dtype), ((), block.dtype)), False][0] == "static"
    monkeypatch.setattr(engine, "_apply", lambda op, fn, args, out, attrs: fn(*args, out=out, **dict(attrs)))
    monkeypatch.setattr(engine, "_vplanned", lambda *form: ("points", None))      # each point eagerly
    for name in names:
        eager, _ = run_single(CASES[name][0], *CASES[name][1:])
        for got, want in zip(fast[name], eager):
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=name)


def test_parse_model():
    _, _, text = realized(*CASES["compare_where"])
    module = engine.parse(text)
    assert dict(module.attrs) == {"pto.target_arch": "a3"}
    func, = module.functions
    assert dict(func.attrs) == {"pto.kernel_kind": "vector"}
    assert all(isinstance(t, engine.PtrType) and t.dtype == "f32" for _, t in func.params)
    tcmp, = [s for s in func.body if isinstance(s, engine.Instr) and s.op == "tcmp"]
    assert dict(tcmp.attrs) == {"cmpMode": "gt"} and len(tcmp.ins) == 2
    assert isinstance(tcmp.out_types[0], engine.TileType) and tcmp.out_types[0].dtype == "ui8"
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


def _softmax_by_labels(x):
    """A softmax whose labels ask for three programs (GM between them, where a label says so)."""
    with jax.named_scope("Max"):
        m = jnp.max(x, axis=1, keepdims=True)
    with jax.named_scope("Exp"):
        e = jnp.exp(x - m)
        s = jnp.sum(e, axis=1, keepdims=True)
    with jax.named_scope("Div"):
        return e / s


def test_multi_function_module_by_name():
    """A softmax staged by labels lowers to three programs in one module; run them one by one, by name."""
    low, ak, text = realized(tiled(_softmax_by_labels, vec=(16, 64)), X)
    module = engine.parse(text)
    assert [f.name for f in module.functions] == [func_name(p.name) for p in low.programs]
    assert len(module.functions) == 3
    grid = {func_name(k[0]): math.prod(v.grid) for k, v in ak.kernels.items()}
    m, e, s, y = np.zeros((32, 1), np.float32), np.zeros_like(X), np.zeros((32, 1), np.float32), np.zeros_like(X)
    engine.run_grid(module, "amax", [X, m], grid["amax"])
    engine.run_grid(module, "sub_exp_sum", [X, m, e, s], grid["sub_exp_sum"])
    engine.run_grid(module, "div", [e, s, y], grid["div"])
    np.testing.assert_allclose(m[:, 0], X.max(axis=1), rtol=0)
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


# ------------------------------------------------------------ statements of the row and sort rules
def T(dtype, rows, cols, v_row=None, v_col=None):
    """A row-major vec tile type's text (valid = whole unless given; ``"?"`` allowed)."""
    v_row, v_col = rows if v_row is None else v_row, cols if v_col is None else v_col
    return (f"!pto.tile_buf<loc=vec, dtype={dtype}, rows={rows}, cols={cols}, v_row={v_row}, v_col={v_col}, "
            "blayout=row_major, slayout=none_box, fractal=512, pad=0>")


def program(params, lines):
    """A one-function module ``k`` with index constants ``%c0 .. %c64`` predefined."""
    consts = [f"%c{n} = arith.constant {n} : index" for n in (0, 1, 2, 3, 4, 5, 8, 12, 16, 64)]
    body = "\n".join("    " + line for line in consts + lines.strip().splitlines())
    return (f'module attributes {{pto.target_arch = "a3"}} {{\n  func.func @k({params}) attributes '
            f"{{pto.kernel_kind = #pto.kernel_kind<vector>}} {{\n{body}\n    return\n  }}\n}}\n")


def line_of(text, needle):
    return next(i + 1 for i, line in enumerate(text.splitlines()) if needle in line)


def gm_io(name, dtype, shape):
    """make_tensor_view + a whole partition_view of a row-major GM tensor (1-D or 2-D)."""
    dims = ", ".join(f"%c{d}" for d in shape)
    strides = "%c1" if len(shape) == 1 else f"%c{shape[1]}, %c1"
    zeros = ", ".join("%c0" for _ in shape)
    t = "x".join(map(str, shape)) + "x" + dtype
    return (f"%v{name} = pto.make_tensor_view %{name}, shape = [{dims}], strides = [{strides}] : "
            f"!pto.tensor_view<{t}>\n"
            f"%p{name} = pto.partition_view %v{name}, offsets = [{zeros}], sizes = [{dims}] : !pto.tensor_view<{t}> -> "
            f"!pto.partition_tensor_view<{t}>\n")


LOOKUP = program("%idx: !pto.ptr<i32>, %table: !pto.ptr<f32>, %out: !pto.ptr<f32>", gm_io("idx", "i32", (8,)) +
                 gm_io("out", "f32", (8,)) + f"""
%n = arith.constant 5 : i32
%miss = arith.constant -1.0 : f32
%t = pto.alloc_tile : {T("i32", 1, 8)}
%o = pto.alloc_tile : {T("f32", 1, 8)}
pto.tload ins(%pidx : !pto.partition_tensor_view<8xi32>) outs(%t : {T("i32", 1, 8)})
scf.for %i = %c0 to %c8 step %c1 {{
  %x = pto.tgetval ins(%t, %i : {T("i32", 1, 8)}, index) outs : i32
  %ok = arith.cmpi ult, %x, %n : i32
  scf.if %ok {{
    %ix = arith.index_cast %x : i32 to index
    %e = pto.load_scalar %table[%ix] : !pto.ptr<f32> -> f32
    pto.tsetval ins(%i, %e : index, f32) outs(%o : {T("f32", 1, 8)})
  }} else {{
    pto.tsetval ins(%i, %miss : index, f32) outs(%o : {T("f32", 1, 8)})
  }}
}}
pto.tstore ins(%o : {T("f32", 1, 8)}) outs(%pout : !pto.partition_tensor_view<8xf32>)
""")
IDX8 = np.array([3, -1, 0, 7, 4, 2, 9, 1], np.int32)
TABLE = np.arange(10, 18, dtype=np.float32)


def test_scalar_loop_tgetval_cmpi_if_load_scalar_tsetval():
    func, = engine.parse(LOOKUP).functions
    loop = next(s for s in func.body if isinstance(s, engine.For))
    get, cmp, branch = loop.body
    assert (get.op, get.type, get.src_type.dtype) == ("tgetval", "i32", "i32")
    assert (cmp.op, cmp.pred, cmp.type) == ("cmpi", "ult", "i32")
    assert isinstance(branch, engine.If) and len(branch.then) == 3 and len(branch.orelse) == 1
    assert branch.then[1].op == "load_scalar" and isinstance(branch.then[1].src_type, engine.PtrType)
    assert branch.orelse[0].op == "tsetval" and branch.orelse[0].ins == ("%i", "%miss")
    out = np.zeros(8, np.float32)
    engine.run(LOOKUP, "k", [IDX8, TABLE, out])
    np.testing.assert_array_equal(out, np.where((IDX8 >= 0) & (IDX8 < 5), TABLE[np.clip(IDX8, 0, 7)], -1))


def test_scalar_statement_faults_name_the_line():
    out = np.zeros(8, np.float32)
    text = LOOKUP.replace("arith.constant 5 : i32", "arith.constant 10 : i32")      # index 9 passes the test
    with pytest.raises(PtoExecutionError, match=rf"line {line_of(text, 'load_scalar')}: offset 9 is outside "
                                                r"the 8-element tensor in `%e = pto.load_scalar"):
        engine.run(text, "k", [IDX8, TABLE, out])
    text = LOOKUP.replace("ins(%t, %i :", "ins(%t, %c8 :")
    with pytest.raises(PtoExecutionError, match=rf"line {line_of(text, 'tgetval')}: offset 8 is outside the "
                                                r"tile's 8 elements in `%x = pto.tgetval"):
        engine.run(text, "k", [IDX8, TABLE, out])
    text = LOOKUP.replace("ins(%i, %miss", "ins(%c16, %miss")
    with pytest.raises(PtoExecutionError, match=rf"line {line_of(text, '%c16, %miss')}: offset 16 is outside"):
        engine.run(text, "k", [IDX8, TABLE, out])
    text = LOOKUP.replace("scf.if %ok", "scf.if %c1")
    with pytest.raises(PtoExecutionError, match=rf"line {line_of(text, 'scf.if')}: condition %c1 is not an i1"):
        engine.run(text, "k", [IDX8, TABLE, out])
    text = LOOKUP.replace("%e = pto.load_scalar %table", "%e = pto.load_scalar %idx")
    with pytest.raises(PtoExecutionError, match=r"%idx is not a f32 pointer parameter"):
        engine.run(text, "k", [IDX8, TABLE, out])
    text = LOOKUP.replace("cmpi ult", "cmpi ugh")
    with pytest.raises(PtoAsmError, match=rf"pto-as:{line_of(text, 'cmpi')}:\d+: unknown cmpi predicate 'ugh'"):
        engine.parse(text)


def test_integer_arith_wraps_and_compares_in_its_width():
    text = program("%out: !pto.ptr<i32>", gm_io("out", "i32", (8,)) + f"""
%big = arith.constant 2147483647 : i32
%one = arith.constant 1 : i32
%neg = arith.constant -3 : i32
%wrap = arith.addi %big, %one : i32
%q = arith.divsi %neg, %one : i32
%r = arith.remsi %neg, %big : i32
%lo = arith.minsi %neg, %one : i32
%u = arith.cmpi ugt, %neg, %one : i32
%s = arith.cmpi sgt, %neg, %one : i32
%o = pto.alloc_tile : {T("i32", 1, 8)}
pto.tsetval ins(%c0, %wrap : index, i32) outs(%o : {T("i32", 1, 8)})
pto.tsetval ins(%c1, %q : index, i32) outs(%o : {T("i32", 1, 8)})
pto.tsetval ins(%c2, %r : index, i32) outs(%o : {T("i32", 1, 8)})
pto.tsetval ins(%c3, %lo : index, i32) outs(%o : {T("i32", 1, 8)})
scf.if %u {{
  pto.tsetval ins(%c4, %one : index, i32) outs(%o : {T("i32", 1, 8)})
}}
scf.if %s {{
  pto.tsetval ins(%c8, %one : index, i32) outs(%o : {T("i32", 1, 8)})
}}
%yes = arith.constant true : i1
scf.if %yes {{
  pto.tsetval ins(%c5, %one : index, i32) outs(%o : {T("i32", 1, 8)})
}}
pto.tstore ins(%o : {T("i32", 1, 8)}) outs(%pout : !pto.partition_tensor_view<8xi32>)
""")
    out = engine.run(text, "k", [np.zeros(8, np.int32)])[0]
    assert list(out) == [-2 ** 31, -3, -3, -3, 1, 1, 0, 0]


SUBSET = program("%x: !pto.ptr<f32>", gm_io("x", "f32", (4, 12)) + f"""
%ten = arith.constant 10.0 : f32
%t = pto.alloc_tile : {T("f32", 4, 16, 4, 12)}
pto.tload ins(%px : !pto.partition_tensor_view<4x12xf32>) outs(%t : {T("f32", 4, 16, 4, 12)})
%s = pto.subset %t[%c1, %c8] sizes [1, 8] : {T("f32", 4, 16, 4, 12)}
pto.tmuls ins(%s, %ten : {T("f32", 1, 8, 1, 4)}, f32) outs(%s : {T("f32", 1, 8, 1, 4)})
%b = pto.subset %t[%c1, %c0] sizes [2, 16] : {T("f32", 4, 16, 4, 12)}
pto.tadds ins(%b, %ten : {T("f32", 2, 16, 2, 12)}, f32) outs(%b : {T("f32", 2, 16, 2, 12)})
scf.for %r = %c3 to %c4 step %c1 {{
  %row = pto.subset %t[%r, %c0] sizes [1, 16] : {T("f32", 4, 16, 4, 12)}
  pto.tadds ins(%row, %ten : {T("f32", 1, 16, "?", 12)}, f32) outs(%row : {T("f32", 1, 16, "?", 12)})
}}
pto.tstore ins(%t : {T("f32", 4, 16, 4, 12)}) outs(%px : !pto.partition_tensor_view<4x12xf32>)
""")


def test_subset_is_a_window_of_whole_rows_or_of_one_row_with_ptoas_valid_region():
    func, = engine.parse(SUBSET).functions
    s = next(st for st in func.body if isinstance(st, engine.Subset))
    assert (s.offsets, s.sizes) == (("%c1", "%c8"), (1, 8))
    assert s.type == engine.TileType("vec", "f32", 1, 8, 1, 4)                 # min(8, 12 - 8) columns
    row = next(st for st in func.body if isinstance(st, engine.For)).body[0]
    assert (row.type.v_row, row.type.v_col) == (None, 12)                      # a loop row: `?`
    x = RNG.standard_normal((4, 12)).astype(np.float32)
    want = x.copy()
    want[1, 8:12] *= 10
    want[1:3] += 10
    want[3] += 10
    got = engine.run(SUBSET, "k", [x.copy()])[0]
    np.testing.assert_array_equal(got, want)


@needs_vendor
def test_a_narrower_subset_of_several_rows_is_refused_as_the_vendor_computes_it_apart():
    """PTOAS's C++ gives a subset the pitch of its own type: a 2x8 window of a 16-column tile sees the
    parent's row 1 cols 8..15 and then row 2 cols 0..7 (pto-isa's CPU simulator), not a 2-D window."""
    text = SUBSET.replace("%t[%c1, %c8] sizes [1, 8]", "%t[%c1, %c8] sizes [2, 8]").replace(
        'T("f32", 1, 8, 1, 4)', 'T("f32", 2, 8, 2, 4)')
    text = text.replace("!pto.tile_buf<loc=vec, dtype=f32, rows=1, cols=8, v_row=1, v_col=4",
                        "!pto.tile_buf<loc=vec, dtype=f32, rows=2, cols=8, v_row=2, v_col=4")
    x = np.arange(48, dtype=np.float32).reshape(4, 12)
    sim = cpusim.run_module(text, "k", [x.copy()])[0]
    window = x.copy()
    window[1:3, 8:12] *= 10
    window[1:3] += 10
    window[3] += 10
    assert not np.array_equal(sim, window)                  # the vendor's result is not the 2-D window
    assert (sim[2, :4] == x[2, :4] * 10 + 10).all()          # its second row: the parent's next 8 elements
    with pytest.raises(PtoExecutionError, match=r"a 2x8 subset of the 4x16 row_major vec tile %t: PTOAS emits a "
                                                r"subset as a tile of its own pitch"):
        engine.run(text, "k", [x.copy()])


def test_subset_faults_name_the_line():
    x = np.zeros((4, 12), np.float32)
    text = SUBSET.replace("%t[%c1, %c8]", "%t[%c4, %c8]")
    with pytest.raises(PtoExecutionError, match=rf"line {line_of(text, '%t[%c4')}: rows 4..5 cols 8..16 fall "
                                                r"outside the 4x16 tile %t in `%s = pto.subset"):
        engine.run(text, "k", [x])
    text = SUBSET.replace("%t[%c1, %c8]", "%t[%c1, %c4]")                      # 2x8 valid: the 2x4 type is wrong
    with pytest.raises(PtoExecutionError, match=rf"line {line_of(text, 'pto.tmuls')}: %s is .*v_col=8.* but the "
                                                r"instruction says .*v_col=4"):
        engine.run(text, "k", [x])
    text = SUBSET.replace("sizes [1, 8]", "sizes [1, %c8]")
    with pytest.raises(PtoAsmError, match=rf"pto-as:{line_of(text, 'sizes [1, %c8]')}:\d+: expected 'num'"):
        engine.parse(text)


def test_atomic_add_store():
    ADD = "#pto<atomic_type atomic_add>"
    text = program("%x: !pto.ptr<f16>, %y: !pto.ptr<f16>", gm_io("x", "f16", (16,)) + gm_io("y", "f16", (16,)) + f"""
%t = pto.alloc_tile : {T("f16", 1, 16)}
pto.tload ins(%px : !pto.partition_tensor_view<16xf16>) outs(%t : {T("f16", 1, 16)})
scf.for %i = %c0 to %c2 step %c1 {{
  pto.tstore ins(%t : {T("f16", 1, 16)}) outs(%py : !pto.partition_tensor_view<16xf16>) {{atomicType = {ADD}}}
}}
""")
    store = engine.parse(text).functions[0].body[-2].body[0]
    assert dict(store.attrs) == {"atomicType": "atomic_add"}
    x, y = RNG.standard_normal(16).astype(np.float16), RNG.standard_normal(16).astype(np.float16)
    got = engine.run(text, "k", [x, y.copy()])[1]
    np.testing.assert_array_equal(got, (y + x) + x)                           # each add rounds to f16
    bad = text.replace("atomic_add>", "atomic_max>")
    with pytest.raises(PtoExecutionError, match=rf"line {line_of(bad, 'atomic_max')}: unknown atomicType "
                                                r"'atomic_max' in `pto.tstore"):
        engine.run(bad, "k", [x, y.copy()])


SORT = program("%x: !pto.ptr<f32>, %v: !pto.ptr<f32>, %i: !pto.ptr<i32>",
               gm_io("x", "f32", (64,)) + gm_io("v", "f32", (64,)) + gm_io("i", "i32", (64,)) + f"""
%k0 = arith.constant 0 : i32
%ex = arith.constant dense<0> : vector<4xi16>
%t = pto.alloc_tile : {T("f32", 1, 64)}
pto.tload ins(%px : !pto.partition_tensor_view<64xf32>) outs(%t : {T("f32", 1, 64)})
%n = pto.alloc_tile : {T("i32", 1, 64)}
pto.tci ins(%k0 {{descending = false}} : i32) outs(%n : {T("i32", 1, 64)})
%u = pto.treshape %n : {T("i32", 1, 64)} -> {T("ui32", 1, 64)}
%runs = pto.alloc_tile : {T("f32", 1, 128)}
pto.tsort32 ins(%t, %u : {T("f32", 1, 64)}, {T("ui32", 1, 64)}) outs(%runs : {T("f32", 1, 128)})
%a = pto.subset %runs[%c0, %c0] sizes [1, 64] : {T("f32", 1, 128)}
%b = pto.subset %runs[%c0, %c64] sizes [1, 64] : {T("f32", 1, 128)}
%tmp = pto.alloc_tile : {T("f32", 1, 128)}
%m = pto.alloc_tile : {T("f32", 1, 128)}
pto.tmrgsort ins(%a, %b, %tmp {{exhausted = false}} : {T("f32", 1, 64)}, {T("f32", 1, 64)},
                 {T("f32", 1, 128)}) outs(%m, %ex : {T("f32", 1, 128)}, vector<4xi16>)
%vals = pto.alloc_tile : {T("f32", 1, 64)}
pto.tgather ins(%m, {{maskPattern = #pto.mask_pattern<P0101>}} : {T("f32", 1, 128)}) outs(%vals : {T("f32", 1, 64)})
%mi = pto.treshape %m : {T("f32", 1, 128)} -> {T("i32", 1, 128)}
%idx = pto.alloc_tile : {T("i32", 1, 64)}
pto.tgather ins(%mi, {{maskPattern = #pto.mask_pattern<P1010>}} : {T("i32", 1, 128)}) outs(%idx : {T("i32", 1, 64)})
pto.tstore ins(%vals : {T("f32", 1, 64)}) outs(%pv : !pto.partition_tensor_view<64xf32>)
pto.tstore ins(%idx : {T("i32", 1, 64)}) outs(%pi : !pto.partition_tensor_view<64xi32>)
""")


def test_sort_sequence_ui32_tci_tmrgsort_lists_and_gather_masks():
    func, = engine.parse(SORT).functions
    ex = next(s for s in func.body if isinstance(s, engine.Const) and s.result == "%ex")
    assert ex.type == engine.VectorType((4,), "i16") and ex.value.tolist() == [0, 0, 0, 0]
    u = next(s for s in func.body if isinstance(s, engine.Tile) and s.result == "%u")
    assert u.type.dtype == "ui32"
    merge = next(s for s in func.body if isinstance(s, engine.Instr) and s.op == "tmrgsort")
    assert merge.outs == ("%m", "%ex") and merge.out_types[1] == engine.VectorType((4,), "i16")
    assert dict(merge.attrs) == {"exhausted": False}
    gather = next(s for s in func.body if isinstance(s, engine.Instr) and s.op == "tgather")
    assert gather.ins == ("%m",) and dict(gather.attrs) == {"maskPattern": "P0101"}
    x = RNG.permutation(64).astype(np.float32) - 20
    v, i = np.zeros(64, np.float32), np.zeros(64, np.int32)
    engine.run(SORT, "k", [x, v, i])
    np.testing.assert_array_equal(v, -np.sort(-x))
    np.testing.assert_array_equal(i, np.argsort(-x, kind="stable"))
    runner = engine._Run(func, [x, v, i], np.array([0]))                      # the executed counts
    runner.block(func.body)
    assert runner.env["%ex"].x.tolist() == [[32, 32, 0, 0]] and ex.value.tolist() == [0, 0, 0, 0]


def test_sort_sequence_faults_name_the_line():
    x, v, i = np.zeros(64, np.float32), np.zeros(64, np.float32), np.zeros(64, np.int32)
    bad = SORT.replace("dense<0>", "dense<[1, 2, 3, 4]>")
    with pytest.raises(PtoAsmError, match=rf"pto-as:{line_of(bad, 'dense<')}:\d+: bad vector constant"):
        engine.parse(bad)
    bad = SORT.replace("dtype=ui32", "dtype=ux32")
    with pytest.raises(PtoAsmError, match=rf"pto-as:{line_of(bad, 'ux32')}:\d+: unknown dtype 'ux32'"):
        engine.parse(bad)
    bad = SORT.replace("outs(%m, %ex :", "outs(%m, %k0 :")
    with pytest.raises(PtoExecutionError, match=rf"line {line_of(bad, 'pto.tmrgsort')}: destination %k0 is "
                                                r"neither a tile nor a vector in `pto.tmrgsort"):
        engine.run(bad, "k", [x, v, i])


@pytest.mark.skipif(not os.path.exists(PTOAS), reason="no ptoas")
@pytest.mark.parametrize("name", ["LOOKUP", "SUBSET", "SORT"])
def test_hand_written_programs_are_accepted_by_ptoas(name, tmp_path):
    """The programs above are real PTO-AS (the subset types written in them are the ones PTOAS infers)."""
    (tmp_path / "k.pto").write_text(globals()[name])
    r = subprocess.run([PTOAS, "--pto-arch=a3", "--enable-insert-sync", "k.pto", "-o", "k.cpp"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
