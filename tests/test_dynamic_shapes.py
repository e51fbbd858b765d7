"""Dynamic shapes: kernels traced with ``jax.export`` symbolic dimensions.

An ``xla`` kernel exports once with a symbolic row count, serialises, and runs at every size with the
numbers of plain JAX; the Tensor level prints the symbols; a ``sim`` kernel with ``polymorphic_shapes``
compiles once to a dynamic PTO-AS module that ``ptoas`` accepts and the engine runs at every size;
a ``sim`` kernel exported with a symbolic row count inlines that module's replay, and a symbolic
``lower`` prints its levels; kernels an export cannot take, the Lowering's levels below the Tensor
level and shape checks JAX cannot decide for every size raise errors that say so.
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from kernels import seed_kernel
from ptojax.errors import PtoArgumentError, PtoShapeError, PtoUnsupportedError

O = pj.ops
SIZES = (1, 17, 64, 130, 1000)
(M,) = jax.export.symbolic_shape("m")
HI = jax.lax.Precision.HIGHEST


def _softmax(x):
    with pj.tile(vec=(32, 64)):
        return O.softmax(x * 0.5, axis=-1)


def _matmul_k_tail(a, w):
    """K = 100 on a cube tile of K 64: a full K step and a tail of 36."""
    with pj.tile(cube=(64, 64, 32)):
        return O.matmul(a, w)


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _assert_matches(got, reference, args):
    """``got`` within 1e-5 of a plain-JAX reference, or within 2 fp32 epsilons of each result's scale of a
    float64 reference (an order of summation is not part of the contract; XLA's differs by CPU)."""
    want = reference(*args)
    if isinstance(want, tuple):
        value, scale = want
        assert got.shape == value.shape
        error = np.abs(got - value) / scale
        assert error.max() <= 2 * np.finfo(np.float32).eps, (error.max(), int(error.argmax()))
    else:
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-5)


def _seed_reference(a, b, w):
    """The seed's row sums in float64, with each sum's scale: the sum of its terms' magnitudes (a row sum
    of a product's row cancels; its fp32 error is bounded by that scale, not by the result)."""
    x, w = a.astype(np.float64) * 2.0 + b, w.astype(np.float64)
    return (x @ w).sum(-1), (np.abs(x) @ np.abs(w)).sum(-1)


