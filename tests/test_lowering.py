"""Tile lowering: the seed's worked example, pass verification over many kernels, IR size, errors."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import F16, rand
from kernels import KERNELS, seed_kernel
from ptojax.lowering import ir
from ptojax.lowering.memory import ASCEND_CORE
from ptojax.lowering.partition import _plan
from ptojax.lowering.pipeline import TOLERANCE

O = pj.ops


def _count_eqns(jaxpr):
    """Eqns of a jaxpr, its loop bodies and its grid / block bodies."""
    n = 0
    for eqn in jaxpr.eqns:
        n += 1
        for key, value in eqn.params.items():
            if key.endswith("jaxpr") and value is not None:
                n += _count_eqns(getattr(value, "jaxpr", value))
        if "spec" in eqn.params:
            n += sum(_count_eqns(p.body.jaxpr) for p in eqn.params["spec"].parts)
    return n


def test_seed_example_has_three_programs():
    a, b, w = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    low = pj.lower(seed_kernel, a, b, w)
    calls = [e.params["spec"] for e in low.block.jaxpr.eqns if e.primitive is ir.block_call_p]
    summary = [[(p.program.name, p.program.core, p.instances) for p in c.parts] for c in calls]
    assert summary == [[("mul+add", "AIV", 4)], [("matmul", "AIC", 1)], [("sum", "AIV", 2)]]
    assert [p.name for p in low.programs] == ["mul+add", "matmul", "sum"]
    assert low.programs[1].label == "Linear"
    # Numbers: the block level against an independent float64 golden (fp16 rounding of A*c+B).
    x = (a.astype(np.float64) * 2 + b.astype(np.float64)).astype(np.float16).astype(np.float64)
    golden = (x @ w.astype(np.float64)).sum(-1)
    np.testing.assert_allclose(np.asarray(low.evaluate("block", a, b, w), np.float64), golden, rtol=1e-5, atol=1e-4)
    report = low.verify(a, b, w)
    assert set(report) == {"tensor", "tile", "block"}


def test_fused_block_keeps_the_intermediate_in_ub():
    low = pj.lower(seed_kernel, *(jax.ShapeDtypeStruct(s, jnp.float16) for s in ((64, 64), (64, 64), (64, 32))))
    body = low.programs[0].body.jaxpr
    names = [e.primitive.name for e in body.eqns]
    assert names == ["pto.tload", "pto.tmul", "pto.tload", "pto.tadd", "pto.tstore"]  # no store/load of A*c


def test_fusion_follows_the_group_that_emits_an_operand_not_its_eqn():
    """Depth merging alone: ``d`` reads ``b`` (group B) and ``c``; ``c``'s eqn comes after B's first eqn,
    but it joined group A, emitted before B — so ``d`` joins B: two groups, not three."""
    def kernel(x, y):
        with pj.tile(vec=(8, 16)):
            a = x * 2.0
            b = y + 1.0
            c = a - 3.0
            return b * c

    x, y = rand((16, 32), np.float32), rand((16, 32), np.float32, 1)
    low = pj.lower(kernel, x, y)
    groups = _plan(low.tile.jaxpr, siblings=False)
    assert [[op for e in g for op in e.params["spec"].ops] for g in groups] == [["mul", "sub"], ["add", "mul"]]
    assert [p.name for p in low.programs] == ["mul+sub+add+mul"]           # with sibling merging: one block
    np.testing.assert_array_equal(np.asarray(pj.kernel(kernel)(x, y)), np.asarray(jax.jit(kernel)(x, y)))


def _siblings(tile):
    def kernel(x, y, z):
        with pj.tile(vec=tile):
            a, b, c = x * 2.0, y + 1.0, z - 1.0     # three groups, each reading only inputs
            return a * 3.0 + b, c + a               # each result reads two of them
    return kernel


def test_sibling_groups_share_a_block_unless_that_overfills_ub():
    """Groups over the same tiles whose results one op reads together run in one block (one task per
    tile, not three); when keeping ``a`` in UB across the others would overfill UB (tiles of 80 KiB),
    still one block, elementwise on whole tiles: each tile in 2 pieces (three programs through GM before,
    twice the time). A result written over a source tile that dies there takes no tile of its own (as
    codegen writes it), so one block holds three tiles at most: 3 x 40 KiB fit, 3 x 80 KiB do not."""
    x, y, z = (rand((64, 1280), np.float32, seed) for seed in range(3))
    for tile, pieces in (((16, 640), None), ((32, 640), 2)):
        kernel = _siblings(tile)
        low = pj.lower(kernel, x, y, z)
        assert [p.name for p in low.programs] == ["mul+mul+add+add+sub+add"], tile
        assert (f"each tile in {pieces} pieces" in low.programs[0].note) if pieces else "pieces" not in low.programs[0].note
        pj.kernel(kernel).lower(x, y, z).compile().ptoas()          # what ptoas plans in the UB
        assert all(used <= ASCEND_CORE.buffer(loc) for p in low.programs for loc, used in p.footprint)
        a = x * np.float32(2)                       # NumPy float32: no fused multiply-adds
        for got, want in zip(pj.kernel(kernel)(x, y, z), (a * np.float32(3) + (y + np.float32(1)), z - np.float32(1) + a)):
            np.testing.assert_array_equal(np.asarray(got), want)


def test_siblings_without_a_common_reader_stay_apart():
    """Two results read by different ops: merging would make each reader wait for both."""
    def kernel(x, y):
        with pj.tile(vec=(8, 16)):
            a, b = x * 2.0, y + 1.0
            return jnp.exp(a), b * 3.0

    x, y = rand((16, 32), np.float32), rand((16, 32), np.float32, 1)
    assert [p.name for p in pj.lower(kernel, x, y).programs] == ["mul+exp", "add+mul"]


@pytest.mark.parametrize("name,kernel,args", KERNELS, ids=[k[0] for k in KERNELS])
def test_verify_every_level(name, kernel, args):
    low = pj.lower(kernel, *args)
    report = low.verify(*args)
    assert set(report) == {"tensor", "tile", "block"}
    # The block level against plain JAX on the original function: exact for integers, and twice the
    # per-level float tolerance (the two levels between them may each round differently).
    want = jax.tree.leaves(jax.jit(kernel)(*args))
    got = jax.tree.leaves(low.evaluate("block", *args))
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert w.shape == g.shape and w.dtype == g.dtype
        rtol, atol = TOLERANCE.get(np.dtype(w.dtype), (0, 0))
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=2 * rtol, atol=2 * atol)
    assert len(low.programs) >= 1
    assert low.as_text("tensor").startswith("kernel(") and low.as_text("tile").startswith("kernel(")
    assert low.as_text("block").startswith("program ")


def test_ir_does_not_grow_with_the_tensor():
    def kernel(x, y):
        with pj.tile(vec=(8, 1024)):
            return jnp.exp(x) * y + 1.0

    sizes = []
    for rows in (1024, 16384):
        spec = jax.ShapeDtypeStruct((rows, 1024), jnp.float32)
        low = pj.lower(kernel, spec, spec)
        sizes.append((_count_eqns(low.tile.jaxpr), _count_eqns(low.block.jaxpr)))
        (call,) = low.block.jaxpr.eqns
        assert call.params["spec"].parts[0].instances == rows // 8
    assert sizes[0] == sizes[1]


def test_tail_tiles_have_their_own_programs():
    low = pj.lower(lambda x: _vec((16, 16), lambda: x * 2 + 1), jax.ShapeDtypeStruct((37, 50), jnp.float32))
    (call,) = low.block.jaxpr.eqns
    assert [(p.shape, p.instances) for p in call.params["spec"].parts] == [((2, 3), 6), ((2, 1), 2), ((1, 3), 3), ((1, 1), 1)]
    shapes = [p.program.body.jaxpr.eqns[0].outvars[0].aval.shape for p in call.params["spec"].parts]
    assert shapes == [(16, 16), (16, 2), (5, 16), (5, 2)]  # tail tiles carry their valid shape


def _vec(tile, fn):
    with pj.tile(vec=tile):
        return fn()


def test_inner_tile_scope_wins_and_labels_come_from_named_scope():
    def kernel(x):
        with pj.tile(vec=(8, 8)):
            y = x + 1
            with pj.tile(vec=(16, 32)), jax.named_scope("Inner"):
                z = y * 2
        return z

    low = pj.lower(kernel, jax.ShapeDtypeStruct((64, 64), jnp.float32))
    text = low.as_text("tensor")
    assert "pto.add(%0, 1.0)    # vec=8x8" in text
    assert "pto.mul(%1, 2.0)    # vec=16x32 label=Inner" in text
    grids = [e.params["spec"] for e in low.tile.jaxpr.eqns]
    assert [g.parts[0].shape for g in grids] == [(8, 8), (4, 2)] and grids[1].label == "Inner"


def test_an_einsum_takes_the_label_around_it_or_its_spec():
    """jnp.einsum opens a scope named by its spec: the user's label around it wins, and a tile override
    keyed by that label reaches the einsum's matmul."""
    def kernel(q, k):
        with pj.tile(cube=(64, 64, 64)), jax.named_scope("Score"):
            s = jnp.einsum("qhd,khd->hqk", q, k, preferred_element_type=jnp.float32)
        return s + jnp.einsum("qhd,khd->hqk", q, k, preferred_element_type=jnp.float32)

    q = jax.ShapeDtypeStruct((64, 4, 64), jnp.float32)
    matmuls = [l for l in pj.lower(kernel, q, q).as_text("tensor").splitlines() if "pto.matmul" in l]
    assert [l.rpartition("label=")[2] for l in matmuls] == ["Score", "qhd,khd->hqk"]
    for spec in ("ij,jk", "ij, jk -> ik", "ij,jk->ik"):        # an implicit output, spaces: still its own scope
        def scoped(a, b, spec=spec):
            with jax.named_scope("attn"):
                return jnp.einsum(spec, a, b)
        text = pj.lower(scoped, jax.ShapeDtypeStruct((8, 16), jnp.float32),
                        jax.ShapeDtypeStruct((16, 8), jnp.float32)).as_text("tensor")
        assert [l.rpartition("label=")[2] for l in text.splitlines() if "pto.matmul" in l] == ["attn"], spec
    low = pj.kernel(kernel, options={"tiles": {"Score": {"cube": (32, 32, 32)}}}).lower(q, q)
    assert "tile_grid[cube matmul label=Score parts=4x2x2]" in low.as_text("tile")


