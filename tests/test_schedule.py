"""The event loop (ptojax/mpmd/schedule.py) gives the schedule that a direct transcription of its rules
gives (written here on the Task objects, with heapq): the same rows, on random DAGs, both policies,
both targets, with and without ties between end times. Importing ptojax and running a kernel, eagerly
or under jax.jit, never imports Numba."""
import heapq
import subprocess
import sys

import numpy as np
import pytest

from ptojax.ascend.targets import target
from ptojax.execute import machine
from ptojax.mpmd import PtoTaskError, simulate
from ptojax.mpmd.synthetic import layered_dag


def _reference(graph, m, spmd):
    """(start, tid, core, decided, end) per task, sorted: the rules of schedule.py, with heapq."""
    tasks = graph.tasks
    kinds = [k for k, _ in m.cores]
    ready = {k: [] for k in kinds}
    idle = {k: list(range(count)) for k, count in m.cores}
    fanin = [len(t.preds) for t in tasks]
    rank_order = sorted(range(len(tasks)), key=lambda i: (-tasks[i].rank, i))
    place = {tid: p for p, tid in enumerate(rank_order)}
    stages = sorted({t.stage for t in tasks})
    left = {s: sum(t.stage == s for t in tasks) for s in stages}
    current, held, events, done, now, channel = 0, {}, [], [], 0.0, 0.0

    def release(tid):
        if spmd and tasks[tid].stage != stages[current]:
            held.setdefault(tasks[tid].stage, []).append(tid)
        else:
            heapq.heappush(ready[tasks[tid].core], place[tid])

    for tid in range(len(tasks)):
        if not fanin[tid]:
            release(tid)
    while True:
        for kind in kinds:
            while ready[kind] and idle[kind]:
                tid, core = rank_order[heapq.heappop(ready[kind])], heapq.heappop(idle[kind])
                free = done[-m.schedulers][3] if len(done) >= m.schedulers else 0.0
                decided = max(now, free) + m.schedule_cost
                start = decided + m.dispatch_latency
                end = start + tasks[tid].cost
                if tasks[tid].hbm:                     # the die's HBM channel, in start order
                    channel = max(start, channel) + tasks[tid].hbm / m.bandwidth
                    end = max(end, channel)
                done.append((start, tid, core, decided, end))
                heapq.heappush(events, (end, len(done), tid, core, kind))
        if not events:
            break
        now, _, tid, core, kind = heapq.heappop(events)
        heapq.heappush(idle[kind], core)
        for succ in tasks[tid].succs:
            fanin[succ.tid] -= 1
            if not fanin[succ.tid]:
                release(succ.tid)
        if spmd:
            left[tasks[tid].stage] -= 1
            while current < len(stages) - 1 and left[stages[current]] == 0:
                current += 1
                for s in held.pop(stages[current], []):
                    heapq.heappush(ready[tasks[s].core], place[s])
    return sorted(done)


@pytest.mark.parametrize("hbm", [0.0, 400.0])
@pytest.mark.parametrize("policy", ["mpmd", "spmd"])
@pytest.mark.parametrize("name", ["a3", "a2"])
def test_the_schedule_is_the_reference_schedule(policy, name, hbm):
    """``hbm``: tasks read up to 400x their GM bytes from HBM, so the HBM channel stretches many."""
    m = machine(target(name))
    for seed in range(12):
        plan = layered_dag(seed, stages=2 + seed % 6, width=(1, 4 + 9 * seed), fan_in=1 + seed % 4, hbm=hbm)
        fanin = plan.graph.fanin.copy()
        trace = simulate(plan, m, policy=policy, execute=False)
        assert list(trace.rows) == _reference(plan.graph, m, policy == "spmd"), seed
        assert np.array_equal(plan.graph.fanin, fanin), seed            # the graph is left as it was
        stretched = sum(end - start > plan.graph.tasks[tid].cost * (1 + 1e-9) for start, tid, _, _, end in trace.rows)
        assert (stretched > 0) == (hbm > 0) or len(plan.graph.tasks) < 8, seed


@pytest.mark.parametrize("policy", ["mpmd", "spmd"])
def test_ties_between_end_times_follow_the_dispatch_order(policy):
    """Every task costs the same, so dispatches decided together end together: the one dispatched
    first frees its core first (the schedule's (end, dispatch number) order). Odd seeds read from HBM."""
    m = machine(target("a3"))
    for seed in range(6):
        plan = layered_dag(seed, stages=3 + seed % 3, width=(20, 120), fan_in=1 + seed % 3, cost=(3e-6, 3e-6),
                           hbm=100.0 * (seed % 2))
        rows = list(simulate(plan, m, policy=policy, execute=False).rows)
        assert rows == _reference(plan.graph, m, policy == "spmd"), seed
        ends = [row[4] for row in rows]
        if seed % 2 == 0:                                           # no HBM channel to stretch them
            assert len(set(ends)) < len(ends), seed                 # ties did happen


def test_importing_ptojax_and_running_a_kernel_imports_no_numba():
    """The schedule is plain Python and a jitted kernel is XLA: eager calls (trace, lower, schedule,
    run, then replays of the kept plan) and jax.jit calls (the replay inlined) in a fresh process
    leave Numba and llvmlite unimported."""
    code = """if True:
        import sys
        import numpy as np, jax, jax.numpy as jnp
        import ptojax as pj

        def fn(a, w):
            with pj.tile(vec=(32, 32)):
                x = a * 2.0
            with pj.tile(cube=(32, 32, 32)):
                y = pj.ops.matmul(x, w)
            with pj.tile(vec=(32, 32)):
                return jnp.sum(y, axis=-1)

        a = np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
        w = np.linspace(1, -1, 64 * 32, dtype=np.float32).reshape(64, 32)
        f = pj.kernel(fn)
        want = np.sum((a * 2.0) @ w, axis=-1)
        for _ in range(20):                             # the first call, then replays of its plan
            assert np.allclose(np.asarray(f(a, w)), want, rtol=1e-4, atol=1e-4)
        jitted = jax.jit(f)
        for _ in range(20):
            assert np.allclose(np.asarray(jitted(a, w)), want, rtol=1e-4, atol=1e-4)
        assert "callback" not in jitted.lower(a, w).as_text()
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("numba", "llvmlite")))
    """
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]", run.stdout


def test_a_task_that_never_becomes_ready_is_reported():
    plan = layered_dag(3, stages=3, width=(4, 6))
    plan.graph.fanin[-1] += 1                          # waits for a predecessor that does not exist
    with pytest.raises(PtoTaskError, match="never became ready"):
        simulate(plan, machine(target("a3")), execute=False)
