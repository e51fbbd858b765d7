"""Regressions from probes of tuning knobs on users' own kernels and of training with ``pj.nn``.

- Output regions no task writes (``jnp.pad``'s border, a staged top-k's padding lists) were filled on
  the host, unpriced: padding 2048 x 1024 f32 to 16 384 columns profiled as padding it to 1 280. A
  ``fill`` task now sets such a tensor first, written through to HBM; a concat's pieces, which write
  all of their tensor between them, take none.
- ``tiles_per_block="auto"`` priced a task function per task of every candidate count (the tasks of a
  count keyed by where they start in a row): a one-op softmax over f32[8, 2048, 2048] took 36 s to
  lower. Tasks that keep no load resident cost the same wherever they start, and each distinct
  instruction is priced once: 0.4 s, the same choice.
- ``pj.ops.quantize`` under a ``vec`` tile splitting its rows kept them whole anyway, and past the UB
  failed with advice to use fewer columns; it loops over the column tiles now (bit exact, pto-isa too).
- ``pj.nn.softmax_cross_entropy`` of a row holding a +inf logit gave a NaN loss and an all-NaN
  gradient row; as ``jax.nn.logsumexp``, the loss is +inf and only the +inf entry's gradient is NaN.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import cost, crosscheck as xc
from ptojax.ascend.targets import A3
from vendor_tools import needed, tools  # noqa: F401 - tools: autouse fixture


def _profile(fn, *specs, options=None):
    return pj.kernel(fn, options=options).lower(*specs).compile().profile(compute=False)


@pytest.mark.parametrize("width", [1280, 16384])
def test_a_pads_border_is_a_priced_fill_task(width):
    def pad(x):
        return jnp.pad(x, ((0, 0), (0, width - 1024)), constant_values=-1.0)

    x = np.arange(64 * 1024, dtype=np.float32).reshape(64, 1024)
    np.testing.assert_array_equal(np.asarray(pj.kernel(pad)(x)), np.asarray(pad(x)))
    np.testing.assert_array_equal(np.asarray(jax.jit(pj.kernel(pad))(x)), np.asarray(pad(x)))
    profile = _profile(pad, jax.ShapeDtypeStruct((2048, 1024), jnp.float32))
    fills = [t for t in profile.trace.graph.tasks if t.name == "fill"]
    out = 2048 * width * 4
    assert len(fills) == 1 and fills[0].hbm >= out, [(t.name, t.hbm) for t in fills]
    assert profile.makespan_us * 1e-6 >= out / A3.hbm_bytes_per_s
    assert profile.makespan_us >= profile.lower_bound_us


def test_a_staged_top_ks_padding_lists_are_filled_by_a_task():
    def topk(s):
        with jax.named_scope("TopK"):
            return pj.ops.topk(s, 256)

    options = {"tiles": {"TopK": {"vec": (1, 1024)}}}
    x = np.random.default_rng(0).standard_normal((8, 2048)).astype(np.float32)
    got = pj.kernel(topk, options=options)(x)
    want = jax.lax.top_k(x, 256)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    profile = _profile(topk, jax.ShapeDtypeStruct((2048, 2048), jnp.float32), options=options)
    assert sum(t.name == "fill" for t in profile.trace.graph.tasks) == 2       # the values' and the indices'


def test_a_concat_split_over_block_calls_takes_no_fill():
    def rope(x):
        return jnp.concatenate([-x[:, 32:], x[:, :32] * 2.0], axis=-1)

    x = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(rope)(x)), np.asarray(rope(x)))
    profile = _profile(rope, jax.ShapeDtypeStruct((64, 64), jnp.float32))
    assert not [t for t in profile.trace.graph.tasks if t.name == "fill"]


def test_auto_tasks_of_a_softmax_price_few_task_functions(monkeypatch):
    calls = []
    real = cost.task_time
    monkeypatch.setattr("ptojax.ascend.autotask.task_time", lambda *a, **k: calls.append(1) or real(*a, **k))

    def softmax(s):
        with jax.named_scope("Softmax"):
            return jax.nn.softmax(s * 0.088, axis=-1).astype(jnp.float16)

    spec = jax.ShapeDtypeStruct((8, 2048, 2048), jnp.float32)
    auto = _profile(softmax, spec, options={"tiles_per_block": {"Softmax": "auto"}})
    assert len(calls) <= 64, len(calls)          # (5 194 before: one per task of each candidate)
    fixed = _profile(softmax, spec, options={"tiles_per_block": {"Softmax": 86}})
    assert auto.makespan_us == pytest.approx(fixed.makespan_us)


@pytest.mark.parametrize("vec", [(4, 2048), (4, 512), (8, 1024)])
def test_quantize_under_a_tile_splitting_its_rows_loops_over_them(vec):
    def quantize(x):
        with jax.named_scope("Quant"):
            return pj.ops.quantize(x, axis=-1)

    x = np.random.default_rng(2).standard_normal((64, 4096)).astype(np.float16)
    kernel = pj.kernel(quantize, options={"tiles": {"Quant": {"vec": vec}}})
    for got in (kernel(x), jax.jit(kernel)(x)):
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(quantize(x))):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    results = xc.crosscheck(kernel.lower(x).compile().code)
    assert results and all(r.status == "exact" for r in results), [(r.name, r.status) for r in results]


def test_cross_entropy_of_a_row_with_a_positive_infinite_logit():
    x = jnp.asarray([[0.0, 1.0, np.inf, 2.0], [0.5, -1.0, 0.0, 3.0]], jnp.float32)
    labels = jnp.asarray([0, 3], jnp.int32)

    def reference(logits):
        picked = jnp.take_along_axis(logits, labels[:, None], -1)[:, 0]
        return jnp.mean(jax.nn.logsumexp(logits, -1) - picked)

    assert float(pj.nn.softmax_cross_entropy(x, labels)) == float(reference(x)) == np.inf
    got = np.asarray(jax.jit(jax.grad(lambda l: pj.nn.softmax_cross_entropy(l, labels)))(x))
    want = np.asarray(jax.grad(reference)(x))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(np.nan_to_num(got), np.nan_to_num(want), rtol=1e-6, atol=1e-7)