def test_tile_is_metadata_outside_lowering():
    x = jnp.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(jax.jit(seed_kernel)(x.astype(jnp.float16).repeat(32, 0).repeat(22, 1)[:64, :64],
                                                       jnp.zeros((64, 64), jnp.float16), jnp.ones((64, 32), jnp.float16)),
                                  seed_kernel(x.astype(jnp.float16).repeat(32, 0).repeat(22, 1)[:64, :64],
                                              jnp.zeros((64, 64), jnp.float16), jnp.ones((64, 32), jnp.float16)))


def test_tiles_per_block_option_per_label():
    def kernel(x):
        with pj.tile(vec=(8, 64)), jax.named_scope("V1"):
            y = x * 2
        with pj.tile(vec=(8, 64)), jax.named_scope("V2"):
            return O.exp(y) + 1

    spec = jax.ShapeDtypeStruct((64, 64), jnp.float32)
    base = pj.lower(kernel, spec)
    tuned = pj.lower(kernel, spec, options={"tiles_per_block": {"DEFAULT": 1, "V1": 4}})
    count = lambda low: [p.instances for e in low.block.jaxpr.eqns for p in e.params["spec"].parts]  # noqa: E731
    assert count(base) == [8, 8] and count(tuned) == [2, 8]
    x = rand((64, 64), np.float32)
    tuned.verify(x)


