"""The jitted replay of the real PTO-AS text (``ptojax.ascend.replay``), what ``jax.jit`` of a
``backend="sim"`` kernel runs: part of the XLA computation — no host callback, no custom call — it
computes what the eager engine computes from the same text: exactly for integer and boolean results,
within one ulp per element for floats (lowering test kernels, a fuzz sample); it composes with
``jax.vmap`` and with ``jax.grad`` through pj.nn's custom_vjp ops, threads share a jitted kernel, it
runs on a GPU where JAX sees one, and a kernel whose schedule reads device data (the MoE router)
keeps the host callback."""
import importlib
import re
import threading

import jax
import jax.numpy as jnp
from jax import lax
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import fuzz
import ptojax as pj
from helpers import assert_replay_matches
from kernels import KERNELS

K = importlib.import_module("ptojax.kernel")    # the module (pj.kernel is the decorator)
O = pj.ops


FAST = {"elementwise-tails", "int32-compare", "cast-int", "matmul-int8", "bf16-cast", "fp16-chain", "matmul-fp16-out",
        "indexing", "fori-loop"}


def _no_host_call(hlo: str):
    for word in ("callback", "custom_call", "custom-call"):
        assert word not in hlo, f"the lowered computation has a {word}"


@pytest.mark.parametrize("name,kernel,args", [pytest.param(*k, marks=() if k[0] in FAST else pytest.mark.slow)
                                              for k in KERNELS], ids=[k[0] for k in KERNELS])
def test_jitted_replay_equals_the_engine(name, kernel, args):
    compiled = pj.kernel(kernel).lower(*args).compile()
    assert K._replay(compiled) is not None, "the schedule of a lowering test kernel depends on no data"
    got = jax.jit(compiled)(*args)
    want, _ = compiled.run(*args)
    assert_replay_matches(got, want, name)


def test_the_seed_example_lowers_to_plain_xla_and_matches_the_engine():
    from kernels import seed_kernel
    a, b, w = (np.random.default_rng(i).uniform(-1, 1, s).astype(np.float16)
               for i, s in enumerate([(64, 64), (64, 64), (64, 32)]))
    f = pj.kernel(seed_kernel)
    _no_host_call(jax.jit(f).lower(a, b, w).as_text())
    _no_host_call(jax.jit(f).lower(a, b, w).compile().as_text())
    want, _ = f.lower(a, b, w).compile().run(a, b, w)
    assert_replay_matches(jax.jit(f)(a, b, w), want, "seed")


def test_a_scalar_argument_that_steers_nothing_replays_and_profiles():
    """A 0-d argument that the programs read as data (a scale, a temperature) is a GM tensor like any
    other: the jitted kernel is XLA code (it was a host callback), and profile() needs no arguments (it
    said the scalar decides which tasks run); so does one the host computes with (a dynamic slice's
    clamped start), its arithmetic traced into the replay; a trip count the host reads steers, and says so."""
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    scaled = pj.kernel(lambda t, x: jax.nn.softmax(x / t, axis=-1))
    _no_host_call(jax.jit(scaled).lower(np.float32(0.7), x).as_text())
    want, _ = scaled.lower(np.float32(0.7), x).compile().run(np.float32(0.7), x)
    assert_replay_matches(jax.jit(scaled)(np.float32(0.7), x), want, "scaled softmax")
    assert_replay_matches(jax.jit(scaled)(np.float32(2.0), x), scaled(np.float32(2.0), x), "another scale")
    compiled = scaled.lower(np.float32(0.7), x).compile()
    assert compiled.profile().makespan_us == compiled.profile(np.float32(0.7), x).makespan_us
    window = pj.kernel(lambda x, start: jax.lax.dynamic_slice(x, (start, 0), (8, 64)) * 2)
    _no_host_call(jax.jit(window).lower(x, np.int32(8)).as_text())
    for start in (8, 60, -3):
        assert_replay_matches(jax.jit(window)(x, np.int32(start)), window(x, np.int32(start)), "window")
    assert window.lower(x, np.int32(8)).compile().profile().tasks > 0
    steps = pj.kernel(lambda x, n: jax.lax.fori_loop(0, n, lambda i, y: y * 2 + 1, x))
    with pytest.raises(pj.PtoArgumentError, match="the value of argument 1 'n'"):
        steps.lower(x, np.int32(3)).compile().profile()


