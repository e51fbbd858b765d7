"""Regressions from a probe of API misuse: each mistake is a ptojax error naming the argument and what it
takes, before any work, where it was a bare TypeError / ValueError / IndexError from deep inside, or a
setting silently ignored."""
import json
import sys

import jax
import numpy as np
import pytest

import ptojax as pj
from ptojax import cli

A = np.ones((64, 64), np.float32)


def add_fn(a, b):
    with pj.tile(vec=(32, 32)), jax.named_scope("Scale"):
        return a * 2.0 + b


@pytest.mark.parametrize("kwargs, match", [
    ({"workers": 2.5}, r"workers must be an int >= 1 .* got 2.5"),
    ({"workers": "4"}, r"workers must be an int >= 1 .* got '4'"),
    ({"workers": 0}, r"workers must be an int >= 1 .* got 0"),
    ({"donate_argnums": 1.0}, r"donate_argnums takes an argument position, or a sequence of them; got 1.0"),
    ({"donate_argnums": "a"}, r"donate_argnums takes an argument position, or a sequence of them; got 'a'"),
    ({"polymorphic_shapes": 3}, r"polymorphic_shapes takes a shape spec \('m, 64'\) or None, or a sequence"),
    ({"polymorphic_shapes": ("m, 64", "m, 64"), "polymorphic_constraints": (5,)},
     r"polymorphic_constraints takes a constraint"),
    ({"polymorphic_constraints": ("mod(m, 16) == 0",)}, r"constrain the symbols of polymorphic_shapes, and none "
                                                        r"are given"),
    ({"interpret": "no"}, r"interpret must be True or False, got 'no'"),
])
def test_malformed_kernel_options_are_refused_when_made(kwargs, match):
    with pytest.raises(pj.PtoArgumentError, match=match):
        pj.kernel(add_fn, **kwargs)


def test_a_kernel_that_is_no_function():
    with pytest.raises(pj.PtoArgumentError, match=r"pj.kernel: the kernel must be callable \(a function\), got 3"):
        pj.kernel(3)
    with pytest.raises(pj.PtoArgumentError, match=r"pto lower: the kernel must be callable"):
        pj.lower(3, A)


def test_polymorphic_specs_are_counted_as_jax_export_parses_them():
    with pytest.raises(pj.PtoArgumentError, match=r"polymorphic shape 'm,' has 1 dim for argument 0"):
        pj.kernel(add_fn, polymorphic_shapes=("m,", "m, 64"))(A, A)
    got = pj.kernel(add_fn, polymorphic_shapes=("m, 64,", "m, 64"))(A[:7], A[:7])
    np.testing.assert_array_equal(np.asarray(got), A[:7] * 3)


def test_options_that_are_no_mapping_and_tiles_that_set_nothing():
    with pytest.raises(pj.PtoArgumentError, match=r"options must be a mapping of pass options"):
        pj.lower(add_fn, A, A, options=[1])
    with pytest.raises(pj.PtoArgumentError, match=r"tiles\['Scale'\] sets no tile \(\{'vec': None\}\)"):
        pj.kernel(add_fn, options={"tiles": {"Scale": {"vec": None}}}).lower(A, A)
    counted = pj.kernel(add_fn, options={"tiles_per_block": {"Scale": np.int64(2)}}).lower(A, A)
    assert counted.compile().profile(A, A).makespan_us > 0


def test_run_arguments_and_op_parameters():
    with pytest.raises(pj.PtoArgumentError, match=r"donated positions \[7\] name no argument of the 2 given"):
        pj.execute(pj.lower(add_fn, A, A), A, A, donated=(7,))
    for op in (pj.ops.sum, pj.ops.amax, pj.ops.amin, pj.ops.prod):
        with pytest.raises(pj.PtoArgumentError, match=r"axis must be an int, a sequence of ints or None, got 1.0"):
            op(A, axis=1.0)
    with pytest.raises(pj.PtoArgumentError, match=r"approximate must be True \(the tanh form\) or False"):
        pj.ops.gelu(A, approximate="none")


def _tile_op(op, x, **params):
    def body(index, ins, outs):
        w = pj.tiles.window((32, 32))
        return [pj.tiles.store(outs[0], pj.tiles.compute(op, pj.tiles.load(ins[0], index, w), **params), index, w)]
    return pj.kernel(lambda x: pj.tiles.grid(body, (2, 2), [x], jax.ShapeDtypeStruct(x.shape, x.dtype)))(x)


def test_a_tile_ops_parameters_are_pj_ops():
    x = np.linspace(-3, 3, 64 * 64, dtype=np.float32).reshape(64, 64)
    np.testing.assert_array_equal(np.asarray(_tile_op("gelu", x)), np.asarray(pj.kernel(pj.ops.gelu)(x)))
    with pytest.raises(pj.PtoArgumentError, match=r"parameters \['foo'\] do not fit pj.ops.exp's"):
        _tile_op("exp", x, foo=1)


def test_report_arguments():
    compiled = pj.kernel(add_fn).lower(A, A).compile()
    with pytest.raises(pj.PtoArgumentError, match=r"levels must be a mapping of level name -> its text, got list"):
        pj.report.build(compiled.profile(), compiled, levels=["tile"])
    with pytest.raises(pj.PtoArgumentError, match=r"report\(path, \*args\): the path must be a str or os.PathLike, "
                                                  r"not ndarray"):
        compiled.report(A, A)


def test_cli_options_merge_label_by_label(tmp_path, capsys, monkeypatch):
    (tmp_path / "kmod.py").write_text(
        "import jax\nimport ptojax as pj\n\n"
        "def g(a, b):\n"
        "    with pj.tile(vec=(32, 32)), jax.named_scope('Scale'):\n        x = a * 2.0\n"
        "    with pj.tile(vec=(32, 32)), jax.named_scope('Shift'):\n        return x + b\n\n"
        "kg = pj.kernel(g, options={'tiles': {'Scale': {'vec': (16, 64)}}})\n")
    (tmp_path / "opts.json").write_text(json.dumps({"tiles": {"Shift": {"vec": [64, 64]}}}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert cli.main(["lower", "kmod.py:kg", "--shape", "64x64", "--shape", "64x64", "--level", "tile",
                     "--options", str(tmp_path / "opts.json")]) == 0
    grids = [line for line in capsys.readouterr().out.splitlines() if "tile_grid" in line]
    assert any("label=Shift parts=1x1" in line for line in grids), grids
    assert any("label=Scale parts=4x1" in line for line in grids), grids     # the kernel's own override kept
