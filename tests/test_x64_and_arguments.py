"""Kernels under ``jax_enable_x64`` (the cores have no 64-bit types: the kernel's own values stay 32-bit,
Python numbers weakly typed, 64-bit arrays a named error) and arguments that are no arrays; keyword
arguments after a skipped default; static arguments; ``jax.vmap`` of outputs that do not depend on the batch."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import rand


@pytest.fixture
def x64():
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", False)


def _matches(fn, *args, jit=True):
    want = jax.jit(fn)(*args)
    for got in (pj.kernel(fn)(*args), *([jax.jit(pj.kernel(fn))(*args)] if jit else [])):
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-6, atol=1e-6)


def test_kernels_under_x64_keep_32_bits(x64):
    """Gathers, sorts and top-k under jit (int64 loop indices met int32 ones in the replay), loops whose
    counters the kernel makes, Python scalar arguments (float64 before) and pj.nn ops."""
    x = rand((16, 64), np.float32, 1)
    idx = np.array([3, 0, 15, 7], np.int32)
    _matches(lambda a, i: a[i] * 2.0, x, idx)
    _matches(lambda a: jax.lax.top_k(a, 4)[0], x)
    _matches(lambda a: jnp.sort(a, axis=-1), x)
    _matches(lambda a: jax.lax.fori_loop(0, 3, lambda i, c: c * 0.5, a), x)
    _matches(lambda a: jax.lax.scan(lambda c, r: (c + r, c * 2.0), jnp.zeros(64, jnp.float32), a), x)
    h = x.astype(np.float16)
    _matches(lambda a, s: a * s, h, 2.5)
    q = rand((2, 32, 16), np.float32, 2)
    np.testing.assert_allclose(np.asarray(pj.nn.flash_attention(q, q, q)),
                               np.asarray(jax.jit(lambda v: pj.nn.flash_attention(v, v, v, backend="xla"))(q)),
                               rtol=1e-5, atol=1e-5)
    labels = np.arange(16, dtype=np.int32) % 64
    grad = jax.grad(lambda v: pj.nn.softmax_cross_entropy(v, labels))(x)
    assert grad.dtype == np.float32 and np.isfinite(np.asarray(grad)).all()
    with pytest.raises(pj.PtoDtypeError, match="float64.*no 64-bit types"):
        pj.kernel(lambda a: a * 2)(np.ones((8, 8), np.float64))


def test_arguments_that_are_no_arrays_are_refused():
    """A string was traced as a str192 array: ``mode == "double"`` was False, silently."""
    x = rand((8, 32), np.float32, 3)
    f = lambda a, mode: a * 2.0 if mode == "double" else a          # noqa: E731
    with pytest.raises(pj.PtoArgumentError, match="'double' is not an array or a number.*static_argnames.*partial"):
        pj.kernel(f)(x, "double")
    np.testing.assert_array_equal(np.asarray(pj.kernel(functools.partial(f, mode="double"))(x)), x * 2)
    with pytest.raises(pj.PtoArgumentError, match="typed PRNG key"):
        pj.kernel(lambda k, a: a + jax.random.uniform(k, a.shape))(jax.random.key(0), x)


def _act_top(a, b, act="none", k=2):
    r = a + b
    return jax.lax.top_k(jnp.maximum(r, 0) if act == "relu" else r, k)


def test_static_arguments_as_under_jit():
    """``static_argnames`` / ``static_argnums``: Python values the trace reads, a kernel per value, by keyword
    or position, eager, under ``jax.jit``'s own static arguments and under ``jax.vmap``; an unhashable value
    and a name that is no parameter are refused by name; donations follow the arguments left."""
    x, y = rand((16, 64), np.float32, 7), rand((16, 64), np.float32, 8)
    k = pj.kernel(_act_top, static_argnames=("act", "k"))
    calls = {("relu", 3): lambda: k(x, y, act="relu", k=3), ("none", 4): lambda: k(x, y, "none", 4),
             ("relu", 5): lambda: jax.jit(k, static_argnames=("act", "k"))(x, y, act="relu", k=5),
             ("none", 2): lambda: jax.jit(k, static_argnums=2)(x, y, "none")}
    for (act, n), call in calls.items():
        for g, w in zip(call(), _act_top(x, y, act, n)):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    batched = jax.vmap(lambda a: pj.kernel(_act_top, static_argnums=(2, 3))(a, y, "relu", 3))(np.stack([x, y]))
    np.testing.assert_array_equal(np.asarray(batched[0][1]), np.asarray(_act_top(y, y, "relu", 3)[0]))
    assert len(k._fixed) == 4
    compiled = k.lower(x, y, act="relu", k=3).compile()       # as jax.jit's: called without its static arguments
    for g, w in zip(compiled(x, y), _act_top(x, y, "relu", 3)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    with pytest.raises(pj.PtoArgumentError, match=r"lowered for calls _act_top\(a, b\), act='relu' static, k=3 static"):
        compiled(x, y, act="relu", k=3)
    with pytest.raises(pj.PtoArgumentError, match="static argument 'act' must be hashable.*list"):
        k(x, y, act=["relu"])
    with pytest.raises(pj.PtoArgumentError, match=r"static_argnames \['mode'\] name no positional parameter"):
        pj.kernel(_act_top, static_argnames="mode")
    with pytest.raises(pj.PtoArgumentError, match=r"static_argnums \[7\] name no positional parameter of "
                                                  r"_act_top\('a', 'b', 'act', 'k'\)"):
        pj.kernel(_act_top, static_argnums=7)
    with pytest.raises(pj.PtoArgumentError, match="'relu' is not an array or a number; name it in .*static_argnames"):
        jax.jit(pj.kernel(_act_top), static_argnames="act")(x, y, act="relu")

    def update(twice, scale, cache):
        return cache.at[0].set(scale[0] * (2 if twice else 1))

    cache, scale = np.zeros((4, 32), np.float32), np.ones((4, 32), np.float32)
    pj.kernel(update, static_argnums=0, donate_argnums=2)(True, scale, cache)
    assert cache[0, 0] == 2 and scale[0, 0] == 1           # the cache updated in place, the scale not


def test_a_keyword_after_a_skipped_default_and_weak_floor_division():
    x = rand((8, 32), np.float32, 4)

    def f(a, scale=2.0, bias=None):
        return a * scale + (0 if bias is None else bias)

    np.testing.assert_allclose(np.asarray(pj.kernel(f)(x, bias=x)), np.asarray(f(x, bias=x)), rtol=1e-6)
    _matches(lambda a: jnp.where(a > 0, 3, -5) // 2, x)            # a Python divisor: 'pto.eq ... scalars'
    _matches(lambda a: (a > 0) // 2, x)


def test_vmap_of_outputs_that_do_not_depend_on_the_batch():
    a, b = rand((3, 16, 32), np.float32, 5), rand((16, 32), np.float32, 6)
    f = lambda u, v: (u * 2, v + 1)                                # noqa: E731
    for fn in (jax.vmap(pj.kernel(f), in_axes=(0, None), out_axes=(0, None)),
               jax.jit(jax.vmap(pj.kernel(f), in_axes=(0, None), out_axes=(0, None)))):
        u, v = fn(a, b)
        np.testing.assert_array_equal(np.asarray(u), a * 2)
        np.testing.assert_array_equal(np.asarray(v), b + 1)


def test_results_of_python_numbers_stay_weakly_typed():
    """A result computed from Python numbers only is weakly typed, as ``jax.jit`` returns it (it gives way
    to a float16 array it meets: the kernel's results were strong float32, promoting the caller's f16)."""
    def fn(x, t):
        return x * 2, t * 0.5

    x = np.ones((16, 64), np.float16)
    for call in (pj.kernel(fn), jax.jit(pj.kernel(fn))):
        y, s = call(x, 3.0)
        assert (y.weak_type, s.weak_type) == (False, True) and s.dtype == np.float32
        assert (y * s).dtype == np.float16
    batched = [jax.vmap(f, in_axes=(0, None))(x, 3.0)[1] for f in (fn, pj.kernel(fn))]
    assert [b.weak_type for b in batched] == [True, True]
    outer = jax.jit(lambda x: (lambda y, s: y * s)(*pj.kernel(fn)(x, 3.0)))
    assert outer(x).dtype == jax.jit(lambda x: (lambda y, s: y * s)(*fn(x, 3.0)))(x).dtype == np.float16


def _aligned(shape, value):
    """A 64-byte aligned float32 buffer (``jax.device_put`` keeps such a NumPy buffer without a copy)."""
    n = int(np.prod(shape)) * 4
    raw = np.empty(n + 128, np.uint8)
    start = (-raw.ctypes.data) % 64
    a = raw[start:start + n].view(np.float32).reshape(shape)
    a[...] = value
    return a


@pytest.mark.parametrize("fn", [lambda x: x[None], lambda x: x.reshape(32, 16), lambda x: x.astype(jnp.float32),
                                lambda x: (x, x + 1)], ids=["x[None]", "reshape", "astype", "pair"])
def test_results_passed_through_do_not_alias_the_argument(fn):
    """A result that is an argument passed through was the caller's buffer: refilling it (a data loader's
    batch) changed a result already returned."""
    x = _aligned((16, 32), 1.0)
    y = jax.tree.leaves(pj.kernel(fn)(x))[0]
    x[...] = 42.0
    assert float(np.asarray(y).ravel()[0]) == 1.0


def test_a_closed_over_array_is_a_constant_of_its_value_when_compiled():
    """Changing a captured NumPy array after the first call: every call of that compile sees the values
    it was traced with, eager and jitted alike (eager calls read some uses live and mixed them: 5.0)."""
    full = np.full((16, 32), 2.0, np.float32)
    kernel = pj.kernel(lambda x: x * full + full[0])
    x = np.ones((16, 32), np.float32)
    assert float(kernel(x)[0, 0]) == 4.0
    full[...] = 3.0
    assert float(kernel(x)[0, 0]) == float(jax.jit(kernel)(x)[0, 0]) == 4.0
    assert float(pj.kernel(lambda x: x * full + full[0])(x)[0, 0]) == 6.0     # a new kernel traces anew
