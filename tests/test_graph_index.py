"""TaskGraph's dependencies equal those of comparing every pair of accesses, whether a buffer's accesses are
paired with NumPy or found through its spatial index, and whether the graph is built from Task objects or
from the tasks' columns alone (TaskTable)."""
import dataclasses
import random

import numpy as np
import pytest

from ptojax.mpmd.graph import Region, Task, TaskGraph, TaskTable
from ptojax.mpmd.orchestrator import _base_box


def _meets(a: Region, b: Region) -> bool:
    """``_meet``'s test, written out: per dim ``lo < other hi`` and ``other lo < hi``."""
    return a.buffer == b.buffer and all(l1 < h2 and l2 < h1 for l1, h1, l2, h2 in zip(a.lo, a.hi, b.lo, b.hi))


def brute_force(tasks):
    """Preds (tids) per task, in program order: a read waits on earlier overlapping writes; a write on
    earlier overlapping writes and reads (by other tasks), except a write of a buffer that both tasks
    write only by unique-index scatters in one block call (stage); never on itself."""
    out = []
    for i, task in enumerate(tasks):
        preds = set()
        for other in tasks[:i]:
            def apart(w, v):
                return w.buffer in task.scatters and v.buffer in other.scatters and task.stage == other.stage
            if any(_meets(r, w) for r in task.reads for w in other.writes) or \
                    any(_meets(w, v) and not apart(w, v) for w in task.writes for v in other.writes) or \
                    any(_meets(w, r) for w in task.writes for r in other.reads):
                preds.add(other.tid)
        preds.discard(task.tid)
        out.append(sorted(preds))
    return out


@pytest.fixture(params=["pairs", "index"])
def path(request, monkeypatch):
    """Link every buffer by NumPy pairs, or every one through its spatial index."""
    monkeypatch.setattr(TaskGraph, "_PAIRS_PER_ACCESS", 10**9 if request.param == "pairs" else -10**9)
    return request.param


