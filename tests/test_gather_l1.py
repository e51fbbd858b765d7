"""User-defined tile ops that read GM (pj.tiles.register_op(reads_gm=True)), and their first user: the
gather of top-k rows straight into L1 (examples/deepseek_v32 ``gather_rows``) in sparse attention."""
import functools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import asm, isa
from ptojax.ascend.cost import kernel_time
from ptojax.ascend.targets import A3

from helpers import bits, rand

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from examples.deepseek_v32 import kernels as K  # noqa: E402
from examples.deepseek_v32 import reference as R  # noqa: E402
from deepseek_cases import B, MAX_BLOCKS, N, S1, SEQ, TOPK, cann_close, sfa_ref  # noqa: E402

T = pj.tiles
OP = K.GATHER_ROWS
ROWS, D, KC = 40, 64, 16


def gather_matmul(table, idx, eye):
    """rows = gather_rows(table, idx) in L1 -> L0B; eye @ rows on the cube: exactly the gathered rows."""
    kc = idx.shape[-1]

    def body(index, ins, outs):
        t, i, e = ins
        rows = T.mov(K.gather_rows(t, T.load(i, index, T.window((1, kc), index=(0, None)), "mat")), "right")
        left = T.mov(T.load(e, index, T.window((kc, kc), index=(None, None)), "mat"), "left")
        return [T.store(outs[0], T.matmul(left, rows), index, T.window((kc, table.shape[1]), index=(0, None)))]

    with jax.named_scope("GatherL1"):
        return T.grid(body, (idx.shape[0],), (table, idx, eye),
                      jax.ShapeDtypeStruct((idx.shape[0] * kc, table.shape[1]), np.float32), name="gather_mm")


def _rows_np(table, idx):
    flat = idx.reshape(-1)
    ok = (flat >= 0) & (flat < table.shape[0])
    return np.where(ok[:, None], table[np.clip(flat, 0, table.shape[0] - 1)], 0).astype(table.dtype)


@pytest.fixture(scope="module")
def case():
    table = rand((ROWS, D), jnp.bfloat16, 0, -2, 2)
    idx = np.random.default_rng(1).integers(0, ROWS, (2, KC)).astype(np.int32)
    idx[0, :3] = [-1, ROWS, 10 ** 6]                     # out of range: zero rows
    return table, idx, np.eye(KC, dtype=table.dtype)


# ------------------------------------------------------------------------------------ semantics
def test_semantics_match_numpy_and_out_of_range_rows_are_zero(case):
    table, idx, eye = case
    want = _rows_np(np.asarray(table), idx)
    assert not want[:3].any() and want[3:].any()
    K.gather_rows(table, idx[:1])                                      # registers the op
    np.testing.assert_array_equal(np.asarray(K.gather_rows(table, idx)), want)               # jnp reference
    for backend in ("sim", "xla"):                                     # a cube kernel: PTO interpreter / XLA
        got = np.asarray(pj.kernel(gather_matmul, backend=backend)(table, idx, eye))
        np.testing.assert_array_equal(got, want.astype(np.float32))
    got = np.asarray(jax.jit(pj.kernel(gather_matmul))(table, idx, eye))        # the replay of the text
    np.testing.assert_array_equal(got, want.astype(np.float32))
    assert pj.lower(gather_matmul, table, idx, eye).verify(table, idx, eye) == {"tensor": 0.0, "tile": 0.0,
                                                                                 "block": 0.0}


def test_pto_round_trip_and_core(case):
    table, idx, eye = case
    low = pj.lower(gather_matmul, table, idx, eye)
    assert f"pto.{OP}(" in low.as_text("tile")
    assert "block_call[gather_mm<AIC> x2]" in low.as_text("block")   # a cube program: L1 is the AIC's
    compiled = pj.kernel(gather_matmul).lower(table, idx, eye).compile()
    assert f"pto.{OP} ins(" in compiled.as_text("pto")       # a user's instruction prints as written
    text = compiled.code.text                                   # codegen's form: parsed back, emitted again
    line = next(s for s in text.splitlines() if f"pto.{OP} ins(" in s)
    assert "!pto.tensor_view<40x64xbf16>" in line and "outs(%t" in line and "loc=mat" in line.split("outs(")[1]
    kernels = asm.parse(text)
    assert "\n".join(asm.emit(k) for k in kernels) == text                                 # emit(parse(t)) == t
    assert isa.TABLE[OP].pipe == "MTE2" and "GM tensor" in isa.TABLE[OP].operands


