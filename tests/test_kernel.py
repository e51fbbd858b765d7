"""pj.kernel: eager, jit, vmap, jit(vmap), shard_map; sim and xla backends; cache; staged API; errors."""
import functools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import ptojax as pj
from helpers import F16, rand
from ptojax.lowering.pipeline import TOLERANCE
from kernels import KERNELS, seed_kernel

# Ten kernels of the lowering suite: elementwise, casts, reductions, sorts, norms, quantization,
# matmuls (fp16 tails, int8), layout and an MLP block (indexing is covered by its own tests: jnp.take
# under vmap becomes a batched lax.gather, which the lowering does not translate).
NAMES = ["elementwise-tails", "compare-where-clip", "int8-arith", "reductions", "cumsum-sort-topk", "softmax-norms",
         "quantize", "matmul-tails", "matmul-int8", "layout", "mlp-block"]
CASES = [k for k in KERNELS if k[0] in NAMES]
# Under jax.jit a sim kernel compiles the replay of its PTO-AS text: these take 10-30 s each, so their
# sim compositions run with ``-m slow``; the default run composes the cheaper ones on sim (the replay of
# every lowering kernel is compared with the engine in tests/test_replay_jit.py).
HEAVY_REPLAYS = {"reductions", "cumsum-sort-topk", "softmax-norms", "matmul-tails", "layout", "mlp-block"}
BACKEND_CASES = [pytest.param(*case, backend, id=f"{case[0]}-{backend}",
                              marks=[pytest.mark.slow] if backend == "sim" and case[0] in HEAVY_REPLAYS else [])
                 for case in CASES for backend in ("sim", "xla")]


# The MLP block rounds an intermediate to fp16: a different fp32 accumulation order upstream can move
# that rounding by one fp16 ulp, so its fp32 output is compared at fp16 tolerance.
INTERMEDIATE = {"mlp-block": np.dtype(np.float16)}


def _close(got, want, name=None):
    got, want = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        rtol, atol = TOLERANCE.get(INTERMEDIATE.get(name, np.dtype(w.dtype)), (0, 0))
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=2 * rtol, atol=2 * atol)


def _batch(args, n):
    """``n`` stacked variants of each argument (float ones perturbed, index arrays repeated)."""
    out = []
    for a in args:
        a = np.asarray(a)
        if a.dtype.kind == "f" or a.dtype == F16:
            out.append(np.stack([(a.astype(np.float32) * (1 + 0.1 * i)).astype(a.dtype) for i in range(n)]))
        else:
            out.append(np.stack([a] * n))
    return out


@pytest.mark.parametrize("name,fn,args,backend", BACKEND_CASES)
def test_compositions(name, fn, args, backend):
    f = pj.kernel(fn, backend=backend)
    want = jax.jit(fn)(*args)
    _close(f(*args), want, name)                                      # eager
    _close(jax.jit(f)(*args), want, name)                             # jit
    batched = _batch(args, 3)
    want_b = jax.vmap(fn)(*batched)
    _close(jax.vmap(f)(*batched), want_b, name)                       # vmap, every argument batched
    _close(jax.jit(jax.vmap(f))(*batched), want_b, name)              # jit(vmap)
    axes = (0,) + (None,) * (len(args) - 1)                           # only the first argument batched
    mixed = [batched[0]] + list(args[1:])
    _close(jax.vmap(f, in_axes=axes)(*mixed), jax.vmap(fn, in_axes=axes)(*mixed), name)


@pytest.mark.parametrize("name,fn,args,backend", BACKEND_CASES)
def test_shard_map_over_eight_devices(name, fn, args, backend):
    f = pj.kernel(fn, backend=backend)
    mesh = jax.make_mesh((8,), ("d",))
    stacked = [jax.device_put(x, NamedSharding(mesh, P("d"))) for x in _batch(args, 8)]
    sharded = jax.shard_map(jax.vmap(f), mesh=mesh, in_specs=P("d"), out_specs=P("d"))
    _close(jax.jit(sharded)(*stacked), jax.vmap(fn)(*_batch(args, 8)), name)


