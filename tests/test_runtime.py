"""The MPMD runtime: both executors against XLA, determinism, the seed's trace, random DAGs, faults."""
import json
import time

import jax
import numpy as np
import pytest

import ptojax as pj
from helpers import F16, rand
from ptojax.execute import execute, machine
from ptojax.ascend.targets import A3
from ptojax.lowering.pipeline import TOLERANCE
from ptojax.mpmd import (Machine, Plan, PtoTaskError, PtoTaskGraphError, Region, Task, TaskGraph, run_threads,
                         simulate)
from ptojax.mpmd.synthetic import layered_dag
from kernels import KERNELS, scatter_rows, seed_kernel


def _check(out, kernel, args):
    want = jax.tree.leaves(jax.jit(kernel)(*args))
    got = jax.tree.leaves(out)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        rtol, atol = TOLERANCE.get(np.dtype(w.dtype), (0, 0))  # integers exact; floats per dtype (x2: two levels)
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=2 * rtol, atol=2 * atol)


@pytest.mark.parametrize("name,kernel,args", KERNELS, ids=[k[0] for k in KERNELS])
def test_both_executors_match_xla(name, kernel, args):
    low = pj.lower(kernel, *args)
    out, trace = execute(low, *args, executor="simulated")
    _check(out, kernel, args)
    again, trace2 = execute(low, *args, executor="simulated")
    assert json.dumps(trace.profile().chrome_trace()) == json.dumps(trace2.profile().chrome_trace())
    results = []
    for workers in (1, 2, 8):
        out, _ = execute(low, *args, executor="threads", workers=workers)
        _check(out, kernel, args)
        results.append([np.asarray(x) for x in jax.tree.leaves(out)])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_seed_trace_has_the_seed_tasks_and_dependency_arrows(tmp_path):
    args = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    out, trace = execute(pj.lower(seed_kernel, *args), *args)
    path = tmp_path / "trace.json"
    profile = trace.profile()
    profile.save(path)
    events = json.loads(path.read_text())["traceEvents"]
    lanes = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert lanes[0] == "AIC 0" and lanes[24] == "AIV 0"              # cube lanes first
    tasks = [e for e in events if e["ph"] == "X"]
    by_program = {}
    for e in tasks:
        by_program.setdefault(e["args"]["program"], []).append(e)
    assert {k: len(v) for k, v in by_program.items()} == {"mul+add": 4, "matmul": 1, "sum": 2}
    assert all(lanes[e["tid"]].startswith("AIV") for e in by_program["mul+add"] + by_program["sum"])
    assert lanes[by_program["matmul"][0]["tid"]].startswith("AIC") and by_program["matmul"][0]["name"] == "Linear"
    # Flow arrows: every mul+add tile feeds the untiled matmul; the matmul feeds both row-sum tasks.
    ids = {e["args"]["task"]: e for e in tasks}
    arrows = {(s["tid"], s["ts"], f["tid"], f["ts"]) for s in events if s["ph"] == "s"
              for f in events if f["ph"] == "f" and f["id"] == s["id"]}
    mm = by_program["matmul"][0]
    assert sorted(mm["args"]["waits_for"]) == sorted(e["args"]["task"] for e in by_program["mul+add"])
    for e in by_program["sum"]:
        assert e["args"]["waits_for"] == [mm["args"]["task"]]
    for e in tasks:
        for p in e["args"]["waits_for"]:
            src = ids[p]
            assert any(a == src["tid"] and c == e["tid"] and abs(b - src["ts"] - src["dur"]) < 1e-6 and abs(d - e["ts"]) < 1e-6
                       for a, b, c, d in arrows)
            assert e["ts"] >= src["ts"] + src["dur"]
    assert profile.makespan_us >= profile.lower_bound_us > 0


# ------------------------------------------------------------------------------------- random DAGs
MACHINE = Machine((("AIC", 24), ("AIV", 48)), 6, 2e-6, 1e-6, 1.42e12, "a3")