def test_cost_is_mte2_per_byte_like_mgather():
    K.gather_rows(np.zeros((4, 8), np.float32), np.zeros((1, 2), np.int32))
    view = asm.Operand("%v0", asm.ViewType((1024, 512), "bf16"))
    idx = asm.Operand("%t1", asm.TileBuf("mat", "i32", 16, 64, 1, 64, "col_major", "row_major"))

    def instr(op, loc, cols):
        out = asm.Operand("%t2", asm.TileBuf(loc, "bf16", 64, cols, 64, cols, "col_major", "row_major"))
        return asm.Instr(op, (view, idx), (out,), (("shapes", ((1, 64),)),))

    pipe, cycles = isa.cycles(instr(OP, "mat", 512), "a3")
    assert pipe == "MTE2"
    assert cycles == pytest.approx(isa.cycles(instr("mgather", "vec", 512), "a3")[1])      # priced like mgather
    want = 64 * 512 * 2 / A3.gm_read_rate(1.0) + A3.dma_issue_cycles + 64 * A3.row_access_cycles
    assert cycles == pytest.approx(want)
    half = isa.cycles(instr(OP, "mat", 256), "a3")[1]
    assert cycles - half == pytest.approx(64 * 256 * 2 / A3.gm_read_rate(1.0))              # scales with bytes
    assert isa.cycles(instr(OP, "mat", 512), "a3", l2_hit=0.0)[1] > cycles                  # HBM is slower


def test_block_cost_counts_the_gathered_bytes(case):
    table, idx, eye = case
    compiled = pj.kernel(gather_matmul).lower(table, idx, eye).compile()
    (kernel,) = compiled.code.kernels.values()
    cost = kernel_time(kernel, "a3")
    gathered = KC * D * 2
    assert cost.bytes_in == 4 * KC + gathered + KC * KC * 2                # index tile + rows + eye
    assert cost.pipes["MTE2"] > KC * A3.row_access_cycles
    prof = compiled.profile(table, idx, eye)
    assert prof.label_us["GatherL1"] > 0


# --------------------------------------------------------------------------------------- errors
def test_errors(case):
    table, idx, eye = case
    with pytest.raises(pj.PtoDtypeError, match=rf"pto.{OP}: the index tile must be int32, got float32"):
        pj.lower(gather_matmul, table, idx.astype(np.float32), eye)
    with pytest.raises(pj.PtoShapeError, match=rf"pto.{OP}: the GM table must be 2-D \[rows, D\], got shape"):
        K.gather_rows(np.zeros((2, 3, 4), np.float32), idx)

    def vector_grid(t, i):
        body = lambda index, ins, outs: [T.store(outs[0], K.gather_rows(ins[0], T.load(ins[1], index, T.window(
            (1, KC), index=(0, None)))), index, T.window((KC, D), index=(0, None)))]
        return T.grid(body, (2,), (t, i), jax.ShapeDtypeStruct((2 * KC, D), t.dtype), kind="vector")

    with pytest.raises(pj.PtoArgumentError, match=rf"pto.{OP} reads GM into 'mat' \(L1\), which only a cube grid has"):
        pj.lower(vector_grid, table, idx)

    def index_in_left(t, i, e):
        def body(index, ins, outs):
            ix = T.mov(T.load(ins[1], index, T.window((1, KC), index=(0, None)), "mat"), "left")
            rows = T.mov(K.gather_rows(ins[0], ix), "right")
            left = T.mov(T.load(ins[2], index, T.window((KC, KC), index=(None, None)), "mat"), "left")
            return [T.store(outs[0], T.matmul(left, rows), index, T.window((KC, D), index=(0, None)))]
        return T.grid(body, (2,), (t, i, e), jax.ShapeDtypeStruct((2 * KC, D), np.float32))

    with pytest.raises(pj.PtoArgumentError, match=rf"pto.{OP}'s tile operand is a 'left' tile; this instruction "
                                                   "reads mat"):
        pj.lower(index_in_left, table, idx, eye)

    def table_from_a_tile(t, i, e):
        def body(index, ins, outs):
            tile = T.load(ins[0], index, T.window((ROWS, D), index=(None, None)), "mat")
            rows = T.mov(K.gather_rows(tile, T.load(ins[1], index, T.window((1, KC), index=(0, None)), "mat")),
                         "right")
            left = T.mov(T.load(ins[2], index, T.window((KC, KC), index=(None, None)), "mat"), "left")
            return [T.store(outs[0], T.matmul(left, rows), index, T.window((KC, D), index=(0, None)))]
        return T.grid(body, (2,), (t, i, e), jax.ShapeDtypeStruct((2 * KC, D), np.float32))

    with pytest.raises(pj.PtoArgumentError, match=rf"pto.{OP} needs a GM tensor .* as its first operand"):
        pj.lower(table_from_a_tile, table, idx, eye)


