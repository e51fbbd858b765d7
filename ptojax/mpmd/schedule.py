"""The event-driven schedule of ``executors.simulate``: when and where each task runs.

Cores of each kind take the highest-ranked ready task (the lowest ``place``) as soon as they are idle,
lowest core number first; each dispatch is decided on the AICPU scheduler that decided
``schedulers`` dispatches ago (the least busy: decisions are made in non-decreasing time), costs
``schedule_cost`` there and ``latency`` more before the task starts; a task ends ``cost`` after its
start, or later if the die's HBM channel has not yet streamed its HBM bytes: one channel serves the
tasks' HBM bytes (``hbm`` seconds each at the die's bandwidth) in start order, from each task's
start, so no run moves HBM bytes faster than the die; its end releases its successors. Policy
``spmd`` holds ready tasks of later stages until every task of the current stage has ended.

Plain Python on lists, with :mod:`heapq` heaps: ready places per core kind, idle cores per kind, running
dispatches by (end, dispatch number). Every key is unique, so the order is the one any correct heap
gives. NumPy prepares the inputs (the tasks that are ready from the start, per kind and stage).
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
    ``n`` when some task never became ready."""
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
