"""Indices of a symbolic size made on the cores; DeepSeek-V3.2 sparse attention and the DIA chain with a
symbolic batch B at decode (one new token per sequence, so the token count T = B): one compile serves
every B.

``jnp.arange(m)`` of a symbolic ``m`` cannot fold to a constant: the Tensor level keeps it as
``pto.iota`` (a ``broadcasted_iota`` as that iota broadcast), and each of its tiles makes its own
indices with PTO's ``tci``, started at the tile's place in the sequence (the grid index times the
tile, in ``i32``). Sparse attention needs it for its cache slots (``arange(B) * MB``, the rows of the
flat block table); the caches stay static (a pool of 8 blocks of 128). Its output meets CANN's
criterion against the plain-JAX reference (the static kernel's test), ``ptoas`` accepts the dynamic
module; its block-table Gather reads the flat table at computed offsets, so ``jax.export`` refuses it
and names why. The DIA chain (Indexer Prolog, Lightning Indexer and top-k, sparse attention) composes.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from deepseek_cases import H, MAX_BLOCKS, N, Q_LORA, TOPK, K, R, cann_close, fp16_close, int8_close, sfa_ref
from ptojax.errors import PtoUnsupportedError

POOL, BS = 8, 128
# query, kv cache, sparse indices, block table, key lengths, query rope, rope cache
POLY = ("b, 4, 512", None, "b, 1, 64", f"b, {MAX_BLOCKS}", "b", "b, 4, 64", None)


# ------------------------------------------------------------------------------ iota of a symbolic size
def _rows_plus_index(x):
    with pj.tile(vec=(32, 64)):
        return x + jnp.arange(x.shape[0], dtype=jnp.float32)[:, None]


def _causal(x):
    with pj.tile(vec=(16, 64)):
        visible = jnp.arange(x.shape[0])[:, None] >= jnp.arange(64)[None, :]
        return jnp.where(visible, x, -1.0)


def _broadcasted(x):
    with pj.tile(vec=(8, 64)):
        return x * jax.lax.broadcasted_iota(jnp.int32, x.shape, 0) + jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)


@pytest.mark.parametrize("fn, want", [
    (_rows_plus_index, lambda x: x + np.arange(len(x), dtype=np.float32)[:, None]),
    (_causal, lambda x: np.where(np.arange(len(x))[:, None] >= np.arange(64)[None, :], x, np.float32(-1.0))),
    (_broadcasted, lambda x: x * np.arange(len(x), dtype=np.int32)[:, None] + np.arange(64, dtype=np.int32)),
])
def test_arange_of_the_rows_equals_plain_jax(fn, want):
    """One compile; at 1, 17 and 130 rows (a tail block in every program but at 1) the numbers of
    plain JAX exactly; the Tensor level keeps the iota as ``pto.iota``."""
    dtype = np.int32 if fn is _broadcasted else np.float32
    k = pj.kernel(fn, polymorphic_shapes=("m, 64",))
    for m in (1, 17, 130):
        x = np.random.default_rng(m).integers(-50, 50, (m, 64)).astype(dtype)
        np.testing.assert_array_equal(np.asarray(k(x)), want(x))
    assert k.compiles == 1
    m, = jax.export.symbolic_shape("m")
    tensor = k.lower(jax.ShapeDtypeStruct((m, 64), dtype)).as_text("tensor")
    assert "i32[m] = pto.iota[size=m]()" in tensor, tensor


def test_the_iota_is_real_pto():
    """Each tile of the iota is ``tci`` from its grid index times the tile (64), cast in ``i32``; the
    tail block's tile has ``valid_col = %dyn_vr``; ``ptoas`` accepts the module."""
    k = pj.kernel(_rows_plus_index, polymorphic_shapes=("m, 64",))
    compiled = k.compiled_for(np.zeros((17, 64), np.float32))
    text = compiled.as_text("pto")
    iota = text.split("func.func @iota")[1].split("func.func")[0]
    assert "arith.index_cast %i0 : index to i32" in iota
    assert "pto.tci ins(" in iota and "{descending = false} : i32)" in iota
    assert "pto.alloc_tile valid_col = %dyn_vr : !pto.tile_buf<loc=vec, dtype=i32, rows=1, cols=64, v_row=1, v_col=?" \
        in iota
    assert "TCI<" in compiled.ptoas()