@pytest.mark.parametrize("backend", ["sim", "xla"])
def test_a_kernel_traced_inside_shard_map_is_one_devices_program(backend):
    """A kernel first traced inside jax.shard_map: ``jnp.where(c, x, 0.0)`` wrote ``reshard`` of the
    manual axes into it (no translation); its results vary along the mesh axes as its arguments do."""
    def relu(x):
        with pj.tile(vec=(16, 48)):
            return jnp.where(x > 0, x, 0.0)

    x = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("d",))
    f = jax.jit(jax.shard_map(pj.kernel(relu, backend=backend), mesh=mesh, in_specs=P("d"), out_specs=P("d")))
    np.testing.assert_array_equal(np.asarray(f(x)), np.maximum(x, 0))


def test_vmap_is_one_kernel_with_the_batch_as_a_tile_loop():
    f = pj.kernel(seed_kernel)
    a, b, w = rand((3, 64, 64), F16, 1, -1, 1), rand((3, 64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    jaxpr = jax.make_jaxpr(jax.vmap(f, in_axes=(0, 0, None)))(a, b, w).jaxpr
    (eqn,) = jaxpr.eqns
    assert eqn.primitive.name == "pto_call"
    low = eqn.params["call"].lowering
    calls = [e.params["spec"] for e in low.block.jaxpr.eqns]
    assert [p.instances for c in calls for p in c.parts] == [12, 3, 6]   # the batch multiplies the instances
    assert [p.shape[0] for c in calls for p in c.parts] == [3, 3, 3]     # as the outermost grid dimension


def test_compile_cache_counts():
    f = pj.kernel(seed_kernel)
    args = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    f(*args)
    f(*args)
    jax.jit(f)(*args)
    assert f.compiles == 1
    f(*[a[:32] if i < 2 else a for i, a in enumerate(args)])
    assert f.compiles == 2
    assert f.lower(*args).compile() is f.compiled_for(*args)


def test_staged_api_and_profile(tmp_path):
    f = pj.kernel(target="a2")(seed_kernel)
    args = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    lowered = f.lower(*args)
    for level in ("tensor", "tile", "block", "pto"):
        assert lowered.as_text(level)
    assert "pto.tmatmul" in lowered.as_text("pto")
    compiled = lowered.compile()
    _close(compiled(*args), seed_kernel(*args))
    prof = compiled.profile(*args)
    assert prof.makespan_us >= prof.lower_bound_us > 0
    assert set(prof.label_us) == {"mul+add", "Linear", "sum"}
    prof.save(tmp_path / "trace.json")
    assert (tmp_path / "trace.json").read_text().startswith('{"traceEvents":')
    out, trace = compiled.run(*args, executor="threads")
    _close(out, seed_kernel(*args))
    quick = compiled.profile(*args, compute=False)       # the same timeline, no task bodies run
    assert quick.trace.records == prof.trace.records
    assert compiled.run(*args, compute=False)[0] is None
    with pytest.raises(pj.PtoArgumentError, match="compute=False needs the simulated executor, not 'threads'"):
        compiled.run(*args, executor="threads", compute=False)


def test_pytrees_in_and_out():
    @pj.kernel
    def f(params, x):
        with pj.tile(vec=(8, 32)):
            return {"y": x * params["scale"] + params["shift"], "z": [jnp.max(x, axis=-1)]}

    params = {"scale": np.float32(2.0) * np.ones((16, 32), np.float32), "shift": np.ones((32,), np.float32)}
    x = rand((16, 32), np.float32)
    out = f(params, x)
    assert set(out) == {"y", "z"} and isinstance(out["z"], list)
    _close(out, f.fn(params, x))


def test_compiled_kernel_called_with_other_shapes():
    f = pj.kernel(seed_kernel)
    args = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    compiled = f.lower(*args).compile()
    with pytest.raises(pj.PtoArgumentError, match=r"pj.kernel 'seed_kernel': argument 0 'a' is float16\[32, 64\], "
                                                   r"compiled for float16\[64, 64\]; call the kernel object itself"):
        compiled(args[0][:32], args[1], args[2])
    with pytest.raises(pj.PtoArgumentError, match=r"called with 2 arguments .*, compiled for 3"):
        compiled(args[0], args[1])


def test_options_are_checked():
    with pytest.raises(pj.PtoArgumentError, match="backend 'gpu' is not one of"):
        pj.kernel(seed_kernel, backend="gpu")
    with pytest.raises(pj.PtoArgumentError, match="unknown Ascend target .a9.; known targets: a2, a3"):
        pj.kernel(seed_kernel, target="a9")


@pytest.mark.parametrize("polymorphic", [(), ("m, 64",)])
def test_grad_of_a_kernel_points_to_custom_vjp(polymorphic):
    """Static or polymorphic: a polymorphic kernel was differentiated through its replay (a row max
    failed inside pto.trowmax's replay, ``exp`` gave a derivative no kernel computes)."""
    for fn in (lambda x: x * 2, lambda x: jnp.max(x, axis=-1)):
        f = pj.kernel(fn, polymorphic_shapes=polymorphic)
        for diff in (jax.grad, lambda g: jax.jit(jax.grad(g))):
            with pytest.raises(pj.PtoUnsupportedError, match="wrap forward and backward kernels in jax.custom_vjp"):
                diff(lambda x: f(x).sum())(np.ones((21, 64), np.float32))


def test_pass_options_reach_the_partition():
    def fn(x):
        with pj.tile(vec=(8, 64)), jax.named_scope("V1"):
            return x * 2

    f = pj.kernel(fn, options={"tiles_per_block": {"V1": 4}})
    low = f.lower(np.ones((64, 64), np.float32)).lowering
    assert [p.instances for e in low.block.jaxpr.eqns for p in e.params["spec"].parts] == [2]


def test_scalar_work_on_kernel_data_runs_on_a_core():
    f = pj.kernel(lambda x: jnp.sum(x) * 2.0 + jnp.max(x))
    x = rand((8, 64), np.float32)
    _close(f(x), f.fn(x))
    calls = f.lower(x).lowering.block.jaxpr.eqns
    assert all(e.primitive.name == "pto.block_call" for e in calls)


def test_profile_and_report_from_shapes_alone(tmp_path):
    """The timeline needs no numbers unless data steers the schedule: profile() and report(path)
    without arguments equal the profile on real arguments; where device data decides the tasks (MoE
    counts read back), the error says so."""
    args = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    compiled = pj.kernel(seed_kernel).lower(*args).compile()
    assert compiled.profile().makespan_us == pytest.approx(compiled.profile(*args).makespan_us)
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]      # the shapes it was lowered with
    assert compiled.profile(*shapes, compute=False).makespan_us == pytest.approx(compiled.profile().makespan_us)
    with pytest.raises(pj.PtoArgumentError, match=r"argument 0 'a' is float32\[64, 64\], compiled for float16"):
        compiled.profile(jax.ShapeDtypeStruct((64, 64), np.float32), *shapes[1:])
    assert compiled.report(tmp_path / "report.html").makespan_us > 0 and (tmp_path / "report.html").exists()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from examples import moe_router

    moe = pj.kernel(moe_router.moe_router).lower(*moe_router.inputs()).compile()
    with pytest.raises(pj.errors.PtoArgumentError) as err:
        moe.profile()
    assert str(err.value) == (
        "pj.kernel 'moe_router': profile() without arguments needs a schedule that the shapes alone decide, but "
        "values the kernel computes from its arguments are read on the host and decide which tasks run; pass the "
        "arguments: compiled.profile(x, w_router, bias, w_gate, w_up, w_down)")
    assert moe.profile(*moe_router.inputs()).makespan_us > 0


def test_profile_without_arguments_names_the_argument_whose_value_steers(tmp_path):
    """A trip count read on the host decides how many tasks run: report(path) names it and how to pass it."""
    def steps(x, n):
        with pj.tile(vec=(8, 64)):
            return jax.lax.fori_loop(0, n, lambda i, y: y * 2 + 1, x)

    x = rand((64, 64), np.float32)
    compiled = pj.kernel(steps).lower(x, np.int32(3)).compile()
    assert [compiled.profile(x, np.int32(n)).tasks for n in (3, 5)] == [24, 40]
    for call, shown in ((lambda: compiled.report(tmp_path / "report.html"), "report(path"), (compiled.profile, "profile(")):
        with pytest.raises(pj.PtoArgumentError) as err:
            call()
        assert str(err.value) == (
            f"pj.kernel 'steps': {shown}) without arguments needs a schedule that the shapes alone decide, but the "
            f"value of argument 1 'n' (int32[]) decides which tasks run; pass the arguments: "
            f"compiled.{shown}{', ' if shown.startswith('report') else ''}x, n)")
    assert not (tmp_path / "report.html").exists()
    _close(compiled(x, np.int32(3)), ((x * 2 + 1) * 2 + 1) * 2 + 1)


@pytest.mark.parametrize("fn", [lambda x, t: x / (1 - np.float32(0.9) ** t),       # AdamW's bias correction
                                lambda x, t: jnp.where(t > 3, x, -x),
                                lambda x, t: jax.lax.dynamic_slice(x, (t.astype(jnp.int32), 0), (8, 64)) * 2,
                                lambda x, t: (x * 2, 1 - 0.9 ** t)],               # one output the host's
                         ids=["scale", "select", "window", "host-output"])
def test_scalars_the_host_computes_with_but_no_loop_reads_leave_the_schedule_to_the_shapes(fn):
    """A scalar argument the host computes with (a power, a compare, a clamped window start) but that no
    loop or branch reads: ``profile()`` needs no arguments and gives what ``profile(x, t)`` gives for any
    ``t``; ``jax.jit`` replays the kernel (the host's arithmetic traced into it, no callback), equal to the
    eager runs, which recompute it for each new ``t`` (a kept plan)."""
    x = rand((64, 64), np.float32)
    kernel = pj.kernel(fn)
    compiled = kernel.lower(x, np.float32(7)).compile()
    shapes_only = compiled.profile()
    jitted = jax.jit(kernel)
    assert "callback" not in jitted.lower(x, np.float32(7)).as_text()
    for t in (0.0, 7.0, 1e4, 7.0, 2.5):
        t = np.float32(t)
        profile = compiled.profile(x, t)
        assert (profile.tasks, profile.makespan_us) == (shapes_only.tasks, shapes_only.makespan_us)
        eager = jax.tree.leaves(kernel(x, t))
        for got, want in zip(eager, jax.tree.leaves(jax.jit(fn)(x, t))):
            _close(got, want)
        for got, want in zip(jax.tree.leaves(jitted(x, t)), eager):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_arguments_are_taken_as_jax_jit_takes_them():
    """Non-contiguous NumPy views, float64 / int64 data and Python floats: converted to JAX's dtypes
    (x64 off) and made contiguous before the run, eagerly, through ``lower`` and under jax.jit alike
    (they faulted the first task: "needs a C-contiguous f32 array, got float64")."""
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    double = pj.kernel(lambda x: x * 2)
    np.testing.assert_array_equal(np.asarray(double(a.T)), a.T * 2)
    np.testing.assert_array_equal(np.asarray(double(a[:, ::2])), a[:, ::2] * 2)
    for x, dtype in ((np.linspace(0, 1, 8), np.float32), (np.arange(6), np.int32)):
        for run in (double, jax.jit(double), double.lower(x).compile()):
            got = run(x)
            assert got.dtype == dtype
            np.testing.assert_array_equal(np.asarray(got), (x * 2).astype(dtype))
    scaled = pj.kernel(lambda x, s: x * s)(a, 2.5)
    assert scaled.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(scaled), a * np.float32(2.5))