def test_random_dags_mpmd_against_spmd_and_the_lower_bound():
    ratios = []
    for seed in range(50):
        plan = layered_dag(seed)
        mpmd = simulate(plan, MACHINE, policy="mpmd", execute=False).profile()
        spmd = simulate(plan, MACHINE, policy="spmd", execute=False).profile()
        assert mpmd.makespan_us >= mpmd.lower_bound_us
        assert spmd.makespan_us >= spmd.lower_bound_us
        ratios.append(mpmd.makespan_us / spmd.makespan_us)
        assert ratios[-1] <= 1.05, (seed, ratios[-1])
    assert np.mean(ratios) < 1.0


def _reference_schedule(plan, m, spmd):
    """The simulator's policy written plainly (scans, no heaps): rows (start, tid, core, dispatch, end)."""
    tasks = plan.graph.tasks
    fanin = [len(t.preds) for t in tasks]
    idle = {kind: set(range(n)) for kind, n in m.cores}
    schedulers = [0.0] * m.schedulers
    ready = {t.tid for t in tasks if not t.preds}
    running, rows, now, seq = [], [], 0.0, 0
    while True:
        stage = min((t.stage for t in tasks if fanin[t.tid] >= 0), default=None)   # the oldest unfinished block call
        for kind, _ in m.cores:
            while True:
                eligible = [t for t in ready if tasks[t].core == kind and (not spmd or tasks[t].stage == stage)]
                if not eligible or not idle[kind]:
                    break
                tid = min(eligible, key=lambda t: (-tasks[t].rank, t))
                core = min(idle[kind])
                ready.remove(tid)
                idle[kind].remove(core)
                k = schedulers.index(min(schedulers))
                decided = max(now, schedulers[k]) + m.schedule_cost
                schedulers[k] = decided
                start = decided + m.dispatch_latency
                seq += 1
                running.append((start + tasks[tid].cost, seq, tid, core))
                rows.append((start, tid, core, decided, start + tasks[tid].cost))
        if not running:
            return sorted(rows)
        now, _, tid, core = min(running)
        running.remove(min(running))
        idle[tasks[tid].core].add(core)
        fanin[tid] = -1                                                            # finished
        for s in tasks[tid].succs:
            fanin[s.tid] -= 1
            if fanin[s.tid] == 0:
                ready.add(s.tid)


@pytest.mark.parametrize("policy", ["mpmd", "spmd"])
def test_simulator_matches_a_plain_reference_scheduler(policy):
    m = Machine(cores=(("AIC", 3), ("AIV", 5)), schedulers=2, schedule_cost=1.5e-6, dispatch_latency=0.5e-6)
    for seed in range(6):
        plan = layered_dag(seed, width=(3, 25))
        trace = simulate(plan, m, policy=policy, execute=False)
        assert list(trace.rows) == _reference_schedule(plan, m, policy == "spmd")
        assert [(r.start, r.tid, r.core, r.dispatch, r.end) for r in trace.records] == list(trace.rows)


def test_graph_validation_rejects_cycles_and_missing_tasks():
    a = Task(0, "a", "AIV", "", 1e-6, None)
    b = Task(1, "b", "AIV", "", 1e-6, None)
    graph = TaskGraph([a, b])
    a.preds, b.preds, a.succs, b.succs = [b], [a], [b], [a]
    with pytest.raises(PtoTaskGraphError, match="cycle"):
        graph.validate()
    ghost = Task(7, "ghost", "AIC", "", 1e-6, None)
    a.preds, a.succs, b.preds, b.succs = [ghost], [], [], []
    with pytest.raises(PtoTaskGraphError, match=r"task 0 'a\(\)' on AIV waits on task 7 'ghost\(\)' on AIC, which is not "
                                                r"in the graph"):
        graph.validate()


def test_unknown_core_kind_is_rejected():
    plan = Plan(TaskGraph([Task(0, "x", "GPU", "", 1e-6, None)]), [], [], 1)
    with pytest.raises(pj.PtoArgumentError, match="needs a GPU core"):
        simulate(plan, MACHINE)


