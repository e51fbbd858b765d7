"""Findings of a probe of 313 misuses (no hang, 299 clear or correct): the engine ran PTO text that
redefines an SSA value (ptoas: "redefinition of SSA value"); ``memory="big"``, a bad ``pto(level=)``, option
tables keyed by a number, a 1-D ``x[3]`` / concatenate (a slip of the interleave rule, caught before it
landed), FFT and an over-long tile row raised internal or misleading errors."""
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import asm, engine


def fn(a, b):
    with pj.tile(vec=(32, 32)):
        return a * 2.0 + b


X = np.ones((64, 64), np.float32)


def test_the_engine_refuses_a_redefined_ssa_value_as_ptoas_does():
    text = pj.kernel(fn).lower(X, X).compile().as_text("pto")
    first = next(line for line in text.splitlines() if "arith.constant 2.0 : f32" in line)
    name = first.split("=")[0].strip()
    bad = text.replace(first, f"{first}\n    {name} = arith.constant 3.0 : f32")
    with pytest.raises(asm.PtoAsmError, match=rf"redefinition of SSA value {name} \(first defined on line \d+\)"):
        engine.parse(bad)


def test_a_name_defined_in_two_sibling_loops_is_not_a_redefinition():
    x = np.ones((64, 8192), np.float32)                        # row loops over column tiles
    text = pj.kernel(lambda v: v - jnp.max(v, -1, keepdims=True)).lower(x).compile().as_text("pto")
    engine.parse(text)


@pytest.mark.parametrize("call, error, match", [
    (lambda: pj.lower(fn, X, X, memory="big"), pj.PtoArgumentError, r"memory must be a CoreMemory"),
    (lambda: pj.kernel(fn).lower(X, X).compile().code.pto(level="level9"), pj.PtoArgumentError,
     r"level 'level9' is not one of"),
    (lambda: pj.kernel(fn, options={"tiles": {5: {"vec": (32, 32)}}})(X, X), pj.PtoArgumentError,
     r"tiles takes a mapping keyed by label .* got \{5: \{'vec': \(32, 32\)\}\}"),
    (lambda: pj.kernel(fn, options={"tiles_per_block": {5: 2}})(X, X), pj.PtoArgumentError,
     r"tiles_per_block takes a mapping keyed by label .* got \{5: 2\}"),
    (lambda: pj.kernel(lambda x: jnp.fft.fft(x))(X), pj.PtoUnsupportedError,
     r"jnp\.fft\.fft at .* 'convert_element_type' makes complex64\[64,64\], and the cores have no complex numbers"),
    (lambda: asm.parse(pj.kernel(fn).lower(X, X).compile().as_text("pto")), asm.PtoAsmError,
     r"found 'module'; this parser reads codegen's blocks .* ptojax\.ascend\.engine\.parse"),
], ids=["memory", "level", "tiles-label", "tiles-per-block-label", "fft", "parse-module"])
def test_misuses_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("f", [lambda x: x[3] * 2.0, lambda x: jnp.concatenate([x[0], x[1]]) + 1.0],
                         ids=["row", "concatenate-1d"])
def test_one_dimensional_views_and_concatenations(f):
    x = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    np.testing.assert_array_equal(pj.kernel(f)(x), f(x))