def test_misaligned_vector_tile_is_an_error():
    def kernel(x):
        with pj.tile(vec=(32, 8)), jax.named_scope("Scale"):
            return x * 2

    with pytest.raises(pj.PtoArgumentError, match=r"pto\.mul \(label 'Scale'\): vec tile \(32, 8\) has a last dim of "
                                                   r"8 x 2 bytes \(float16\) = 16 bytes; it must be a multiple of 32 bytes"):
        pj.lower(kernel, jax.ShapeDtypeStruct((64, 64), jnp.float16))
    pj.lower(kernel, jax.ShapeDtypeStruct((64, 64), jnp.float32))  # 8 x 4 bytes is aligned


def test_oversize_cube_tile_is_an_error_where_it_is_set():
    with pytest.raises(pj.PtoCapacityError, match=r"cube tile \(m=256, k=256, n=256\) needs 262144 bytes of L0C even for "
                                                   r"int8 operands; L0C holds 131072 bytes"):
        with pj.tile(cube=(256, 256, 256)):
            pass
    with pytest.raises(pj.PtoArgumentError, match=r"must be multiples of the 16x16x16 fractal"):
        with pj.tile(cube=(64, 40, 32)):
            pass


def test_cube_tile_that_overflows_l0a_for_its_dtype():
    def kernel(a, b):
        with pj.tile(cube=(256, 256, 64)):  # fits L0A for int8, not for fp16 (128 KiB)
            return O.matmul(a, b)

    with pytest.raises(pj.PtoCapacityError, match=r"block 'matmul' \(AIC\) needs 131072 bytes of L0A at its peak; "
                                                   r"L0A holds 65536 bytes"):
        pj.lower(kernel, jax.ShapeDtypeStruct((256, 512), jnp.float16), jax.ShapeDtypeStruct((512, 64), jnp.float16))