@pytest.mark.parametrize("fn", [
    lambda x, t: (x + t / 3.0, t / 3.0),                     # XLA would multiply by 1/3: 16 in 60 t 1 ulp off
    lambda x, t: (x + jnp.log(t - 7.0), jnp.log(t - 7.0)),   # a NaN's bits (log of -6: 0xffffffff)
    lambda x, t: x + lax.erf(t) * jnp.sin(t),                # 77 host ops (the block calls' limit is 32)
    lambda x, t: lax.fori_loop(0, 40, lambda i, y: y * (1 - 0.9 ** t) + 1, x),   # one value, read 40 times
    lambda x, t: x * (t.astype(jnp.int32) // 3).astype(jnp.float32)],
    ids=["divide", "nan", "many-ops", "loop", "floor-divide"])
def test_the_hosts_arithmetic_on_arguments_replays_as_the_host_computes_it(fn):
    """Under ``jax.jit`` a kernel whose host computes with scalar arguments is XLA code, bit for bit the
    eager call: each host op traced behind barriers (no constant folded into it, no fusion with the next),
    the value one buffer however many calls and trips read it (a loop still rolls)."""
    x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    kernel = pj.kernel(fn)
    _no_host_call(jax.jit(kernel).lower(x, np.float32(1)).as_text())
    for t in (1.0, 9.009273529052734, -4.25):
        for got, want in zip(jax.tree.leaves(jax.jit(kernel)(x, np.float32(t))), jax.tree.leaves(kernel(x, np.float32(t)))):
            np.testing.assert_array_equal(np.asarray(got).reshape(-1).view(np.uint8),
                                          np.asarray(want).reshape(-1).view(np.uint8))


def test_grid_points_reading_one_tile_read_it_as_a_slice_not_an_index_table():
    """Attention over heads: every query block of a head reads the head's keys, so the grid points'
    element indices repeat along the query blocks. The replay reads them as a slice broadcast over the
    points (the module held 524 288-element index tables, one row per point: 9.6 MB of StableHLO) and
    equals the engine; what tables remain are one tile's offsets that every point shares (the cube's
    transposed load of a (128, 128) tile reads it as 16 384 runs of one element)."""
    t, h, d = 512, 4, 64
    q, k, v = (np.random.default_rng(i).standard_normal((t, h, d)).astype(np.float32) for i in range(3))

    def attention(q, k, v):
        s = jnp.einsum("qhd,khd->hqk", q, k) / np.float32(np.sqrt(d))
        return jnp.einsum("hqk,khd->qhd", jax.nn.softmax(s, axis=-1), v)

    f = pj.kernel(attention)
    text = jax.jit(f).lower(q, k, v).as_text()
    tables = [int(np.prod([int(n) for n in m.group(1).split("x")]))
              for m in re.finditer(r'dense<"0x[0-9A-F]*">\s*:\s*tensor<([0-9x]+)x\w+>', text)]
    assert max(tables, default=0) <= 128 * 128 and len(text) < 1_000_000, (max(tables, default=0), len(text))
    want, _ = f.lower(q, k, v).compile().run(q, k, v)
    assert_replay_matches(jax.jit(f)(q, k, v), want, "attention")


@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(fuzz.kernels(max_ops=3))
def test_fuzz_sample(spec):
    fn, args = fuzz.build(spec)
    compiled = pj.kernel(fn).lower(*args).compile()
    if K._replay(compiled) is None:           # a scalar input steers the host
        return
    want, _ = compiled.run(*args)
    assert_replay_matches(jax.jit(compiled)(*args), want, fuzz.describe(spec))


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16], ids=["bf16", "f16"])
def test_rows_picked_by_data_in_16_bit_floats_equal_the_engine(dtype):
    """Indices read from a tile steer which rows are loaded (out-of-range ones skipped under a
    condition read from data) and where they are stored or added: 16-bit float tiles and GM tensors,
    which the replay holds as their bits, written at traced offsets."""
    rng = np.random.default_rng(5)
    x, u = rng.uniform(-4, 4, (37, 50)).astype(dtype), rng.uniform(-4, 4, (24, 50)).astype(dtype)
    idx = rng.integers(-3, 40, 24).astype(np.int32)      # out of range: -3..-1, 37..39

    def k(x, i, u):
        with pj.tile(vec=(8, 16)):
            return O.gather(x, i, 0), O.scatter_update(x, i, u, 0), O.index_add(x, i, u, 0), jnp.take(x, jnp.abs(i), 0)

    compiled = pj.kernel(k).lower(x, idx, u).compile()
    assert "scf.if" in compiled.as_text("pto")
    want, _ = compiled.run(x, idx, u)
    assert_replay_matches(jax.jit(compiled)(x, idx, u), want, np.dtype(dtype).name)


