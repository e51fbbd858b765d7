"""``tiles_per_block="auto"``: the grid points per task that the cost model predicts fastest.

For a block program of ``P`` grid points on ``C`` cores of its kind, each candidate ``n`` (1 to 4,
and the ``n`` that makes ``C / 4``, ``C / 2``, ``C``, ``2C``, ... ``8C`` tasks) is priced as the
runtime prices it: each task of ``n`` points by its task function (:func:`~ptojax.ascend.cost.task_time`:
one pipeline, its fill paid once, loads the task keeps resident in L1/UB charged once per window), one
point by its grid-point function. The tasks, in order, then go to the earliest idle core, each after
an AICPU scheduler (the least recently used of ``Target.aicpu``) spends ``Target.aicpu_task_s``
deciding it and ``Target.dispatch_s`` passes: the last end is the part's predicted makespan on its
own. It is found with the reads all L2 hits and all from HBM (the L2 rule's share depends on the rest
of the run), and the ``n`` with the smaller worse of the two wins (the larger ``n`` on a tie: fewer
tasks, fewer dispatches and reloads than the model charges): a count that leaves cores idle wins where
dispatches bind, not where its tasks' HBM reads would. The parts of one block call (an odd-sized GEMM's
interior and edge programs) share the cores: one count for all of them is priced on their tasks
together against each part's own choice. L1/UB capacity needs no term of its
own: a resident tile is a tile the grid point already holds (``isel/task.py``), so a task of any ``n``
takes the space of one point; a K chain's resident A strip is larger, and selection keeps it only
where L1 holds it beside the point's tiles.
"""
from __future__ import annotations

import heapq
import math

from ..errors import PtoUnsupportedError
from . import asm, isel
from .cost import function_time, kernel_time, load_l2_hit, task_time
from . import engine_parse as E
from .engine_parse import parse
from .targets import Target

ROUNDS = 8          # candidates: the n that gives each core 1 .. ROUNDS tasks


def candidates(points: int, cores: int) -> list[int]:
    """The counts of grid points per task tried for ``points`` points on ``cores`` cores: 1 to 4 and
    those that make ``cores``, ``2 cores``, ... tasks, and ``cores / 2``, ``cores / 4`` (fewer tasks
    than cores: a count that leaves cores idle may still end first where the schedulers' dispatches
    bind, e.g. 8 of 192 points on 48 cores)."""
    tried = (1, 2, 3, 4, *(-(-points // (cores * r)) for r in range(1, ROUNDS + 1)),
             *(-(-points // max(1, cores // r)) for r in (2, 4)))
    return sorted({n for n in tried if n <= max(points, 1)})


def part_makespan(costs: list[float], target: Target, cores: int) -> float:
    """When the last of tasks costing ``costs`` seconds ends, dispatched in order to ``cores`` cores."""
    idle = [0.0] * cores
    schedulers = [0.0] * target.aicpu
    end = 0.0
    for cost in costs:
        free = heapq.heappop(idle)
        decide = max(free, heapq.heappop(schedulers))
        heapq.heappush(schedulers, decide + target.aicpu_task_s)
        done = decide + target.aicpu_task_s + target.dispatch_s + cost
        heapq.heappush(idle, done)
        end = max(end, done)
    return end


def task_costs(kernel: asm.Kernel, n: int, target: Target, memory, arch: str = "a3") -> tuple[list, list]:
    """Seconds of each task of ``kernel`` at ``n`` grid points per task (the last may have fewer): with
    its reads L2 hits (as its loads are marked), and with them all from HBM."""
    points = math.prod(kernel.grid)
    try:
        functions = parse(isel.module([kernel], arch=arch, memory=memory, tasks=[n])).functions
    except (PtoUnsupportedError, asm.PtoAsmError):          # what selection cannot print: codegen's, n x one
        return tuple([kernel_time(kernel, target, l2_hit=hit).seconds * min(n, points - first)
                      for first in range(0, points, n)] for hit in (1.0, 0.0))
    hits = (load_l2_hit(kernel), 0.0)
    if n == 1:
        return tuple([function_time(functions[0], target, l2_hit=hit).seconds] * points for hit in hits)
    row = math.prod(kernel.grid[1:]) if _keeps_loads(functions[-1]) else 1
    priced: dict = {}
    out = ([], [])
    for first in range(0, points, n):
        phase = (first % max(1, row), min(n, points - first))       # tasks of one phase load alike
        if phase not in priced:
            priced[phase] = [task_time(functions[-1], target, block=first // n, l2_hit=hit).seconds for hit in hits]
        for costs, cost in zip(out, priced[phase]):
            costs.append(cost)
    return out


def _keeps_loads(function) -> bool:
    """Whether a task function keeps a load resident across its points (hoisted before its task loop, or
    under an ``scf.if`` in it, inside the guard of points past the grid): else every task of ``n`` points
    costs the same, wherever it starts."""
    pos = next(i for i, s in enumerate(function.body) if isinstance(s, E.For))
    body = function.body[pos].body
    guards = [s for s in body if isinstance(s, E.If)]
    if len(guards) == 1 and not any(isinstance(s, E.Instr) for s in body):
        body = guards[0].then
    return any(isinstance(s, E.Instr) for s in function.body[:pos]) or any(isinstance(s, E.If) for s in body)


def points_per_task(kernels: list[asm.Kernel], target: Target, memory, arch: str = "a3") -> list[int]:
    """The grid points per task of each of ``kernels``, the parts of one block call (module docstring):
    they share the cores of their kind, so besides each part's own best count, one count for all of
    them (capped at each part's points: an odd-sized GEMM's edge parts) is priced on their tasks
    together, and the smallest predicted makespan wins (each part's own choice on a tie)."""
    cores = target.cores(kernels[0].core)
    points = [math.prod(k.grid) for k in kernels]
    tried = [candidates(p, cores) for p in points]
    priced: dict = {}

    def costs(i, n):
        if (i, n) not in priced:
            priced[i, n] = task_costs(kernels[i], n, target, memory, arch)
        return priced[i, n]

    def makespan(choice):             # the worse of reads all from L2 and all from HBM
        return max(part_makespan([c for i, n in choice for c in costs(i, n)[end]], target, cores) for end in (0, 1))

    own = [min(t, key=lambda n, i=i: (makespan([(i, n)]), -n)) for i, t in enumerate(tried)]
    if len(kernels) == 1:
        return own
    shared = [[min(n, p) for p in points] for n in sorted(set().union(*tried), reverse=True)]  # larger n on a tie
    return min([own, *shared], key=lambda choice: makespan(list(enumerate(choice))))