@pytest.mark.parametrize("executor", ["simulated", "threads"])
def test_failing_task_raises_a_named_error_quickly(executor):
    def boom(_):
        raise FloatingPointError("injected")

    tasks = [Task(i, "work", "AIV", "L", 1e-6, (lambda _: time.sleep(0.001)), (), (Region(i, (0,), (1,)),), (i,))
             for i in range(40)]
    tasks.append(Task(40, "bad", "AIC", "Faulty", 1e-6, boom, (Region(3, (0,), (1,)),), (Region(99, (0,), (1,)),), (0, 1)))
    tasks += [Task(41 + i, "after", "AIV", "", 1e-6, lambda _: None, (Region(99, (0,), (1,)),), ()) for i in range(5)]
    plan = Plan(TaskGraph(tasks), [], [], 1)
    start = time.perf_counter()
    with pytest.raises(PtoTaskError, match=r"task 40 'bad\(0,1\)' label 'Faulty' on AIC \(core .*\) failed: "
                                           r"FloatingPointError: injected"):
        if executor == "simulated":
            simulate(plan, MACHINE)
        else:
            run_threads(plan, MACHINE, workers=4)
    assert time.perf_counter() - start < 1.0


def test_threads_run_a_block_call_in_a_share_per_worker(monkeypatch):
    """A thread takes up to 1/workers of a block call's ready tasks and runs them as one batch (a walk of
    the text), not one walk per task: a long-row cumsum is 288 tasks of ~460 instructions each."""
    from ptojax.ascend import textbatch

    x = rand((64, 4096), np.float32)
    kernel = lambda a: jax.numpy.cumsum(a * 1.0, -1)
    low = pj.lower(kernel, x)
    walks = []
    real = textbatch.run
    monkeypatch.setattr(textbatch, "run", lambda module, name, args, blocks: walks.append(len(blocks)) or
                        real(module, name, args, blocks))
    want, trace = execute(low, x, executor="simulated")
    batches = len(walks)
    assert len(trace.records) > 20 * batches                # the kernel is many tasks per block call
    for workers in (1, 3):
        walks.clear()
        out, threaded = execute(low, x, executor="threads", workers=workers)
        np.testing.assert_array_equal(np.asarray(out), np.asarray(want))
        assert sorted(r.tid for r in threaded.records) == sorted(r.tid for r in trace.records)
        assert len(walks) <= batches * (workers + 1), (workers, len(walks), batches)
        lanes = {}
        for r in threaded.records:                      # a batch's time shared out: one task at a time per lane
            lanes.setdefault(r.core, []).append((r.start, r.end))
        for spans in lanes.values():
            spans.sort()
            assert all(b[0] >= a[1] - 1e-9 for a, b in zip(spans, spans[1:]))


def test_failing_kernel_task_returns_no_output():
    args = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    low = pj.lower(seed_kernel, *args)
    from ptojax.ascend.program import compile_kernel
    import dataclasses
    compiled = compile_kernel(low)
    key = ("sum", (2, 1))
    kernel = compiled.kernels[key]
    from ptojax.ascend import asm
    body = tuple(dataclasses.replace(s, shape=("%c32", "%c32")) if isinstance(s, asm.MakeView) and s.name == "%v0" else s
                 for s in kernel.body)
    broken = dataclasses.replace(compiled, kernels={**compiled.kernels, key: dataclasses.replace(kernel, body=body)})
    result = None
    with pytest.raises(PtoTaskError, match=r"task \d+ 'sum\(\d,0\)' on AIV .* pto engine: function 'sum' line \d+: "
                                           r"shape \[32, 32\] strides \[32, 1\] over a float32 pointer do not match"):
        result = execute(low, *args, compiled=broken, executor="threads")
    assert result is None


def test_dynamic_trip_count_makes_only_the_tasks_it_needs():
    def kernel(x, n):
        with pj.tile(vec=(8, 64)):
            return jax.lax.fori_loop(0, n, lambda i, c: c * 0.5 + x, x)

    x = rand((32, 64), np.float32)
    low = pj.lower(kernel, x, np.int32(0))                       # one lowering serves every trip count
    counts = []
    for n in (1, 3, 7):
        out, trace = execute(low, x, np.int32(n))
        _check(out, kernel, (x, np.int32(n)))
        counts.append(len(trace.records))
    assert counts[1] == 3 * counts[0] and counts[2] == 7 * counts[0]


