"""The event-driven schedule of ``executors.simulate``, compiled with Numba: when and where each task runs.

Cores of each kind take the highest-ranked ready task (the lowest ``place``) as soon as they are idle,
lowest core number first; each dispatch is decided on the AICPU scheduler that decided
``schedulers`` dispatches ago (the least busy: decisions are made in non-decreasing time), costs
``schedule_cost`` there and ``latency`` more before the task starts; a task ends ``cost`` after its
start, or later if the die's HBM channel has not yet streamed its HBM bytes: one channel serves the
tasks' HBM bytes (``hbm`` seconds each at the die's bandwidth) in start order, from each task's
start, so no run moves HBM bytes faster than the die; its end releases its successors. Policy
``spmd`` holds ready tasks of later stages until every task of the current stage has ended. Heaps
are arrays here (ready places per core kind, idle cores per kind, running dispatches by (end,
dispatch number)); every key is unique, so the order is the one any correct heap gives.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _push(heap, at, size, value):
    """Push ``value`` on the min-heap ``heap[at:at + size]``; returns the new size."""
    i = size
    heap[at + i] = value
    while i > 0:
        parent = (i - 1) >> 1
        if heap[at + parent] <= heap[at + i]:
            break
        heap[at + parent], heap[at + i] = heap[at + i], heap[at + parent]
        i = parent
    return size + 1


@numba.njit(cache=True, inline="always")
def _pop(heap, at, size):
    """The smallest value of the min-heap ``heap[at:at + size]``, removed (its size is now ``size - 1``)."""
    top = heap[at]
    size -= 1
    heap[at] = heap[at + size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and heap[at + child + 1] < heap[at + child]:
            child += 1
        if heap[at + i] <= heap[at + child]:
            break
        heap[at + i], heap[at + child] = heap[at + child], heap[at + i]
        i = child
    return top


@numba.njit(cache=True)
def _earlier(end, a, b):
    return end[a] < end[b] or (end[a] == end[b] and a < b)


@numba.njit(cache=True)
def _push_event(events, size, end, d):
    i = size
    events[i] = d
    while i > 0:
        parent = (i - 1) >> 1
        if not _earlier(end, events[i], events[parent]):
            break
        events[parent], events[i] = events[i], events[parent]
        i = parent
    return size + 1


@numba.njit(cache=True)
def _pop_event(events, size, end):
    top = events[0]
    size -= 1
    events[0] = events[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _earlier(end, events[child + 1], events[child]):
            child += 1
        if not _earlier(end, events[child], events[i]):
            break
        events[i], events[child] = events[child], events[i]
        i = child
    return top


@numba.njit(cache=True, inline="always")
def _release(t, hold, held, held_start, held_size, stage, ready, ready_size, kind, place):
    """Task ``t`` is ready: onto its core kind's heap, or (``hold``: spmd, a later stage) kept for its stage."""
    if hold:
        held[held_start[stage[t]] + held_size[stage[t]]] = t
        held_size[stage[t]] += 1
    else:
        k = kind[t]
        ready_size[k] = _push(ready, k * kind.shape[0], ready_size[k], place[t])


@numba.njit(cache=True)
def dispatch(kind, place, order, cost, hbm, succ_start, succ_ids, fanin, stage, stage_size, cores, schedulers,
             schedule_cost, latency, spmd):
    """Schedule ``n`` tasks: per task its core kind (index into ``cores``, the count of each kind),
    ``place`` in rank order (``order`` inverts it), ``cost``, HBM channel seconds ``hbm``, successors
    (``succ_ids[succ_start[t]:succ_start[t + 1]]``), predecessor count ``fanin`` (consumed), and ``stage`` (``0..S-1``, in order;
    ``stage_size`` tasks each). Returns the dispatches in order — start, task, core, decided, end —
    and how many there were (fewer than ``n``: some task never became ready)."""
    n, kinds, stages = kind.shape[0], cores.shape[0], stage_size.shape[0]
    ready = np.empty(kinds * n, np.int64)                # kind k's heap at k * n
    ready_size = np.zeros(kinds, np.int64)
    width = max(1, cores.max())
    idle = np.empty(kinds * width, np.int64)             # kind k's heap at k * width
    idle_size = np.zeros(kinds, np.int64)
    for k in range(kinds):
        for c in range(cores[k]):
            idle_size[k] = _push(idle, k * width, idle_size[k], c)
    held = np.empty(n, np.int64)                        # spmd: ready tasks by stage, stage_size slots each
    held_start = np.zeros(stages + 1, np.int64)
    for s in range(stages):
        held_start[s + 1] = held_start[s] + stage_size[s]
    held_size = np.zeros(stages, np.int64)
    stage_left = stage_size.copy()
    current = 0
    start, task, core, decided, end = (np.empty(n, np.float64), np.empty(n, np.int64), np.empty(n, np.int64),
                                       np.empty(n, np.float64), np.empty(n, np.float64))
    events = np.empty(n, np.int64)
    n_events = 0
    for t in range(n):
        if fanin[t] == 0:
            _release(t, spmd and stage[t] != current, held, held_start, held_size, stage, ready, ready_size, kind, place)
    now, seq, channel = 0.0, 0, 0.0                    # channel: when the HBM channel is next free
    while True:
        for k in range(kinds):                          # idle cores take the highest-ranked ready tasks
            while ready_size[k] > 0 and idle_size[k] > 0:
                t = order[_pop(ready, k * n, ready_size[k])]
                ready_size[k] -= 1
                c = _pop(idle, k * width, idle_size[k])
                idle_size[k] -= 1
                free = decided[seq - schedulers] if seq >= schedulers else 0.0
                decided[seq] = (now if now > free else free) + schedule_cost
                start[seq] = decided[seq] + latency
                end[seq] = start[seq] + cost[t]
                if hbm[t] > 0.0:
                    channel = (start[seq] if start[seq] > channel else channel) + hbm[t]
                    if channel > end[seq]:
                        end[seq] = channel
                task[seq], core[seq] = t, c
                n_events = _push_event(events, n_events, end, seq)
                seq += 1
        if n_events == 0:
            break
        d = _pop_event(events, n_events, end)
        n_events -= 1
        now, t = end[d], task[d]
        idle_size[kind[t]] = _push(idle, kind[t] * width, idle_size[kind[t]], core[d])
        for j in range(succ_start[t], succ_start[t + 1]):
            s = succ_ids[j]
            fanin[s] -= 1
            if fanin[s] == 0:
                _release(s, spmd and stage[s] != current, held, held_start, held_size, stage, ready, ready_size, kind,
                         place)
        if spmd:
            stage_left[stage[t]] -= 1
            while current < stages - 1 and stage_left[current] == 0:
                current += 1
                for j in range(held_start[current], held_start[current] + held_size[current]):
                    _release(held[j], False, held, held_start, held_size, stage, ready, ready_size, kind, place)
                held_size[current] = 0
    return start, task, core, decided, end, seq