def test_keyword_arguments_are_placed_by_the_signature_as_under_jax_jit():
    """``f(x, y=y)``, keywords in any order and a defaulted parameter passed by name run as the positional
    call does, eagerly, under jax.jit, through ``lower`` and on the compiled kernel (they were a
    TypeError); a keyword the function lacks and a keyword-only parameter are errors naming them."""
    def fn(x, y, scale=2.0):
        return x * scale + y

    kernel = pj.kernel(fn)
    x = np.linspace(-1, 1, 4 * 16, dtype=np.float32).reshape(4, 16)
    y = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)
    for run in (kernel, jax.jit(kernel), kernel.lower(x, y).compile()):
        np.testing.assert_array_equal(np.asarray(run(x, y=y)), fn(x, y))
        np.testing.assert_array_equal(np.asarray(run(y=y, x=x)), fn(x, y))
    np.testing.assert_array_equal(np.asarray(kernel(x, y, scale=3.0)), fn(x, y, 3.0))
    np.testing.assert_array_equal(np.asarray(kernel.lower(x, y=y, scale=0.5).compile()(x, y, 0.5)),
                                  fn(x, y, 0.5))
    with pytest.raises(pj.PtoArgumentError, match=r"'fn': got an unexpected keyword argument 'z'"):
        kernel(x, y, z=y)
    with pytest.raises(pj.PtoArgumentError, match=r"arguments \['s'\] can only be passed by keyword"):
        pj.kernel(lambda x, *, s: x * s)(x, s=2.0)
    with pytest.raises(pj.PtoArgumentError, match=r"\['scale'\] .* a functools.partial binds by keyword"):
        pj.kernel(functools.partial(fn, scale=3.0))(x, y, scale=5.0)


