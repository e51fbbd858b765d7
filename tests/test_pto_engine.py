"""What ptoas takes is what runs: every lowering test kernel executed task by task from its real
PTO-AS text (``Compiled.run(engine="pto")``: the module parsed back, each instruction's semantics as
pto-isa's CPU simulator computes them) equals XLA's evaluation of the same function — exact for
integer and boolean results, within the per-dtype tolerance of the lowering checks for floats."""
import functools

import jax
import numpy as np
import pytest

import ptojax as pj
from ptojax.lowering.pipeline import TOLERANCE
from helpers import rand
from kernels import KERNELS


def _text_equals_xla(name, kernel, args):
    compiled = pj.kernel(kernel).lower(*args).compile()
    got, _ = compiled.run(*args, engine="pto")
    want = jax.jit(kernel)(*args)
    for i, (g, w) in enumerate(zip(jax.tree.leaves(got), jax.tree.leaves(want))):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {i}"
        if g.dtype not in TOLERANCE:
            np.testing.assert_array_equal(g, w, err_msg=f"{name} output {i}")
            continue
        rtol, atol = TOLERANCE[g.dtype]
        scale = float(np.max(np.abs(w.astype(np.float64)), initial=1.0))     # sums of many terms: a
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,  # reassociation error
                                   atol=atol * scale, err_msg=f"{name} output {i}")         # relative to the output


@pytest.mark.parametrize("name,kernel,args", KERNELS, ids=[k[0] for k in KERNELS])
def test_the_real_text_computes_what_xla_does(name, kernel, args):
    _text_equals_xla(name, kernel, args)


def test_flash_attention_backward_from_the_real_text():
    """The backward kernel's causal mask is a predicate that only selects read, broadcast over the
    heads: its bytes must be written from the compare's mask before the broadcast reads them."""
    from ptojax.nn import _attention as A

    h, s, d, block = 2, 24, 16, 16                       # two KV blocks, the last one padded
    q, k, v, do = (rand((h, s, d), np.float32, seed) for seed in range(4))
    o, lse = jax.jit(functools.partial(A._fa_fwd_kernel, block=block))(q, k, v)
    args = (q, k, v, np.asarray(o), np.asarray(lse), do)
    _text_equals_xla("flash_attention_bwd", functools.partial(A._fa_bwd_kernel, block=block), args)


def test_a_fault_in_the_text_names_the_function_and_line():
    x = np.ones((4, 8), np.float32)
    compiled = pj.kernel(lambda x: x * 2.0).lower(x).compile()
    compiled.code._pto["a3", "level2"] = compiled.code.pto().replace("pto.tmuls", "pto.tmulz", 1)
    with pytest.raises(pj.errors.PtoError, match=r"line \d+"):
        compiled.run(x, engine="pto")