def test_row_and_column_extremes_keep_the_first_zero_and_skip_nan():
    """Row and column max/min of a batch — the replay's plain reduction, its exact scan where a line
    holds NaN or its extreme is zero — equal the engine's: the first zero's sign; a line holding NaN
    is NaN wherever the NaN is (JAX's max: the real instructions see it only first, so selection
    adds a NaN pass)."""
    x = np.random.default_rng(3).uniform(-4, 4, (32, 48)).astype(np.float32)

    def k(x):
        with pj.tile(vec=(8, 16)):
            return jnp.max(x, axis=1), jnp.min(x, axis=1), jnp.max(x, axis=0), jnp.min(x, axis=0)

    plain = x.copy()
    x[1, :] = -np.abs(x[1, :])
    x[1, 5], x[1, 9] = -0.0, 0.0                 # row max is the first zero: -0.0
    x[2, :] = np.abs(x[2, :])
    x[2, 3], x[2, 4] = 0.0, -0.0                 # row min: +0.0
    x[3, 7], x[4, 0] = np.nan, np.nan            # skipped at index 7, the result at index 0
    x[:, 13] = -np.abs(x[:, 13])
    x[0, 13], x[2, 13] = -0.0, 0.0               # a column whose max is the first zero: -0.0
    compiled = pj.kernel(k).lower(x).compile()
    for arg in (plain, x):                       # no line that needs the scan; several that do
        want, _ = compiled.run(arg)
        got = jax.jit(compiled)(arg)
        assert_replay_matches(got, want, "extremes")
        for g, w in zip(got, want):                   # zeros' signs (a made NaN's sign says nothing)
            g, w = np.asarray(g), np.asarray(w)
            np.testing.assert_array_equal(np.signbit(g[~np.isnan(w)]), np.signbit(w[~np.isnan(w)]))
    assert np.signbit(np.asarray(got[0])[1]) and not np.signbit(np.asarray(got[1])[2])
    assert np.isnan(np.asarray(got[0])[3]) and np.isnan(np.asarray(got[0])[4])
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(jnp.max(x, axis=1)))
    assert np.signbit(np.asarray(got[2])[13])