def test_a_quantize_row_too_long_for_its_rule_lowers_as_its_reference():
    """A quantization keeps its row whole in its rule; a row whose float32 copies would overfill the UB
    lowers as its reference's ops (an amax that stages or loops, then elementwise), as the row-wise
    composites do."""
    def kernel(x):
        with pj.tile(vec=(8, 64)), jax.named_scope("Scan"):
            return O.quantize(x, -1)[0]

    low = pj.lower(kernel, jax.ShapeDtypeStruct((64, 65536), jnp.float32))
    assert not any("quantize" in p.name.split("+") for p in low.programs)


def test_unknown_pass_option():
    with pytest.raises(pj.PtoArgumentError, match="unknown pass options"):
        pj.lower(lambda x: x * 2, jax.ShapeDtypeStruct((8, 8), jnp.float32), options={"l1_reuse": 2})


def test_verify_catches_a_wrong_level():
    a, b, w = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    low = pj.lower(seed_kernel, a, b, w)
    broken = jax.make_jaxpr(lambda a, b, w: seed_kernel(a, b, w) + 1.0)(a, b, w)
    with pytest.raises(pj.PtoVerifyError, match=r"level 'block' output 0 \(float32\[64\]\) differs"):
        type(low)(low.traced, low.tensor, low.tile, broken, low.programs, low.in_tree, low.out_tree).verify(a, b, w)