def test_a_static_arange_still_folds():
    """A kernel of static shapes folds its aranges to constants, as before: no ``pto.iota``."""
    tensor = pj.kernel(_causal).lower(np.zeros((17, 64), np.float32)).as_text("tensor")
    assert "iota" not in tensor


# ------------------------------------------------------------------------------------ sparse attention
def _inputs(b, topk=TOPK):
    """``b`` sequences of one new token each (lengths up to the table's 512 positions, blocks drawn
    from a static pool, -1 past each length); top-k positions some past the causal limit, the last
    eighth -1."""
    rng = np.random.default_rng(b)
    lens = rng.integers(1, MAX_BLOCKS * BS + 1, b).astype(np.int32)
    table = rng.integers(0, POOL, (b, MAX_BLOCKS)).astype(np.int32)
    table[np.arange(MAX_BLOCKS)[None, :] * BS >= lens[:, None]] = -1
    idx = np.full((b, 1, topk), -1, np.int32)
    for i in range(b):
        pos = rng.permutation(min(int(lens[i]) + 8, MAX_BLOCKS * BS))[:topk]
        n = len(pos) - len(pos) // 8
        idx[i, 0, :n] = pos[:n]
    bf = jnp.bfloat16
    kv, kr = ((rng.normal(0, 1, (POOL, BS, 1, d)) * 0.5).astype(bf) for d in (512, 64))
    return (rng.normal(0, 1, (b, N, 512)).astype(bf), kv, idx, table, lens, rng.normal(0, 1, (b, N, 64)).astype(bf), kr)


def _attention(**options):
    return pj.kernel(functools.partial(K.sparse_attention, scale_value=K.SOFTMAX_SCALE), **options)


@pytest.fixture(scope="module")
def attention():
    return _attention(polymorphic_shapes=POLY)


def _check(attention, b):
    args = _inputs(b)
    got = attention(*args)
    assert got.shape == (b, N, 512) and got.dtype == jnp.bfloat16
    cann_close(got, sfa_ref(*args))


def test_one_compile_serves_every_batch(attention):
    """The outputs at B = 3 and 17; at 17 the tasks of the static kernel compiled for 17 sequences, and
    those that make the cache slots' rows ``arange(B) * MB``, which the static kernel folds to a
    constant: the iota's one block of 64 and the slot arithmetic's one block per sequence."""
    _check(attention, 3)
    _check(attention, 17)
    args = _inputs(17)
    static = _attention().lower(*args).compile().profile(*args, compute=False).tasks
    assert attention.compiled_for(*args).profile(m=17).tasks == static + 1 + 17
    assert attention.compiles == 1


def test_a_top_k_of_no_whole_32_bytes():
    """k = 20: the slot stage's tile (1, k) also tiles the batch offsets' iota, 80 bytes a block where B
    is symbolic (a 32-byte alignment error); its default is k rounded up to 8 int32s."""
    poly = tuple(p.replace(", 64", ", 20") if p and p.startswith("b, 1,") else p for p in POLY)
    attention = _attention(polymorphic_shapes=poly)
    for b in (1, 3):
        args = _inputs(b, topk=20)
        cann_close(attention(*args), sfa_ref(*args))
    assert attention.compiles == 1


@pytest.mark.slow
@pytest.mark.parametrize("b", (1, 64, 130))
def test_one_compile_serves_more_batches(attention, b):
    _check(attention, b)
    assert attention.compiles == 1


def test_the_dynamic_attention_is_real_pto(attention):
    compiled = attention.compiled_for(*_inputs(3))
    text = compiled.as_text("pto")
    assert "pto.tci ins(" in text                                          # arange(B): the cache slots' rows
    gather = text.split("func.func @gather(")[1].split("func.func")[0]     # the flat block table [4·B] ...
    assert "!pto.tensor_view<?xi32>" in gather and "%dyn_m4 = arith.muli %dyn_m, %dyn_k4 : index" in gather
    assert "arith.cmpi ult" in gather and "arith.index_cast %dyn_m : index to i32" in gather   # ... and its bound
    cpp = compiled.ptoas()                                                 # Huawei's ptoas accepts it
    assert "TCI<" in cpp and "AICORE void gather(" in cpp