def test_register_op_errors_for_gm_readers():
    ref = lambda t, i: t[i]                                             # noqa: E731
    shape = lambda t, i: jax.ShapeDtypeStruct(i.shape + t.shape[1:], t.dtype)   # noqa: E731
    with pytest.raises(pj.PtoArgumentError, match="loc 'acc' is not a buffer GM can be read into"):
        T.register_op("tbad_rows", reference=ref, abstract=shape, reads_gm=True, loc="acc")
    with pytest.raises(pj.PtoArgumentError, match="a GM reader needs abstract="):
        T.register_op("tbad_rows", reference=ref, reads_gm=True)
    with pytest.raises(pj.PtoArgumentError, match="loc='mat' needs reads_gm=True"):
        T.register_op("tbad_rows", reference=jnp.exp, loc="mat")
    with pytest.raises(pj.PtoArgumentError, match="'gather' and 'load' price a GM reader"):
        T.register_op("tbad_rows", reference=jnp.exp, cost="gather")
    assert "tbad_rows" not in T.CUSTOM and "tbad_rows" not in isa.TABLE
    op = T.register_op("tf16_rows", reference=ref, abstract=shape, reads_gm=True, dtypes=(np.float16,), cost="load")
    try:
        with pytest.raises(pj.PtoDtypeError, match="pj.tiles.tf16_rows: first operand is float32; pto.tf16_rows "
                                                   "takes float16"):
            op(np.zeros((4, 8), np.float32), np.zeros((2,), np.int32))
        assert op(np.ones((4, 8), np.float16), np.zeros((2,), np.int32)).shape == (2, 8)
    finally:
        T.unregister_op("tf16_rows")
    assert "tf16_rows" not in isa.TABLE and not any(p.name == "pto.tf16_rows" for p in
                                                        pj.primitives.tile.GM_READERS)


# ------------------------------------------------------------------- a vector-core GM reader
@pytest.fixture
def vec_rows():
    op = T.register_op("tvec_rows", reference=lambda t, i: jnp.take(t, i.reshape(-1), axis=0, mode="fill",
                                                                     fill_value=0),
                       numpy=_rows_np, abstract=lambda t, i: jax.ShapeDtypeStruct((i.size, t.shape[1]), t.dtype),
                       reads_gm=True)
    yield op
    T.unregister_op("tvec_rows")


def _vec_kernel(op):
    def kernel(x, idx):
        with pj.tile(vec=(32, 32)), jax.named_scope("Scale"):
            y = x * 2.0                                                 # produced in the kernel, then read by op

        def body(index, ins, outs):
            rows = op(ins[0], T.load(ins[1], index, T.window((1, 8), index=(None, 0))))
            return [T.store(outs[0], rows, index, T.window((8, 32), index=(0, None)))]

        return T.grid(body, (4,), (y, idx), jax.ShapeDtypeStruct((32, 32), np.float32), name="rows")
    return kernel


