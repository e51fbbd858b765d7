"""The event-driven schedule of ``executors.simulate``: when and where each task runs.

Cores of each kind take the highest-ranked ready task (the first in ``order``) as soon as they are idle,
lowest core number first; each dispatch is decided on the AICPU scheduler that decided
``schedulers`` dispatches ago (the least busy: decisions are made in non-decreasing time), costs
``schedule_cost`` there and ``latency`` more before the task starts; a task ends ``cost`` after its
start, or later if the die's HBM channel has not yet streamed its HBM bytes: one channel serves the
tasks' HBM bytes (``hbm`` seconds each at the die's bandwidth) in start order, from each task's
start, so no run moves HBM bytes faster than the die; its end releases its successors. Policy
``spmd`` holds ready tasks of later stages until every task of the current stage has ended.

Plain Python on lists. The tasks are renumbered into slots: by core kind, then place (rank order),
with one sentinel slot closing each kind's block, so the ready tasks of a kind are the set bytes of
its block of one ``bytearray`` and its best ready task is the first set byte (``bytearray.find``, a
memory scan that only moves back when a task ready later outranks every ready one). Idle cores per
kind are :mod:`heapq` heaps; the ends of running dispatches a sorted list (:mod:`bisect`; equal ends
leave in dispatch order) with their slots beside it (a slot runs once, so its core is kept by slot).
When no other core is idle that could take a ready task, the core an end frees takes its kind's best
ready task at once. ``spmd``'s barrier is one more wait per task of a later stage, lifted when its
stage opens. NumPy prepares the inputs and the returned columns.
"""
from __future__ import annotations

from bisect import bisect_right
from heapq import heappop, heappush

import numpy as np


def _slots(kind, order, kinds):
    """The slot numbering: the places of each kind in order, then a sentinel. Returns ``tid_of`` (the
    task of each slot, -1 for sentinels), ``base`` (each kind's first slot) and ``stop`` (its sentinel)."""
    n = len(order)
    by_place = kind[order]
    ranked = np.argsort(by_place, kind="stable")          # places by kind, then place
    sizes = np.bincount(by_place, minlength=kinds)
    stop = np.cumsum(sizes + 1) - 1
    base = stop - sizes
    tid_of = np.full(n + kinds, -1, np.int64)
    tid_of[np.arange(n) + by_place[ranked]] = order[ranked]   # kinds before k add k sentinels
    return tid_of, base, stop