def test_under_jit_the_attention_runs_on_the_host_runtime(attention):
    """``jax.jit`` of the polymorphic kernel: the replay cannot give the Gather's blocks their rows only,
    so the call runs the dynamic module through a callback, with the eager call's numbers."""
    args = _inputs(3)
    assert "at computed offsets" in attention.compiled_for(*args).replay()
    jitted = jax.jit(attention)
    assert "callback" in jitted.lower(*args).as_text()
    np.testing.assert_array_equal(np.asarray(jitted(*args), np.float32), np.asarray(attention(*args), np.float32))


def test_sparse_attention_does_not_export_with_a_symbolic_batch():
    """The block-table Gather reads the flat table at computed offsets: the replay cannot give a block
    only its own rows, so the export says so (the kernel runs on the runtime, above)."""
    specs = jax.export.symbolic_args_specs(_inputs(3), POLY)
    with pytest.raises(PtoUnsupportedError) as err:
        jax.export.export(jax.jit(_attention()))(*specs)
    assert str(err.value) == ("pj.kernel 'sparse_attention': function 'gather' reads argument 0 (4*m rows) at computed "
                              "offsets: a block may read any of its rows, not only its own, so it cannot run for a "
                              "symbolic row count; with backend='xla' (pj.kernel's, or the pj.nn op's) it exports "
                              "for every row count")


# -------------------------------------------------------------------------------------------- the DIA chain
DIA_POOL = 40                       # index-cache and attention-cache blocks (up to 17 sequences of 2 blocks)
PROLOG = ("b, 256", "b, 128", "b, 1") + (None,) * 6 + ("b, 64", "b, 64") + (None,) * 4 + ("b",)
DIA_POLY = PROLOG + (f"b, {MAX_BLOCKS}", "b", "b, 4, 512", "b, 4, 64", None, None)


def _pad(x, rng):
    """A cache of the sequences' blocks, then blocks no sequence uses up to the static pool."""
    extra = rng.standard_normal((DIA_POOL - x.shape[0],) + x.shape[1:]) * (0.01 if x.dtype == np.float16 else 50)
    return np.concatenate([x, extra.astype(x.dtype)])


def _dia_inputs(b):
    rng = np.random.default_rng(b)
    seq = [int(s) for s in rng.integers(1, 2 * BS + 1, b)]
    pargs, table = R.prolog_inputs(b, 1, H, Q_LORA, N, seq, max_blocks=MAX_BLOCKS, seed=b)
    q, kv, _, _, lens, qr, kr = R.attention_inputs(b, 1, N, seq, TOPK, max_blocks=MAX_BLOCKS, seed=b + 1,
                                                   indices=False)
    pargs = list(pargs)
    pargs[13], pargs[14] = _pad(pargs[13], rng), _pad(pargs[14], rng)
    return (*pargs, table, lens, q, qr, _pad(kv, rng), _pad(kr, rng))


@pytest.mark.slow
def test_the_dia_chain_takes_a_symbolic_batch():
    """Prolog -> Lightning Indexer + top-k -> sparse attention as one kernel, compiled once: at B = 3
    and 17 the indices equal the chained references', the output meets CANN's criterion, the caches
    the prolog's."""
    dia = pj.kernel(functools.partial(K.dia, n_heads=N, sparse_count=TOPK, scale_value=K.SOFTMAX_SCALE,
                                      tiles={"indexer": {"gather_vec": (1, 8)}}), polymorphic_shapes=DIA_POLY)
    for b in (3, 17):
        args = _dia_inputs(b)
        out, idx, kc, ks = dia(*args)
        table, lens, q, qr, kv, kr = args[16:]
        rq, rqs, rw, rkc, rks = R.indexer_prolog(*args[:16], n_heads=N)
        ridx = np.asarray(R.lightning_indexer(rq, rkc, rw, rqs, rks, lens, table, sparse_count=TOPK))
        np.testing.assert_array_equal(np.asarray(idx), ridx)
        cann_close(out, sfa_ref(q, kv, ridx, table, lens, qr, kr))
        int8_close(kc, rkc)
        fp16_close(ks, rks)
    assert dia.compiles == 1
