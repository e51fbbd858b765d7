"""Regressions from a probe of hand-written tiles against ptoas (/tmp/probe_pto, findings 3 to 6).

* ``pj.tiles.load(..., loc="left"/"right")`` passed the checker and ran on the simulator, but A2/A3 has
  no GM -> L0A/L0B path and ``ptoas --pto-arch=a3`` refused the text ("expects A2/A3 tload dst to use
  loc=vec or loc=mat"): now a trace-time PtoArgumentError naming the op, the loc and the allowed ones.
* ``pj.tiles.register_op`` took ``reference=3`` / ``None`` and an ``abstract=`` that disagreed with the
  reference; each failed only when a task ran ("'int' object is not callable", "gave float32[16,32] for
  a destination of int32"): now refused at registration (not callable) and when the op is traced
  (``abstract`` against ``jax.eval_shape(reference)``), naming the op.
* ``Compiled.ptoas(level="level1")``, a level ptoas accepts, raised a bare ValueError; level1 now
  assembles (ptoas runs its level2 pipeline) and an unknown level is a PtoArgumentError naming them.
* docs/pto.md said f32 transcendentals differ from the simulator by an ulp or a few without 64-bit
  mode; the engine computes them in double whatever ``jax_enable_x64`` says, and they agree bit for bit.
"""
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import ptoas as ptoas_mod
from ptojax.primitives import tile as T

DOCS = Path(__file__).resolve().parents[2] / "docs"


# ------------------------------------------------------------------------------- loads into L0A/L0B
def _direct(loc_a="left", loc_b="right", load=pj.tiles.load):
    def kernel(a, b):
        def body(i, ins, outs):
            ta = load(ins[0], (i[0], 0), pj.tiles.window((32, 64)), loc_a)
            tb = load(ins[1], (0, i[1]), pj.tiles.window((64, 32)), loc_b)
            ta = pj.tiles.mov(ta, "left") if loc_a == "mat" else ta
            tb = pj.tiles.mov(tb, "right") if loc_b == "mat" else tb
            return [pj.tiles.store(outs[0], pj.tiles.matmul(ta, tb), i, pj.tiles.window((32, 32)))]
        return pj.tiles.grid(body, (2, 2), (a, b), jax.ShapeDtypeStruct((64, 64), np.float32), kind="cube")
    return kernel


AB = (np.ones((64, 64), np.float16), np.ones((64, 64), np.float16))


@pytest.mark.parametrize("loc, buffer", [("left", "L0A"), ("right", "L0B")])
def test_a_load_straight_into_l0a_or_l0b_is_refused_when_traced(loc, buffer):
    kernel = _direct(*(("left", "mat") if loc == "left" else ("mat", "right")))
    with pytest.raises(pj.PtoArgumentError, match=rf"pj.tiles.load: tload into loc='{loc}' \({buffer}\) is not a "
                                                  r"data path on A2/A3.*loc='vec' \(UB\) or loc='mat' \(L1\) only.*"
                                                  rf"loc='mat'.*pj.tiles.mov\(tile, '{loc}'\)"):
        pj.kernel(kernel).lower(*AB)


def test_the_checker_refuses_a_tload_into_l0a_bound_directly():
    """A ``tload`` bound without pj.tiles.load (T.tload) meets the same rule in the grid's checker."""
    with pytest.raises(pj.PtoArgumentError, match=r"pj.tiles.grid 'body': tload into loc='left' \(L0A\) is not a "
                                                  "data path on A2/A3"):
        pj.kernel(_direct("left", "mat", load=T.tload)).lower(*AB)


def test_load_names_the_destinations_for_other_locations():
    with pytest.raises(pj.PtoArgumentError, match=r"loc 'acc' is not a tload destination on A2/A3; one of 'vec' "
                                                  r"\(UB\) or 'mat' \(L1\)"):
        pj.kernel(_direct("acc", "mat")).lower(*AB)


def test_the_path_through_l1_still_runs():
    out = pj.kernel(_direct("mat", "mat"))(*AB)
    np.testing.assert_array_equal(np.asarray(out), np.full((64, 64), 64.0, np.float32))


# ------------------------------------------------------------------------------------- register_op
@pytest.mark.parametrize("kwargs, what", [(dict(reference=3), "reference=3"),
                                          (dict(reference=None), "reference=None"),
                                          (dict(reference=jnp.exp, numpy=3.5), "numpy=3.5"),
                                          (dict(reference=jnp.exp, abstract="f32"), "abstract='f32'")])
