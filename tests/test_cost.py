"""The Ascend cost model: calibration against published A3 figures, and unit properties.

Calibration points (DESIGN.md, HW notes §2.7):
(a) 6144^3 fp16 GEMM on one A3 die: 1.506 ms (308 TFLOPS; pto-isa manual GEMM README), +-15 %.
(b) Indexer Prolog Q matmul (8,1536)@(1536,8192) int8, weights streamed from HBM, next to the K path
    (8,7168)@(7168,128) bf16 and the weights path (8,7168)@(7168,64) bf16: 13 us floor (cann-recipes
    PyPTO operator guide), +-20 %.
Block programs are hand-built PTO-AS kernels; a stage's time is its blocks list-scheduled on the 24
AICs, bounded below by the stage's HBM bytes over the die's HBM bandwidth.
"""
from __future__ import annotations

import heapq
import math

import pytest

import ptojax as pj
from ptojax.ascend import asm
from ptojax.ascend.cost import PIPES, VECTOR_OPS, BlockCost, instr_cost, kernel_time
from ptojax.ascend.targets import A2, A3, TARGETS, Target, target
from ptojax.lowering.memory import ASCEND_CORE


# -------------------------------------------------------------------------------------- builders
def tile(loc, dtype, rows, cols):
    return asm.TileBuf(loc, dtype, rows, cols, rows, cols)


def view(rows, cols, dtype):
    return asm.ViewType((rows, cols), dtype, partition=True)


_names = iter(range(10 ** 9))


def instr(op, ins, outs, **attrs):
    operand = lambda t: asm.Operand(f"%v{next(_names)}", t)
    return asm.Instr(op, tuple(map(operand, ins)), tuple(map(operand, outs)), tuple(attrs.items()))


def consts(*values):
    return tuple(asm.Const(f"%c{v}", v, "index") for v in values)


def loop(var, trip, body):
    return asm.For(var, "%c0", f"%c{trip}", "%c1", tuple(body))


def kernel(name, body, core="AIC"):
    return asm.Kernel(name, core, name, (), (("%a", "!pto.ptr<f16>"),), tuple(body))


