"""The event-driven schedule of ``executors.simulate``: when and where each task runs.

Cores of each kind take the highest-ranked ready task (the lowest ``place``) as soon as they are idle,
lowest core number first; each dispatch is decided on the AICPU scheduler that decided
``schedulers`` dispatches ago (the least busy: decisions are made in non-decreasing time), costs
``schedule_cost`` there and ``latency`` more before the task starts; a task ends ``cost`` after its
start, or later if the die's HBM channel has not yet streamed its HBM bytes: one channel serves the
tasks' HBM bytes (``hbm`` seconds each at the die's bandwidth) in start order, from each task's
start, so no run moves HBM bytes faster than the die; its end releases its successors. Policy
``spmd`` holds ready tasks of later stages until every task of the current stage has ended.

Plain Python on lists, with :mod:`heapq` heaps: ready places per core kind, idle cores per kind, the
end times of running dispatches (a float heap; a dict gives each end's dispatch, and dispatches that
end at the same time leave in dispatch order). Every key is unique, so the order is the one any
correct heap gives. NumPy prepares the inputs: the graph renumbered by place (so the loop never maps
between task ids and places), the tasks that are ready from the start, per kind and stage.
"""
from __future__ import annotations

from heapq import heapify, heappop, heappush

import numpy as np


def dispatch(kind, place, order, cost, hbm, succ_start, succ_ids, fanin, stage, stage_size, cores, schedulers,
             schedule_cost, latency, spmd):
    """Schedule ``n`` tasks: per task its core kind (index into ``cores``, the count of each kind),
    ``place`` in rank order (``order`` inverts it), ``cost``, HBM channel seconds ``hbm``, successors
    (``succ_ids[succ_start[t]:succ_start[t + 1]]``), predecessor count ``fanin`` (not modified), and
    ``stage`` (``0..S-1``, in order; ``stage_size`` tasks each); NumPy arrays. Returns the dispatches in
    order (so by non-decreasing start) as five lists — start, task, core, decided, end — shorter than
    ``n`` when some task never became ready.

    The loop works on places: task ``p`` below is the task of place ``p`` (NumPy renumbers the inputs),
    so a ready queue is a heap of the tasks themselves."""
    n, kinds, stages = len(order), len(cores), len(stage_size)
    counts = np.diff(succ_start)[order]                # place p's successors: succ[first[p]:first[p + 1]]
    first = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    total = int(first[-1])
    idx = np.repeat(succ_start[:-1][order] - first[:-1], counts) + np.arange(total, dtype=np.int64)
    succ = place[succ_ids[idx]].tolist()
    first = first.tolist()
    kind_p = kind[order]
    stage_p = stage[order]
    fanin_p = fanin[order]
    roots = np.flatnonzero(fanin_p == 0)
    go = roots if not spmd else roots[stage_p[roots] == 0]
    ready = [go[kind_p[go] == k].tolist() for k in range(kinds)]      # ascending: heaps
    idle = [list(range(count)) for count in cores.tolist()]
    held = [[[] for _ in range(kinds)] for _ in range(stages)]
    if spmd:
        for p in roots[stage_p[roots] != 0].tolist():
            held[stage_p[p]][kind_p[p]].append(p)
    kind, cost, hbm = kind_p.tolist(), cost[order].tolist(), hbm[order].tolist()
    fanin, stage, stage_left = fanin_p.tolist(), stage_p.tolist(), stage_size.tolist()
    start, task, core, end = [0.0] * n, [0] * n, [0] * n, [0.0] * n
    decided = [0.0] * (n + schedulers)                 # dispatch k decided at decided[k + schedulers]
    events, waiting, ties = [], {}, {}         # ends (a heap); end -> dispatch, end -> later ones
    by_kind = list(zip(ready, idle))
    now, seq, channel, current = 0.0, 0, 0.0, 0
    while True:
        for queue, free_cores in by_kind:
            while queue and free_cores:
                p = heappop(queue)
                c = heappop(free_cores)
                free = decided[seq]
                at = (now if now > free else free) + schedule_cost
                begin = at + latency
                finish = begin + cost[p]
                seconds = hbm[p]
                if seconds > 0.0:
                    channel = (begin if begin > channel else channel) + seconds
                    if channel > finish:
                        finish = channel
                decided[seq + schedulers] = at
                start[seq] = begin
                end[seq] = finish
                task[seq] = p
                core[seq] = c
                if finish in waiting:                   # ties: later dispatches wait in order
                    ties.setdefault(finish, []).append(seq)
                elif ties and finish in ties:
                    ties[finish].append(seq)
                else:
                    waiting[finish] = seq
                heappush(events, finish)
                seq += 1
        if not events:
            break
        now = heappop(events)
        k = waiting.pop(now, -1)
        if k < 0:
            later = ties[now]
            k = later.pop(0)
            if not later:
                del ties[now]
        p = task[k]
        heappush(idle[kind[p]], core[k])
        for s in succ[first[p]:first[p + 1]]:
            left = fanin[s] - 1
            fanin[s] = left
            if not left:
                if spmd and stage[s] != current:
                    held[stage[s]][kind[s]].append(s)
                else:
                    heappush(ready[kind[s]], s)
        if spmd:
            stage_left[stage[p]] -= 1
            while current < stages - 1 and stage_left[current] == 0:
                current += 1
                for queue, places in zip(ready, held[current]):
                    queue += places
                    heapify(queue)
                held[current] = None
    task = order[np.array(task[:seq], np.int64)].tolist()
    return start[:seq], task, core[:seq], decided[schedulers:schedulers + seq], end[:seq]