def test_large_constant_broadcasts_run_on_the_cores_not_folded():
    """jnp.where(mask, 1.0, 0.0) broadcasts two scalars to the mask's shape: folding that at trace time
    would bake (rows x vocab) arrays into the kernel (4 GiB at 8192 x 128256); past FOLD_ELEMENTS the
    broadcast is an op that fills a GM tensor on the cores."""
    from ptojax.lowering.tensor import FOLD_ELEMENTS

    def fn(x):
        return jnp.where(x > 0, 1.0, 0.0) + jnp.zeros_like(x)

    big = np.random.default_rng(0).normal(size=(1024, 2048)).astype(np.float32)     # 2M elements > 1M
    low = pj.lower(fn, big)
    consts = low.level("tensor").consts
    assert all(np.size(c) <= FOLD_ELEMENTS for c in consts), [np.shape(c) for c in consts]
    np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(big)), (big > 0).astype(np.float32))
    small = big[:8, :16]
    assert pj.lower(fn, small).level("tensor").consts                                 # small ones still fold


def test_default_tiles_count_padded_rows():
    """Narrow rows take a UB row of 32 bytes each: the default tile of (30000, 2) fp32 holds 32 KiB of
    padded rows (1 024), not 4 096 rows of 8 bytes — whose fused program needed 256 KiB of UB."""
    x = np.random.default_rng(1).normal(size=(30000, 2)).astype(np.float32)
    fn = lambda a: jnp.exp(a) * 2 + 1  # noqa: E731
    np.testing.assert_allclose(np.asarray(pj.kernel(fn)(x)), np.exp(x) * 2 + 1, rtol=1e-6)
    assert "f32[1024,2] = pto.tload" in pj.kernel(fn).compiled_for(x).as_text("tile")


def test_logsumexp_sign_and_isfinite_translate():
    """jax.nn.logsumexp (is_finite, sign) over a row past a tile's columns, with inf, -inf and NaN rows."""
    x = np.random.default_rng(2).normal(size=(6, 20000)).astype(np.float32) * 5
    x[1, 3], x[2, :], x[3, 7] = np.inf, -np.inf, np.nan
    np.testing.assert_allclose(np.asarray(pj.kernel(lambda v: jax.nn.logsumexp(v, -1))(x)),
                               np.asarray(jax.nn.logsumexp(x, -1)), rtol=1e-6)
    y = np.array([1.0, np.inf, -np.inf, np.nan, -0.0, 0.0, 3e38, -2.5, 1e-30], np.float32)
    for fn in (jnp.sign, jnp.isfinite):
        got, want = np.asarray(pj.kernel(fn)(y)), np.asarray(fn(y))
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))   # -0.0 and NaN bits too
    ints = np.array([-7, 0, 9], np.int32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(jnp.sign)(ints)), [-1, 0, 1])


SPECIALS = np.array([0.0, -0.0, 0.3, -0.3, 0.5, -0.5, 1.5, 2.5, -2.5, 7.7, -7.7, 8388607.5, -8388607.5, 1e30, -1e30,
                     np.inf, -np.inf, np.nan, 1e-30, -1e-30, 123456.49], np.float32)


@pytest.mark.parametrize("fn", [jnp.floor, jnp.ceil, jnp.round, jax.lax.round, jnp.trunc],
                         ids=["floor", "ceil", "round-even", "round-away", "trunc"])
def test_rounding_to_integers_is_exact(fn):
    """Bit for bit against XLA: half-way cases, -0.0 from a negative fraction, |x| >= 2**23, inf, NaN."""
    got, want = np.asarray(pj.kernel(fn)(SPECIALS)), np.asarray(jax.jit(fn)(SPECIALS))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("name", ["log1p", "expm1"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_log1p_and_expm1_keep_small_arguments(name, dtype):
    """Within 2 ulp of float64's, also where log(1 + x) and exp(x) - 1 would lose x (|x| << 1)."""
    x = np.concatenate([np.random.default_rng(3).normal(size=100_000) * 3, 10.0 ** -np.arange(1, 30, 2),
                        -(10.0 ** -np.arange(1, 30, 2)), [0.0, -0.0, -1.0, 88.0, 100.0, -100.0, np.inf, -np.inf, np.nan]])
    x = x[np.abs(x) > 1e-4].astype(dtype) if dtype == np.float16 else x.astype(dtype)
    x = x[(x > -1) | (name == "expm1") | (x == -1)]
    got = np.asarray(pj.kernel(getattr(jnp, name))(x)).astype(np.float64)
    with np.errstate(all="ignore"):      # log1p(-1) = -inf; inf past the dtype's range
        want = getattr(np, name)(x.astype(np.float64)).astype(dtype).astype(np.float64)
        ulp = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
        err = np.abs(got - want)
    finite = np.isfinite(want)
    assert np.all(err[finite] <= 2 * ulp[finite]), x[finite][err[finite] > 2 * ulp[finite]]
    np.testing.assert_array_equal(got[~finite], want[~finite])


def test_any_and_all():
    x = np.random.default_rng(4).normal(size=(6, 9)).astype(np.float32)
    x[2] = -1
    for fn in (lambda v: jnp.any(v > 1.5, -1), lambda v: jnp.all(v < 1.5, 0), lambda v: jnp.any(v > 0)):
        np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x)), np.asarray(fn(x)))


