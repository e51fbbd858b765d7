"""What a profile reports about its run agrees with the run: the critical path is the chain the
bound's critical_path term measures, bubbles are gaps on the swimlane's lanes (host threads on a
threads run), the per-core load judges each block call, and Perfetto slices carry cost and bytes."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax import report
from ptojax.mpmd import Machine, simulate
from ptojax.mpmd.synthetic import layered_dag
from ptojax.report.load import load


def _longest_chain(tasks, overhead):
    """The longest dependency chain, each task counting cost + overhead, by dynamic programming over the
    tasks' preds (Task objects, program order is a dependency order)."""
    best = {}
    for t in tasks:
        best[t.tid] = overhead + t.cost + max([best[p.tid] for p in t.preds], default=0.0)
    return max(best.values(), default=0.0)


def _check_path(profile):
    tasks, m = profile.trace.graph.tasks, profile.trace.machine
    overhead = m.schedule_cost + m.dispatch_latency
    path = [tasks[t] for t in profile.critical_path]
    for a, b in zip(path, path[1:]):                     # a chain: each waits on the one before
        assert a in b.preds
    assert not path or not path[0].preds                 # from a task that waits on none
    length = sum(t.cost + overhead for t in path)
    assert length == pytest.approx(_longest_chain(tasks, overhead), rel=1e-12)
    assert length == pytest.approx(profile.bound.critical_path, rel=1e-12)
    return path


def _long_beside_chain(x, y):
    with pj.tile(vec=(16, 1024)), jax.named_scope("Long"):
        a = jnp.sum(jnp.exp(x), axis=-1)                 # one long task
    z = y
    for i in range(8):                                   # a chain of 8 short dependent tasks
        with pj.tile(vec=(8, 64)), jax.named_scope(f"C{i}"):
            z = z * 1.5 + 1.0
    return a, z


def test_report_critical_path_is_the_chain_of_the_bound_term():
    """A long task beside a chain of 8 short ones: the chain with dispatch overheads is longer, sets the
    bound and the makespan, yet the path shown was the long task alone (ranked by cost only)."""
    x, y = np.ones((16, 8192), np.float32), np.ones((8, 64), np.float32)
    compiled = pj.kernel(_long_beside_chain).lower(x, y).compile()
    profile = compiled.profile()
    path = _check_path(profile)
    labels = [t.label for t in path]
    data = report.build(profile, compiled)
    assert data["critical_path"]["runs"] == [[lab, 1] for lab in labels]
    assert data["summary"]["critical_path"] == [[lab, 1] for lab in labels]
    assert data["critical_path"]["length_us"] == pytest.approx(profile.bound.critical_path * 1e6)
    assert {r["tid"] for r in data["records"] if r["critical"]} == set(profile.critical_path)


@pytest.mark.parametrize("seed", range(8))
def test_report_critical_path_of_random_graphs_is_the_longest_chain(seed):
    rng = np.random.default_rng(seed)
    plan = layered_dag(seed, stages=int(rng.integers(2, 7)), width=(1, int(rng.integers(2, 40))), fan_in=3,
                       cost=(1e-8, float(rng.choice([1e-7, 20e-6]))))
    machine = Machine((("AIC", 24), ("AIV", 48)), 6, 2e-6, 1e-6, 1.42e12)
    _check_path(simulate(plan, machine, execute=False).profile())


def _mm_act_mm(x, w):
    with pj.tile(cube=(32, 32, 32)), jax.named_scope("Mm"):
        y = pj.ops.matmul(x, w)
    with pj.tile(vec=(32, 32)), jax.named_scope("Act"):
        z = jax.nn.relu(y).astype(np.float16)
    with pj.tile(cube=(32, 32, 32)), jax.named_scope("Mm2"):
        return pj.ops.matmul(z, w)


