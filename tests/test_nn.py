"""pj.nn: every training op's forward and backward kernels against pure-jnp references (check_grads,
both backends), bf16, compositions (jit(grad), vmap, value_and_grad), flash attention's O(seq)
workspace and the MLP training example."""
import functools
import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

import ptojax as pj
from ptojax._jax import ClosedJaxpr, Jaxpr

BACKENDS = ["sim", "xla"]
BF16_TOL = 5e-2        # bf16 results and gradients vs the fp32 reference: |err| <= 5e-2 * max|ref| (+ atol 5e-2)


def _rand(shape, seed, scale=1.0, dtype=np.float32):
    return (np.random.default_rng(seed).normal(size=shape) * scale).astype(dtype)


# ----------------------------------------------------------------------------- jnp references
ACT = {"relu": jax.nn.relu, "gelu": jax.nn.gelu, "silu": jax.nn.silu, None: lambda z: z}


def ref_dense(x, w, b, activation):
    return ACT[activation](x @ w + b)


def ref_rms(x, g, eps=1e-6):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * g


def ref_ln(x, g, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * g + b


def ref_xent(logits, y):
    return jnp.mean(jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(logits, y[:, None], -1)[:, 0])


def ref_swiglu(x, wg, wu):
    return jax.nn.silu(x @ wg) * (x @ wu)


def ref_attention(q, k, v):
    s = jnp.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    n = q.shape[-2]
    s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
    return jnp.einsum("...qk,...kd->...qd", jax.nn.softmax(s, -1), v)


X, W, B = _rand((16, 32), 0), _rand((32, 32), 1, 0.2), _rand((32,), 2)
G, BETA = _rand((32,), 3), _rand((32,), 4)
LABELS = np.random.default_rng(5).integers(0, 32, 16).astype(np.int32)
Q, K, V = (_rand((2, 40, 16), 10 + i) for i in range(3))      # seq 40: not a multiple of the 16-row block


def _cases(backend):
    """(name, pj.nn function, jnp reference, float args) per op."""
    nn = pj.nn
    out = [(f"dense-{a}", lambda x, w, b, a=a: nn.dense(x, w, b, a, backend=backend),
            lambda x, w, b, a=a: ref_dense(x, w, b, a), (X, W, B)) for a in ("relu", "gelu", "silu", None)]
    return out + [
        ("rms_norm", lambda x, g: nn.rms_norm(x, g, 1e-6, backend=backend), ref_rms, (X, G)),
        ("layer_norm", lambda x, g, b: nn.layer_norm(x, g, b, 1e-5, backend=backend), ref_ln, (X, G, BETA)),
        ("softmax", lambda x: nn.softmax(x, backend=backend), lambda x: jax.nn.softmax(x, -1), (X,)),
        ("softmax-axis0", lambda x: nn.softmax(x, axis=0, backend=backend), lambda x: jax.nn.softmax(x, 0), (X,)),
        ("xent", lambda x: nn.softmax_cross_entropy(x, LABELS, backend=backend), lambda x: ref_xent(x, LABELS), (X,)),
        ("swiglu", lambda x, a, c: nn.swiglu(x, a, c, backend=backend), ref_swiglu, (X, W, W[:, ::-1].copy())),
        ("flash_attention", lambda q, k, v: nn.flash_attention(q, k, v, backend=backend), ref_attention, (Q, K, V)),
    ]


NAMES = [c[0] for c in _cases("xla")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index", range(len(NAMES)), ids=NAMES)
def test_forward_and_grads_float32(index, backend):
    name, f, ref, args = _cases(backend)[index]
    np.testing.assert_allclose(np.asarray(f(*args)), np.asarray(ref(*args)), rtol=1e-5, atol=1e-5)
    # the VJP of each kernel pair equals the jnp reference's ...
    ct = _rand(np.shape(ref(*args)), 99)
    got = jax.vjp(f, *args)[1](jnp.asarray(ct, jnp.float32))
    want = jax.vjp(ref, *args)[1](jnp.asarray(ct, jnp.float32))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)
    # ... and agrees with finite differences of the forward kernel
    check_grads(f, args, order=1, modes=("rev",), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["dense-relu", "rms_norm", "layer_norm", "softmax", "swiglu"])
def test_data_parallel_grads_under_shard_map(name, backend):
    """Rows sharded over 2 devices, weights replicated: each device's jax.grad, the weights' summed over
    the devices, equals the unsharded gradient (the kernels' results lost the shard_map axes, so the
    custom_vjp's cotangents did not match its primals; a ``jnp.where`` in a kernel traced inside
    shard_map carried a ``reshard`` with no translation)."""
    _, f, ref, args = next(c for c in _cases(backend) if c[0] == name)
    ct = _rand(np.shape(ref(*args)), 99)
    argnums = tuple(range(len(args)))
    specs = (P("d"),) + (P(),) * (len(args) - 1)

    def step(c, *a):
        return jax.grad(lambda *a: jnp.sum(f(*a) * c), argnums=argnums)(*a)

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("d",))
    got = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P("d"),) + specs, out_specs=specs))(ct, *args)
    want = jax.grad(lambda *a: jnp.sum(ref(*a) * ct), argnums=argnums)(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("index", range(len(NAMES)), ids=NAMES)
def test_bfloat16(index):
    """bf16 operands accumulate in fp32: within BF16_TOL of the fp32 reference on the same bf16 inputs."""
    name, f, ref, args = _cases("sim" if index < 2 else "xla")[index]
    bf = [jnp.asarray(a, jnp.bfloat16) for a in args]
    f32 = [a.astype(jnp.float32) for a in bf]
    out, vjp = jax.vjp(f, *bf)
    want, vjp_ref = jax.vjp(ref, *f32)
    assert out.dtype == (jnp.float32 if name == "xent" else jnp.bfloat16)
    ct = _rand(np.shape(want), 99)
    pairs = [(out, want)] + list(zip(vjp(jnp.asarray(ct, out.dtype)), vjp_ref(jnp.asarray(ct, jnp.float32))))
    for g, w in pairs:
        assert g.dtype == jnp.bfloat16 or name == "xent"
        g, w = np.asarray(g, np.float32), np.asarray(w, np.float32)
        np.testing.assert_allclose(g, w, rtol=0, atol=BF16_TOL * (1 + np.abs(w).max()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_compositions_jit_grad_vmap_value_and_grad(backend):
    nn = pj.nn

    def loss(params, x, y):
        w1, b1, g, w2, b2 = params
        h = nn.dense(x, w1, b1, "gelu", backend=backend)
        h = jnp.tanh(nn.rms_norm(h, g, backend=backend)) * 0.5 + h          # plain JAX code in between
        return nn.softmax_cross_entropy(nn.dense(h, w2, b2, backend=backend), y, backend=backend) + 1e-3 * jnp.sum(w1 ** 2)

    def loss_ref(params, x, y):
        w1, b1, g, w2, b2 = params
        h = jax.nn.gelu(x @ w1 + b1)
        h = jnp.tanh(ref_rms(h, g)) * 0.5 + h
        return ref_xent(h @ w2 + b2, y) + 1e-3 * jnp.sum(w1 ** 2)

    params = (W, B, G, _rand((32, 32), 7, 0.2), BETA)
    got = jax.jit(jax.grad(loss))(params, X, LABELS)
    want = jax.grad(loss_ref)(params, X, LABELS)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    (l, g), (lr, gr) = jax.value_and_grad(loss)(params, X, LABELS), jax.value_and_grad(loss_ref)(params, X, LABELS)
    np.testing.assert_allclose(l, lr, rtol=1e-5)
    for a, b in zip(g, gr):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # vmap over a batch of inputs, of both the forward and the gradient
    xs = np.stack([X, -X, 2 * X])
    f = lambda x: nn.layer_norm(nn.dense(x, W, B, "silu", backend=backend), G, BETA, backend=backend)
    fr = lambda x: ref_ln(ref_dense(x, W, B, "silu"), G, BETA)
    np.testing.assert_allclose(jax.vmap(f)(xs), jax.vmap(fr)(xs), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(jax.vmap(jax.grad(lambda x: f(x).sum() ** 2))(xs),
                               jax.vmap(jax.grad(lambda x: fr(x).sum() ** 2))(xs), rtol=1e-3, atol=1e-3)


@pytest.mark.slow      # jit(grad) compiles the replays of the forward and backward kernels (20-50 s)
def test_flash_attention_4d_and_jit_grad_sim():
    q, k, v = (x.reshape(1, 2, 40, 16) for x in (Q, K, V))
    f = lambda q, k, v: (pj.nn.flash_attention(q, k, v, backend="sim") ** 2).sum()
    fr = lambda q, k, v: (ref_attention(q, k, v) ** 2).sum()
    got = jax.jit(jax.grad(f, argnums=(0, 1, 2)))(q, k, v)
    want = jax.grad(fr, argnums=(0, 1, 2))(q, k, v)
    for g, w in zip(got, want):
        assert g.shape == (1, 2, 40, 16)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def _avals(jaxpr):
    """Every eqn output aval of a jaxpr, loop and branch bodies included."""
    for eqn in jaxpr.eqns:
        yield eqn.primitive.name, [v.aval for v in eqn.outvars]
        for p in eqn.params.values():
            for sub in (p if isinstance(p, (tuple, list)) else [p]):
                if isinstance(sub, ClosedJaxpr):
                    yield from _avals(sub.jaxpr)
                elif isinstance(sub, Jaxpr):
                    yield from _avals(sub)


def _largest_gm(seq, backend="xla"):
    from ptojax.nn import _attention as A
    h, d = 2, 16
    q = np.zeros((h, seq, d), np.float32)
    lse = np.zeros((h, seq), np.float32)
    bwd = pj.nn._common.make("flash_attention_bwd", A._fa_bwd_kernel, backend, block=A.FRACTAL)
    low = bwd.lower(q, q, q, q, lse, q).lowering
    # GM tensors of the Block graph: the outputs of block calls (and every other top-level value)
    sizes = [int(np.prod(a.shape)) for _, avals in _avals(low.block.jaxpr) for a in avals if hasattr(a, "shape")]
    return max(sizes), low


@pytest.mark.parametrize("shape", [(1, 40, 20), (2, 64, 36), (1, 24, 12)])
def test_flash_attention_head_dims_off_the_16_grid(shape):
    """Head dims 20, 36, 12 with a longer sequence: the (16, d) tile tiled the (H, S) log-sum-exp's S by d,
    rows of 80 bytes ('must be a multiple of 32 bytes' from a tile the user never set)."""
    q, k, v = (_rand(shape, 20 + i) for i in range(3))
    ct = _rand(shape, 30)
    for backend in ("sim", "xla"):
        f = lambda q, k, v: pj.nn.flash_attention(q, k, v, backend=backend)  # noqa: E731
        out, vjp = jax.vjp(f, q, k, v)
        want, ref_vjp = jax.vjp(ref_attention, q, k, v)
        np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-5, atol=1e-5)
        for g, w in zip(vjp(jnp.asarray(ct)), ref_vjp(jnp.asarray(ct))):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)


def test_vmap_of_flash_attention_is_its_batch():
    """jax.vmap over a leading axis equals the 4-D call (the KV blocks' ``dynamic_slice`` became a gather
    with no translation under vmap), forward and backward."""
    q = _rand((3, 2, 16, 16), 40)
    for backend in ("sim", "xla"):
        f = lambda t: pj.nn.flash_attention(t, t, t, backend=backend)  # noqa: E731
        np.testing.assert_allclose(np.asarray(jax.vmap(f)(q)), np.asarray(f(q)), rtol=1e-5, atol=1e-6)
        g = jax.grad(lambda t: jnp.sum(jax.vmap(f)(t) ** 2))(q)
        np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(lambda t: jnp.sum(f(t) ** 2))(q)),
                                   rtol=1e-4, atol=1e-5)