def test_profile_summary_and_swimlane(tmp_path):
    args = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    _, trace = execute(pj.lower(seed_kernel, *args), *args)
    profile = trace.profile()
    text = profile.summary()
    assert "7 tasks" in text and "lower bound" in text and "Linear" in text
    assert set(profile.utilisation) == {"AIC", "AIV"} and 0 < profile.utilisation["AIC"] <= 1
    assert profile.critical_path and profile.label_us["Linear"] > 0
    path = tmp_path / "lanes.png"
    profile.swimlane(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_a_run_of_no_tasks_profiles_and_draws(tmp_path):
    """A loop whose runtime trip count is 0 runs no task: summary, trace and swimlane all work (the
    swimlane's legend of no labels failed in matplotlib)."""
    def loop(x, n):
        return jax.lax.fori_loop(0, n, lambda i, c: c * 0.5 + x, x)

    x = np.ones((40, 64), np.float32)
    profile = pj.kernel(loop).lower(x, np.int32(0)).compile().profile(x, np.int32(0))
    assert profile.tasks == 0 and profile.makespan_us == profile.lower_bound_us == 0
    assert "0 tasks" in profile.summary()
    profile.swimlane(tmp_path / "none.png")
    profile.save(tmp_path / "none.json")
    assert (tmp_path / "none.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_machine_of_a3():
    m = machine(A3)
    assert m.cores == (("AIC", 24), ("AIV", 48)) and m.schedulers == 6


def test_donated_cache_is_updated_in_place_without_a_copy_task():
    cache = rand((64, 128), np.float32)
    rows = rand((4, 128), np.float32, 1)
    slots = np.array([3, 60, -1, 7], np.int32)
    want = np.asarray(scatter_rows(cache, rows, slots))
    plain = pj.kernel(scatter_rows).lower(cache, rows, slots).compile()
    out, trace = plain.run(cache, rows, slots)
    np.testing.assert_array_equal(out, want)
    assert "copy" in {r.name for r in trace.records}
    kernel = pj.kernel(scatter_rows, donate_argnums=0)
    donated = kernel.lower(cache, rows, slots).compile()
    buffer = cache.copy()
    out, trace = donated.run(buffer, rows, slots)
    np.testing.assert_array_equal(out, want)
    assert "copy" not in {r.name for r in trace.records}
    np.testing.assert_array_equal(buffer, want)          # the donated array holds the result
    # Inside jax.jit the kernel gets XLA's read-only arrays: a donated one is copied, never written.
    frozen = cache.copy()
    frozen.flags.writeable = False
    out, trace = donated.run(frozen, rows, slots)
    np.testing.assert_array_equal(out, want)
    assert "copy" in {r.name for r in trace.records}
    np.testing.assert_array_equal(frozen, cache)
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(jax.numpy.asarray(cache), rows, slots)), want)


def test_auto_tiles_per_block_is_the_cost_models_fastest():
    """tiles_per_block="auto": the count whose simulated run is no slower than any fixed count's (here
    fewer tasks than cores: the AICPU schedulers' dispatches bind); the numbers do not change and the
    makespan drops well below one tile per task."""
    x = rand((1024, 2048), np.float32)

    def scale(x):
        with pj.tile(vec=(16, 64)):
            return x * 2.0 + 1.0

    default = pj.kernel(scale).compiled_for(x)
    auto = pj.kernel(scale, options={"tiles_per_block": "auto"}).compiled_for(x)
    out, trace = auto.run(x)
    np.testing.assert_array_equal(out, np.asarray(default(x)))
    assert len(trace.records) < len(default.run(x)[1].records) // 2
    fastest = auto.profile(x).makespan_us
    for n in (2, 21, 42, 86, 171, 342):           # 1024, 98, 49, 24, 12 and 6 tasks
        fixed = pj.kernel(scale, options={"tiles_per_block": n}).compiled_for(x)
        assert fastest <= fixed.profile(x, compute=False).makespan_us * (1 + 1e-9), n
    assert fastest < 0.5 * default.profile(x).makespan_us
    with pytest.raises(pj.PtoArgumentError, match="positive int or 'auto'"):
        pj.kernel(scale, options={"tiles_per_block": {"DEFAULT": "fast"}}).lower(x)