def test_vector_gm_reader(vec_rows):
    x = rand((64, 32), np.float32, 3)
    idx = (np.arange(32, dtype=np.int32)[::-1] * 2).reshape(1, 32).copy()
    idx[0, 0] = 64
    want = _rows_np(2 * x, idx)
    kernel = _vec_kernel(vec_rows)
    assert "block_call[rows<AIV> x4]" in pj.lower(kernel, x, idx).as_text("block")
    np.testing.assert_array_equal(np.asarray(pj.kernel(kernel)(x, idx)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(pj.kernel(kernel))(x, idx)), want)
    np.testing.assert_array_equal(np.asarray(pj.kernel(kernel, backend="xla")(x, idx)), want)


def test_gm_reader_waits_for_the_tasks_that_write_its_tensor(vec_rows):
    x = rand((64, 32), np.float32, 3)
    idx = np.arange(32, dtype=np.int32).reshape(1, 32)
    _, trace = pj.kernel(_vec_kernel(vec_rows)).lower(x, idx).compile().run(x, idx)
    tasks = trace.graph.tasks
    producers = {t.tid for t in tasks if t.label == "Scale"}
    for t in tasks:
        if t.name == "rows":
            assert producers <= {p.tid for p in t.preds}


# ------------------------------------------------------------------------------ sparse attention
@pytest.fixture(scope="module")
def sfa_case():
    args = R.attention_inputs(B, S1, N, SEQ, TOPK, max_blocks=MAX_BLOCKS, seed=5)
    default = np.asarray(K.make_dsa_kernels(N, TOPK)[0](*args), np.float32)
    return args, default


def _l1_kernel(backend="sim", **tiles):
    return pj.kernel(functools.partial(K.sparse_attention, scale_value=K.SOFTMAX_SCALE,
                                       tiles=dict(gather_l1=True, **tiles)), backend=backend)


@pytest.mark.parametrize("tiles", [{}, {"qk_l1": (2, 16, 2), "pv_l1": (2, 16, 2)}], ids=["default", "chunked"])
def test_sparse_attention_with_and_without_the_l1_gather(sfa_case, tiles):
    """Same numbers as the default path (CANN's criterion against the reference; at most 1 % of the bf16
    outputs one rounding apart from the default path's), with no [T, k, D] GM intermediate."""
    args, default = sfa_case
    low = pj.lower(functools.partial(K.sparse_attention, scale_value=K.SOFTMAX_SCALE,
                                     tiles=dict(gather_l1=True, **tiles)), *args)
    block = low.as_text("block")
    assert "gather_qk<AIC>" in block and "gather_pv<AIC>" in block
    assert f"[{B * S1},{TOPK},512] = block_call" not in block and "gather#2" not in block
    got = np.asarray(_l1_kernel(**tiles)(*args), np.float32)
    cann_close(got, sfa_ref(*args))
    differ = got != default
    assert differ.mean() <= 0.01
    np.testing.assert_allclose(got[differ], default[differ], rtol=2 ** -7)          # one bf16 rounding


def test_sparse_attention_l1_gather_fp32_and_xla(sfa_case):
    args, _ = sfa_case
    a32 = [a.astype(np.float32) if a.dtype == jnp.bfloat16 else a for a in args]
    eager = np.asarray(_l1_kernel()(*a32))
    np.testing.assert_allclose(eager, sfa_ref(*a32), rtol=5e-3, atol=1e-4)
    # under jax.jit the replay: the gathers into the transposed operand's L1 tile (zn) bit for bit
    np.testing.assert_array_equal(bits(np.asarray(jax.jit(_l1_kernel())(*a32))), bits(eager))
    cann_close(np.asarray(_l1_kernel("xla")(*args), np.float32), sfa_ref(*args))
    with pytest.raises(pj.PtoArgumentError, match="p_dtype float16 must be float32 or the value dtype bfloat16"):
        pj.lower(functools.partial(K.sparse_attention, scale_value=0.1, p_dtype=jnp.float16,
                                   tiles={"gather_l1": True}), *args)
    with pytest.raises(pj.PtoShapeError,
                       match=r"tiles\['qk_l1'\] gives top-k rows x chunks per task 16 x 3, which does not divide 64"):
        pj.lower(functools.partial(K.sparse_attention, scale_value=0.1, tiles={"gather_l1": True,
                                                                               "qk_l1": (None, 16, 3)}), *args)