@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16], ids=["float32", "bfloat16"])
def test_erf_translates_within_8_ulp(dtype):
    import math
    x = np.concatenate([np.linspace(-6, 6, 2001), [3.9265358],        # 8 ulp (all of [3, 4.05] tried)
                        [0.0, -0.0, 1e-30, 1e-5, np.inf, -np.inf, np.nan]]).astype(dtype)
    got = np.asarray(pj.kernel(jax.scipy.special.erf)(x)).astype(np.float64)
    xs = x.astype(np.float64)
    want = np.array([math.erf(v) if not np.isnan(v) else np.nan for v in xs]).astype(dtype).astype(np.float64)
    ulp = np.spacing(np.abs(want).astype(dtype).astype(np.float32)).astype(np.float64)
    if dtype != np.float32:
        ulp = np.maximum(ulp, np.abs(want) * 2.0 ** -7)                # bfloat16: one rounding of the f32 value
    finite = np.isfinite(want)
    assert np.all(np.abs(got - want)[finite] <= 8 * ulp[finite])
    np.testing.assert_array_equal(np.signbit(got[xs == 0]), np.signbit(xs[xs == 0]))
    assert np.isnan(got[-1])


def test_a_label_is_a_fusion_boundary():
    """As docs/concepts.md says: a label per op turns ``tanh(x * 2) - 1`` into three programs and three
    times the tasks."""
    def one(x):
        with pj.tile(vec=(32, 128)), jax.named_scope("A"):
            return jnp.tanh(x * 2) - 1

    def three(x):
        with pj.tile(vec=(32, 128)):
            with jax.named_scope("A"):
                y = x * 2
            with jax.named_scope("B"):
                y = jnp.tanh(y)
            with jax.named_scope("C"):
                return y - 1

    x = np.ones((256, 128), np.float32)
    assert [len(pj.lower(f, x).programs) for f in (one, three)] == [1, 3]
    tasks = [pj.kernel(f).lower(x).compile().profile().tasks for f in (one, three)]
    assert tasks[1] == 3 * tasks[0]


def test_every_value_the_levels_use_is_defined():
    """The trace's constants (a causal mask, a fill) are declared in the printed levels."""
    def kernel(s):
        mask = jnp.arange(64)[:, None] >= jnp.arange(64)[None, :]
        return jax.nn.softmax(jnp.where(mask, s, -jnp.inf), -1)

    low = pj.lower(kernel, jax.ShapeDtypeStruct((4, 64, 64), jnp.float32))
    for level in ("tensor", "block"):
        graph = low.as_text(level).split("\n\n")[-1].splitlines()
        defined = set(re.findall(r"%\d+", graph[0]))
        for line in graph[1:]:
            lhs, _, rhs = line.partition(" = ")
            assert set(re.findall(r"%\d+", rhs or lhs)) <= defined, (level, line)
            defined |= set(re.findall(r"%\d+", lhs))
        assert any(re.search(r"%\d+:bool\[64,64\] = constant$", line) for line in graph), level