def test_row_folds_of_a_large_batch_run_in_chunks_and_equal_the_engine():
    """515 grid points of a row sum and product: the replay folds them in chunks of points, a loop
    trip each (512 points), then the last three; every row equals the engine's sequential fold."""
    from ptojax.ascend import replay as R

    x = np.random.default_rng(8).uniform(0.5, 1.5, (8 * 515, 16)).astype(np.float32)

    def k(x):
        with pj.tile(vec=(8, 16)):
            return jnp.sum(x * 3.0, axis=1), jnp.prod(x, axis=1)

    assert 515 // (R.CHUNK_BYTES // (8 * 16 * 4)) >= 2 and 515 % (R.CHUNK_BYTES // (8 * 16 * 4))
    compiled = pj.kernel(k).lower(x).compile()
    assert {"pto.trowsum", "pto.trowprod"} <= set(compiled.as_text("pto").split())
    want, _ = compiled.run(x)
    got = jax.jit(compiled)(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _tile(dtype, rows, cols, v_row=None):
    return (f"!pto.tile_buf<loc=vec, dtype={dtype}, rows={rows}, cols={cols}, v_row={v_row or rows}, v_col={cols}, "
            "blayout=row_major, slayout=none_box, fractal=512, pad=0>")


# Grid point b copies rows idx[b, q] of src (12 x 16 bf16) to out[b, q] where idx[b, q] < 12 (unsigned),
# leaving zeros elsewhere: the gather of the DeepSeek sparse attention at a small size.
_PICK_ROWS = f"""module attributes {{pto.target_arch = "a3"}} {{
  func.func @pick_rows(%src: !pto.ptr<bf16>, %idx: !pto.ptr<i32>, %out: !pto.ptr<bf16>) {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c12 = arith.constant 12 : index
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    %n = arith.constant 12 : i32
    %z = arith.constant 0 : i16
    %bid = pto.get_block_idx
    %b = arith.index_cast %bid : i64 to index
    %vs = pto.make_tensor_view %src, shape = [%c12, %c16], strides = [%c16, %c1] : !pto.tensor_view<12x16xbf16>
    %vi = pto.make_tensor_view %idx, shape = [%c4, %c8], strides = [%c8, %c1] : !pto.tensor_view<4x8xi32>
    %vo = pto.make_tensor_view %out, shape = [%c4, %c8, %c16], strides = [%c128, %c16, %c1] : \
!pto.tensor_view<4x8x16xbf16>
    %ti = pto.alloc_tile : {_tile("i32", 1, 8)}
    %tr = pto.alloc_tile : {_tile("bf16", 8, 16)}
    %pi = pto.partition_view %vi, offsets = [%b, %c0], sizes = [%c1, %c8] : !pto.tensor_view<4x8xi32> -> \
!pto.partition_tensor_view<1x8xi32>
    pto.tload ins(%pi : !pto.partition_tensor_view<1x8xi32>) outs(%ti : {_tile("i32", 1, 8)})
    %ri = pto.treshape %tr : {_tile("bf16", 8, 16)} -> {_tile("i16", 8, 16)}
    pto.texpands ins(%z : i16) outs(%ri : {_tile("i16", 8, 16)})
    scf.for %q = %c0 to %c8 step %c1 {{
      %i = pto.tgetval ins(%ti, %q : {_tile("i32", 1, 8)}, index) outs : i32
      %ok = arith.cmpi ult, %i, %n : i32
      scf.if %ok {{
        %row = arith.index_cast %i : i32 to index
        %ps = pto.partition_view %vs, offsets = [%row, %c0], sizes = [%c1, %c16] : \
!pto.tensor_view<12x16xbf16> -> !pto.partition_tensor_view<1x16xbf16>
        %sub = pto.subset %tr[%q, %c0] sizes [1, 16] : {_tile("bf16", 8, 16)}
        pto.tload ins(%ps : !pto.partition_tensor_view<1x16xbf16>) outs(%sub : {_tile("bf16", 1, 16, "?")})
      }}
    }}
    %po = pto.partition_view %vo, offsets = [%b, %c0, %c0], sizes = [%c1, %c8, %c16] : \
!pto.tensor_view<4x8x16xbf16> -> !pto.partition_tensor_view<1x8x16xbf16>
    pto.tstore ins(%tr : {_tile("bf16", 8, 16)}) outs(%po : !pto.partition_tensor_view<1x8x16xbf16>)
    return
  }}
}}
"""


def test_grid_points_of_a_batch_whose_conditions_differ_write_only_their_own_rows():
    """The four grid points of one batch load a row each loop trip under a condition read from data
    that holds for some points only: a point's tile changes only where its condition holds."""
    from ptojax.ascend import engine
    from ptojax.ascend.replay_graph import call

    func = engine.parse(_PICK_ROWS).function("pick_rows")
    rng = np.random.default_rng(0)
    src = rng.uniform(-4, 4, (12, 16)).astype(ml_dtypes.bfloat16)
    idx = rng.integers(-2, 15, (4, 8)).astype(np.int32)

    def replay(src, idx):
        gm = {0: src.reshape(-1), 1: idx.reshape(-1), 2: jnp.zeros(4 * 8 * 16, src.dtype)}
        return call(func, gm, (0, 1, 2), np.arange(4))[2].reshape(4, 8, 16)

    ok = (idx >= 0) & (idx < 12)
    assert ok.any(axis=1).all() and not ok.all(axis=1).any()     # every point loads some rows and skips some
    want = np.where(ok[..., None], src[np.clip(idx, 0, 11)], np.zeros((), src.dtype))
    np.testing.assert_array_equal(np.asarray(jax.jit(replay)(src, idx)).view(np.uint16), want.view(np.uint16))


def test_vmap_of_a_jitted_kernel_is_one_replay():
    x = np.random.default_rng(0).normal(size=(3, 20, 48)).astype(np.float32)

    def k(x):
        with pj.tile(vec=(8, 16)):
            return jnp.exp(x) * 2.0 - x

    f = jax.jit(jax.vmap(pj.kernel(k)))
    _no_host_call(f.lower(x).as_text())
    np.testing.assert_allclose(np.asarray(f(x)), np.exp(x) * 2 - x, rtol=1e-6, atol=1e-6)


def test_threads_share_a_jitted_kernel():
    """Six threads call one jitted kernel on their own inputs, eight times each: every result is
    that input's result from one thread."""
    from kernels import seed_kernel

    rng = np.random.default_rng(4)
    inputs = [tuple(rng.uniform(-1, 1, s).astype(np.float16) for s in [(64, 64), (64, 64), (64, 32)])
              for _ in range(6)]
    jitted = jax.jit(pj.kernel(seed_kernel))
    wants = [np.asarray(jitted(*args)) for args in inputs]
    errors = []

    def work(i):
        try:
            for _ in range(8):
                np.testing.assert_array_equal(np.asarray(jitted(*inputs[i])), wants[i])
        except AssertionError as err:
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert len({w.tobytes() for w in wants}) == len(wants)          # the inputs give different results


def test_grad_through_a_custom_vjp_op_runs_as_xla():
    x = np.random.default_rng(1).normal(size=(16, 64)).astype(np.float32)
    g = np.random.default_rng(2).normal(size=(64,)).astype(np.float32)

    def loss(x, g, norm):
        return jnp.sum(norm(x, g) ** 2)

    sim = jax.jit(jax.grad(lambda x, g: loss(x, g, pj.nn.rms_norm), argnums=(0, 1)))
    _no_host_call(sim.lower(x, g).as_text())

    def ref(x, g, eps=1e-6):
        return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * g

    want = jax.grad(lambda x, g: loss(x, g, ref), argnums=(0, 1))(x, g)
    for got, w in zip(sim(x, g), want):
        np.testing.assert_allclose(np.asarray(got), np.asarray(w), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_deepseek_kernels_replay_under_jit():
    """The DeepSeek-V3.2 kernels at tests/test_deepseek.py's shapes: lengths and block tables are
    device arrays the replay indexes with, so they replay; equal to the engine."""
    import functools

    from deepseek_cases import B, H, MAX_BLOCKS, N, Q_LORA, S1, SEQ, TOPK
    from examples.deepseek_v32 import kernels as DK
    from examples.deepseek_v32 import reference as R

    sfa, _ = DK.make_dsa_kernels(N, TOPK)
    for fn, args in ((functools.partial(DK.indexer_prolog, n_heads=N),
                      R.prolog_inputs(B, S1, H, Q_LORA, N, SEQ, max_blocks=MAX_BLOCKS, seed=1)[0]),
                     (functools.partial(DK.lightning_indexer, sparse_count=TOPK),
                      R.indexer_inputs(B, S1, N, SEQ, max_blocks=MAX_BLOCKS, seed=2)),
                     (sfa.fn, R.attention_inputs(B, S1, N, SEQ, TOPK, max_blocks=MAX_BLOCKS, seed=5))):
        compiled = pj.kernel(fn).lower(*args).compile()
        assert K._replay(compiled) is not None
        want, _ = compiled.run(*args)
        assert_replay_matches(jax.jit(compiled)(*args), want, compiled.name)


def test_a_data_steered_kernel_keeps_the_host_path():
    """The MoE router reads per-expert counts back on the host: its jitted form is the host callback."""
    from examples import moe_router as M

    args = M.inputs()
    compiled = pj.kernel(M.moe_router).lower(*args).compile()
    assert K._replay(compiled) is None
    want, _ = compiled.run(*args)
    assert "callback" in jax.jit(compiled).lower(*args).as_text()
    for g, w in zip(jax.tree.leaves(jax.jit(compiled)(*args)), jax.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _gpus():
    try:
        return jax.devices("gpu")
    except RuntimeError:
        return []


@pytest.mark.skipif(not _gpus(), reason="JAX sees no GPU")
def test_the_replay_runs_on_a_gpu():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(40, 96)).astype(np.float32), rng.integers(-50, 50, (40, 96)).astype(np.int32)

    def k(x, y):
        with pj.tile(vec=(8, 32)):
            return jnp.sum(jnp.maximum(x * 2.0 + 1.0, x), axis=1), y * 3 - (y > 0)

    compiled = pj.kernel(k).lower(x, y).compile()
    want, _ = compiled.run(x, y)
    gpu = _gpus()[0]
    got = jax.jit(compiled)(jax.device_put(x, gpu), jax.device_put(y, gpu))
    assert all(leaf.devices() == {gpu} for leaf in jax.tree.leaves(got))
    assert_replay_matches(got, want, "gpu")