def matmul_block(m, n, K, dtype, acc_dtype, k_l1, k_l0, *, resident_a=False, b_l2_hit=1.0):
    """One AIC block: C[m, n] = A[m, K] @ B[K, n], B (and A unless resident) loaded into L1 in
    k_l1-deep slices, moved to L0A/L0B in k_l0-deep pieces, accumulated in L0C, stored once."""
    acc = tile("acc", acc_dtype, m, n)
    b_attrs = {} if b_l2_hit == 1.0 else {"l2_hit": b_l2_hit}
    a_mat = tile("mat", dtype, m, K if resident_a else k_l1)
    b_mat = tile("mat", dtype, k_l1, n)
    inner = [instr("tmov", [a_mat], [tile("left", dtype, m, k_l0)]),
             instr("tmov", [b_mat], [tile("right", dtype, k_l0, n)]),
             instr("tmatmul_acc", [acc, tile("left", dtype, m, k_l0), tile("right", dtype, k_l0, n)], [acc])]
    outer = [] if resident_a else [instr("tload", [view(m, k_l1, dtype)], [a_mat])]
    outer += [instr("tload", [view(k_l1, n, dtype)], [b_mat], **b_attrs),
              loop("%k1", k_l1 // k_l0, inner)]
    body = list(consts(0, 1, K // k_l1, k_l1 // k_l0))
    if resident_a:
        body.append(instr("tload", [view(m, K, dtype)], [a_mat]))
    body += [loop("%k0", K // k_l1, outer), instr("tstore", [acc], [view(m, n, acc_dtype)])]
    return kernel(f"mm_{m}x{K}x{n}", body)


def lpt_makespan(block_seconds, cores):
    """Longest-processing-time-first list schedule of independent blocks on ``cores`` cores."""
    loads = [0.0] * cores
    for s in sorted(block_seconds, reverse=True):
        heapq.heapreplace(loads, loads[0] + s)
    return max(loads)


# ----------------------------------------------------------------------------------- calibration
def test_calibration_gemm_6144_fp16_a3():
    n = 6144
    tm, tn, k_l1, k_l0 = 128, 256, 256, 64        # PTO GEMM README: base (128, 64, 256), stepK 4
    block = kernel_time(matmul_block(tm, tn, n, "f16", "f32", k_l1, k_l0), "a3")
    blocks = (n // tm) * (n // tn)
    waves = math.ceil(blocks / A3.aic)
    hbm_bytes = n * n * (2 + 2 + 4)               # A, B read once into L2, C (fp32) written once
    hbm_s = hbm_bytes / A3.hbm_bytes_per_s
    predicted = max(waves * block.seconds, hbm_s)
    published = 1.506e-3
    ratio = predicted / published
    cube_share = block.pipes["CUBE"] / block.cycles
    tflops = 2 * n ** 3 / predicted / 1e12
    print(f"\n[cost] GEMM 6144^3 fp16 on a3: {blocks} blocks of {tm}x{tn} in {waves} waves; block "
          f"{block.seconds * 1e6:.2f} us (bottleneck {block.bottleneck}, fill {block.fill:.0f} cycles); "
          f"HBM floor {hbm_s * 1e6:.0f} us")
    print(f"[cost] predicted {predicted * 1e3:.3f} ms ({tflops:.0f} TFLOPS) vs published 1.506 ms "
          f"(308 TFLOPS): ratio {ratio:.3f}; cube busy {cube_share:.1%} of the block (README: TMATMUL 86.7%)")
    assert block.bottleneck == "CUBE"
    assert 0.85 <= ratio <= 1.15
    assert 0.80 <= cube_share <= 0.95


def test_calibration_indexer_prolog_q_matmul_a3():
    # Q: (8,1536)@(1536,8192) int8, n tiles of 512 -> 16 blocks; int8 weights streamed from HBM
    q = kernel_time(matmul_block(8, 512, 1536, "i8", "i32", 256, 64, resident_a=True, b_l2_hit=0.0), "a3")
    # K path (8,7168)@(7168,128) and weights path (8,7168)@(7168,64), bf16: n tiles of 32
    kw = kernel_time(matmul_block(8, 32, 7168, "bf16", "f32", 1024, 256, resident_a=True, b_l2_hit=0.0), "a3")
    blocks = [q.seconds] * (8192 // 512) + [kw.seconds] * (128 // 32 + 64 // 32)
    hbm_bytes = 1536 * 8192 + (7168 * 128 + 7168 * 64) * 2 + 8 * (1536 + 7168 * 2)
    hbm_s = hbm_bytes / A3.hbm_bytes_per_s
    schedule_s = lpt_makespan(blocks, A3.aic)
    predicted = max(schedule_s, hbm_s)
    ratio = predicted / 13e-6
    print(f"\n[cost] Indexer Prolog Q stage on a3: {len(blocks)} blocks on {A3.aic} AICs; Q block "
          f"{q.seconds * 1e6:.2f} us ({q.bottleneck}), K/weights block {kw.seconds * 1e6:.2f} us ({kw.bottleneck}); "
          f"HBM {hbm_bytes / 1e6:.2f} MB -> floor {hbm_s * 1e6:.2f} us")
    print(f"[cost] predicted {predicted * 1e6:.2f} us vs published 13 us floor: ratio {ratio:.3f}")
    assert q.bottleneck == "MTE2" and kw.bottleneck == "MTE2"
    assert q.bytes_in >= 1536 * 512
    assert 0.8 <= ratio <= 1.2


# --------------------------------------------------------------------------------------- targets
def test_targets_are_data():
    assert TARGETS == {"a2": A2, "a3": A3}
    assert target("a3") is A3 and target("A2") is A2 and target(A3) is A3
    assert A3.memory is ASCEND_CORE and A3.memory.ub == 192 * 1024
    assert (A3.aic, A3.aiv, A3.aicpu, A3.clock_hz) == (24, 48, 6, 1.85e9)
    assert abs(A3.peak_flops_f16 - 363.7e12) < 0.1e12
    assert abs(A3.gm_read_hbm * A3.aic * A3.clock_hz - A3.hbm_bytes_per_s) / A3.hbm_bytes_per_s < 0.01
    with pytest.raises(pj.PtoArgumentError, match="unknown Ascend target 'a9'"):
        target("a9")
    with pytest.raises(Exception):
        A3.aic = 25                                        # frozen
    assert isinstance(A2, Target) and hash(A2) == hash(Target("a2"))


# ------------------------------------------------------------------------------- unit properties
@pytest.mark.parametrize("make", [
    lambda r: instr("tload", [view(r, 128, "f16")], [tile("vec", "f16", r, 128)]),
    lambda r: instr("tload", [view(r, 128, "f16")], [tile("mat", "f16", r, 128)]),
    lambda r: instr("tstore", [tile("vec", "f32", r, 64)], [view(r, 64, "f32")]),
    lambda r: instr("tstore", [tile("acc", "f32", r, 64)], [view(r, 64, "f16")]),
    lambda r: instr("tmov", [tile("mat", "f16", r, 64)], [tile("left", "f16", r, 64)]),
    lambda r: instr("tmov", [tile("mat", "f16", 64, r)], [tile("right", "f16", 64, r)]),
    lambda r: instr("tmov", [tile("acc", "f32", r, 64)], [tile("vec", "f32", r, 64)]),
    lambda r: instr("tmatmul", [tile("left", "f16", r, 64), tile("right", "f16", 64, 64)], [tile("acc", "f32", r, 64)]),
    lambda r: instr("mgather", [view(4096, 128, "i8"), tile("vec", "i32", r, 1)], [tile("vec", "i8", r, 128)]),
    lambda r: instr("tadd", [tile("vec", "f32", r, 64)] * 2, [tile("vec", "f32", r, 64)]),
    lambda r: instr("texp", [tile("vec", "f16", r, 128)], [tile("vec", "f16", r, 128)]),
    lambda r: instr("tsoftmax", [tile("vec", "f32", r, 128)], [tile("vec", "f32", r, 128)]),
    lambda r: instr("trowsum", [tile("vec", "f32", r, 128)], [tile("vec", "f32", r, 1)]),
    lambda r: instr("ttopk", [tile("vec", "f32", r, 256)], [tile("vec", "f32", r, 32), tile("vec", "i32", r, 32)]),
])
def test_more_bytes_more_cycles(make):
    costs = [instr_cost(make(r), "a3")[1] for r in (16, 32, 64, 128)]
    assert all(a < b for a, b in zip(costs, costs[1:])), costs


def test_pipes():
    v, m = tile("vec", "f16", 32, 128), tile("mat", "f16", 32, 128)
    cases = {"MTE2": instr("tload", [view(32, 128, "f16")], [v]),
             "MTE3": instr("tstore", [v], [view(32, 128, "f16")]),
             "MTE1": instr("tmov", [m], [tile("left", "f16", 32, 128)]),
             "FIXPIPE": instr("tstore", [tile("acc", "f32", 32, 128)], [view(32, 128, "f32")]),
             "CUBE": instr("tmatmul", [tile("left", "f16", 32, 128), tile("right", "f16", 128, 32)],
                           [tile("acc", "f32", 32, 32)]),
             "VECTOR": instr("tmuls", [v, "f16"], [v]),
             "SCALAR": instr("treshape", [v], [v])}
    for pipe, i in cases.items():
        assert instr_cost(i, A3)[0] == pipe, (i.op, pipe)
    assert instr_cost(instr("tmov", [v], [v]), A3)[0] == "VECTOR"
    assert instr_cost(instr("tmov", [tile("acc", "f32", 32, 32)], [tile("vec", "f32", 32, 32)]), A3)[0] == "FIXPIPE"


def test_hbm_reads_slower_than_l2_hits():
    i = instr("tload", [view(256, 512, "i8")], [tile("mat", "i8", 256, 512)])
    l2, hbm = instr_cost(i, A3)[1], instr_cost(i, A3, l2_hit=0.0)[1]
    assert abs((hbm - A3.dma_issue_cycles) / (l2 - A3.dma_issue_cycles) - 110 / 32) < 1e-9
    tagged = instr("tload", [view(256, 512, "i8")], [tile("mat", "i8", 256, 512)], l2_hit=0.0)
    assert instr_cost(tagged, A3)[1] == hbm


def test_cube_int8_rate_is_twice_fp16():
    assert A3.cube_macs("int8") == 2 * A3.cube_macs("float16") == 2 * A3.cube_macs("bfloat16")

    def cube(dtype, acc):
        i = instr("tmatmul", [tile("left", dtype, 128, 256), tile("right", dtype, 256, 128)], [tile("acc", acc, 128, 128)])
        return instr_cost(i, A3)[1] - A3.cube_issue_cycles

    assert cube("f16", "f32") == 2 * cube("i8", "i32") == 128 * 256 * 128 / 4096
    assert cube("bf16", "f32") == cube("f16", "f32")
    assert cube("f32", "f32") == 2 * cube("f16", "f32")


def test_cube_pads_to_fractals():
    def cube(m, k, n, dtype="f16"):
        i = instr("tmatmul", [tile("left", dtype, m, k), tile("right", dtype, k, n)], [tile("acc", "f32", m, n)])
        return instr_cost(i, A3)[1]

    assert cube(8, 64, 64) == cube(16, 64, 64)           # m padded to 16
    assert cube(16, 24, 64) == cube(16, 32, 64)          # k padded to 16 (fp16)
    assert cube(16, 40, 64, "i8") == cube(16, 64, 64, "i8")   # k padded to 32 (int8)
    assert cube(16, 64, 17) == cube(16, 64, 32)


def test_vector_relative_costs():
    t = tile("vec", "f32", 64, 128)
    cost = lambda op: instr_cost(instr(op, [t, t], [t]), A3)[1]
    assert cost("tadd") < cost("texp") < cost("tdiv")
    assert cost("tadds") == cost("tadd") and cost("trowexpandmul") == cost("tmul")
    # tadd: 32 KiB = 128 repeats x 2 cycles + startup 6
    assert cost("tadd") == 6 + 128 * 2
    parts = sum(instr_cost(instr(p, [t], [t]), A3)[1] for p in ("trowmax", "tsub", "texp", "trowsum", "tdiv"))
    assert cost("tsoftmax") == pytest.approx(parts)
    assert VECTOR_OPS["tsoftmax"] == ("ROWMAX", "ADD", "EXP", "ROWSUM", "DIV")


def test_every_tile_op_is_priced():
    from ptojax.primitives.tile import TILE_OPS
    v = tile("vec", "f32", 32, 64)
    for name in TILE_OPS:
        if name == "tload":
            i = instr(name, [view(32, 64, "f32")], [v])
        elif name in ("tstore", "mscatter"):
            i = instr(name, [tile("vec", "i32", 32, 1), v], [view(32, 64, "f32")])
        elif name == "mgather":
            i = instr(name, [view(1024, 64, "f32"), tile("vec", "i32", 32, 1)], [v])
        elif name == "tmov":
            i = instr(name, [tile("mat", "f16", 32, 64)], [tile("left", "f16", 32, 64)])
        elif name.startswith("tmatmul"):
            i = instr(name, [tile("acc", "f32", 32, 32), tile("left", "f16", 32, 64), tile("right", "f16", 64, 32)],
                      [tile("acc", "f32", 32, 32)])
        else:
            i = instr(name, [v, v], [v])
        pipe, cycles = instr_cost(i, A3)
        assert pipe in PIPES and cycles > 0, name


def test_unknown_mnemonic():
    bad = instr("tfrobnicate", [tile("vec", "f32", 8, 8)], [tile("vec", "f32", 8, 8)])
    with pytest.raises(pj.PtoUnsupportedError, match="tfrobnicate"):
        instr_cost(bad, A3)
    with pytest.raises(pj.PtoUnsupportedError, match="tfrobnicate"):
        kernel_time(kernel("k", [bad], core="AIV"), A3)
    with pytest.raises(pj.PtoUnsupportedError, match="mat -> GM"):
        instr_cost(instr("tstore", [tile("mat", "f16", 8, 8)], [view(8, 8, "f16")]), A3)


def _vector_kernel(trip):
    t = tile("vec", "f32", 64, 128)
    body = [instr("tload", [view(64, 128, "f32")], [t]), instr("texp", [t], [t]), instr("tmul", [t, t], [t]),
            instr("tstore", [t], [view(64, 128, "f32")])]
    return kernel(f"loop{trip}", [*consts(0, 1, trip), loop("%i", trip, body)], core="AIV")


def test_loop_of_n_iterations_costs_n_bodies():
    one = kernel_time(_vector_kernel(1), A3)
    for n in (2, 8, 64):
        many = kernel_time(_vector_kernel(n), A3)
        assert all(many.pipes[p] == pytest.approx(n * one.pipes[p]) for p in one.pipes)
        assert (many.bytes_in, many.bytes_out, many.flops) == (n * one.bytes_in, n * one.bytes_out, n * one.flops)
        assert many.fill == pytest.approx(one.fill)
        assert many.cycles == pytest.approx(n * one.pipes[one.bottleneck] + one.fill)
        assert many.cycles <= n * one.cycles
    assert isinstance(one, BlockCost) and one.seconds == pytest.approx(one.cycles / A3.clock_hz)


def test_block_is_bounded_by_its_busiest_pipe():
    cost = kernel_time(matmul_block(128, 256, 1024, "f16", "f32", 256, 64), A3)
    assert cost.cycles >= max(cost.pipes.values())
    assert cost.cycles == pytest.approx(cost.pipes[cost.bottleneck] + cost.fill)
    assert cost.flops == 2 * 128 * 256 * 1024
    assert cost.bytes_in == (128 + 256) * 1024 * 2 and cost.bytes_out == 128 * 256 * 4


def test_dynamic_loop_bound():
    t = tile("vec", "f32", 8, 64)
    k = kernel("dyn", [*consts(0, 1), asm.For("%i", "%c0", "%n", "%c1", (instr("tadd", [t, t], [t]),))], core="AIV")
    with pytest.raises(pj.PtoUnsupportedError, match="%n"):
        kernel_time(k, A3)
    assert kernel_time(k, A3, values={"%n": 10}).pipes["VECTOR"] == pytest.approx(10 * instr_cost(
        instr("tadd", [t, t], [t]), A3)[1])
    assert kernel_time(k, A3, values={"%n": 0}).cycles == 0


def test_cost_of_printed_and_parsed_program_is_the_same():
    k = matmul_block(8, 512, 1536, "i8", "i32", 256, 64, resident_a=True, b_l2_hit=0.0)
    (parsed,) = asm.parse(asm.emit(k))
    assert kernel_time(parsed, A3) == kernel_time(k, A3)


def test_reductions_by_axes():
    t = tile("vec", "f32", 64, 128)
    rows = instr_cost(instr("tsum", [t], [tile("vec", "f32", 1, 64)], axes=(1,)), A3)[1]
    cols = instr_cost(instr("tsum", [t], [tile("vec", "f32", 1, 128)], axes=(0,)), A3)[1]
    both = instr_cost(instr("tsum", [t], [tile("vec", "f32", 1, 1)], axes=(0, 1)), A3)[1]
    assert rows == instr_cost(instr("trowsum", [t], [tile("vec", "f32", 64, 1)]), A3)[1]
    assert cols == instr_cost(instr("tcolsum", [t], [tile("vec", "f32", 1, 128)]), A3)[1]
    assert cols < rows < both
    assert instr_cost(instr("tsum", [t], [tile("vec", "f32", 64, 1)]), A3)[1] == rows   # from shapes


def test_gemm_6144_through_the_lowering_pipeline():
    """The same calibration point, from ``pj.lower`` + codegen instead of a hand-built program: the
    PTO GEMM README's base tile (m=128, k=64, n=256), one AIC block per output tile."""
    import jax
    import jax.numpy as jnp

    from ptojax.ascend.program import compile_kernel

    def gemm(a, b):
        with pj.tile(cube=(128, 64, 256)):
            return pj.ops.matmul(a, b)

    spec = jax.ShapeDtypeStruct((6144, 6144), jnp.float16)
    compiled = compile_kernel(pj.lower(gemm, spec, spec))
    (part,) = compiled.lowering.block.jaxpr.eqns[0].params["spec"].parts
    block = kernel_time(compiled.kernel(part), A3)
    predicted = math.ceil(part.instances / A3.aic) * block.seconds
    ratio = predicted / 1.506e-3
    print(f"[cost] lowered GEMM 6144^3 fp16: {part.instances} blocks, {block.seconds * 1e6:.2f} us each -> "
          f"{predicted * 1e3:.3f} ms vs 1.506 ms published (ratio {ratio:.3f})")
    assert 0.85 <= ratio <= 1.15
    # The runtime prices the real module selection prints (what ptoas assembles): the same tmatmul chain.
    real = compiled.costs(A3)[(part.program.name, tuple(part.shape))]
    assert real.priced == "pto" and compiled.costs(A3, "codegen")[(part.program.name, tuple(part.shape))] == block
    assert real.bytes_in == block.bytes_in and real.bytes_out == block.bytes_out
    assert real.pipes["CUBE"] == pytest.approx(block.pipes["CUBE"])
    ratio = math.ceil(part.instances / A3.aic) * real.seconds / 1.506e-3
    print(f"[cost] the same GEMM priced on the real module: {real.seconds * 1e6:.2f} us per block (ratio {ratio:.3f})")
    assert 0.85 <= ratio <= 1.15


# --------------------------------------------------------------------------- the real module's text
_T = "!pto.tile_buf<loc=vec, dtype=f32, rows={r}, cols={c}, v_row={vr}, v_col={c}, blayout=row_major, slayout=none_box, fractal=512, pad=0>"


def _real(body, params="%arg0: !pto.ptr<f32>, %arg1: !pto.ptr<f32>"):
    from ptojax.ascend import engine

    text = (f'module attributes {{pto.target_arch = "a3"}} {{\n func.func @f({params}) attributes '
            f'{{pto.kernel_kind = #pto.kernel_kind<vector>}} {{\n{body}\n    return\n  }}\n}}\n')
    (func,) = engine.parse(text).functions
    return func


_HEAD = """    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %c64 = arith.constant 64 : index
    %v0 = pto.make_tensor_view %arg0, shape = [%c64, %c64], strides = [%c64, %c1] : !pto.tensor_view<64x64xf32>
    %t = pto.alloc_tile : {T}
    %u = pto.alloc_tile : {T}
""".format(T=_T.format(r=16, c=64, vr=16))


def test_real_function_is_priced_like_the_same_codegen_instructions():
    """A loop of tload / texp / trowexpanddiv-free vector work: the real text and codegen's kernel of the
    same instructions cost the same; four trips cost four bodies; GM bytes count per trip."""
    T = _T.format(r=16, c=64, vr=16)
    func = _real(_HEAD + f"""    %k = arith.muli %c4, %c1 : index
    scf.for %i = %c0 to %k step %c1 {{
      %o = arith.muli %i, %c16 : index
      %p = pto.partition_view %v0, offsets = [%o, %c0], sizes = [%c16, %c64] : !pto.tensor_view<64x64xf32> -> !pto.partition_tensor_view<16x64xf32>
      pto.tload ins(%p : !pto.partition_tensor_view<16x64xf32>) outs(%t : {T})
      pto.texp ins(%t : {T}) outs(%u : {T})
      pto.tstore ins(%u : {T}) outs(%p : !pto.partition_tensor_view<16x64xf32>)
    }}""")
    v, t = view(16, 64, "f32"), tile("vec", "f32", 16, 64)
    body = [instr("tload", [v], [t]), instr("texp", [t], [t]), instr("tstore", [t], [v])]
    ref = kernel_time(kernel("k", [*consts(0, 1, 4), loop("%i", 4, body)], core="AIV"), A3)
    cost = kernel_time(func, A3)                      # dispatches on the type: function_time
    assert cost.priced == "pto" and ref.priced == "codegen"
    assert cost.pipes == pytest.approx(ref.pipes) and cost.cycles == pytest.approx(ref.cycles)
    assert (cost.bytes_in, cost.bytes_out) == (ref.bytes_in, ref.bytes_out) == (4 * 16 * 64 * 4,) * 2
    assert kernel_time(func, A3, l2_hit=0.0).pipes["MTE2"] > cost.pipes["MTE2"]       # the caller's L2 fraction


def test_real_scalar_statements_and_branches():
    """tgetval / load_scalar / tsetval on the scalar pipe, aliases one cycle, an scf.if taken once per trip."""
    from ptojax.ascend.cost import function_time

    T, R = _T.format(r=16, c=64, vr=16), _T.format(r=1, c=64, vr="?")
    func = _real(_HEAD + f"""    %n = arith.constant 1000 : i32
    scf.for %i = %c0 to %c16 step %c1 {{
      %x = pto.tgetval ins(%t, %i : {T}, index) outs : f32
      %j = arith.index_cast %i : index to i32
      %ok = arith.cmpi ult, %j, %n : i32
      scf.if %ok {{
        %e = pto.load_scalar %arg1[%i] : !pto.ptr<f32> -> f32
        pto.tsetval ins(%i, %e : index, f32) outs(%u : {T})
        %s = pto.subset %u[%i, %c0] sizes [1, 64] : {T}
        pto.tadds ins(%s, %x : {R}, f32) outs(%s : {R})
      }}
    }}""")
    cost = function_time(func, A3)
    assert cost.pipes["SCALAR"] == pytest.approx(16 * (2 * A3.scalar_ub_cycles + A3.scalar_gm_cycles + 1))
    row = tile("vec", "f32", 1, 64)
    assert cost.pipes["VECTOR"] == pytest.approx(16 * instr_cost(instr("tadds", [row, "f32"], [row]), A3)[1])
    assert cost.bottleneck == "SCALAR" and cost.bytes_in == cost.bytes_out == 0


def test_real_sort_stages_and_unknown_bounds():
    """tsort32 at vbitsort's rate measured on a 910B3 for pto-isa's a2a3 cost model, 16 cycles per
    32-value repeat + 21; tmrgsort at vmrgsort4's 20 cycles + a rate per struct written fitted to
    pto-isa's top-k (194 per 128 structs; tests/test_calibration.py checks the fit)."""
    from ptojax.ascend.cost import function_time

    V, S = _T.format(r=1, c=2048, vr=1), _T.format(r=1, c=4096, vr=1)
    I = V.replace("dtype=f32", "dtype=ui32")
    func = _real(f"""    %c1 = arith.constant 1 : index
    %b = arith.constant 128 : i32
    %v = pto.alloc_tile : {V}
    %ix = pto.alloc_tile : {I}
    %s0 = pto.alloc_tile : {S}
    %s1 = pto.alloc_tile : {S}
    pto.tsort32 ins(%v, %ix : {V}, {I}) outs(%s0 : {S})
    pto.tmrgsort ins(%s0, %b : {S}, i32) outs(%s1 : {S})""")
    cost = function_time(func, A3)
    sort32 = 16 * (2048 // 32) + 21                    # one row of 2048 values: 64 repeats
    merge = 194 * (4096 // 2 // (4 * 32)) + 20         # 4096 f32 = 2048 structs: 16 repeats of 128
    assert cost.pipes["VECTOR"] == pytest.approx(sort32 + merge)
    H = _T.format(r=1, c=1024, vr=1)
    lists = _real(f"""    %c0 = arith.constant 0 : index
    %c1024 = arith.constant 1024 : index
    %ex = arith.constant dense<0> : vector<4xi16>
    %t = pto.alloc_tile : {V}
    %a = pto.subset %t[%c0, %c0] sizes [1, 1024] : {V}
    %b = pto.subset %t[%c0, %c1024] sizes [1, 1024] : {V}
    %m = pto.alloc_tile : {V}
    %o = pto.alloc_tile : {V}
    pto.tmrgsort ins(%a, %b, %m {{exhausted = false}} : {H}, {H}, {V}) outs(%o, %ex : {V}, vector<4xi16>)""")
    assert function_time(lists, A3).pipes["VECTOR"] == pytest.approx(194 * 1024 / 128 + 20)  # both lists' structs
    dyn = _real("""    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %bid = pto.get_block_idx
    %n = arith.index_cast %bid : i64 to index
    scf.for %i = %c0 to %n step %c1 {
    }""")
    with pytest.raises(pj.PtoUnsupportedError, match="%n"):
        function_time(dyn, A3)
    assert function_time(dyn, A3, values={"%n": 3}).cycles == 0