# name: (kernel, symbolic shapes, shapes at size m, reference: plain JAX, or float64 with each result's scale)
CASES = {
    "seed": (seed_kernel, [(M, 64), (M, 64), (64, 32)], lambda m: [(m, 64), (m, 64), (64, 32)], _seed_reference),
    "softmax": (_softmax, [(M, 64)], lambda m: [(m, 64)], lambda x: jax.nn.softmax(x * 0.5, axis=-1)),
    "matmul-k-tail": (_matmul_k_tail, [(M, 100), (100, 48)], lambda m: [(m, 100), (100, 48)],
                      lambda a, w: jnp.matmul(a, w, precision=HI)),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def exported(request):
    """(the case, its kernel exported once with a symbolic m, then serialised and deserialised)."""
    fn, shapes, _, _ = CASES[request.param]
    specs = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    exp = jax.export.export(jax.jit(pj.kernel(fn, backend="xla")))(*specs)
    return request.param, exp, jax.export.deserialize(exp.serialize())


def test_export_keeps_the_symbolic_signature(exported):
    name, exp, restored = exported
    _, shapes, _, _ = CASES[name]
    assert [a.shape for a in exp.in_avals] == [tuple(s) for s in shapes]
    # a deserialised module has its own symbolic scope: compare the avals as text
    assert list(map(str, restored.in_avals + restored.out_avals)) == list(map(str, exp.in_avals + exp.out_avals))
    assert str(exp.out_avals[0].shape[0]) == "m"


@pytest.mark.parametrize("m", SIZES)
def test_one_export_runs_at_every_size(exported, m):
    name, _, restored = exported
    _, _, shapes, reference = CASES[name]
    args = [_rand(s, seed) for seed, s in enumerate(shapes(m))]
    got = np.asarray(restored.call(*args))
    assert got.shape[0] == m
    _assert_matches(got, reference, args)


def test_symbolic_reshape_slices_and_gathers_export():
    def fn(x, i):
        with pj.tile(vec=(16, 32)):
            y = x.reshape(-1, 25) * 2.0
            return y.reshape(x.shape)[1:] - x[:-1], jnp.take(x, i, axis=1)

    k = pj.kernel(fn, backend="xla")
    exp = jax.export.export(jax.jit(k))(jax.ShapeDtypeStruct((M, 50), jnp.float32),
                                        jax.ShapeDtypeStruct((7,), jnp.int32))
    idx = np.array([0, 49, 3, 3, 17, 1, 2], np.int32)
    for m in (2, 17):
        x = _rand((m, 50), m)
        got = exp.call(x, idx)
        np.testing.assert_allclose(got[0], x[1:] * 2.0 - x[:-1], rtol=1e-6)
        np.testing.assert_array_equal(got[1], x[:, idx])


# ---------------------------------------------------------------------------------------- the levels
def _specs():
    return [jax.ShapeDtypeStruct((M, 64), jnp.float32)] * 2


def _add_exp(a, b):
    with pj.tile(vec=(32, 32)):
        return jnp.exp(a * 2.0 + b)


def test_tensor_level_prints_the_symbols():
    assert pj.kernel(_add_exp, backend="xla").lower(*_specs()).as_text("tensor") == (
        "kernel(%0:f32[m,64], %1:f32[m,64]):\n"
        "  %2:f32[m,64] = pto.mul(%0, 2.0)    # vec=32x32\n"
        "  %3:f32[m,64] = pto.add(%2, %1)    # vec=32x32\n"
        "  %4:f32[m,64] = pto.exp(%3)    # vec=32x32\n"
        "  return %4")


LEVEL_ERROR = ("pto lowering: the {level} level needs concrete sizes, but argument 0 is float32[m,64] "
               "(symbolic m); argument 1 is float32[m,64] (symbolic m); the tensor level and backend='xla' "
               "take symbolic dimensions (jax.export), lower with concrete shapes for the tile, block and "
               "pto levels, or through pj.kernel (its lower and polymorphic_shapes compile a symbolic row count)")


def test_a_polymorphic_compile_prints_its_tensor_level_with_the_symbol():
    poly = pj.kernel(_add_exp, polymorphic_shapes=("m, 64", "m, 64")).compiled_for(_rand((5, 64), 0), _rand((5, 64), 1))
    text = poly.as_text("tensor")
    assert text == pj.kernel(_add_exp, backend="xla").lower(*_specs()).as_text("tensor")
    assert "f32[m,64]" in text and "f32[512" not in text
    with pytest.raises(PtoArgumentError) as err:
        poly.as_text("execution")
    assert str(err.value) == ("pj.kernel '_add_exp': a polymorphic compile prints 'tensor', 'tile', 'block', "
                              "'pto' or 'cpp', not 'execution' (its tasks depend on the size: profile(m=...) shows them)")


@pytest.mark.parametrize("level", ["tile", "block", "pto"])
def test_a_symbolic_lower_prints_the_polymorphic_levels(level):
    """``lower`` with a symbolic m gives the levels the polymorphic compile prints (symbolic counts)."""
    lowered = pj.kernel(_add_exp, backend="xla").lower(*_specs())
    with pytest.raises(PtoUnsupportedError) as err:      # the Lowering itself stops after the Tensor level
        lowered.lowering.as_text(level)
    assert str(err.value) == LEVEL_ERROR.format(level=level)
    poly = pj.kernel(_add_exp, polymorphic_shapes=("m, 64", "m, 64")).compiled_for(_rand((5, 64), 0), _rand((5, 64), 1))
    assert lowered.as_text(level) == poly.as_text(level)
    if level == "block":
        assert lowered.as_text(level).split("\n\n")[-1] == (
            "kernel(%0:f32[m,64], %1:f32[m,64]):\n"
            "  %2:f32[m,64] = block_call[mul+add+exp<AIV> x2*ceil(m/32)](%0, %1)\n"
            "  return %2")
    if level == "pto":
        assert "%dyn_m: index" in lowered.as_text(level) and "valid_row = %dyn_vr" in lowered.as_text(level)


def test_a_symbolic_lowering_has_no_block_graph():
    low = pj.kernel(_add_exp, backend="xla").lower(*_specs()).lowering
    for get, level in ((lambda: low.tile, "tile"), (lambda: low.block, "block"), (lambda: low.programs, "block")):
        with pytest.raises(PtoUnsupportedError) as err:
            get()
        assert str(err.value) == LEVEL_ERROR.format(level=level)


# ------------------------------------------------------- jax.export of a sim kernel: the dynamic module
@pytest.fixture(scope="module", params=sorted(CASES))
def exported_sim(request):
    """(the case, its backend='sim' kernel exported once with a symbolic m, serialised and deserialised)."""
    fn, shapes, _, _ = CASES[request.param]
    exp = jax.export.export(jax.jit(pj.kernel(fn)))(*[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes])
    assert "callback" not in exp.mlir_module()          # the replay is inlined: no host runtime
    return request.param, jax.export.deserialize(exp.serialize())


@pytest.mark.parametrize("m", (17, 130))
def test_an_exported_sim_kernel_runs_the_dynamic_module(exported_sim, m):
    """At every size, the numbers of the engine running the dynamic PTO-AS text (bit for bit) and of
    plain JAX."""
    name, restored = exported_sim
    fn, _, shapes, reference = CASES[name]
    args = [_rand(s, seed) for seed, s in enumerate(shapes(m))]
    got = np.asarray(restored.call(*args))
    dynamic = pj.kernel(fn, polymorphic_shapes=POLY[name]).compiled_for(*args).dynamic
    np.testing.assert_array_equal(got, dynamic.run(args, m)[0])
    assert got.shape[0] == m
    _assert_matches(got, reference, args)


def test_an_exported_compare_and_mask_kernel():
    """A compare (``tcmp`` with its attribute dict) and a boolean result: the dynamic module types both
    operands with dynamic rows, ``ptoas`` accepts it, the export gives NumPy's numbers at two sizes."""
    def masked(x, y):
        with pj.tile(vec=(32, 64)):
            return jnp.where(x > y, x, y * 2.0), x > 0.5

    spec = jax.ShapeDtypeStruct((M, 64), jnp.float32)
    restored = jax.export.deserialize(jax.export.export(jax.jit(pj.kernel(masked)))(spec, spec).serialize())
    for m in (5, 70):
        x, y = _rand((m, 64), m), _rand((m, 64), m + 1)
        got, mask = restored.call(x, y)
        np.testing.assert_array_equal(got, np.where(x > y, x, y * np.float32(2.0)))
        assert mask.dtype == np.bool_
        np.testing.assert_array_equal(mask, x > 0.5)
    text = pj.kernel(masked).lower(spec, spec).as_text("pto")
    tcmp = next(line for line in text.split("\n") if "pto.tcmp ins" in line)
    assert "{cmpMode = #pto<cmp gt>}" in tcmp and tcmp.split(" outs(")[0].count("v_row=?") == 2
    assert pj.kernel(masked, polymorphic_shapes=("m, 64", "m, 64")).compiled_for(x, y).ptoas()


def test_an_exported_kernel_with_a_reshape_step():
    """A Block graph with a reshape step (a static bias viewed as a row) between the block calls."""
    def biased(x, b):
        with pj.tile(vec=(32, 64)):
            return jnp.exp(x) * pj.ops.reshape(b, (1, 64))

    specs = [jax.ShapeDtypeStruct((M, 64), jnp.float32), jax.ShapeDtypeStruct((64,), jnp.float32)]
    restored = jax.export.deserialize(jax.export.export(jax.jit(pj.kernel(biased)))(*specs).serialize())
    b = _rand((64,), 1)
    for m in (3, 70):
        x = _rand((m, 64), m)
        got = np.asarray(restored.call(x, b))
        dynamic = pj.kernel(biased, polymorphic_shapes=("m, 64", None)).compiled_for(x, b).dynamic
        np.testing.assert_array_equal(got, dynamic.run([x, b], m)[0])
        np.testing.assert_allclose(got, np.exp(x) * b, rtol=1e-5, atol=1e-5)


def test_a_sim_kernel_with_a_scalar_operand_exports():
    """A scalar the programs read as data (a GM tensor like any other) steers no task: the kernel exports
    with a symbolic row count (it was refused: 'the values of argument 1 decide which tasks run')."""
    def scaled(x, s):
        with pj.tile(vec=(32, 64)):
            return x * s

    exp = jax.export.export(jax.jit(pj.kernel(scaled)))(jax.ShapeDtypeStruct((M, 64), jnp.float32),
                                                        jax.ShapeDtypeStruct((), jnp.float32))
    for m in (3, 70):
        x = _rand((m, 64), m)
        np.testing.assert_array_equal(np.asarray(exp.call(x, np.float32(1.5))), x * np.float32(1.5))


@pytest.mark.parametrize("backend", ["sim", "xla"])
def test_an_export_under_x64_takes_the_symbolic_sizes(backend):
    """Under ``jax_enable_x64`` the symbolic sizes are 64-bit; the kernel's body, traced with 64-bit values
    off, computes its shapes in 32 bits (MLIR's verifier refused the module: i64 reshaped to i32)."""
    def axpb(a, b):
        with pj.tile(vec=(16, 64)):
            return a * 2.0 + b

    spec = jax.ShapeDtypeStruct((M, 64), jnp.float32)
    with jax.enable_x64(True):
        exp = jax.export.export(jax.jit(pj.kernel(axpb, backend=backend)))(spec, spec)
        for m in (3, 20):
            a, b = _rand((m, 64), m), _rand((m, 64), m + 1)
            np.testing.assert_array_equal(np.asarray(exp.call(a, b)), a * np.float32(2.0) + b)


def test_a_sim_kernel_whose_scalar_steers_does_not_export_at_static_shapes():
    """At concrete shapes too (there the jitted kernel runs in a host callback): a named error, not
    JAX's 'serialization of host_callbacks is not yet implemented'."""
    def halvings(x, n):
        with pj.tile(vec=(16, 64)):
            return jax.lax.fori_loop(0, n, lambda i, c: c * 0.5 + 1.0, x)

    x = _rand((16, 64), 0)
    with pytest.raises(PtoUnsupportedError) as err:
        jax.export.export(jax.jit(pj.kernel(halvings)))(x, np.int32(3))
    assert str(err.value) == (
        "pj.kernel 'halvings': jax.export serialises a backend='sim' kernel's replay, but this one runs in a host "
        "callback (the value of argument 1 'n' (int32[]) decides which tasks run), which cannot be serialised; "
        "export it with backend='xla'")
    with pytest.raises(PtoUnsupportedError, match="interpret=True runs the interpreter"):
        jax.export.export(jax.jit(pj.kernel(lambda x: x * 2.0, interpret=True)))(x)
    exp = jax.export.export(jax.jit(pj.kernel(halvings, backend="xla")))(x, np.int32(3))
    np.testing.assert_allclose(np.asarray(exp.call(x, np.int32(3))), halvings(x, 3), rtol=1e-6)


def test_a_sim_kernel_with_a_user_op_run_on_the_host_does_not_export():
    """A ``register_op`` with NumPy semantics runs them in a host callback inside the replay: a named
    error, not JAX's 'serialization of host_callbacks is not yet implemented'; its jnp reference exports."""
    T = pj.tiles
    x = _rand((16, 32), 0)

    def squares(op):
        def f(a):
            def body(index, ins, outs):
                w = T.window((8, 32))
                return [T.store(outs[0], op(T.load(ins[0], index, w)), index, w)]
            return T.grid(body, (2, 1), (a,), jax.ShapeDtypeStruct(a.shape, a.dtype))
        return f

    hosted = T.register_op("tsquare_host", reference=lambda v: v * v, numpy=lambda v: (v * v).astype(v.dtype))
    traced = T.register_op("tsquare_traced", reference=lambda v: v * v)
    try:
        np.testing.assert_array_equal(np.asarray(jax.jit(pj.kernel(squares(hosted)))(x)), x * x)
        with pytest.raises(PtoUnsupportedError, match=r"the NumPy semantics of tsquare_host \(pj.tiles.register_op"):
            jax.export.export(jax.jit(pj.kernel(squares(hosted))))(x)
        exp = jax.export.export(jax.jit(pj.kernel(squares(traced))))(x)
        np.testing.assert_array_equal(np.asarray(exp.call(x)), x * x)
    finally:
        T.unregister_op("tsquare_host")
        T.unregister_op("tsquare_traced")


def test_a_hand_written_grid_of_a_symbolic_size_is_refused_by_name():
    """A ``pj.tiles.grid`` sized by a symbolic row count raised JAX's InconclusiveDimensionOperation."""
    T = pj.tiles

    def f(a):
        def body(index, ins, outs):
            w = T.window((32, 32))
            return [T.store(outs[0], T.load(ins[0], index, w) * 2.0, index, w)]
        return T.grid(body, (a.shape[0] // 32, 1), (a,), jax.ShapeDtypeStruct(a.shape, a.dtype))

    spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("m, 32"), jnp.float32)
    with pytest.raises(PtoUnsupportedError, match=r"pj.tiles: grid must be static, got \(floordiv\(m, 32\), 1\)"):
        jax.export.export(jax.jit(pj.kernel(f)))(spec)
    x = _rand((64, 32), 1)
    np.testing.assert_array_equal(np.asarray(pj.kernel(f)(x)), x * np.float32(2.0))


def test_a_sim_kernel_with_two_symbols_does_not_export():
    def pair(x, y):
        with pj.tile(vec=(32, 64)):
            return x * 2.0, jnp.exp(y)

    m, n = jax.export.symbolic_shape("m, n")
    with pytest.raises(PtoUnsupportedError) as err:
        jax.export.export(jax.jit(pj.kernel(pair)))(jax.ShapeDtypeStruct((m, 64), jnp.float32),
                                                    jax.ShapeDtypeStruct((n, 64), jnp.float32))
    assert str(err.value) == ("pj.kernel 'pair': the symbolic shapes name ['m', 'n']; the tile level takes "
                              "exactly one symbolic row count; with backend='xla' (pj.kernel's, or the pj.nn "
                              "op's) it exports for every row count")


# ------------------------------------------------------------------------------------- shape rules
def test_symbols_that_do_not_broadcast():
    with pytest.raises(PtoShapeError) as err:
        jax.make_jaxpr(O.add)(jax.ShapeDtypeStruct((M, 64), jnp.float32), jax.ShapeDtypeStruct((3, 64), jnp.float32))
    assert str(err.value) == ("pto.add: shapes (m, 64), (3, 64) do not broadcast "
                              "(NumPy rules: trailing dimensions equal or 1)")


def test_an_undecidable_window_asks_for_a_constraint():
    def window(x):
        return O.view(x, (10, 10), (3, 4), valid_shape=(7, 10))

    with pytest.raises(PtoShapeError) as err:
        jax.make_jaxpr(window)(jax.ShapeDtypeStruct((M, 50), jnp.float32))
    assert str(err.value) == (
        "pto.view: cannot decide whether window dim 0 (offset 3, valid 7, size 10) of the input (m, 50) satisfies "
        "0 <= offset, 0 <= valid <= size and offset + valid <= m for every value of the symbolic dimensions; "
        "state the bound as a constraint: jax.export.symbolic_shape(..., constraints=...)")

    (m10,) = jax.export.symbolic_shape("m", constraints=("m >= 10",))
    exp = jax.export.export(jax.jit(pj.kernel(window, backend="xla")))(jax.ShapeDtypeStruct((m10, 50), jnp.float32))
    for m in (10, 23):
        x = _rand((m, 50), m)
        want = np.zeros((10, 10), np.float32)
        want[:7] = x[3:10, 4:14]
        np.testing.assert_array_equal(exp.call(x), want)


def test_symbolic_reshape_sizes_must_agree():
    with pytest.raises(PtoShapeError) as err:
        jax.make_jaxpr(lambda x: O.reshape(x, (M, 32)))(jax.ShapeDtypeStruct((M, 64), jnp.float32))
    assert str(err.value) == "pto.reshape: cannot reshape (m, 64) (64*m elements) to (m, 32) (32*m elements)"


def test_verify_runs_the_symbolic_levels_at_several_sizes():
    def fn(a, b):
        with pj.tile(vec=(32, 32)):
            return jnp.sum(jnp.exp(a * 0.5 - b), axis=-1), jnp.take(a, jnp.array([3, 0, 63], jnp.int32), axis=1)

    low = pj.lower(fn, *_specs())
    for m in (1, 130):
        a, b = _rand((m, 64), 1), _rand((m, 64), 2)
        assert set(low.verify(a, b)) == {"tensor"}
        total, picked = low.evaluate("tensor", a, b)
        np.testing.assert_allclose(total, np.exp(a * 0.5 - b).sum(-1), rtol=1e-5)
        np.testing.assert_array_equal(picked, a[:, [3, 0, 63]])


# ------------------------------------------------------ polymorphic_shapes: one dynamic PTO compile
POLY = {"seed": ("m, 64", "m, 64", None), "softmax": ("m, 64",), "matmul-k-tail": ("m, 100", None)}


@pytest.fixture(scope="module", params=sorted(CASES))
def polymorphic(request):
    """(the case, its sim kernel with polymorphic_shapes, compiled once by a first call)."""
    return request.param, pj.kernel(CASES[request.param][0], polymorphic_shapes=POLY[request.param])


def test_one_compile_serves_every_size(polymorphic):
    name, f = polymorphic
    _, _, shapes, reference = CASES[name]
    for m in SIZES:
        args = [_rand(s, seed) for seed, s in enumerate(shapes(m))]
        got = np.asarray(f(*args))
        assert got.shape[0] == m
        _assert_matches(got, reference, args)
    assert f.compiles == 1


def test_the_dynamic_module_is_real_pto(polymorphic):
    name, f = polymorphic
    compiled = f.compiled_for(*[_rand(s, 0) for s in CASES[name][2](17)])
    text = compiled.as_text("pto")
    assert "%dyn_m: index" in text and "!pto.tensor_view<?x" in text and "!pto.partition_tensor_view<?x" in text
    assert "valid_row = %dyn_vr" in text and "v_row=?" in text
    assert "%dyn_vr = arith.minsi %dyn_left" in text
    cpp = compiled.ptoas()                             # Huawei's ptoas accepts the dynamic module
    for fn in compiled.dynamic.rows:                   # each function takes m (ptoas passes index as int32)
        assert re.search(rf"AICORE void {fn}\((__gm__ float\* v\d+, )+int32_t v\d+\)", cpp), fn


def test_the_seed_rows_are_tiled_by_each_programs_row_tile():
    f = pj.kernel(seed_kernel, polymorphic_shapes=("m, 64", "m, 64", None))
    compiled = f.compiled_for(*[_rand(s, 0) for s in [(5, 64), (5, 64), (64, 32)]])
    assert compiled.dynamic.rows == {"mul_add": 32, "matmul": 64, "sum": 32}
    part = {p.program.name: p for e in compiled.dynamic.lowering.block.jaxpr.eqns for p in e.params["spec"].parts}
    assert compiled.dynamic.grid(part["mul+add"], 130) == (5, 2)       # ceil(130/32) row blocks, 2 col blocks
    assert compiled.dynamic.grid(part["matmul"], 130) == (3, 1)        # ceil(130/64)


def test_a_size_that_violates_a_constraint():
    f = pj.kernel(_softmax, polymorphic_shapes=("m, 64",), polymorphic_constraints=("mod(m, 16) == 0",))
    np.testing.assert_allclose(f(_rand((32, 64), 1)), jax.nn.softmax(_rand((32, 64), 1) * 0.5, axis=-1),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(PtoArgumentError) as err:
        f(_rand((17, 64), 1))
    assert str(err.value) == "pj.kernel '_softmax': m = 17 violates the constraint 'mod(m, 16) == 0'"
    with pytest.raises(PtoArgumentError) as err:
        f(_rand((32, 48), 1))
    assert str(err.value) == ("pj.kernel '_softmax': arguments (float32[32, 48]) do not have the polymorphic "
                              "shapes ('m, 64'): different size 64 for known dimension 1")
    assert f.compiles == 1


def test_the_symbol_must_agree_across_arguments():
    f = pj.kernel(seed_kernel, polymorphic_shapes=("m, 64", "m, 64", None))
    with pytest.raises(PtoArgumentError) as err:
        f(_rand((17, 64), 0), _rand((18, 64), 1), _rand((64, 32), 2))
    assert str(err.value) == "pj.kernel 'seed_kernel': m is 17 by an earlier argument but argument 1 has 18 at axis 0"


def test_a_symbol_off_the_leading_dim_is_unsupported():
    f = pj.kernel(_softmax, polymorphic_shapes=("32, n",))
    with pytest.raises(PtoUnsupportedError) as err:
        f(_rand((32, 64), 1))
    assert str(err.value) == ("pj.kernel '_softmax': argument 0 has the symbolic dim n at axis 1; the tile level "
                              "takes one symbol as the leading (row) dim")


def test_the_tile_and_block_levels_print_the_symbol():
    f = pj.kernel(seed_kernel, polymorphic_shapes=("m, 64", "m, 64", None))
    compiled = f.compiled_for(*[_rand(s, 0) for s in [(5, 64), (5, 64), (64, 32)]])
    tile = compiled.as_text("tile")
    assert "%3:f32[m,64] = tile_grid[vector mul parts=ceil(m/32)x2](%0)" in tile
    assert "part 0: grid ceil(m/64)x1 index" in tile
    assert "pto.tload[window=[64*i0:+min(64, m-64*i0), 64*i2:+64] loc=mat]" in tile
    assert "%40:f32[m] = pto.tstore[window=[32*i0:+min(32, m-32*i0)]](%37, %39, %34, %35)" in tile
    assert compiled.as_text("block").split("\n\n")[-1] == (
        "kernel(%0:f32[m,64], %1:f32[m,64], %2:f32[64,32]):\n"
        "  %3:f32[m,64] = block_call[mul+add<AIV> x2*ceil(m/32)](%0, %1)\n"
        "  %4:f32[m,32] = block_call[matmul<AIC> xceil(m/64)](%3, %2)\n"
        "  %5:f32[m] = block_call[sum<AIV> xceil(m/32)](%4)\n"
        "  return %5")


def test_a_result_whose_rows_are_not_the_symbol_is_unsupported():
    def twice(x):
        with pj.tile(vec=(32, 64)):
            return jnp.concatenate([x, x], axis=0) * 2.0

    with pytest.raises(PtoUnsupportedError) as err:
        pj.kernel(twice, polymorphic_shapes=("m, 64",))(_rand((17, 64), 0))
    assert str(err.value) == ("pj.kernel 'twice': result 0 has the shape (2*m, 64); the tile level takes the "
                              "symbol as the leading dim of a result, or no symbol")


def _static_512(x, y):
    """A static (512, 64) intermediate, the template's row count by coincidence: y and y/2 stacked."""
    with pj.tile(vec=(32, 64)):
        z = jnp.concatenate([y, y * 0.5], axis=0) * 2.0
        return x + z[300:301]


def test_a_static_dim_equal_to_the_template_stays_static():
    f = pj.kernel(_static_512, polymorphic_shapes=("m, 64", None))
    y = _rand((256, 64), 9)
    for m in (1, 17, 512, 700):
        x = _rand((m, 64), m)
        want = x + np.concatenate([y, y * 0.5])[300] * 2.0           # = x + y[44]
        np.testing.assert_allclose(np.asarray(f(x, y)), want, rtol=1e-6, atol=1e-6)
    assert f.compiles == 1
    compiled = f.compiled_for(_rand((5, 64), 0), y)
    assert compiled.dynamic.size == 512 and compiled.twin.size == 768
    fn = compiled.dynamic.names
    rows = {p.program.name: compiled.dynamic.rows[fn[(p.program.name, tuple(p.shape))]]
            for e in compiled.dynamic.lowering.block.jaxpr.eqns for p in e.params["spec"].parts}
    assert rows == {"mul+concat": None, "concat": None, "mul": None, "view": None, "add": 32}
    tile = compiled.as_text("tile")       # the static 512 rows: a fixed grid, full windows
    assert "%32:f32[512,64] = pto.tstore[window=[32*i0:+32, 64*i1:+64]](%29, %31, %26, %27)" in tile
    assert "%49:f32[m,64] = pto.tstore[window=[32*i0:+min(32, m-32*i0), 64*i1:+64]](%45, %48, %41, %42)" in tile
    assert compiled.as_text("block").split("\n\n")[-1] == (
        "kernel(%0:f32[m,64], %1:f32[256,64]):\n"
        "  %2:f32[512,64] = block_call[concat<AIV> x8](%1)\n"
        "  %3:f32[512,64] = block_call[mul+concat<AIV> x8](%1, %2)\n"
        "  %4:f32[512,64] = block_call[mul<AIV> x16](%3)\n"
        "  %5:f32[1,64] = block_call[view<AIV> x1](%4)\n"
        "  %6:f32[m,64] = block_call[add<AIV> xceil(m/32)](%0, %5)\n"
        "  return %6")


def test_a_static_width_equal_to_the_template_stays_static():
    def widen(x, y):       # x eight times side by side: (m, 512), 512 the template's rows by coincidence
        with pj.tile(vec=(32, 64), cube=(64, 64, 64)):
            return jnp.matmul(jnp.concatenate([x] * 8, axis=1), y)

    f = pj.kernel(widen, polymorphic_shapes=("m, 64", None))
    y = _rand((512, 48), 3)
    for m in (3, 130):
        x = _rand((m, 64), m)
        want = np.tile(x.astype(np.float64), (1, 8)) @ y.astype(np.float64)
        np.testing.assert_allclose(np.asarray(f(x, y)), want, rtol=1e-4, atol=1e-4)
    assert f.compiles == 1


def test_a_matmul_contracting_the_symbolic_rows_is_unsupported():
    def gram(x):
        with pj.tile(vec=(32, 64), cube=(64, 64, 64)):
            return jnp.matmul(x.T, x)

    with pytest.raises(PtoUnsupportedError) as err:
        pj.kernel(gram, polymorphic_shapes=("m, 64",))(_rand((17, 64), 0))
    assert str(err.value) == (     # x.T is the matmul's transposed load: it contracts the rows m
        "pj.kernel 'gram': pto.matmul[transpose_a=True] of float32[m, 64] contracts over the symbolic rows m "
        "(x.T @ x: a sum over every row): it needs every row at once, but a polymorphic kernel runs each block of "
        "rows on its own and a block reads only its own rows; do it outside the kernel on the kernel's result, or "
        "call the kernel without polymorphic_shapes (one compile per row count)")


def test_a_dim_that_follows_the_rows_off_the_leading_axis_is_unsupported():
    def twice_transposed(x):
        with pj.tile(vec=(32, 64)):
            return (jnp.exp(x.T) * 2).T + 1

    with pytest.raises(PtoUnsupportedError) as err:
        pj.kernel(twice_transposed, polymorphic_shapes=("m, 64",))(_rand((17, 64), 0))
    assert str(err.value) == (
        "pj.kernel 'twice_transposed': lowered at 512 and at 768 rows, result 0 of step 0 "
        "(pto.block_call[transpose+exp+mul]) is float32[64,512] at 512 rows but float32[64,768] at 768 (a dim that "
        "changes other than as the leading dim, k times the row count); a symbolic row count needs one program for "
        "every size, with the rows as its leading dim only; the dynamic PTO-AS cannot follow the row count through "
        "this program: call the kernel without polymorphic_shapes (one compile per row count)")   # same at every pair


def test_a_reduction_over_the_symbolic_rows_is_not_blamed_on_the_row_tile():
    """A column sum fails alike at every pair of template sizes; the error said a row tile must divide two
    of them, though 16 divides all."""
    def colsum(x):
        with pj.tile(vec=(16, 64)):
            return jnp.sum(x, axis=0)

    with pytest.raises(PtoUnsupportedError, match=r"pj.kernel 'colsum': pto.sum\[axes=\(0,\)\] of float32\[m, 64\] "
                                                  r"runs along the symbolic rows m \(axis 0\), a reduction or scan "
                                                  r"along the symbolic row axis") as err:
        pj.kernel(colsum, polymorphic_shapes=("m, 64",))(_rand((20, 64), 0))
    assert "row tile must divide" not in str(err.value)


def test_top_k_and_a_reduction_at_every_size_eagerly_and_under_jit():
    """A new user's kernels with a symbolic row count: ``lax.top_k`` (its staging tiles narrowed to k
    columns with ``?`` rows: the engine now keeps the source's valid rows for a same-layout
    ``treshape``) and ``logsumexp`` under ``jax.jit`` (a host reshape step of a constant under the
    caller's trace raised TracerArrayConversionError); ptoas accepts the dynamic module."""
    def top3(x):
        with pj.tile(vec=(16, 32)):
            return jax.lax.top_k(x, 3)

    def lse(x):
        with pj.tile(vec=(16, 32)):
            return jax.nn.logsumexp(x, axis=-1)

    for fn in (top3, lse):
        kernel = pj.kernel(fn, polymorphic_shapes=("m, 32",))
        for m in (7, 16, 33):
            x = _rand((m, 32), m)
            want = jax.tree.leaves(jax.jit(fn)(x))
            for run in (kernel, jax.jit(kernel)):
                for got, w in zip(jax.tree.leaves(run(x)), want):
                    np.testing.assert_allclose(np.asarray(got), np.asarray(w), rtol=1e-6, atol=1e-6)
        assert kernel.compiles == 1
        if fn is top3:
            kernel.compiled_for(x).ptoas()


def test_a_transpose_of_the_block_rows_is_unsupported_at_compile_time():
    """``cumsum`` along the rows transposes the block (``ttrans``): the dynamic module cannot carry its
    ``?`` rows into columns, which is said when it compiles (it failed inside the first task)."""
    def scan(x):
        with pj.tile(vec=(16, 32)):
            return jnp.cumsum(x, axis=1)

    with pytest.raises(PtoUnsupportedError, match=r"function 'cumsum': a transpose of the block's 16 dynamic rows "
                                                  r"\(ttrans of %\w+ into %\w+: a transpose, or a cumsum along "
                                                  r"the last axis, which scans down the tile's transpose\) has no "
                                                  r"dynamic form; compile it without polymorphic_shapes"):
        pj.kernel(scan, polymorphic_shapes=("m, 32",))(_rand((7, 32), 0))


@pytest.mark.parametrize("tile", [12, 24, 48, 40])
def test_row_tiles_that_do_not_divide_512_take_templates_they_divide(tile):
    """A row tile of 12, 24, 48 (3 times a power of two) or 40 leaves a tail at 512 rows: the search goes
    on to template row counts it divides (it stopped at 512 and 768 with an error about PTO-AS windows,
    while the static kernel ran); a tile that divides no two of them says so."""
    def fn(x):
        with pj.tile(vec=(tile, 64)):
            return jnp.exp(x) * 2.0

    kernel = pj.kernel(fn, polymorphic_shapes=("m, 64",))
    for m in (1, tile + 1, 100):
        x = _rand((m, 64), m)
        np.testing.assert_allclose(np.asarray(kernel(x)), np.exp(x) * 2, rtol=2e-6)
    assert kernel.compiles == 1


@pytest.mark.parametrize("rows", [7, 112])
def test_a_row_tile_that_divides_no_two_templates_names_the_rule(rows):
    """112 leaves a tail at every template, each failing alike but for its size: that said no rule."""
    def fn(x):
        with pj.tile(vec=(rows, 64)):
            return jnp.exp(x)

    with pytest.raises(PtoUnsupportedError, match=r"so at every pair of the template row counts \[512, .*\] "
                                                  r"\(a row tile must divide two of them\)"):
        pj.kernel(fn, polymorphic_shapes=("m, 64",))(_rand((9, 64), 0))


def test_default_tiles_divide_the_template():
    """Without ``pj.tile``, rows of 24 f32 columns took 341-row default tiles, which divide no template
    row count ('not one row tile of a block' for ``jnp.tanh``); a template lowering takes a power of
    two. A reduction over the symbolic rows says that is what it is."""
    for fn in (jnp.tanh, lambda x: jax.nn.softmax(x, axis=-1), lambda x: jnp.argmax(x, axis=-1)):
        kernel = pj.kernel(fn, polymorphic_shapes=("m, 24",))
        for m in (1, 33, 130):
            x = _rand((m, 24), m)
            np.testing.assert_allclose(np.asarray(kernel(x)), np.asarray(jax.jit(fn)(x)), rtol=2e-6, atol=1e-6)
        assert kernel.compiles == 1
    with pytest.raises(PtoUnsupportedError, match=r"pto.sum\[axes=\(0,\)\] of float32\[m, 24\] runs along the "
                                                  r"symbolic rows m \(axis 0\), a reduction or scan along the "
                                                  r"symbolic row axis"):
        pj.kernel(lambda x: x.sum(0), polymorphic_shapes=("m, 24",))(_rand((7, 24), 0))


def test_the_row_tiles_the_docs_list_are_those_two_templates_share():
    from pathlib import Path

    from ptojax.polymorphic import _TEMPLATES

    tiles = [t for t in range(1, 257) if sum(n % t == 0 for n in _TEMPLATES) >= 2]
    assert tiles[:6] == [1, 2, 3, 4, 5, 6]
    listed = "1 to 6, " + ", ".join(map(str, tiles[6:-1])) + f" and {tiles[-1]} do"
    doc = " ".join((Path(__file__).parents[1] / "docs" / "dynamic_shapes.md").read_text().split())
    assert listed in doc
    assert "two of 1 280, 2 304, 1 024, 1 536, 3 072, 2 560" in doc and _TEMPLATES[:2] == (512, 768)
    assert _TEMPLATES[2:] == (1280, 2304, 1024, 1536, 3072, 2560)


def test_a_staged_reduction_along_the_symbolic_rows_is_said_to_be_one():
    """The refusal named only the Block graph's reshape of the rows into chunks (an op the user never
    wrote)."""
    def colsum(x):
        with pj.tile(vec=(32, 64)):
            return jnp.sum(x, axis=0)

    x = _rand((130, 64), 2)
    with pytest.raises(PtoUnsupportedError, match="'colsum': pto.sum.* a reduction or scan along the symbolic row axis"):
        pj.kernel(colsum, polymorphic_shapes=("m, 64",))(x)
    np.testing.assert_allclose(np.asarray(pj.kernel(colsum)(x)), x.sum(0), rtol=1e-5, atol=1e-5)
