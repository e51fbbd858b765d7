"""Regressions from a probe of the profile views (profile, report, summary, swimlane, command line).

* ``pj.report.build(profile, compiled)`` took a profile of the same kernel compiled with other pass
  options (``tiles_per_block``) and showed it under that kernel's header ("pass options: none", its
  tasks): a trace now carries its compile's signature, and another compile's is refused.
* The per-core load of a run on host threads counted the threads that ran a task, not the run's
  threads (one task on 8 threads: 0 idle threads; its own Chrome trace said 7).
* The swimlane drew one matplotlib collection per task (4 096 tasks: 6 s, 9x the run): now one per lane
  and label.
* A polymorphic compile's report had no levels ("Not available"): it shows them, with the symbol.
* ``ptojax diff`` printed ``2.69 -> 2.69, +0.01``: the change of the exact figures, not of the printed ones.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


def _kernel(a, b):
    with pj.tile(vec=(32, 32)), jax.named_scope("Scale"):
        return a * 2.0 + b


ARGS = [np.ones((256, 64), np.float32)] * 2


def test_a_profile_of_other_pass_options_is_refused():
    plain = pj.kernel(_kernel).lower(*ARGS).compile()
    tuned = pj.kernel(_kernel, options={"tiles_per_block": {"Scale": 2}}).lower(*ARGS).compile()
    assert pj.report.build(tuned.profile(), tuned)["options"] == {"tiles_per_block": {"Scale": 2}}
    assert pj.report.build(plain.run(*ARGS)[1].profile(), plain)["options"] == {}
    with pytest.raises(pj.PtoArgumentError, match=r"it ran with pass options \{'tiles_per_block': \{'Scale': 2\}\}, "
                                                  r"the kernel is compiled with none"):
        pj.report.build(tuned.profile(), plain)
    threads = pj.kernel(_kernel, executor="threads").lower(*ARGS).compile()     # how it runs is not what it is
    assert pj.report.build(threads.run(*ARGS)[1].profile(), plain)["tasks"] == plain.profile().tasks


def test_idle_host_threads_are_the_runs_threads_less_the_busy_ones():
    one = pj.kernel(lambda a: a * 2.0, executor="threads", workers=8)
    x = np.ones((8, 64), np.float32)
    profile = one.lower(x).compile().run(x)[1].profile()
    assert profile.tasks == 1 and dict(profile.lanes) == {"host": 8}
    host = pj.report.summary(profile)["load"]["kinds"]["host"]
    assert (host["cores"], len(host["idle"])) == (8, 7)


def test_the_swimlane_draws_a_collection_per_lane_and_label(tmp_path, monkeypatch):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    calls = []
    real = Axes.broken_barh
    monkeypatch.setattr(Axes, "broken_barh", lambda self, spans, *a, **k: calls.append(len(spans)) or
                        real(self, spans, *a, **k))
    x = np.ones((4096, 64), np.float32)
    profile = pj.kernel(_kernel).lower(x, x).compile().profile()
    profile.swimlane(tmp_path / "s.png")
    lanes = {(r.lane, r.title) for r in profile.trace.records}
    assert sum(calls) == profile.tasks > len(calls) == len(lanes)


def test_a_polymorphic_report_shows_the_levels(tmp_path):
    f = pj.kernel(_kernel, polymorphic_shapes=("m, 64", "m, 64"))
    compiled = f.compiled_for(*ARGS)
    page = tmp_path / "r.html"
    compiled.report(page, m=130)
    text = page.read_text(encoding="utf-8")
    assert "Not available" not in text
    assert "32*i0:+min(32, m-32*i0)" in compiled.as_text("block") and "32*i0:+min(32, m-32*i0)" in text


def test_a_diff_shows_the_change_of_the_printed_figures():
    d = pj.report.Diff({}, {}, [("utilisation AIV %", 2.687, 2.692, 2.692 - 2.687), ("makespan us", 10.004, 9.996, -0.008),
                                ("lower bound us", 1.0, 1.25, 0.25), ("tasks", 3, 5, 2)])
    lines = {line.split("  ")[0]: line.split() for line in str(d).splitlines()[1:]}
    assert lines["utilisation AIV %"][-3:] == ["2.69", "2.69", "+0.00"]
    assert lines["makespan us"][-4:] == ["10.00", "10.00", "+0.00", "-0.1%"]
    assert lines["lower bound us"][-4:] == ["1.00", "1.25", "+0.25", "+25.0%"]
    assert lines["tasks"][-4:] == ["3", "5", "+2", "+66.7%"]
