"""pj.tiles: hand-written Tile-level grids inside kernels, and user-defined tile ops."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import asm, engine, isa, tile_semantics
from ptojax.errors import PtoExecutionError
from ptojax.mpmd import PtoTaskError

from helpers import bits, rand

W32 = pj.tiles.window((32, 32))


def hand_axpb(a, b, c=2.0):
    """The seed's elementwise example, written at the Tile level: (A*c + B), 32x32 tiles by hand."""
    def body(index, ins, outs):
        x = pj.tiles.load(ins[0], index, W32)
        y = pj.tiles.load(ins[1], index, W32)
        z = pj.tiles.add(pj.tiles.mul(x, c), y)
        return [pj.tiles.store(outs[0], z, index, W32)]

    grid = (a.shape[0] // 32, a.shape[1] // 32)
    with jax.named_scope("Hand"):
        return pj.tiles.grid(body, grid, (a, b), jax.ShapeDtypeStruct(a.shape, a.dtype))


def tensor_axpb(a, b, c=2.0):
    with pj.tile(vec=(32, 32)):
        return a * c + b


@pytest.fixture(scope="module")
def ab():
    return rand((64, 64), np.float16, 0, -1, 1), rand((64, 64), np.float16, 1, -1, 1)


@pytest.mark.parametrize("backend", ["sim", "xla"])
def test_hand_written_elementwise_equals_tensor_level_and_xla(ab, backend):
    a, b = ab
    hand = np.asarray(pj.kernel(hand_axpb, backend=backend)(a, b))
    tensor = np.asarray(pj.kernel(tensor_axpb, backend=backend)(a, b))
    np.testing.assert_array_equal(hand, tensor)
    np.testing.assert_array_equal(hand, np.asarray(jax.jit(tensor_axpb)(a, b)))


def test_hand_written_grid_is_an_ordinary_tile_grid(ab):
    a, b = ab
    low = pj.lower(hand_axpb, a, b)
    assert low.verify(a, b) == {"tensor": 0.0, "tile": 0.0, "block": 0.0}
    tile = low.as_text("tile")
    assert "tile_grid[vector body label=Hand parts=2x2]" in tile
    assert "pto.tmul" in tile and "pto.tadd" in tile
    assert "block_call[body<AIV> x4]" in low.as_text("block")
    pto = pj.kernel(hand_axpb).lower(a, b).compile().as_text("pto")
    assert "pto.tmuls" in pto and "pto.tadd ins(" in pto
    prof = pj.kernel(hand_axpb).lower(a, b).compile().profile(a, b)
    assert "Hand" in prof.label_us and prof.summary().startswith("simulated mpmd: 4 tasks")


def test_jnp_and_map_tiles_inside_a_body(ab):
    """The seed's split / compute / merge with a chosen tile config; jnp on tiles becomes tile ops."""
    a, _ = ab

    def f(x):
        return pj.tiles.map_tiles(lambda t: t * 2.0 + 1.0, x, (32, 64), label="Split")

    low = pj.lower(f, a)
    assert "pto.tmul" in low.as_text("tile") and "parts=2x1" in low.as_text("tile")
    out = np.asarray(pj.kernel(f)(a))
    np.testing.assert_array_equal(out, np.asarray(jax.jit(lambda x: x * 2.0 + 1.0)(a)))


def hand_matmul(x, w, m=32, k=32, n=32):
    """A K chain by hand: tmatmul on the first K tile, then tmatmul_acc in a fori_loop."""
    big_k = x.shape[1]

    def body(index, ins, outs):
        i, j = index
        wa = pj.tiles.window((m, k), index=(0, 2))     # rows follow grid index 0, K follows the counter
        wb = pj.tiles.window((k, n), index=(2, 1))

        def operands(kk):
            a = pj.tiles.mov(pj.tiles.load(ins[0], (i, j, kk), wa, "mat"), "left")
            b = pj.tiles.mov(pj.tiles.load(ins[1], (i, j, kk), wb, "mat"), "right")
            return a, b

        acc = pj.tiles.matmul(*operands(jnp.int32(0)))
        acc = jax.lax.fori_loop(1, big_k // k, lambda kk, c: pj.tiles.matmul_acc(c, *operands(kk)), acc)
        return [pj.tiles.store(outs[0], acc, index, pj.tiles.window((m, n)))]

    out = jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), np.float32)
    with jax.named_scope("HandMM"):
        return pj.tiles.grid(body, (x.shape[0] // m, w.shape[1] // n), (x, w), out)


def test_hand_written_k_chain_matmul():
    x, w = rand((64, 128), np.float16, 2, -1, 1), rand((128, 64), np.float16, 3, -1, 1)
    low = pj.lower(hand_matmul, x, w)
    assert "tile_grid[cube body label=HandMM parts=2x2]" in low.as_text("tile")
    low.verify(x, w)
    want = np.asarray(pj.kernel(lambda a, b: pj.ops.matmul(a, b))(x, w))
    got = np.asarray(pj.kernel(hand_matmul)(x, w))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(pj.kernel(hand_matmul, backend="xla")(x, w)), want, rtol=1e-5, atol=1e-5)
    pto = pj.kernel(hand_matmul).lower(x, w).compile().as_text("pto")
    assert "pto.tmatmul ins(" in pto and "pto.tmatmul.acc ins(" in pto and "scf.for" in pto


def _instructions(fn, *args):
    """Per block program: its PTO-AS statements' mnemonics, in order."""
    text = pj.kernel(fn).lower(*args).compile().as_text("pto")
    return [re.findall(r"^\s*(?:%\S+ = )?(pto\.[\w.]+|scf\.for)", prog, re.M) for prog in text.split("func.func @")[1:]]


def test_seed_gemm_relu_by_hand_equals_the_tensor_level():
    """The seed's fused GEMM + ReLU written at the Tile level (a K chain on the cube, ReLU on vector
    tiles) gives the Tensor-level version's numbers and its PTO instructions, program by program."""
    x, w = rand((64, 128), np.float16, 2, -1, 1), rand((128, 64), np.float16, 3, -1, 1)

    def tensor_level(a, b):
        with pj.tile(cube=(32, 32, 32)):
            y = pj.ops.matmul(a, b)
        with pj.tile(vec=(32, 32)):
            return pj.ops.relu(y)

    def tile_level(a, b):
        return pj.tiles.map_tiles(pj.tiles.relu, hand_matmul(a, b), (32, 32))

    np.testing.assert_array_equal(np.asarray(pj.kernel(tile_level)(x, w)), np.asarray(pj.kernel(tensor_level)(x, w)))
    by_hand, lowered = _instructions(tile_level, x, w), _instructions(tensor_level, x, w)
    assert by_hand == lowered
    assert [p.count("pto.tmatmul.acc") for p in by_hand] == [1, 0] and by_hand[1].count("pto.trelu") == 1


def test_tensor_ops_before_and_after_a_hand_written_grid(ab):
    a, b = ab
    w = rand((64, 32), np.float16, 4, -1, 1)

    def mixed(a, b, w):
        with pj.tile(vec=(32, 32)), jax.named_scope("Before"):
            x = jnp.maximum(a, 0.0)
        y = hand_axpb(x, b)                              # hand-written tiles in the middle
        with pj.tile(cube=(32, 64, 32)), jax.named_scope("Linear"):
            z = pj.ops.matmul(y, w)
        with pj.tile(vec=(32, 32)), jax.named_scope("After"):
            return jnp.sum(z, axis=-1)

    want = np.asarray(jax.jit(mixed)(a, b, w))
    low = pj.lower(mixed, a, b, w)
    low.verify(a, b, w)
    assert {"Before", "Hand", "Linear", "After"} <= {p.label for p in low.programs}
    for backend in ("sim", "xla"):
        got = np.asarray(pj.kernel(mixed, backend=backend)(a, b, w))
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


# ------------------------------------------------------------------------------------ custom ops
@pytest.fixture(scope="module")
def scaled_exp():
    op = pj.tiles.register_op(
        "tscaled_exp",
        reference=lambda x, s: jnp.exp(s.astype(jnp.float32) * x.astype(jnp.float32)).astype(x.dtype),
        numpy=lambda x, s: np.exp(np.float32(s) * x.astype(np.float32)).astype(x.dtype),
        cost=("MUL", "EXP"), pipe="VECTOR", dtypes=(np.float32, np.float16), summary="exp(s * x)")
    yield op
    pj.tiles.unregister_op("tscaled_exp")
    assert "tscaled_exp" not in isa.TABLE


def scaled_exp_kernel(x):
    def body(index, ins, outs):
        t = pj.tiles.load(ins[0], index, W32)
        return [pj.tiles.store(outs[0], pj.tiles.compute("tscaled_exp", t, 0.5), index, W32)]

    with jax.named_scope("ScaledExp"):
        y = pj.tiles.grid(body, (2, 2), x, jax.ShapeDtypeStruct(x.shape, x.dtype), name="scaled_exp")
    with pj.tile(vec=(32, 32)):
        return y + 1.0


def test_custom_op_end_to_end(scaled_exp):
    x = rand((64, 64), np.float32, 5, -2, 2)
    want = np.exp(0.5 * x) + 1.0
    low = pj.lower(scaled_exp_kernel, x)
    low.verify(x)
    assert "pto.tscaled_exp(" in low.as_text("tile")
    compiled = pj.kernel(scaled_exp_kernel).lower(x).compile()
    text = compiled.as_text("pto")
    assert "pto.tscaled_exp ins(" in text
    eager = np.asarray(compiled(x))
    np.testing.assert_allclose(eager, want, rtol=1e-6)                                # the interpreter
    np.testing.assert_array_equal(bits(np.asarray(jax.jit(pj.kernel(scaled_exp_kernel))(x))), bits(eager))  # replay
    np.testing.assert_allclose(np.asarray(pj.kernel(scaled_exp_kernel, backend="xla")(x)), want, rtol=1e-6)
    # parsed back and priced on the VECTOR pipe as a MUL pass plus an EXP pass
    (kernel,) = [k for k in asm.parse(compiled.code.text) if k.name == "scaled_exp"]
    (instr,) = [s for s in kernel.body if isinstance(s, asm.Instr) and s.op == "tscaled_exp"]
    pipe, cycles = isa.cycles(instr, "a3")
    mul = asm.Instr("tmul", instr.ins[:1], instr.outs)
    ex = asm.Instr("texp", instr.ins[:1], instr.outs)
    assert pipe == "VECTOR" and cycles == pytest.approx(isa.cycles(mul, "a3")[1] + isa.cycles(ex, "a3")[1])
    assert isa.TABLE["tscaled_exp"].summary == "exp(s * x)"
    prof = compiled.profile(x)
    assert "ScaledExp" in prof.label_us and prof.label_us["ScaledExp"] > 0


def test_custom_op_cost_forms_and_default_semantics():
    op = pj.tiles.register_op("tdouble_it", reference=lambda x: x * 2, cost=0.5)   # numpy: via the reference
    try:
        t = asm.TileBuf("vec", "f32", 32, 32, 32, 32)
        instr = asm.Instr("tdouble_it", (asm.Operand("%t1", t),), (asm.Operand("%t2", t),))
        assert isa.cycles(instr, "a3") == ("VECTOR", 0.5 * 32 * 32 * 4)

        def f(x):
            body = lambda i, ins, outs: [pj.tiles.store(outs[0], op(pj.tiles.load(ins[0], i, W32)), i, W32)]
            return pj.tiles.grid(body, (1, 2), x, jax.ShapeDtypeStruct(x.shape, x.dtype))

        x = rand((32, 64), np.float32, 6)
        np.testing.assert_array_equal(np.asarray(pj.kernel(f)(x)), x * 2)
        np.testing.assert_array_equal(np.asarray(jax.jit(pj.kernel(f))(x)), x * 2)
    finally:
        pj.tiles.unregister_op("tdouble_it")
    with pytest.raises(pj.PtoArgumentError, match="already exists"):
        pj.tiles.register_op("tadd", reference=jnp.add)
    with pytest.raises(pj.PtoArgumentError, match="starting with 't'"):
        pj.tiles.register_op("scaled", reference=jnp.exp)
    with pytest.raises(pj.PtoArgumentError, match="vector pass classes"):
        pj.tiles.register_op("tbad", reference=jnp.exp, cost=("NOPE",))


def _one_op_kernel(op, grid=(1, 2)):
    def f(x):
        body = lambda i, ins, outs: [pj.tiles.store(outs[0], op(pj.tiles.load(ins[0], i, W32)), i, W32)]
        return pj.tiles.grid(body, grid, x, jax.ShapeDtypeStruct(x.shape, x.dtype))
    return f


def test_custom_op_semantics_on_each_backend_and_after_unregistering():
    """The simulator runs numpy= where given (eagerly and under jax.jit: the replay calls it back), the
    XLA backend the jnp reference; an op unregistered is gone from the text engine, and registered
    again under its name runs its new semantics."""
    x = rand((32, 64), np.float32, 7)
    op = pj.tiles.register_op("tbump", reference=lambda t: t + 1, numpy=lambda t: t + 2)
    f = _one_op_kernel(op)
    try:
        np.testing.assert_array_equal(np.asarray(pj.kernel(f)(x)), x + 2)
        np.testing.assert_array_equal(np.asarray(jax.jit(pj.kernel(f))(x)), x + 2)
        np.testing.assert_array_equal(np.asarray(pj.kernel(f, backend="xla")(x)), x + 1)
        text = pj.kernel(f).lower(x).compile().as_text("pto")
    finally:
        pj.tiles.unregister_op("tbump")
    assert "tbump" not in tile_semantics.SEMANTICS and "tbump" not in tile_semantics.USER
    (func,) = engine.parse(text).functions
    with pytest.raises(PtoExecutionError, match="no semantics for pto.tbump"):
        engine.run(text, func.name, [x, np.zeros_like(x)])
    op = pj.tiles.register_op("tbump", reference=lambda t: t * 3)                       # the reference only
    try:
        f = _one_op_kernel(op)
        np.testing.assert_array_equal(np.asarray(pj.kernel(f)(x)), x * 3)
        np.testing.assert_array_equal(np.asarray(jax.jit(pj.kernel(f))(x)), x * 3)
    finally:
        pj.tiles.unregister_op("tbump")


@pytest.mark.parametrize("with_numpy", [False, True])
def test_custom_op_parameters_reach_its_semantics_through_the_text(with_numpy):
    """Keyword parameters of a registered op (int, float, bool, string, tuple) are written into its
    PTO-AS line as attributes and parsed back: the engine and the replay run the op with them, as the
    XLA backend runs the reference; a parameter the text cannot hold is refused, naming it."""
    def ref(t, *, scale, shift, flip, mode, weights):
        y = t * scale + shift * (len(weights) + sum(weights))
        y = -y if flip else y
        return jnp.abs(y) if mode == "abs" else y

    def host(t, *, scale, shift, flip, mode, weights):
        return np.asarray(ref(t, scale=scale, shift=shift, flip=flip, mode=mode, weights=weights))

    x = rand((32, 64), np.float32, 9)
    params = dict(scale=0.1, shift=3, flip=True, mode="abs", weights=(1.5, -2.0))
    op = pj.tiles.register_op("tparams", reference=ref, numpy=host if with_numpy else None)
    try:
        f = _one_op_kernel(lambda t: op(t, **params))
        want = np.abs(-(x * np.float32(0.1) + np.float32(3 * 1.5)))
        text = pj.kernel(f).lower(x).compile().as_text("pto")
        line = next(line for line in text.split("\n") if "pto.tparams ins(" in line)
        assert 'mode = "abs"' in line and "scale = 0.1 : f64" in line and "weights = [1.5 : f64, -2.0 : f64]" in line
        np.testing.assert_allclose(np.asarray(pj.kernel(f)(x)), want, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(jax.jit(pj.kernel(f))(x)), want, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(pj.kernel(f, backend="xla")(x)), want, rtol=1e-6)
        bad = _one_op_kernel(lambda t: op(t, **{**params, "scale": float("inf")}))
        with pytest.raises(pj.errors.PtoUnsupportedError, match=r"pto.tparams: parameter scale=inf cannot be written"):
            pj.kernel(bad)(x)
    finally:
        pj.tiles.unregister_op("tparams")


@pytest.mark.parametrize("cols", [2, 64])
def test_a_fault_in_a_custom_op_names_its_grid_point(cols):
    """A registered op that raises at one grid point of a batch of them: the error names that point's
    task, the instruction and the op's own message."""
    def check(x):
        if (x > 100).any():
            raise ValueError("a value above 100")
        return x

    op = pj.tiles.register_op("tcheck_small", reference=lambda x: x, numpy=check)
    try:
        x = np.zeros((128, 32 * cols), np.float32)
        x[70, 40] = 101.0                                        # in the tile at grid point (2, 1)
        compiled = pj.kernel(_one_op_kernel(op, (4, cols))).compiled_for(x)
        with pytest.raises(PtoTaskError, match=rf"task {2 * cols + 1} 'lambda\(2,1\)'.*pto.tcheck_small failed: "
                                               "ValueError: a value above 100"):
            compiled.run(x)
        out, _ = compiled.run(np.ones_like(x))
        np.testing.assert_array_equal(out, np.ones_like(x))
    finally:
        pj.tiles.unregister_op("tcheck_small")


# ---------------------------------------------------------------------------------------- errors
def _grid_of(body, x, grid=(2, 2), **kw):
    return lambda x: pj.tiles.grid(body, grid, x, jax.ShapeDtypeStruct(x.shape, x.dtype), **kw)


def _copy(window):
    return lambda i, ins, outs: [pj.tiles.store(outs[0], pj.tiles.load(ins[0], i, window), i, window)]


def test_errors():
    x = rand((64, 64), np.float32, 7)
    with pytest.raises(pj.PtoShapeError, match=r"reaches \[0, 96\) in dim 0"):      # window out of bounds
        pj.lower(_grid_of(_copy(W32), x, grid=(3, 2)), x)
    with pytest.raises(pj.PtoShapeError, match="reaches"):
        pj.lower(_grid_of(_copy(pj.tiles.window((32, 32), base=(40, 0))), x), x)
    with pytest.raises(pj.PtoArgumentError, match="unknown tile op 'nope'"):
        pj.lower(_grid_of(lambda i, ins, outs: [pj.tiles.store(outs[0], pj.tiles.compute(
            "nope", pj.tiles.load(ins[0], i, W32)), i, W32)], x), x)
    big = rand((256, 256), np.float32, 8)                                             # 256 KiB tile > 192 KiB UB
    with pytest.raises(pj.PtoCapacityError, match="UB"):
        pj.lower(_grid_of(_copy(pj.tiles.window((256, 256))), big, grid=(1, 1)), big)
    with pytest.raises(pj.PtoShapeError, match="does not match window"):
        pj.lower(_grid_of(lambda i, ins, outs: [pj.tiles.store(
            outs[0], pj.tiles.rowsum(pj.tiles.load(ins[0], i, W32)), i, W32)], x), x)
    with pytest.raises(pj.PtoArgumentError, match="convert it with pj.tiles.cast"):
        pj.lower(_grid_of(lambda i, ins, outs: [pj.tiles.store(
            outs[0], pj.tiles.cast(pj.tiles.load(ins[0], i, W32), np.float16), i, W32)], x), x)
    with pytest.raises(pj.PtoShapeError, match="return pj.tiles.store"):
        pj.lower(_grid_of(lambda i, ins, outs: [pj.tiles.load(ins[0], i, W32)], x), x)
    with pytest.raises(pj.PtoArgumentError, match="load a tile from it"):
        pj.lower(_grid_of(lambda i, ins, outs: [pj.tiles.store(outs[0], pj.tiles.load(ins[0], i, W32) + ins[0][:32, :32],
                                                               i, W32)], x), x)
    xh = rand((64, 64), np.float16, 9)

    def no_mov(index, ins, outs):
        a = pj.tiles.load(ins[0], index, W32, "mat")
        return [pj.tiles.store(outs[0], pj.tiles.matmul(a, a), index, W32)]

    with pytest.raises(pj.PtoArgumentError, match="'mat' tile; this instruction reads left"):
        pj.lower(lambda a: pj.tiles.grid(no_mov, (2, 2), a, jax.ShapeDtypeStruct((64, 64), np.float32)), xh)
    with pytest.raises(pj.PtoArgumentError, match="vector grid loads into vec"):
        pj.lower(_grid_of(lambda i, ins, outs: [pj.tiles.store(outs[0], pj.tiles.load(ins[0], i, W32, "mat"), i, W32)],
                          xh), xh)
    def vector_carry(index, ins, outs):
        acc = pj.tiles.load(ins[0], index, W32)
        acc = jax.lax.fori_loop(1, 2, lambda k, c: c + pj.tiles.load(ins[0], index, W32), acc)
        return [pj.tiles.store(outs[0], acc, index, W32)]

    with pytest.raises(pj.PtoUnsupportedError, match="updated in place"):
        pj.lower(_grid_of(vector_carry, x), x)
    with pytest.raises(pj.PtoArgumentError, match="block or stride"):
        pj.tiles.window((32, 32), block=(32, 32), stride=(32, 32))


def test_tile_compute_parameters_are_checked_and_axes_normalised():
    x = rand((64, 64), np.float32, 11)

    def rows(i, ins, outs):
        t = pj.tiles.load(ins[0], i, W32)
        s = pj.tiles.compute("sum", t, axes=(-1,), keepdims=True)          # -1: the last axis, as pj.ops
        return [pj.tiles.store(outs[0], jnp.broadcast_to(s, t.shape), i, W32)]

    got = pj.kernel(_grid_of(rows, x))(x)
    want = np.repeat(x.reshape(2, 32, 2, 32).sum(-1, dtype=np.float64), 32, -1).reshape(64, 64)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    softmax = [_grid_of(lambda i, ins, outs, kw=kw: [pj.tiles.store(outs[0], pj.tiles.compute(
        "softmax", pj.tiles.load(ins[0], i, W32), **kw), i, W32)], x) for kw in ({"axis": -1}, {"axes": (1,)})]
    np.testing.assert_array_equal(*(np.asarray(pj.kernel(f)(x)) for f in softmax))     # pj.ops.softmax's axis=
    for bad, match in [(lambda t: pj.tiles.compute("sum", t, axes=(5,), keepdims=True), "axis 5 is out of range"),
                       (lambda t: pj.tiles.compute("sum", t), "do not fit pj.ops.sum's"),
                       (lambda t: pj.tiles.compute("softmax", t, dim=0), "do not fit pj.ops.softmax's"),
                       (lambda t: pj.tiles.cast(t, jnp.int16), "dtype int16 is not supported"),
                       (lambda t: pj.tiles.cast(t, jnp.int32, rounding="nearest"), "rounding 'nearest'")]:
        with pytest.raises((pj.PtoArgumentError, pj.PtoDtypeError), match=match):
            pj.lower(_grid_of(lambda i, ins, outs: [pj.tiles.store(outs[0], bad(pj.tiles.load(ins[0], i, W32)),
                                                                   i, W32)], x), x)


@pytest.mark.parametrize("make", [lambda t: t + jnp.ones((32, 32), jnp.float32), lambda t: t * jnp.full_like(t, 2.5),
                                  lambda t: jnp.zeros_like(t) - 1.0, lambda t: t + pj.ops.expand(1.0, (32, 32)),
                                  lambda t: t + jnp.ones((32,), jnp.float32)])
def test_constant_tiles_built_with_jnp_in_a_body(make):
    """A constant tile the body builds (folded to an array) is one ``texpands``; its numbers as XLA's."""
    x = rand((64, 64), np.float32, 12)
    f = _grid_of(lambda i, ins, outs: [pj.tiles.store(outs[0], make(pj.tiles.load(ins[0], i, W32)), i, W32)], x)
    kernel = pj.kernel(f)
    np.testing.assert_array_equal(np.asarray(kernel(x)), np.asarray(jax.jit(f)(x)))
    assert "texpands" in kernel.lower(x).compile().as_text()


def test_body_errors_for_constants_indices_and_fill():
    x = rand((64, 64), np.float32, 13)
    iota = _grid_of(lambda i, ins, outs: [pj.tiles.store(
        outs[0], pj.tiles.load(ins[0], i, W32) + jnp.arange(32, dtype=jnp.float32), i, W32)], x)
    with pytest.raises(pj.PtoUnsupportedError, match="32 different values"):
        pj.lower(iota, x)
    for scale, y in ((lambda i: i[0], x.astype(np.int32)), (lambda i: (i[0] * 2).astype(jnp.float32), x)):
        body = (lambda i, ins, outs, scale=scale: [pj.tiles.store(
            outs[0], pj.tiles.load(ins[0], i, W32) * scale(i), i, W32)])
        with pytest.raises(pj.PtoUnsupportedError, match="grid index or loop counter"):
            pj.lower(_grid_of(body, y), y)
    for fill, dtype in [(300, np.int8), ("a", np.float32), (2.5, np.int32), (float("nan"), np.int32)]:
        y = np.zeros((64, 64), dtype)
        with pytest.raises(pj.PtoArgumentError, match=f"fill={fill!r} is not a value"):
            pj.lower(_grid_of(_copy(W32), y, fill=fill), y)


def test_per_label_options_reach_a_hand_written_grid(ab):
    a, b = ab
    tasks = {tpb: pj.kernel(hand_axpb, options={"tiles_per_block": {"Hand": tpb}}).lower(a, b).compile()
             .profile(a, b).tasks for tpb in (1, 2)}
    assert tasks == {1: 4, 2: 2}
    with pytest.raises(pj.PtoArgumentError, match="label hand-written grids"):
        pj.lower(hand_axpb, a, b, options={"tiles": {"Hand": {"vec": (16, 32)}}})


def test_vmap_of_a_hand_written_grid(ab):
    a, b = ab
    xs = np.stack([a, b, a * 2])
    want = np.stack([np.asarray(tensor_axpb(v, v)) for v in xs])
    for fn in (jax.vmap(pj.kernel(lambda v: hand_axpb(v, v))), jax.jit(jax.vmap(pj.kernel(lambda v: hand_axpb(v, v)))),
               pj.kernel(jax.vmap(lambda v: hand_axpb(v, v)))):
        np.testing.assert_array_equal(np.asarray(fn(xs)), want)


def test_custom_op_parameters_and_cube_out_dtype_are_checked_at_trace_time(scaled_exp):
    x = rand((64, 64), np.float32, 14)
    for value in (np.ones(3), 'a"b', {"k": 1}):      # not hashable (JAX's TypeError), or not text
        body = (lambda i, ins, outs, value=value: [pj.tiles.store(
            outs[0], pj.tiles.compute("tscaled_exp", pj.tiles.load(ins[0], i, W32), 0.5, mode=value), i, W32)])
        with pytest.raises(pj.PtoArgumentError, match="parameter mode="):
            pj.lower(_grid_of(body, x), x)
    xh = rand((64, 64), np.float16, 15)

    def f16_acc(index, ins, outs):
        a = pj.tiles.mov(pj.tiles.load(ins[0], index, W32, "mat"), "left")
        b = pj.tiles.mov(pj.tiles.load(ins[0], index, W32, "mat"), "right")
        return [pj.tiles.store(outs[0], pj.tiles.matmul(a, b, out_dtype=np.float16), index, W32)]

    with pytest.raises(pj.PtoDtypeError, match="accumulates float16 products in float32"):
        pj.lower(lambda a: pj.tiles.grid(f16_acc, (2, 2), a, jax.ShapeDtypeStruct((64, 64), np.float16)), xh)


@pytest.mark.parametrize("op", ["sum", "amax"])
def test_a_row_reduction_without_keepdims_reshaped_back_to_a_column(op):
    """``r[:, None]`` of a (32,) row sum in a body (a ``treshape`` of a row as a column) had no real form."""
    x = rand((64, 64), np.float32, 16)

    def body(i, ins, outs):
        t = pj.tiles.load(ins[0], i, W32)
        r = pj.tiles.compute(op, t, axes=(1,), keepdims=False)
        return [pj.tiles.store(outs[0], jnp.broadcast_to(r[:, None], t.shape), i, W32)]

    f = _grid_of(body, x)
    kernel = pj.kernel(f)
    np.testing.assert_allclose(np.asarray(kernel(x)), np.asarray(jax.jit(f)(x)), rtol=1e-6)
    kernel.lower(x).compile().ptoas()


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
@pytest.mark.parametrize("op,axes", [("sum", (0,)), ("sum", (0, 1)), ("prod", (0,)), ("prod", (1,)), ("sum", (1,))])
def test_half_sums_and_products_by_hand_round_once_from_float32(dtype, op, axes):
    """A hand-written column sum of an f16 tile ran the real tcolsum, which adds in f16 (off by 56 ulp);
    pj.ops reduces half floats in float32 and rounds once, and so do the tile forms."""
    x = (np.random.default_rng(16).uniform(0.5, 1.5, (16, 32)) * (4 if op == "sum" else 1)).astype(dtype)
    out_shape = tuple(1 if a in axes else n for a, n in enumerate(x.shape))

    def body(i, ins, outs):
        t = pj.tiles.load(ins[0], i, pj.tiles.window((16, 32)))
        return [pj.tiles.store(outs[0], pj.tiles.compute(op, t, axes=axes, keepdims=True), i,
                                       pj.tiles.window(out_shape))]

    f = lambda x: pj.tiles.grid(body, (1, 1), x, jax.ShapeDtypeStruct(out_shape, x.dtype))  # noqa: E731
    wide = getattr(np, op)(x.astype(np.float64), axis=axes, keepdims=True)
    want = wide.astype(np.float32).astype(dtype)            # float32 accumulation rounds within 1 f32 ulp
    got = np.asarray(pj.kernel(f)(x))
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(jax.jit(pj.kernel(f))(x)), got)
    pj.kernel(f).lower(x).compile().ptoas()


