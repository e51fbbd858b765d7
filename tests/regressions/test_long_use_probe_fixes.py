"""Findings of a probe of long-running use (threads, caches, copies): a static argument's kernel is
chosen by the value's type as well as its value (``2`` and ``2.0`` and ``True`` and ``1`` are equal,
and traced differently), and kernels, lowerings and compiles deep-copy (to themselves: nothing in them
changes what they compute)."""
from __future__ import annotations

import copy

import jax
import numpy as np

import ptojax as pj


def _scaled(x, n):
    with pj.tile(vec=(32, 32)):
        return x * n


def _flagged(x, flag):
    with pj.tile(vec=(32, 32)):
        return x + (1 if flag is True else 100)


def test_equal_static_values_of_other_types_trace_anew():
    x = np.arange(64 * 64, dtype=np.int32).reshape(64, 64) % 7
    k, j = pj.kernel(_scaled, static_argnums=1), jax.jit(_scaled, static_argnums=1)
    assert k(x, 2).dtype == j(x, 2).dtype == np.int32
    assert k(x, 2.0).dtype == j(x, 2.0).dtype == np.float32
    half = np.ones((64, 64), np.float16)
    assert k(half, 2.0).dtype == np.float16
    assert k(half, np.float32(2)).dtype == j(half, np.float32(2)).dtype == np.float32
    k, j = pj.kernel(_flagged, static_argnames="flag"), jax.jit(_flagged, static_argnames="flag")
    assert int(k(x, flag=1)[0, 0]) == int(j(x, flag=1)[0, 0]) == 100
    assert int(k(x, flag=True)[0, 0]) == int(j(x, flag=True)[0, 0]) == 1


def test_kernels_and_their_stages_deep_copy():
    x = np.ones((64, 64), np.float32)
    k = pj.kernel(lambda a: _scaled(a, 2.0))
    fresh = copy.deepcopy(k)
    np.testing.assert_array_equal(fresh(x), 2 * x)
    lowered = k.lower(x)
    compiled = lowered.compile()
    held = copy.deepcopy({"kernel": k, "lowered": lowered, "compiled": compiled})
    np.testing.assert_array_equal(held["compiled"](x), 2 * x)
    assert held["lowered"].as_text("block") == lowered.as_text("block")
    np.testing.assert_array_equal(held["kernel"](x), 2 * x)