def _gaps(records, lane):
    """Every idle gap between consecutive tasks of each lane: (gap µs, lane kind, core, after task)."""
    lanes = {}
    for r in records:
        lanes.setdefault(lane(r), []).append(r)
    out = []
    for (kind, core), recs in lanes.items():
        recs.sort(key=lambda r: r.start)
        out += [((b.start - a.end) * 1e6, kind, core, a.tid) for a, b in zip(recs, recs[1:]) if b.start > a.end]
    return sorted(out, reverse=True)


def test_report_bubbles_are_gaps_of_the_swimlane_lanes(tmp_path):
    """On a threads run a host thread runs cube and vector tasks; bubbles were taken per (core kind,
    thread), so a thread busy with a vector task showed a cube 'gap' over it."""
    x, w = np.ones((64, 64), np.float16), np.ones((64, 64), np.float16)
    compiled = pj.kernel(_mm_act_mm).lower(x, w).compile()
    _, trace = compiled.run(x, w, executor="threads")
    profile = trace.profile()
    records = trace.records
    want = _gaps(list(records), lambda r: ("host", r.core))
    assert profile.bubbles(len(records)) == want
    for gap, kind, core, after in profile.bubbles(len(records)):
        lo = next(r.end for r in records if r.tid == after)
        assert kind == "host" and not [r for r in records if r.core == core and r.start < lo + gap * 1e-6 - 1e-12
                                        and r.end > lo + 1e-12]
    page = report.write(tmp_path / "host.html", profile, compiled).read_text()
    bubbles = page[page.index("<section id='bubbles'>"):]
    bubbles = bubbles[:bubbles.index("</section>")]
    assert "AIC " not in bubbles and "AIV " not in bubbles
    assert all(f"host {core}" in bubbles for _, _, core, _ in profile.bubbles(10))
    # a simulated run: the lanes are the cores of each kind, as before
    sim = compiled.profile(x, w)
    assert sim.bubbles(len(sim.trace.records)) == _gaps(list(sim.trace.records), lambda r: (r.kind, r.core))


def _two_stages(x):
    with pj.tile(vec=(16, 64)), jax.named_scope("A"):
        y = x * 2.0 + 1.0                                # 16 tiles
    with pj.tile(vec=(16, 64)), jax.named_scope("B"):
        return jnp.sum(y.reshape(128, 128), axis=-1)     # 8 tiles that need all of A


def _tail(x):
    with pj.tile(vec=(32, 1024)), jax.named_scope("Big"):
        return jnp.exp(x) * 2.0                          # 33 rows: a full tile and a 1-row tail tile


def _flags_per_call(trace, kind, high=1.25, low=0.75):
    """(over, under, whole-run over, whole-run under) of ``kind``'s cores, straight from the records: per
    block call against that call's busy cores' mean, and over the whole run."""
    calls, whole = {}, {}
    for r in trace.records:
        if r.kind == kind:
            on = calls.setdefault(r.stage, {})
            on[r.core] = on.get(r.core, 0.0) + (r.end - r.start) * 1e6
            whole[r.core] = whole.get(r.core, 0.0) + (r.end - r.start) * 1e6
    over, under = set(), set()
    for on in list(calls.values()):
        mean = sum(on.values()) / len(on)
        over |= {c for c, b in on.items() if b > high * mean}
        under |= {c for c, b in on.items() if b < low * mean}
    mean = sum(whole.values()) / len(whole)
    return (sorted(over), sorted(under), sorted(c for c, b in whole.items() if b > high * mean),
            sorted(c for c, b in whole.items() if b < low * mean))