def test_phase_bound_adds_up_chained_phases_and_never_exceeds_a_schedule():
    """One wave of 24 vector tasks, then 8 cube tasks on 4 cube cores that each wait for all of them:
    the critical path (two tasks) and the work bounds (each phase alone) miss that the cube phase
    starts only after the vector phase; the phase bound adds them."""
    m = Machine(cores=(("AIC", 4), ("AIV", 24)), schedulers=6, schedule_cost=2e-6, dispatch_latency=1e-6)
    first = [Task(i, "a", "AIV", "A", 10e-6, None, (), (Region(i, (0,), (1,)),)) for i in range(24)]
    reads = tuple(Region(i, (0,), (1,)) for i in range(24))
    second = [Task(24 + i, "b", "AIC", "B", 10e-6, None, reads, (Region(24 + i, (0,), (1,)),)) for i in range(8)]
    plan = Plan(TaskGraph(first + second), [], [], 2)
    profile = simulate(plan, m, execute=False).profile()
    b = profile.bound
    overhead = m.schedule_cost + m.dispatch_latency
    assert b.critical_path == pytest.approx(2 * (overhead + 10e-6))
    # release, then two waves of cube tasks; a core gets its next task ``overhead`` after it is idle
    assert b.phases == pytest.approx(overhead + 10e-6 + overhead + 10e-6 + overhead + 10e-6)
    assert b.phases > max(b.critical_path, b.cube, b.vector, b.scheduler, b.bandwidth)
    assert profile.makespan_us >= profile.lower_bound_us == pytest.approx(b.phases * 1e6)
    # Waves: five equal cube tasks on four cores take two task times (and a dispatch), not 5/4 of one.
    plan = Plan(TaskGraph([Task(i, "a", "AIC", "A", 10e-6, None, (), (Region(i, (0,), (1,)),)) for i in range(5)]),
                [], [], 1)
    profile = simulate(plan, m, execute=False).profile()
    assert profile.bound.phases == pytest.approx(2 * (overhead + 10e-6)) == profile.makespan_us * 1e-6
    # Tails: eight cube tasks feed 30 us vector tasks, eight others feed nothing. All sixteen share the
    # cube cores, but the run still needs the eight fed ones' two waves plus their tail.
    fed = [Task(i, "qk", "AIC", "QK", 10e-6, None, (), (Region(i, (0,), (1,)),)) for i in range(8)]
    other = [Task(8 + i, "pv", "AIC", "PV", 10e-6, None, (), (Region(8 + i, (0,), (1,)),)) for i in range(8)]
    tail = [Task(16 + i, "v", "AIV", "V", 30e-6, None, (Region(i, (0,), (1,)),), (Region(16 + i, (0,), (1,)),))
            for i in range(8)]
    profile = simulate(Plan(TaskGraph(fed + other + tail), [], [], 2), m, execute=False).profile()
    b = profile.bound
    assert b.phases == pytest.approx(2 * (overhead + 10e-6) + overhead + 30e-6)
    assert b.phases > max(b.critical_path, overhead + 16 * 10e-6 / 4)       # the path; all cube work at once
    assert profile.makespan_us >= profile.lower_bound_us
    for seed in range(30):                                   # never above a real schedule
        plan = layered_dag(seed)
        for policy in ("mpmd", "spmd"):
            p = simulate(plan, MACHINE, policy=policy, execute=False).profile()
            assert p.makespan_us >= p.bound.phases * 1e6 * (1 - 1e-9), (seed, policy)
    for name, kernel, args in KERNELS:
        p = pj.kernel(kernel).compiled_for(*args).profile(*args, compute=False)
        assert p.makespan_us >= p.lower_bound_us, name
