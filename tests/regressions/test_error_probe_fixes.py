"""Findings of a probe of bad input (about 3 760 cases over every public surface):

- a kernel called with ``jax.ShapeDtypeStruct`` s returned ``f(zeros)``: a call or run needs arrays now;
- a kernel whose grid makes millions of tasks (``tanh`` of (2**20, 2**16) float32, 8 388 608) unrolled for
  72 s and then said values read on the host steer its schedule; ``profile(n=10**12)`` of a polymorphic
  kernel was a NumPy MemoryError: a grid past the task limit is refused before its tasks are made, naming
  the program and what makes fewer;
- a polymorphic constraint ``"n >= "`` was "not enough values to unpack";
- PTO text with an unknown dtype, an integer constant out of its type, a tile larger than its buffer or a
  cut-off attribute failed with a bare KeyError / OverflowError / MemoryError / ValueError, and two texts
  ptoas rejects (an ``f8`` constant, an ``f16`` constant used as an ``f32`` scalar) ran."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import engine
from ptojax.ascend.asm import PtoAsmError
from ptojax.mpmd.orchestrator import PtoTaskLimitError

X = np.ones((64, 64), np.float32)


def test_a_call_on_shapes_is_refused_and_a_profile_takes_them():
    spec = jax.ShapeDtypeStruct((64, 64), jnp.float32)
    compiled = pj.kernel(lambda a: a + 1.0).lower(X).compile()
    for call in (lambda: compiled(spec), lambda: compiled.run(spec), lambda: pj.kernel(lambda a: a + 1.0)(spec)):
        with pytest.raises(pj.PtoArgumentError, match="argument 0 is a jax.ShapeDtypeStruct .*no values"):
            call()
    assert compiled.run(spec, compute=False)[1].profile().makespan_us == compiled.profile().makespan_us


def test_a_grid_past_the_task_limit_is_refused_before_its_tasks_are_made():
    spec = jax.ShapeDtypeStruct((2 ** 20, 2 ** 16), jnp.float32)
    compiled = pj.kernel(lambda a: jnp.tanh(a) * 2).lower(spec).compile()
    with pytest.raises(PtoTaskLimitError, match=r"program 'tanh\+mul' \(grid .*would make 8,388,608 tasks.*larger "
                                                r"tiles"):
        compiled.profile()
    poly = pj.kernel(lambda a: jnp.tanh(a) * 2, polymorphic_shapes=("n, 64",)).compiled_for(X)
    with pytest.raises(PtoTaskLimitError, match="would make 7,812,500,000 tasks"):
        poly.profile(n=10 ** 12)


def test_a_constraint_with_an_empty_side_is_named():
    with pytest.raises(pj.PtoArgumentError, match="polymorphic constraint 'n >= ' is not '<expr> >= <expr>'"):
        pj.kernel(lambda a: a * 2, polymorphic_shapes=("n, 64",), polymorphic_constraints=("n >= ",))(X)


@pytest.mark.parametrize("old, new, message", [
    ("rows=64, cols=64, v_row=64", "rows=99999999999, cols=64, v_row=64", "tile is larger than the 196608-byte vec"),
    ("!pto.tensor_view<64x64xf32>", "!pto.tensor_view<64x64f16>", "unknown dtype '64f16'"),
    ("!pto.ptr<f32>", "!pto.ptr<bogus>", "unknown dtype 'bogus'"),
    ("arith.constant 2.0 : f32", "arith.constant 99999999999 : i32", "constant 99999999999 does not fit i32"),
    ("arith.constant 2.0 : f32", "arith.constant 2.0 : f8", "unknown constant type 'f8'"),
    ("arith.constant 2.0 : f32", "arith.constant 2.0 : f16", "is a f16 constant, used as f32"),
    ("#pto.kernel_kind<vector>", "#pto.kernel", "malformed attribute '#pto.kernel'"),
])
def test_malformed_pto_text_is_a_pto_asm_error_with_its_line(old, new, message):
    text = pj.kernel(lambda a, b: a * 2.0 + b).lower(X, X).compile().as_text("pto")
    assert old in text
    bad = text.replace(old, new, 1) if "kernel_kind" not in old else text[:text.index(old) + len(new)]
    with pytest.raises(PtoAsmError, match=rf"pto-as:\d+:\d+: .*{message}"):
        module = engine.parse(bad)
        engine.run(module, module.functions[0].name, [X.copy(), X.copy(), X.copy()])


def test_wrong_kinds_of_argument_to_public_functions_are_named(tmp_path):
    """(Bare AttributeErrors from inside; an unwritable file was a FileNotFoundError after the work.)"""
    from ptojax.ascend import ptoas

    lowering = pj.lower(lambda a: a + 1, X)
    for call, message in [(lambda: pj.execute(3, X), "the first argument is a Lowering"),
                          (lambda: pj.execute(lowering, X, plans=3), "plans is a dict"),
                          (lambda: pj.execute(lowering, X, compiled=3), "compiled is the lowering's compiled code"),
                          (lambda: pj.report.block_graph(3), "takes a Lowering"),
                          (lambda: ptoas.assemble(b"module {}"), "the PTO-AS text is a str, not bytes")]:
        with pytest.raises(pj.PtoArgumentError, match=message):
            call()
    fake = tmp_path / "ptoas"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    with pytest.raises(ptoas.PtoasError, match="exited 0 but wrote no C"):
        ptoas.assemble("module {}", ptoas=str(fake))
    profile = pj.kernel(lambda a: a + 1).lower(X).compile().profile()
    with pytest.raises(pj.PtoArgumentError, match="Profile.save: cannot write '/proc/t.json'"):
        profile.save("/proc/t.json")
    profile.save(tmp_path / "t.json")
    assert (tmp_path / "t.json").stat().st_size > 0