@pytest.mark.parametrize("backend", ["sim", "xla"])
def test_arrays_the_function_closes_over_are_constants(backend):
    """A closed-over jax.Array is a constant as a NumPy array is (a (32, 64) one met the tiles of ``x``
    whole: 'shapes (16, 64), (32, 64) do not broadcast'; one tile's worth and a 0-d ``jnp.float32`` were
    a KeyError in codegen); a value traced by an enclosing jax.jit is an error that says to pass it."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    for c, tile in ((jnp.asarray(rng.standard_normal((32, 64)), jnp.float32), (16, 64)),
                    (jnp.asarray(rng.standard_normal((32, 64)), jnp.float32), (32, 64)),
                    (jnp.float32(3.0), (16, 64)), (jnp.arange(64, dtype=jnp.bfloat16), (16, 64))):
        def fn(v, c=c, tile=tile):
            with pj.tile(vec=tile):
                return v * c
        for run in (pj.kernel(fn, backend=backend), jax.jit(pj.kernel(fn, backend=backend))):
            np.testing.assert_array_equal(np.asarray(run(x)), np.asarray(jax.jit(fn)(x)))

    def outer(v, s):
        return pj.kernel(lambda v: v * s, backend=backend)(v)

    with pytest.raises(pj.PtoArgumentError, match=r"closes over a float32\[64\] value traced by an enclosing "
                                                  r"transformation .* pass it to the kernel as an argument"):
        jax.jit(outer)(x, np.ones(64, np.float32))


def test_python_numbers_are_weakly_typed_as_under_jax_jit():
    """A Python number argument gives way to an array's dtype as it does under ``jax.jit``: ``f16 * 2.0``
    is float16 and ``int8 * 3`` int8, eagerly, under jax.jit and through ``lower``; a NumPy scalar is not
    weak (float32), and a kernel compiled for a Python number names the difference (it was float32 and
    an int8 product int32)."""
    fn = lambda x, s: x * s
    kernel = pj.kernel(fn)
    half = (np.arange(64, dtype=np.float16) / 8).reshape(4, 16)
    small = np.arange(-32, 32, dtype=np.int8).reshape(4, 16)
    for x, s in ((half, 2.5), (small, 3), (half, np.float32(2.5))):
        want = jax.jit(fn)(x, s)
        for run in (kernel, jax.jit(kernel), kernel.lower(x, s).compile()):
            got = run(x, s)
            assert got.dtype == want.dtype, (x.dtype, s, run)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    compiled = kernel.lower(half, 2.5).compile()
    with pytest.raises(pj.PtoArgumentError, match=r"argument 1 's' is float32\[\], compiled for float32\[\] "
                                                  r"\(a Python number\)"):
        compiled(half, np.float32(2.5))
    assert kernel.lower(half, 2.5).compile().profile(half, 2.5).makespan_us > 0


def test_constant_outputs_of_any_rank_under_jit():
    """A 0-d constant output (``jnp.zeros(())``, ``n * jnp.ones(())``) under jax.jit: the replay read it
    as a GM buffer (an AttributeError); 1-d and 2-d ones worked."""
    x = np.ones((5, 6), np.float32)
    for fn in (lambda v: (v + 1, jnp.zeros((), jnp.float32)), lambda v: v.shape[0] * jnp.ones(()),
               lambda v: (jnp.arange(3), v * 2)):
        kernel = pj.kernel(fn)
        for got, want in zip(jax.tree.leaves(jax.jit(kernel)(x)), jax.tree.leaves(jax.jit(fn)(x))):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        for got, want in zip(jax.tree.leaves(kernel(x)), jax.tree.leaves(fn(x))):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_an_op_without_a_real_form_fails_at_trace_time_under_jit():
    """Lowering runs in ``lower()``: under jax.jit the PtoUnsupportedError of an op with no PTO form
    (``lax.lgamma``) is raised while tracing, not as an XLA runtime error from a callback."""
    def fn(v):
        with pj.tile(vec=(2, 6, 3, 32)):
            return jax.lax.lgamma(v)

    x = np.random.default_rng(0).uniform(1, 2, (2, 6, 3, 32)).astype(np.float32)
    kernel = pj.kernel(fn)
    for stage in (jax.jit(kernel), kernel.lower):
        with pytest.raises(pj.PtoUnsupportedError, match=r"lgamma"):
            stage(x)


@pytest.mark.parametrize("label", ['a"b', "a\nb", "x\\y", "é ü"])
def test_any_label_text_survives_the_pto_text(label):
    """A label is written into each program's header and read back: quotes, newlines and backslashes
    are escaped (a quote ended the header: PtoAsmError)."""
    def f(a):
        with pj.tile(vec=(32, 32)), jax.named_scope(label):
            return a * 2.0

    x = rand((64, 64), np.float32, 3)
    compiled = pj.kernel(f).lower(x).compile()
    np.testing.assert_array_equal(np.asarray(compiled(x)), x * 2)
    assert list(compiled.profile(x).label_us) == [label]


def test_the_cache_keys_on_the_settings_that_change_tracing():
    """Compiled under rank promotion 'allow', the same call under 'raise' came from the cache and ran."""
    kernel = pj.kernel(lambda a, b: a + b)
    x, v = np.ones((8, 32), np.float32), np.ones((32,), np.float32)
    kernel(x, v)
    kernel(x, v)
    assert kernel.compiles == 1
    with jax.numpy_rank_promotion("raise"), pytest.raises(ValueError, match="jax_numpy_rank_promotion"):
        kernel(x, v)


def test_debug_nans_checks_an_eager_call_as_jit_does():
    kernel = pj.kernel(lambda a: jnp.log(a))
    x = np.full((8, 32), -1.0, np.float32)
    assert np.isnan(np.asarray(kernel(x))).all()
    with jax.debug_nans(True), pytest.raises(FloatingPointError, match="nan.*pj.kernel"):
        kernel(x)