def test_a_k_chain_of_one_tile_runs_its_loop_no_trip():
    """K equal to the tile's k makes ``fori_loop(1, 1)``: its loads never run, so their windows (past
    the tensor) are not out of bounds."""
    x, w = rand((32, 32), np.float16, 2, -1, 1), rand((32, 32), np.float16, 3, -1, 1)
    got = np.asarray(pj.kernel(hand_matmul)(x, w))
    np.testing.assert_allclose(got, x.astype(np.float32) @ w.astype(np.float32), rtol=1e-5, atol=1e-5)
    pj.kernel(hand_matmul).lower(x, w).compile().ptoas()


def _cube_body(epilogue):
    def body(i, ins, outs):
        a = pj.tiles.mov(pj.tiles.load(ins[0], i, W32, "mat"), "left")
        b = pj.tiles.mov(pj.tiles.load(ins[0], i, W32, "mat"), "right")
        return [pj.tiles.store(outs[0], epilogue(pj.tiles.matmul(a, b)), i, W32)]
    return lambda x: pj.tiles.grid(body, (1, 1), x, jax.ShapeDtypeStruct((32, 32), np.float32))


@pytest.mark.parametrize("epilogue", [pj.tiles.relu, lambda acc: acc * 0.5, lambda acc: acc + acc,
                                      lambda acc: acc - pj.tiles.rowsum(acc)])