def test_register_op_refuses_what_is_not_callable(kwargs, what):
    with pytest.raises(pj.PtoArgumentError, match=rf"pj.tiles.register_op 'tprobe_bad': {re.escape(what)} is not "
                                                  "callable; give a function"):
        pj.tiles.register_op("tprobe_bad", **kwargs)
    assert "tprobe_bad" not in pj.tiles.CUSTOM and "tprobe_bad" not in T.TILE_OPS


def _custom_kernel(op, shape=(32, 64)):
    w = pj.tiles.window((16, 32))

    def kernel(x):
        body = lambda i, ins, outs: [pj.tiles.store(outs[0], op(pj.tiles.load(ins[0], i, w)), i, w)]   # noqa: E731
        return pj.tiles.grid(body, (2, 2), x, jax.ShapeDtypeStruct(shape, np.float32))
    return kernel


@pytest.mark.parametrize("abstract, declared", [
    (lambda t: jax.ShapeDtypeStruct(t.shape, np.int32), r"int32\[16, 32\]"),              # dtype
    (lambda t: jax.ShapeDtypeStruct((16, 16), t.dtype), r"float32\[16, 16\]"),            # shape
])
def test_an_abstract_that_disagrees_with_the_reference_is_refused_when_traced(abstract, declared):
    op = pj.tiles.register_op("tprobe_abs", reference=lambda t: t * 2.0, abstract=abstract)
    try:
        with pytest.raises(pj.PtoArgumentError, match=rf"pj.tiles.tprobe_abs: abstract= declares {declared} for "
                                                      r"operands \(float32\[16, 32\]\), but reference returns "
                                                      r"float32\[16, 32\]"):
            pj.kernel(_custom_kernel(op)).lower(np.ones((32, 64), np.float32))
    finally:
        pj.tiles.unregister_op("tprobe_abs")


def test_an_abstract_that_agrees_runs():
    op = pj.tiles.register_op("tprobe_ok", reference=lambda t, *, k: t * k,
                              abstract=lambda t, *, k: jax.ShapeDtypeStruct(t.shape, t.dtype))
    try:
        x = np.arange(32 * 64, dtype=np.float32).reshape(32, 64)
        out = pj.kernel(_custom_kernel(lambda t: op(t, k=3.0)))(x)
        np.testing.assert_array_equal(np.asarray(out), x * 3)
    finally:
        pj.tiles.unregister_op("tprobe_ok")


# --------------------------------------------------------------------------------------- ptoas levels
def test_an_unknown_ptoas_level_is_an_argument_error_naming_the_levels(monkeypatch):
    monkeypatch.setenv("PTOAS", "/nonexistent/ptoas")          # refused before ptoas is looked for
    compiled = pj.kernel(lambda v: v + 1).lower(np.ones((32, 32), np.float32)).compile()
    with pytest.raises(pj.PtoArgumentError, match=r"\.ptoas: level 'level4' is not a ptoas --pto-level; one of "
                                                  "level1, level2, level3"):
        compiled.ptoas(level="level4")
    with pytest.raises(pj.PtoArgumentError, match="ptoas.assemble: level 'l2' is not a ptoas --pto-level"):
        ptoas_mod.assemble("", level="l2")
    assert set(ptoas_mod.LEVELS) == {"level1", "level2", "level3"}


# ------------------------------------------------------------------------------- docs: precision
def test_pto_md_no_longer_says_transcendentals_differ_without_x64():
    pto = re.sub(r"\s+", " ", (DOCS / "pto.md").read_text())
    ops = re.sub(r"\s+", " ", (DOCS / "ops.md").read_text())
    assert "Without 64-bit mode f32 transcendentals differ" not in pto
    assert "with JAX's 64-bit mode on or off" in pto
    assert "whether or not `jax_enable_x64` is on" in ops


@pytest.mark.parametrize("fn", [jnp.exp, jnp.log, jnp.sqrt, jax.lax.rsqrt], ids=lambda f: f.__name__)
def test_f32_transcendentals_are_double_rounded_once_without_x64(fn):
    """What the docs now say: the engine's f32 texp/tlog/tsqrt/trsqrt are the double result rounded once
    (what pto-isa's simulator computes), eagerly and jitted, with 64-bit mode off."""
    rng = np.random.default_rng(0)
    x = (rng.uniform(-87, 88, (64, 128)) if fn is jnp.exp else np.exp(rng.uniform(-80, 80, (64, 128))))
    x = x.astype(np.float32)
    with jax.enable_x64(False):
        kernel = pj.kernel(fn)
        eager, jitted = np.asarray(kernel(x)), np.asarray(jax.jit(kernel)(x))
    x64 = x.astype(np.float64)
    want = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda v: 1.0 / np.sqrt(v)}[fn.__name__](x64)
    want = want.astype(np.float32)
    np.testing.assert_array_equal(eager.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(jitted.view(np.uint32), want.view(np.uint32))
