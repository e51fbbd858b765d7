"""Regressions from a probe of profiles, reports and the CLI.

- A block call of several programs (a tail or edge part beside the full tiles) was priced part by part
  by the L2 rule: the first part marked the whole tensor resident, so the tail's first reads cost no
  HBM bytes (``a + b`` on f32[4096, 768]: 25.2 MB from HBM with ``vec=(16, 256)``, 16.8 MB with
  ``vec=(16, 512)``). The rule is applied once per block call now (``price_memory``).
- ``report()`` refused a kernel's own profile when a ``while_loop``'s condition ran block calls: the
  condition's calls were in no block graph, so their tasks looked like another kernel's.
- The per-core load flagged one-tile block calls that run one after another (a loop's trips) as a
  label run on a single core; a label is judged per block call now.
- A polymorphic compile printed raw ``PyTreeDef`` s for a wrong argument count and profiled before it
  checked ``report``'s path.
- ``ptojax profile FILE:KERNEL`` profiled a static compile of a kernel made with ``polymorphic_shapes``.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax import report
from ptojax.cli import _load, main

F32 = jnp.float32


def _add(tile):
    def add(a, b):
        with pj.tile(vec=tile):
            return a + b
    return add


@pytest.mark.parametrize("tile", [(16, 256), (16, 512)])
def test_tail_programs_read_their_first_bytes_from_hbm(tile):
    """Both tilings read each input once from HBM (nothing is resident before the call), tail or not."""
    spec = jax.ShapeDtypeStruct((512, 768), F32)
    compiled = pj.kernel(_add(tile)).lower(spec, spec).compile()
    tasks = compiled.profile(compute=False).trace.graph.tasks
    programs = {t.name for t in tasks}
    assert len(programs) == (1 if tile[1] == 256 else 2)
    assert sum(t.hbm for t in tasks) == 2 * 512 * 768 * 4
    assert all(t.hbm > 0 for t in tasks)


def test_a_static_tail_is_charged_as_the_polymorphic_compile_charges_it():
    x = np.ones((70, 64), np.float32)
    static = pj.kernel(_add((32, 32))).lower(x, x).compile().profile()
    dyn = pj.kernel(_add((32, 32)), polymorphic_shapes=("m, 64", "m, 64")).compiled_for(x, x).profile(m=70)
    hbm = lambda p: sorted((t.bytes, t.hbm) for t in p.trace.graph.tasks)
    assert hbm(static) == hbm(dyn) and sum(t.hbm for t in static.trace.graph.tasks) == 2 * x.nbytes


def _grow(x):
    return jax.lax.while_loop(lambda c: jnp.max(c) < 100.0, lambda c: c * 2.0 + 1.0, x)


def test_report_of_a_while_loop_with_a_condition_on_the_chip(tmp_path):
    x = np.abs(np.random.default_rng(0).standard_normal((64, 64))).astype(np.float32) + 0.5
    compiled = pj.kernel(_grow).lower(x).compile()
    prof = compiled.report(tmp_path / "grow.html", x)
    tasks = prof.trace.graph.tasks
    assert {t.name for t in tasks} == {"amax+lt", "mul+add"} and all(t.call >= 0 for t in tasks)
    nodes = [n for n in report.build(prof, compiled)["graph"]["nodes"] if n["kind"] == "block"]
    assert [n["parts"][0]["program"] for n in nodes] == ["amax+lt", "mul+add"]      # the condition's first
    assert np.array_equal(compiled(x), _grow(x))


def _chain(x, w):
    def body(i, h):
        with jax.named_scope("Step"):
            return pj.ops.matmul(h, w)              # one 64x64 cube tile per trip
    return jax.lax.fori_loop(0, 4, body, x)


def test_one_tile_calls_in_a_chain_are_not_a_single_core_label():
    x = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    prof = pj.kernel(_chain).lower(x, x).compile().profile()
    assert len({r.stage for r in prof.trace.records}) == 4
    (label,) = report.summary(prof)["load"]["labels"]
    assert (label["tiles"], label["single_core"], label["single_core_on"]) == (4, False, None)


def test_a_call_of_several_tiles_on_one_core_is_flagged_on_its_core():
    spans = [("AIV", 3, "E", 1.0, 0, 8), ("AIV", 5, "E", 1.0, 1, 1), ("AIV", 6, "E", 1.0, 2, 1)]
    ld = report.load.load(spans, {"AIV": 48})
    assert ld["single_core"] == ["E (AIV 3)"] and ld["labels"][0]["tiles"] == 10


def test_polymorphic_compile_names_the_arguments_and_checks_the_path_first(tmp_path, monkeypatch):
    x = np.ones((70, 64), np.float32)
    compiled = pj.kernel(_add((32, 32)), polymorphic_shapes=("m, 64", "m, 64")).compiled_for(x, x)
    with pytest.raises(pj.PtoArgumentError, match=r"called with 1 argument \(float32\[70, 64\]\), compiled for "
                       r"2 arguments \(float32\[m, 64\], float32\[m, 64\]\)"):
        compiled(x)
    monkeypatch.setattr(type(compiled), "run", lambda *a, **k: pytest.fail("profiled before the path check"))
    with pytest.raises(pj.PtoArgumentError, match="the path must be a str or os.PathLike, not ndarray"):
        compiled.report(x, x)


def test_cli_profiles_a_polymorphic_kernel_object_as_calling_it_runs(tmp_path, capsys):
    (tmp_path / "k.py").write_text("import ptojax as pj\n\n\ndef seed(a, b):\n    with pj.tile(vec=(32, 32)):\n"
                                   "        return a * 2.0 + b\n\n\n"
                                   "poly = pj.kernel(seed, polymorphic_shapes=('m, 64', 'm, 64'))\n")
    args = [str(tmp_path / "k.py:poly"), "--shape", "70x64", "--shape", "70x64"]
    assert main(["profile", *args, "--summary", str(tmp_path / "s.json"), "--html", str(tmp_path / "r.html")]) == 0
    x = np.ones((70, 64), np.float32)
    own = _load(args[0]).compiled_for(x, x)             # the file's kernel object's compile
    saved = report.load_summary(tmp_path / "s.json")
    assert saved["tasks"] == own.profile(m=70).tasks == 6
    assert list(saved["label_us"]) == ["mul+add"]               # one program: no static tail 'mul+add#2'
    capsys.readouterr()
    assert main(["lower", *args, "--level", "pto"]) == 0
    assert capsys.readouterr().out.strip() == own.as_text("pto").strip()