def test_vector_work_on_an_acc_tile_is_refused_at_trace_time(epilogue):
    """Vector instructions on an L0C tile ran on the host but ptoas rejects them (no vector unit on the
    cube core): the body checker says so."""
    x = rand((32, 32), np.float16, 4)
    with pytest.raises(pj.PtoUnsupportedError, match="is vector work, which a cube grid has no unit for"):
        pj.lower(_cube_body(epilogue), x)
    pj.kernel(_cube_body(lambda acc: pj.tiles.cast(acc, np.float32))).lower(x).compile().ptoas()


def test_a_nested_k_loop_is_refused_with_its_reason():
    x = rand((32, 64), np.float16, 5)

    def body(index, ins, outs):
        wa, wb = pj.tiles.window((32, 32), index=(0, 3)), pj.tiles.window((32, 32), index=(3, 1))

        def ops(r, kk):
            return (pj.tiles.mov(pj.tiles.load(ins[0], (*index, r, kk), wa, "mat"), "left"),
                    pj.tiles.mov(pj.tiles.load(ins[1], (*index, r, kk), wb, "mat"), "right"))

        acc = pj.tiles.matmul(*ops(jnp.int32(0), jnp.int32(0)))
        acc = jax.lax.fori_loop(0, 2, lambda r, c: jax.lax.fori_loop(
            1, 2, lambda kk, c2: pj.tiles.matmul_acc(c2, *ops(r, kk)), c), acc)
        return [pj.tiles.store(outs[0], acc, index, W32)]

    f = lambda x, w: pj.tiles.grid(body, (1, 1), (x, w), jax.ShapeDtypeStruct((32, 32), np.float32))  # noqa: E731
    with pytest.raises(pj.PtoUnsupportedError, match="a fori_loop inside a fori_loop carrying a tile"):
        pj.lower(f, x, x.T.copy())


