"""The DeepSeek-V3.2 Indexer Prolog with a symbolic token count T = B·S1: one compile serves every T.

Its Q Hadamard and quantize work on ``[T·N, 128]`` rows (a row count ``k·m``), its RoPE on ``[T, N, D]``
and ``[T, 1, 64]`` views whose tiles hold ``T·N`` rows, and its scatter into the key cache loops over a
block's valid rows only. The numbers meet the CANN criteria of the static prolog's tests against the
same plain-JAX reference, the cache rows no token addresses stay as they were (a tail block writes
nothing past T), and ``ptoas`` accepts the dynamic module. The scatter writes the whole cache from
every block, so the module cannot be replayed for a symbolic T: ``jax.export`` says so.
"""
import functools
import re

import jax
import numpy as np
import pytest

import ptojax as pj
from deepseek_cases import D, H, MAX_BLOCKS, N, Q_LORA, K, R, fp16_close, int8_close
from ptojax.errors import PtoUnsupportedError

# token_x, q_norm, q_norm_scale, 6 weights, cos, sin, 2 Hadamards, the two caches, the cache slots
POLY = ("t, 256", "t, 128", "t, 1") + (None,) * 6 + ("t, 64", "t, 64") + (None,) * 4 + ("t",)


def _inputs(t):
    """Inputs for ``t`` new tokens of one sequence of 500 (the cache shapes do not depend on ``t``)."""
    return R.prolog_inputs(1, t, H, Q_LORA, N, [500], max_blocks=MAX_BLOCKS, seed=t)[0]


@pytest.fixture(scope="module")
def prolog():
    return pj.kernel(functools.partial(K.indexer_prolog, n_heads=N), polymorphic_shapes=POLY)


def _check(prolog, t):
    args = _inputs(t)
    q, qs, w, kc, ks = prolog(*args)
    rq, rqs, rw, rkc, rks = R.indexer_prolog(*args, n_heads=N)
    assert (q.shape, qs.shape, w.shape) == ((t, N, D), (t, N), (t, N))
    int8_close(q, rq)
    fp16_close(qs, rqs)
    fp16_close(w, rw)
    int8_close(kc, rkc)
    fp16_close(ks, rks)
    rows = args[13].shape[0] * args[13].shape[1]                 # cache blocks x block size
    untouched = np.setdiff1d(np.arange(rows), args[-1])           # rows no token addresses stay as they were
    for got, cache in ((kc, args[13]), (ks, args[14])):
        np.testing.assert_array_equal(np.asarray(got).reshape(rows, -1)[untouched],
                                      np.asarray(cache).reshape(rows, -1)[untouched])


def test_one_compile_serves_every_token_count(prolog):
    """The numbers at T = 17 (a tail block in every program); at T = 130 the tasks of the static
    prolog compiled for 130 tokens, from the same compile."""
    _check(prolog, 17)
    args = _inputs(130)
    dynamic = prolog.compiled_for(*args).profile(m=130)
    static = pj.kernel(functools.partial(K.indexer_prolog, n_heads=N)).lower(*args).compile()
    assert dynamic.tasks == static.profile(*args, compute=False).tasks
    assert prolog.compiles == 1


@pytest.mark.slow
@pytest.mark.parametrize("t", (1, 64, 130, 300, 1000))
def test_one_compile_serves_more_token_counts(prolog, t):
    _check(prolog, t)
    assert prolog.compiles == 1


def test_the_dynamic_prolog_is_real_pto(prolog):
    compiled = prolog.compiled_for(*_inputs(3))
    dk = compiled.dynamic
    assert sorted(k for k in dk.scales.values() if k != 1) == [4, 4]      # Q Hadamard, Q quantize: [T·N, 128]
    text = compiled.as_text("pto")
    assert "%dyn_m4 = arith.muli %dyn_m, %dyn_k4 : index" in text and "!pto.tensor_view<?x128xbf16>" in text
    assert "!pto.tensor_view<?x4x128xbf16>" in text and "!pto.tensor_view<?x1x64xbf16>" in text
    assert "valid_row = %dyn_vr4" in text                                  # 2 tokens x 4 heads per tile
    assert len(re.findall(r"scf\.for %\w+ = %\w+ to %dyn_vr step", text)) == 2     # the two scatters
    cpp = compiled.ptoas()                                                 # Huawei's ptoas accepts it
    for fn in dk.rows:
        assert re.search(rf"AICORE void {fn}\((__gm__ \w+\* v\d+, )+int32_t v\d+\)", cpp), fn


def test_the_prolog_does_not_export_with_a_symbolic_token_count():
    specs = jax.export.symbolic_args_specs(_inputs(3), POLY)
    with pytest.raises(PtoUnsupportedError) as err:
        jax.export.export(jax.jit(pj.kernel(functools.partial(K.indexer_prolog, n_heads=N))))(*specs)
    assert str(err.value) == ("pj.kernel 'indexer_prolog': function 'scatter_update' writes argument 3, which has "
                              "no rows: its blocks of 128 rows are not independent, so it cannot run for a symbolic "
                              "row count; with backend='xla' (pj.kernel's, or the pj.nn op's) it exports for every "
                              "row count")