def test_report_load_judges_each_block_call(tmp_path):
    """Two sequential block calls of 16 then 8 equal tiles, each spread one per core, were flagged
    (cores 0-7 ran both calls); a real imbalance -- a tail tile in one call -- still is."""
    prof = pj.kernel(_two_stages).lower(np.ones((256, 64), np.float32)).compile().profile()
    aiv = report.summary(prof)["load"]["kinds"]["AIV"]
    over, under, whole_over, whole_under = _flags_per_call(prof.trace, "AIV")
    assert whole_over and whole_under                    # what the whole-run sums would flag
    assert aiv["over"] == over == [] and aiv["under"] == under == []
    # the summary of the saved Chrome trace judges the same
    prof.save(tmp_path / "t.json")
    assert report.load_summary(tmp_path / "t.json")["load"]["kinds"]["AIV"]["over"] == []
    rows = {r[0]: r[1:3] for r in report.diff(prof, tmp_path / "t.json").rows}
    assert rows["AIV flagged cores"] == (0, 0)

    tail = pj.kernel(_tail).lower(np.ones((33, 1024), np.float32)).compile().profile()
    aiv = report.summary(tail)["load"]["kinds"]["AIV"]
    over, under, _, _ = _flags_per_call(tail.trace, "AIV")
    assert over and under and (aiv["over"], aiv["under"]) == (over, under)


def test_report_load_flags_more_tiles_of_one_call_on_a_core():
    """33 equal tiles of one call over 16 cores: the core that ran 3 is over its call's mean (33 / 16);
    16 then 8 equal tiles in two calls on the first cores: none is."""
    spans = [("AIV", i % 16, "E", 1.0, 0) for i in range(33)]
    k = load(spans, {"AIV": 16})["kinds"]["AIV"]
    per = [sum(1 for i in range(33) if i % 16 == c) for c in range(16)]
    assert k["over"] == [c for c in range(16) if per[c] > 1.25 * 33 / 16] == [0]
    assert k["under"] == [] and k["max_over_mean"] == pytest.approx(max(per) / (33 / 16))
    staged = [("AIV", c, "A", 1.0, 0) for c in range(16)] + [("AIV", c, "B", 1.0, 1) for c in range(8)]
    k = load(staged, {"AIV": 48})["kinds"]["AIV"]
    assert k["over"] == k["under"] == [] and k["max_over_mean"] == 1.0
    # without the block call (an older trace) the run is one call, as before
    k = load([s[:4] for s in staged], {"AIV": 48})["kinds"]["AIV"]
    assert k["over"] == list(range(8)) and k["under"] == list(range(8, 16))


def test_report_chrome_trace_slices_carry_cost_and_bytes():
    """quickstart §5: each slice's details hold its predicted cost and bytes; they held neither."""
    def fn(x):
        with pj.tile(vec=(32, 64)), jax.named_scope("Scale"):
            return x * 2.0

    prof = pj.kernel(fn).lower(np.ones((64, 64), np.float32)).compile().profile()
    tasks = prof.trace.graph.tasks
    events = [e for e in prof.chrome_trace()["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(tasks) > 0
    for e in events:
        t = tasks[e["args"]["task"]]
        assert e["args"]["cost_us"] == pytest.approx(t.cost * 1e6, rel=1e-12)
        assert e["args"]["bytes"] == t.bytes > 0 and e["args"]["hbm_bytes"] == t.hbm
        assert e["dur"] >= e["args"]["cost_us"] * (1 - 1e-9)   # the slice may include a wait, never less


def test_report_diff_counts_each_flagged_core_once():
    """A core over its call's mean in one block call and under it in another is one flagged core: the
    diff's count never passes the cores that ran tasks (the indexer's 64 Reduce tiles on 48 cores read
    80 flagged AIV cores)."""
    def fn(x):
        with pj.tile(vec=(8, 64)), jax.named_scope("A"):
            y = jnp.exp(x) * 2.0                         # 72 tiles on 48 cores: 24 run two
        with pj.tile(vec=(8, 64)), jax.named_scope("B"):
            return jnp.tanh(y) + 1.0                     # the same, the other 24 cores running two
    prof = pj.kernel(fn).lower(np.ones((576, 64), np.float32)).compile().profile()
    aiv = report.summary(prof)["load"]["kinds"]["AIV"]
    flagged = {*aiv["over"], *aiv["under"]}
    assert set(aiv["over"]) & set(aiv["under"])         # a core over in one call and under in the other
    rows = {r[0]: r[1:3] for r in report.diff(prof, prof).rows}
    assert rows["AIV flagged cores"] == (len(flagged), len(flagged)) and len(flagged) <= aiv["busy_cores"]