@pytest.mark.parametrize("op", ["gather", "scatter_update", "index_add"])
def test_rows_moved_by_index_values_inside_a_tile_are_refused(op):
    """An in-tile row gather ran on the host, but its PTO-AS (a pto.subset at an offset read from the
    index tile) is rejected by ptoas and its replay raised an internal error under jax.jit."""
    table, idx = rand((16, 32), np.float32, 11), np.arange(8, dtype=np.int32)[::-1].copy()

    def body(i, ins, outs):
        tab = pj.tiles.load(ins[0], i, pj.tiles.window((16, 32), index=(None, None)))
        ix = pj.tiles.load(ins[1], i, pj.tiles.window((8,), index=(None,)))
        args = (tab, ix) if op == "gather" else (tab, ix, tab[:8])
        out = pj.tiles.compute(op, *args, axis=0)
        return [pj.tiles.store(outs[0], out, i, pj.tiles.window(out.shape, index=(None, None)))]

    shape = (8, 32) if op == "gather" else (16, 32)
    f = lambda t, i: pj.tiles.grid(body, (1,), (t, i), jax.ShapeDtypeStruct(shape, t.dtype))  # noqa: E731
    with pytest.raises(pj.PtoUnsupportedError, match="which PTOAS cannot emit"):
        pj.lower(f, table, idx)


def test_a_result_written_over_its_dying_source_takes_no_more_ub():
    """``load(128 x 256 f32) * 2 + 1`` is one 128 KiB tile in the PTO-AS (each result written over its
    source): the footprint counted two and refused it as needing 256 KiB of the 192 KiB UB."""
    x = rand((128, 256), np.float32, 12)
    w = pj.tiles.window((128, 256))
    f = _grid_of(lambda i, ins, outs: [pj.tiles.store(outs[0], pj.tiles.load(ins[0], i, w) * 2.0 + 1.0, i, w)],
                 x, grid=(1, 1))
    (program,) = pj.lower(f, x).programs
    assert dict(program.footprint)["vec"] == 128 * 256 * 4
    np.testing.assert_array_equal(np.asarray(pj.kernel(f)(x)), x * np.float32(2) + np.float32(1))
    pj.kernel(f).lower(x).compile().ptoas()