def test_flash_attention_backward_workspace_is_linear_in_seq():
    h, d, block = 2, 16, pj.nn._attention.FRACTAL
    small, low = _largest_gm(40)
    assert any(e.primitive.name in ("scan", "while") for e in low.block.jaxpr.eqns)   # the KV loop stays a loop
    assert small < h * 40 * 40                                                 # no (seq x seq) score matrix
    assert small <= h * 48 * max(d, block)                                     # O(seq): a (h, seq, block) tile
    big, _ = _largest_gm(160)
    assert big < h * 160 * 160 and big <= 4 * small * (1 + 1e-9) * 1.2          # grows linearly, not quadratically


def _example():
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "train_mlp.py"
    spec = importlib.util.spec_from_file_location("train_mlp", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_train_mlp_example():
    curve, ref = _example().main(steps=24, sim_steps=3, verbose=False)
    assert len(curve) == 24 and curve[-1] < 0.5 * curve[0]
    assert all(b < a for a, b in zip(curve[:10], curve[1:11]))               # decreasing
    np.testing.assert_allclose(curve, ref, rtol=1e-4, atol=1e-5)             # matches the pure-jnp model


def test_errors():
    with pytest.raises(pj.PtoArgumentError, match="activation 'tanh'"):
        pj.nn.dense(X, W, B, "tanh")
    with pytest.raises(pj.PtoArgumentError, match="backend 'gpu'"):
        pj.nn.softmax(X, backend="gpu")
    with pytest.raises(pj.PtoDtypeError, match="labels have dtype"):
        pj.nn.softmax_cross_entropy(X, LABELS.astype(np.float32))
    with pytest.raises(pj.PtoShapeError, match="flash_attention"):
        pj.nn.flash_attention(Q, K[:, :8], V)


def test_flash_attention_default_block_and_many_heads():
    from ptojax.nn._attention import MAX_BLOCK, default_block
    assert default_block(2, 40) == 48                          # the sequence, padded to the 16-row fractal
    assert default_block(4, 4096) == MAX_BLOCK
    assert default_block(64, 8192) == 32                       # the (64, 8192, block) score tile stays <= 64 MiB
    assert default_block(1024, 1 << 16) == 16
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(4, 16, 24, 128)).astype(np.float32) for _ in range(3))   # 64 heads of 128
    np.testing.assert_allclose(pj.nn.flash_attention(q, k, v), ref_attention(q, k, v), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(pj.nn.flash_attention(q, k, v, block=16), ref_attention(q, k, v), rtol=1e-4, atol=1e-5)
    for block in (0, "a", 2.5):         # 2.5 was truncated to 2, "a" a TypeError from a comparison
        with pytest.raises(pj.PtoArgumentError, match=f"block {block!r}"):
            pj.nn.flash_attention(q, k, v, block=block)


WIDE = [  # rows wider than a tile holds (a vocabulary's logits, a wide hidden size), and many tokens
    ("xent vocab 32000", lambda x: pj.nn.softmax_cross_entropy(x, LABELS[:4] * 997, backend="sim"),
     lambda x: ref_xent(x, LABELS[:4] * 997), ((4, 32000),)),
    ("softmax 5000", lambda x: pj.nn.softmax(x, backend="sim"), lambda x: jax.nn.softmax(x, -1), ((3, 5000),)),
    ("layer_norm 8192", lambda x, g, b: pj.nn.layer_norm(x, g, b, 1e-5, backend="sim"), ref_ln,
     ((2, 8192), (8192,), (8192,))),
    ("rms_norm 16384 tokens", lambda x, g: pj.nn.rms_norm(x, g, 1e-6, backend="sim"), ref_rms, ((16384, 16), (16,))),
]


@pytest.mark.parametrize("index", range(len(WIDE)), ids=[w[0] for w in WIDE])
def test_wide_rows_and_many_tokens(index):
    """Rows past a tile's 4095 columns run in column blocks with staged reductions; a norm's dgamma over
    16 384 tokens reduces in chunks that fit the UB."""
    _, f, ref, shapes = WIDE[index]
    args = [jnp.asarray(_rand(s, 30 + i)) for i, s in enumerate(shapes)]
    np.testing.assert_allclose(np.asarray(f(*args)), np.asarray(ref(*args)), rtol=2e-5, atol=1e-5)
    ct = jnp.asarray(_rand(np.shape(ref(*args)), 98))
    for g, w in zip(jax.vjp(f, *args)[1](ct), jax.vjp(ref, *args)[1](ct)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=2e-5 * (1 + np.abs(w).max()))


def _forward_and_grad(q, block):
    """Flash attention of ``q`` with KV blocks of ``block`` rows, forward and under jax.grad (thunks)."""
    return (lambda: pj.nn.flash_attention(q, q, q, block=block),
            lambda: jax.grad(lambda a: pj.nn.flash_attention(a, q, q, block=block).sum())(q))


def test_flash_attention_names_block_when_its_tiles_overfill_the_ub():
    """The vector tiles are (16, block): a block whose single tile overfills the UB names ``block``, the
    knob the user sets, forward and under jax.grad (the error said "use a smaller vec tile")."""
    q = np.random.default_rng(0).standard_normal((1, 3584, 64)).astype(np.float32)
    for run in _forward_and_grad(q, 3584):
        with pytest.raises(pj.PtoCapacityError, match=r"pj.nn.flash_attention: block 3584 needs more on-chip "
                                                       r"memory than the core has; use a smaller block"):
            run()


def test_flash_attention_block_whose_tiles_overfill_together_runs_in_pieces():
    """Block 1000: (16, 1000) tiles fit one at a time but not all the live ones together; the elementwise
    programs compute each tile in pieces, forward and backward, and match the xla backend."""
    q = np.random.default_rng(0).standard_normal((2, 1000, 64)).astype(np.float32)
    (fwd, grad), (fwd_xla, grad_xla) = _forward_and_grad(q, 1000), (
        lambda: pj.nn.flash_attention(q, q, q, block=1000, backend="xla"),
        lambda: jax.grad(lambda a: pj.nn.flash_attention(a, q, q, block=1000, backend="xla").sum())(q))
    np.testing.assert_allclose(np.asarray(fwd()), np.asarray(fwd_xla()), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(grad()), np.asarray(grad_xla()), rtol=1e-4, atol=1e-4)


def test_bad_and_empty_inputs_get_named_errors():
    x = _rand((4, 8), 40)
    for axis in (5, 2, -3):                        # axis % ndim picked another axis, silently
        with pytest.raises(pj.PtoArgumentError, match=f"axis {axis!r} is out of range"):
            pj.nn.softmax(x, axis=axis)
    with pytest.raises(pj.PtoArgumentError, match="axis must be one int, got 'a'"):
        pj.nn.softmax(x, axis="a")
    with pytest.raises(pj.PtoArgumentError, match="rank-0"):
        pj.nn.softmax(np.float32(1.0))               # ZeroDivisionError
    assert pj.nn.softmax(np.zeros((0, 5), np.float32)).shape == (0, 5)
    with pytest.raises(pj.PtoShapeError, match="hold no row"):
        pj.nn.softmax_cross_entropy(np.zeros((0, 5), np.float32), np.zeros((0,), np.int32))
    for label in (10, -1):                          # picked no logit: the loss was the log-sum-exp alone
        with pytest.raises(pj.PtoArgumentError, match=rf"labels \[{label}\] are outside \[0, 10\)"):
            pj.nn.softmax_cross_entropy(_rand((2, 10), 41), np.array([3, label], np.int32))
    with pytest.raises(pj.PtoShapeError, match="are empty"):
        pj.nn.flash_attention(*(np.zeros((2, 0, 64), np.float32),) * 3)


def test_norms_without_scale_or_shift():
    x = _rand((8, 64), 42)
    np.testing.assert_allclose(np.asarray(pj.nn.layer_norm(x, None, None)),
                               np.asarray(ref_ln(x, np.ones(64, np.float32), np.zeros(64, np.float32))),
                               rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(pj.nn.rms_norm(x, None)), np.asarray(ref_rms(x, np.ones(64, np.float32))),
                               rtol=2e-5, atol=1e-5)
    g = jax.grad(lambda v: jnp.sum(pj.nn.layer_norm(v, None, None) ** 2))(x)
    want = jax.grad(lambda v: jnp.sum(ref_ln(v, jnp.ones(64), jnp.zeros(64)) ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-4, atol=1e-4)


def test_degenerate_shapes_get_named_errors():
    """No features or no rank was a bare ValueError (reshape to (-1, 0)) or IndexError; no rows still runs."""
    z = lambda *s: np.zeros(s, np.float32)        # noqa: E731
    for f, match in [
            (lambda: pj.nn.rms_norm(z(4, 0), None), r"pj.nn.rms_norm: x \(4, 0\) has no features"),
            (lambda: pj.nn.layer_norm(z(4, 0), None, None), r"pj.nn.layer_norm: x \(4, 0\) has no features"),
            (lambda: pj.nn.rms_norm(np.float32(3.0), None), r"pj.nn.rms_norm: x \(\) has no features"),
            (lambda: pj.nn.dense(z(4, 0), z(0, 6)), r"pj.nn.dense: x \(4, 0\) and w \(0, 6\) contract over an empty K"),
            (lambda: pj.nn.dense(np.float32(1.0), z(8, 6)), r"pj.nn.dense: x \(\), w \(8, 6\)"),
            (lambda: pj.nn.swiglu(z(4, 0), z(0, 6), z(0, 6)), r"pj.nn.swiglu: x \(4, 0\) and w_gate \(0, 6\)"),
            (lambda: pj.nn.swiglu(np.float32(1.0), z(8, 6), z(8, 6)), r"pj.nn.swiglu: x \(\), w_gate")]:
        with pytest.raises(pj.PtoShapeError, match=match):
            f()
    assert pj.nn.rms_norm(z(0, 8), None).shape == pj.nn.layer_norm(z(0, 8), None, None).shape == (0, 8)
    assert pj.nn.dense(z(0, 8), z(8, 6)).shape == pj.nn.swiglu(z(0, 8), z(8, 6), z(8, 6)).shape == (0, 6)


def test_traced_static_parameters_are_named():
    """eps, block and axis are baked into the kernels: traced, they were JAX's generic ConcretizationTypeError
    (eps) or a misleading range error (block, axis)."""
    for f, match in [(lambda: jax.jit(lambda x, e: pj.nn.rms_norm(x, None, e))(X, 1e-6), "rms_norm: eps"),
                     (lambda: jax.grad(lambda e: jnp.sum(pj.nn.layer_norm(X, None, None, e)))(1e-5), "layer_norm: eps"),
                     (lambda: jax.jit(lambda q, b: pj.nn.flash_attention(q, q, q, block=b))(Q, 16),
                      "flash_attention: block"),
                     (lambda: jax.jit(lambda x, a: pj.nn.softmax(x, axis=a))(X, 1), "softmax: axis")]:
        with pytest.raises(pj.PtoArgumentError, match=rf"pj.nn.{match} must be a Python or NumPy (number|int) "
                                                      r"\(static, not differentiable\); got a traced (float|int)32\[\] "
                                                      "value — close over it or use functools.partial"):
            f()


def test_flash_attention_block_is_cut_to_the_sequence():
    """A block past the sequence (padded to 16 rows) is cut to it, as the default: 4096 on a sequence of 5
    overfilled a tile, 600 padded K and V to 600 rows. A block still too wide names flash_attention."""
    from ptojax.nn._common import _KERNELS
    q, k, v = (_rand((2, 5, 8), 60 + i) for i in range(3))
    for block in (600, 4096):
        np.testing.assert_allclose(pj.nn.flash_attention(q, k, v, block=block, backend="xla"), ref_attention(q, k, v),
                                   rtol=1e-5, atol=1e-6)
        assert ("flash_attention_fwd", "xla", (("block", block),)) not in _KERNELS
    assert ("flash_attention_fwd", "xla", (("block", 16),)) in _KERNELS
    for run in _forward_and_grad(np.zeros((1, 4200, 16), np.float32), 4096):
        with pytest.raises(pj.PtoArgumentError, match=r"pj.nn.flash_attention: block 4096 makes \(16, 4096\) vector "
                                                      r"tiles wider than the core's; use a smaller block"):
            run()


def test_kernel_of_a_partial_is_named_after_its_function():
    def scaled_exp(x, *, s, t):
        with pj.tile(vec=(8, 16)):
            return jnp.exp(x) * s + t
    k = pj.kernel(functools.partial(functools.partial(scaled_exp, s=2.0), t=1.0))      # was 'kernel'
    assert k.name == "scaled_exp" and repr(k).startswith("pj.kernel(scaled_exp,")


def test_second_derivative_error_holds_for_the_kernel_it_names():
    """grad of grad meets the forward kernel first ('dense_fwd'): the error said "in its backward kernel"."""
    with pytest.raises(pj.PtoUnsupportedError, match=r"pj.kernel 'dense_fwd' has no automatic derivative: .*; second "
                                                     r"derivatives \(grad of grad, jax.hessian\) of pj.nn ops are not "
                                                     r"supported"):
        jax.grad(lambda x: jnp.sum(jax.grad(lambda x: jnp.sum(pj.nn.dense(x, W, backend="xla") ** 2))(x) ** 2))(X)


def test_cross_entropy_with_concrete_labels_closed_over_under_jit():
    """``jax.jit(lambda lg: xent(lg, labels))`` with ``labels`` a concrete array: their range is checked
    on the host (the check built with jnp was traced and failed as a bool)."""
    labels = jnp.asarray(LABELS)
    got = jax.jit(lambda lg: pj.nn.softmax_cross_entropy(lg, labels))(X)
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref_xent(X, LABELS)), rtol=1e-5)
    bad = labels + 1000
    with pytest.raises(pj.PtoArgumentError, match="outside"):
        jax.jit(lambda lg: pj.nn.softmax_cross_entropy(lg, bad))(X)


def test_a_list_is_refused_by_name():
    with pytest.raises(pj.PtoDtypeError, match=r"pj.nn.softmax: x is a list, not an array"):
        pj.nn.softmax([[1.0, 2.0, 3.0]])
