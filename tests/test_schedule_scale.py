"""The schedule of a 100 000-task DAG, the size the scheduler benchmark runs, equals the one the event
loop gave when it was written on task ids (kept here: heaps of places, (end, dispatch number, task,
core) event tuples, rows sorted as tuples), both policies; the array-built graph of that DAG has the
links and ranks its generator implies."""
from heapq import heapify, heappop, heappush

import numpy as np
import pytest

from ptojax.ascend.targets import target
from ptojax.execute import machine
from ptojax.mpmd import simulate
from ptojax.mpmd.synthetic import layered_dag


def _heap_dispatch(kind, place, order, cost, hbm, succ_start, succ_ids, fanin, stage, stage_size, cores, schedulers,
             schedule_cost, latency, spmd):
    """The event loop as it was written on task ids, with (end, dispatch number, task, core) events."""
    kinds, stages = len(cores), len(stage_size)
    roots = np.flatnonzero(fanin == 0)
    first = roots if not spmd else roots[stage[roots] == 0]
    ready = [np.sort(place[first[kind[first] == k]]).tolist() for k in range(kinds)]   # sorted: a heap
    idle = [list(range(count)) for count in cores.tolist()]
    held = [[[] for _ in range(kinds)] for _ in range(stages)]   # spmd: places ready in later stages, by kind
    if spmd:
        for t in roots[stage[roots] != 0].tolist():
            held[stage[t]][kind[t]].append(place[t])
    kind, place, order, cost, hbm = kind.tolist(), place.tolist(), order.tolist(), cost.tolist(), hbm.tolist()
    succ_start, succ_ids, fanin = succ_start.tolist(), succ_ids.tolist(), fanin.tolist()
    stage, stage_left = stage.tolist(), stage_size.tolist()
    start, task, core, decided, end = [], [], [], [], []
    events = []                                         # (end, dispatch number, task, core)
    by_kind = list(zip(ready, idle))
    now, seq, channel, current = 0.0, 0, 0.0, 0         # channel: when the HBM channel is next free
    while True:
        for queue, free_cores in by_kind:               # idle cores take the highest-ranked ready tasks
            while queue and free_cores:
                t = order[heappop(queue)]
                c = heappop(free_cores)
                free = decided[seq - schedulers] if seq >= schedulers else 0.0
                at = (now if now > free else free) + schedule_cost
                begin = at + latency
                finish = begin + cost[t]
                seconds = hbm[t]
                if seconds > 0.0:
                    channel = (begin if begin > channel else channel) + seconds
                    if channel > finish:
                        finish = channel
                decided.append(at)
                start.append(begin)
                end.append(finish)
                task.append(t)
                core.append(c)
                heappush(events, (finish, seq, t, c))
                seq += 1
        if not events:
            break
        now, _, t, c = heappop(events)
        heappush(idle[kind[t]], c)
        for s in succ_ids[succ_start[t]:succ_start[t + 1]]:
            left = fanin[s] - 1
            fanin[s] = left
            if not left:
                if spmd and stage[s] != current:
                    held[stage[s]][kind[s]].append(place[s])
                else:
                    heappush(ready[kind[s]], place[s])
        if spmd:
            stage_left[stage[t]] -= 1
            while current < stages - 1 and stage_left[current] == 0:
                current += 1
                for queue, places in zip(ready, held[current]):
                    queue += places
                    heapify(queue)
                held[current] = None
    return start, task, core, decided, end


@pytest.fixture(scope="module")
def big():
    """The benchmark's DAG: 50 stages of 2000 tasks, each reading up to two earlier tasks' regions."""
    return layered_dag(7, stages=50, width=(2000, 2000), fan_in=2)


def test_the_graph_of_a_large_dag_has_the_links_its_generator_implies(big):
    """Each task reads whole regions of earlier tasks' own buffers: its predecessors are exactly those
    tasks; ranks by the recurrence, in reverse program order."""
    tasks, graph = big.graph.tasks, big.graph
    preds = [sorted({r.buffer for r in t.reads}) for t in tasks]
    assert [[p.tid for p in t.preds] for t in tasks] == preds
    succs = [[] for _ in tasks]
    for t, ps in zip(tasks, preds):
        for p in ps:
            succs[p].append(t.tid)
    assert [[s.tid for s in t.succs] for t in tasks] == succs
    assert graph.succ_ids.tolist() == [s for ss in succs for s in ss]
    assert graph.fanin.tolist() == [len(p) for p in preds]
    rank = [0.0] * len(tasks)
    for t in reversed(tasks):
        rank[t.tid] = t.cost + (max(rank[s] for s in succs[t.tid]) if succs[t.tid] else 0.0)
    assert [t.rank for t in tasks] == rank
    assert graph.by_rank.tolist() == sorted(range(len(tasks)), key=lambda i: (-rank[i], i))
    assert len(tasks) == 100_000 and len(graph.succ_ids) > 90_000


@pytest.mark.parametrize("policy", ["mpmd", "spmd"])
def test_a_large_schedule_equals_the_task_id_event_loop(big, policy):
    graph, m = big.graph, machine(target("a3"))
    kinds = [k for k, _ in m.cores]
    kind = np.array([kinds.index(k) for k in graph.core_kinds.tolist()], np.int64)[graph.core_codes]
    cores = np.array([count for _, count in m.cores], np.int64)
    place = np.empty(len(graph), np.int64)              # each task's position in rank order
    place[graph.by_rank] = np.arange(len(graph))
    rows = sorted(zip(*_heap_dispatch(kind, place, graph.by_rank, graph.costs, graph.hbm / m.bandwidth,
                                      graph.succ_start, graph.succ_ids, graph.fanin, graph.stage_codes,
                                      graph.stage_sizes, cores, m.schedulers, m.schedule_cost, m.dispatch_latency,
                                      policy == "spmd")))
    trace = simulate(big, m, policy=policy, execute=False)
    assert len(rows) == 100_000
    assert list(trace.rows) == rows