def dispatch(kind, order, cost, hbm, succ_start, succ_ids, fanin, stage, stage_size, cores, schedulers,
             schedule_cost, latency, spmd):
    """Schedule ``n`` tasks: per task its core kind (index into ``cores``, the count of each kind),
    ``cost``, HBM channel seconds ``hbm``, successors (``succ_ids[succ_start[t]:succ_start[t + 1]]``),
    predecessor count ``fanin`` (not modified), and ``stage`` (``0..S-1``, in order; ``stage_size``
    tasks each); ``order``: the tasks by place (rank order); NumPy arrays. Returns the dispatches in
    order (so by non-decreasing start) as five arrays -- start, task, core, decided, end -- shorter
    than ``n`` when some task never became ready."""
    n, kinds, stages = len(order), len(cores), len(stage_size)
    if n == 0:                                          # nothing to run (a kernel of reshapes only)
        return np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    tid_of, base, stop = _slots(kind, order, kinds)
    real = tid_of >= 0
    slot_of = np.empty(n, np.int64)
    slot_of[tid_of[real]] = np.flatnonzero(real)
    t = np.where(real, tid_of, 0)
    counts = np.where(real, np.diff(succ_start)[t], 0)    # slot q's successors: succ[first[q]:first[q + 1]]
    first = np.zeros(len(t) + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    idx = np.repeat(succ_start[:-1][t] - first[:-1], counts) + np.arange(int(first[-1]), dtype=np.int64)
    succ, first = slot_of[succ_ids[idx]].tolist(), first.tolist()
    fanin_s = np.where(real, fanin[t], 1)
    members = []                                        # spmd: the slots of each stage
    if spmd:                                            # a later stage's task also waits for its stage to open
        fanin_s += real & (stage[t] > 0)
        by_stage = np.flatnonzero(real)[np.argsort(stage[tid_of[real]], kind="stable")]
        members = [m.tolist() for m in np.split(by_stage, np.cumsum(stage_size)[:-1])]
    ready = np.zeros(len(t), np.uint8)
    ready[stop] = 1
    ready[real & (fanin_s == 0)] = 1
    ready = bytearray(ready.tobytes())
    nxt = [ready.find(1, b) for b in base.tolist()]      # each kind's best ready slot (its sentinel: none)
    stop = stop.tolist()
    idle = [list(range(count)) for count in cores.tolist()]
    nidle = int(cores.sum())
    kind = np.repeat(np.arange(kinds), np.diff(stop, prepend=-1)).tolist()
    cost, hbm = np.where(real, cost[t], 0.0).tolist(), np.where(real, hbm[t], 0.0).tolist()
    fanin, stage, stage_left = fanin_s.tolist(), np.where(real, stage[t], 0).tolist(), stage_size.tolist()
    task, end, on = [0] * n, [0.0] * n, [0] * len(kind)   # per dispatch: slot, end; per slot: its core
    decided = [0.0] * (n + schedulers)                 # dispatch d decided at decided[d + schedulers]
    events, ids = [], []                               # running dispatches' ends (ascending), their slots
    krange = range(kinds)
    now, seq, channel, current = 0.0, 0, 0.0, 0
    scan = True                                         # whether an idle core may have a ready task
    while True:
        if scan:                                        # idle cores take the best ready tasks, kinds in order
            for k in krange:
                if idle[k] and nxt[k] != stop[k]:
                    c = heappop(idle[k])
                    nidle -= 1
                    break
            else:
                scan = False
        if not scan:                                    # the next end (of equal ends, the first dispatched)
            if not events:
                break
            now = events.pop(0)
            p = ids.pop(0)
            waits = succ[first[p]:first[p + 1]]          # the slots whose waits it ends (a new list)
            if spmd:
                stage_left[stage[p]] -= 1
                while current < stages - 1 and stage_left[current] == 0:
                    current += 1                        # the next stage opens
                    waits += members[current]
            for s in waits:
                left = fanin[s] - 1
                fanin[s] = left
                if not left:
                    ready[s] = 1
                    if s < nxt[kind[s]]:
                        nxt[kind[s]] = s
            k = kind[p]
            c = on[p]
            if nidle:                                   # other idle cores: the scan decides, unless none can start
                scan = bool(idle[k]) or nxt[k] == stop[k]
                if not scan:
                    for j in krange:
                        if idle[j] and nxt[j] != stop[j]:
                            scan = True
                            break
            else:                                       # the core it frees is the only idle one
                scan = nxt[k] == stop[k]
            if scan:
                heappush(idle[k], c)
                nidle += 1
                continue
        q = nxt[k]                                      # dispatch slot q on core c of kind k
        ready[q] = 0
        nxt[k] = ready.find(1, q + 1)
        free = decided[seq]
        at = (now if now > free else free) + schedule_cost
        finish = at + latency + cost[q]
        if hbm[q] > 0.0:
            begin = at + latency
            channel = (begin if begin > channel else channel) + hbm[q]
            if channel > finish:
                finish = channel
        decided[seq + schedulers] = at
        end[seq] = finish
        task[seq] = q
        on[q] = c
        i = bisect_right(events, finish)
        events.insert(i, finish)
        ids.insert(i, q)
        seq += 1
    decided, task = np.array(decided[schedulers:schedulers + seq]), np.array(task[:seq], np.int64)
    return decided + latency, tid_of[task], np.array(on, np.int64)[task], decided, np.array(end[:seq])