def random_box(rng, shape):
    lo, hi = [], []
    for n in shape:
        kind = rng.random()
        if kind < 0.15:                              # the whole dim
            a, b = 0, n
        elif kind < 0.25:                            # empty (may still be inside another box: _meet's rule)
            a = rng.randrange(n + 1)
            b = a
        elif kind < 0.6:                             # an aligned tile
            t = max(1, n // rng.choice((2, 4, 8)))
            a = rng.randrange(0, n, t)
            b = min(n, a + t)
        else:                                        # anywhere
            a = rng.randrange(n)
            b = rng.randrange(a + 1, n + 1)
        lo.append(a)
        hi.append(b)
    return tuple(lo), tuple(hi)


def random_tasks(seed, count):
    rng = random.Random(seed)
    shapes = {b: tuple(rng.choice((1, 3, 8, 16, 64)) for _ in range(rng.randint(1, 4))) for b in range(rng.randint(1, 4))}
    shapes[-1] = (rng.randint(1, 6),)                # a host-sync token buffer
    full = rng.random() < 0.5                        # some buffers read or written whole, often

    def regions(k):
        out = []
        for _ in range(k):
            b = rng.choice(list(shapes))
            lo, hi = ((0,) * len(shapes[b]), shapes[b]) if full and rng.random() < 0.1 else random_box(rng, shapes[b])
            out.append(Region(b, lo, hi))
        return tuple(out)

    tasks = []
    for tid in range(count):
        reads, writes = regions(rng.randint(0, 3)), regions(rng.randint(0, 2))
        if writes and rng.random() < 0.2:            # the same task reads what it writes
            reads += (writes[0],)
        tasks.append(Task(tid, "t", "AIV", "", 1.0, None, reads, writes))
    return tasks


@pytest.mark.parametrize("seed", range(40))
def test_random_workloads_match_brute_force(seed, path):
    tasks = random_tasks(seed, 60 if seed % 4 else 150)
    expected = brute_force(tasks)
    TaskGraph(tasks)
    assert [[p.tid for p in t.preds] for t in tasks] == expected
    succs = {t.tid: [] for t in tasks}
    for t in tasks:                                  # succs in program order of the successor
        for p in t.preds:
            succs[p.tid].append(t.tid)
    assert [[s.tid for s in t.succs] for t in tasks] == [succs[t.tid] for t in tasks]


def test_many_disjoint_tiles_and_whole_buffer_reads(path):
    """Tiles of one buffer written, read back tile by tile, then read whole: the grid and its fallbacks."""
    tasks, tid = [], 0
    tiles = [((i, j), (i + 2, j + 4)) for i in range(0, 16, 2) for j in range(0, 32, 4)]
    for lo, hi in tiles:
        tasks.append(Task(tid, "w", "AIV", "", 1.0, None, (), (Region(0, lo, hi),)))
        tid += 1
    for lo, hi in tiles:                              # misaligned reads straddle up to four tiles
        lo, hi = (lo[0] + 1, lo[1] + 2), (min(16, hi[0] + 1), min(32, hi[1] + 2))
        tasks.append(Task(tid, "r", "AIV", "", 1.0, None, (Region(0, lo, hi),), (Region(1, (tid,), (tid + 1,)),)))
        tid += 1
    for _ in range(3):
        tasks.append(Task(tid, "all", "AIV", "", 1.0, None, (Region(0, (0, 0), (16, 32)),), ()))
        tid += 1
    tasks.append(Task(tid, "rewrite", "AIV", "", 1.0, None, (), (Region(0, (3, 3), (4, 4)),)))
    expected = brute_force(tasks)
    TaskGraph(tasks)
    assert [[p.tid for p in t.preds] for t in tasks] == expected
    assert len(tasks[-1].preds) == 1 + 1 + 3       # its tile's writer, the one reader of (3, 3), the whole reads


@pytest.mark.parametrize("seed", range(12))
def test_scatters_ranks_and_both_paths_agree(seed, path):
    """Unique-index scatters of one block call do not wait on each other (they do across calls, and on
    plain writes); boxes of other ranks in one buffer (0-d, 1-d views of a 2-d buffer) compare in the
    dims both have. Every link the graph makes, as a predecessor and as a successor."""
    rng = random.Random(seed)
    tasks = []
    for tid in range(120):
        stage = tid // 10
        rank = rng.choice((0, 1, 2, 2))
        lo, hi = random_box(rng, (8, 8)[:rank])
        region = Region(rng.randint(0, 2), lo, hi)
        if rng.random() < 0.5:
            tasks.append(Task(tid, "scatter", "AIV", "", 1.0, None, (), (region,), stage=stage,
                              scatters=frozenset({region.buffer})))
        elif rng.random() < 0.5:
            tasks.append(Task(tid, "write", "AIV", "", 1.0, None, (), (region,), stage=stage))
        else:
            tasks.append(Task(tid, "read", "AIV", "", 1.0, None, (region,), (), stage=stage))
    expected = brute_force(tasks)
    graph = TaskGraph(tasks)
    assert [[p.tid for p in t.preds] for t in tasks] == expected
    assert graph.fanin.tolist() == [len(e) for e in expected]
    plain = brute_force([dataclasses.replace(t, scatters=frozenset()) for t in tasks])
    assert plain != expected                                        # scatters did skip pairs
    again = TaskGraph(tasks)                                        # the latest graph links the tasks
    assert [[s.tid for s in t.succs] for t in tasks] == [[s for s in again.succ_ids[again.succ_start[i]:
                                                                                     again.succ_start[i + 1]]]
                                                           for i in range(len(tasks))]


def _columns(tasks, rng) -> TaskTable:
    """The tasks' columns, written out: the accesses shuffled, every box padded to the largest rank with
    dims every box meets in."""
    kinds = sorted({t.core for t in tasks})
    rows = [(t.tid, r, write, write and r.buffer in t.scatters) for t in tasks
            for regions, write in ((t.reads, False), (t.writes, True)) for r in regions]
    rng.shuffle(rows)
    rank = max([len(r.lo) for _, r, _, _ in rows], default=0)
    far = np.iinfo(np.int64).max
    lo = np.array([list(r.lo) + [-far] * (rank - len(r.lo)) for _, r, _, _ in rows], np.int64).reshape(-1, rank)
    hi = np.array([list(r.hi) + [far] * (rank - len(r.hi)) for _, r, _, _ in rows], np.int64).reshape(-1, rank)
    return TaskTable(np.array([t.cost for t in tasks]), np.array([t.hbm for t in tasks], np.float64),
                     np.array([kinds.index(t.core) for t in tasks], np.int64), tuple(kinds),
                     np.array([t.stage for t in tasks], np.int64), np.array([row[0] for row in rows], np.int64),
                     np.array([row[1].buffer for row in rows], np.int64), lo, hi,
                     np.array([row[2] for row in rows], bool), np.array([row[3] for row in rows], bool))


@pytest.mark.parametrize("seed", range(16))
def test_a_graph_of_columns_alone_has_the_links_of_its_tasks(seed, path):
    """Built from the tasks' columns (accesses in any order, boxes padded), with the Task objects made on
    first use: the brute-force links, and the arrays of the graph built from the objects."""
    rng = random.Random(seed)
    tasks = random_tasks(seed, 80)
    for t in tasks:                                 # stages, costs and core kinds of their own
        t.stage, t.cost, t.core = rng.randint(0, 3), rng.uniform(1.0, 5.0), rng.choice(("AIC", "AIV", "AIV"))
        if t.writes and rng.random() < 0.3:
            t.scatters = frozenset({t.writes[0].buffer})
    made = []
    graph = TaskGraph.of_table(_columns(tasks, rng), lambda: made.append(1) or tasks)
    assert not made                                  # not before first use
    objects = TaskGraph([dataclasses.replace(t) for t in tasks])
    for name in ("pred_start", "pred_ids", "succ_start", "succ_ids", "costs", "by_rank", "fanin", "core_kinds",
                 "core_codes", "stage_codes", "stage_sizes", "ranks"):
        assert np.array_equal(getattr(graph, name), getattr(objects, name)), name
    assert [[p.tid for p in t.preds] for t in graph.tasks] == brute_force(tasks)
    assert made == [1] and graph.tasks is tasks


def test_coordinates_beyond_int64_link_through_the_index():
    """Boxes that NumPy cannot hold: the graph links them through the spatial index, as any other."""
    big = 2 ** 70
    tasks = [Task(0, "w", "AIV", "", 1.0, None, (), (Region(0, (big,), (big + 4,)),)),
             Task(1, "w", "AIV", "", 1.0, None, (), (Region(0, (big + 4,), (big + 8,)),)),
             Task(2, "r", "AIV", "", 1.0, None, (Region(0, (big + 3,), (big + 5,)),), ()),
             Task(3, "r", "AIV", "", 1.0, None, (Region(0, (0,), (big,)),), ())]
    graph = TaskGraph(tasks)
    assert graph.table.lo is None
    assert [[p.tid for p in t.preds] for t in tasks] == brute_force(tasks) == [[], [], [0, 1], []]


# ------------------------------------------------------------------- boxes of reshaped views
@pytest.mark.parametrize("view,base", [((4, 2, 64, 8), (4, 128, 8)), ((6, 4), (24,)), ((24,), (2, 3, 4)),
                                       ((2, 3, 4), (6, 4)), ((2, 1, 3), (6,)), ((1, 6), (6, 1)), ((2, 6), (3, 4)),
                                       ((3, 1, 1, 4), (12,)), ((4, 6), (4, 6, 1, 1))])
def test_a_view_box_maps_to_a_base_box_that_holds_it(view, base):
    """The orchestrator's region of a tile read through a reshape: every element, nothing lost."""
    rng = np.random.default_rng(len(view) * 10 + len(base))
    exact = 0
    for _ in range(200):
        lo = [int(rng.integers(0, n)) for n in view]
        hi = [int(rng.integers(a + 1, n + 1)) for a, n in zip(lo, view)]
        blo, bhi = _base_box(view, base, lo, hi)
        touched = np.zeros(view, bool)
        touched[tuple(slice(a, b) for a, b in zip(lo, hi))] = True
        box = np.zeros(base, bool)
        box[tuple(slice(a, b) for a, b in zip(blo, bhi))] = True
        assert not (touched.reshape(base) & ~box).any(), (lo, hi, blo, bhi)
        exact += bool((touched.reshape(base) == box).all())
    assert exact > 0


def test_a_split_dim_keeps_tiles_apart():
    """[b, h, 0:64, s] of a (4, 2, 64, 65536) view of (4, 128, 65536) is exactly [b, 64h:64h+64, s]."""
    assert _base_box((4, 2, 64, 65536), (4, 128, 65536), (1, 1, 0, 256), (2, 2, 64, 384)) == (
        [1, 64, 256], [2, 128, 384])


def test_spans_of_consecutive_grid_points_are_boxes_they_fill_exactly():
    """Every point numbered a..b lies in exactly one box and every box point is numbered a..b, in at most
    2 * rank - 1 boxes (one when the points form a box)."""
    from ptojax.mpmd.orchestrator import _spans
    rng = np.random.default_rng(3)
    for _ in range(300):
        grid = tuple(int(x) for x in rng.integers(1, 6, rng.integers(1, 5)))
        points = list(np.ndindex(*grid))
        a = int(rng.integers(0, len(points)))
        b = int(rng.integers(a, len(points)))
        boxes = _spans(grid, a, b)
        covered = [tuple(f + c for f, c in zip(first, p)) for (first, last) in boxes
                   for p in np.ndindex(*[z - f + 1 for f, z in zip(first, last)])]
        assert sorted(covered) == points[a:b + 1], (grid, a, b, boxes)
        assert len(boxes) <= 2 * len(grid) - 1
    assert _spans((4, 8, 2), 16, 47) == [((1, 0, 0), (2, 7, 1))]


@pytest.mark.parametrize("seed", range(12))
def test_tiled_buffers_grouped_by_cell_match_brute_force(seed, path):
    """Buffers accessed only by tiles of one grid (tail tiles, repeats, scatters of one call included) are
    paired cell by cell: the links equal brute force's, and the cells do split those buffers."""
    from ptojax.mpmd.graph import _cells

    rng = random.Random(seed)
    shapes = {0: (20, 30), 1: (37,), 2: (8, 8, 9)}
    steps = {0: (4, 8), 1: (5,), 2: (2, 8, 4)}

    def tile(b):
        lo = tuple(rng.randrange(0, n, t) for n, t in zip(shapes[b], steps[b]))
        return Region(b, lo, tuple(min(n, a + t) for a, n, t in zip(lo, shapes[b], steps[b])))

    tasks = []
    for tid in range(120):
        reads = tuple(tile(rng.choice((0, 1, 2))) for _ in range(rng.randint(0, 2)))
        writes = tuple(tile(rng.choice((0, 1, 2))) for _ in range(rng.randint(0, 2)))
        if tid == 60:
            reads += (Region(0, (0, 0), (4, 8)),)    # a first box that is not the buffer's: still a tile
        scatters = frozenset({2}) if rng.random() < 0.3 else frozenset()
        tasks.append(Task(tid, "t", "AIV", "", 1.0, None, reads, writes, stage=tid // 40, scatters=scatters))
    table = TaskTable.of(tasks)
    cells = _cells(table)
    assert all(len(set(cells[table.buffer == b].tolist())) > 1 for b in shapes if (table.buffer == b).any())
    expected = brute_force(tasks)
    TaskGraph(tasks)
    assert [[p.tid for p in t.preds] for t in tasks] == expected


def test_buffers_not_on_one_grid_stay_one_group():
    """A box off the grid of its buffer's first box (misaligned, or wider than a cell) keeps the buffer whole."""
    from ptojax.mpmd.graph import _cells

    tasks = [Task(0, "t", "AIV", "", 1.0, None, (), (Region(0, (0,), (4,)), Region(1, (0,), (4,)))),
             Task(1, "t", "AIV", "", 1.0, None, (Region(0, (2,), (6,)), Region(1, (4,), (12,))), ()),
             Task(2, "t", "AIV", "", 1.0, None, (Region(2, (4,), (8,)), Region(2, (8,), (10,))), ())]
    table = TaskTable.of(tasks)
    cells = _cells(table).tolist()
    by = dict(zip(zip(table.buffer.tolist(), table.lo[:, 0].tolist()), cells))
    assert by[0, 0] == by[0, 2] and by[1, 0] == by[1, 4] and by[2, 4] != by[2, 8]
    TaskGraph(tasks)
    assert [[p.tid for p in t.preds] for t in tasks] == brute_force(tasks)
