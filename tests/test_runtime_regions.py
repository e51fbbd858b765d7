"""The orchestrator's regions of one-point tasks, computed per block call at once (``point_regions``),
against the per-task path (``regions`` over ``_spans``, the one multi-point tasks take): the same
tasks, regions, costs and traces."""
import numpy as np
import pytest

import ptojax as pj
from helpers import rand
from ptojax.execute import execute
from ptojax.mpmd import orchestrator
from kernels import KERNELS, seed_kernel

NAMES = ("elementwise-tails", "reductions", "layout", "indexing", "matmul-batched", "fori-loop", "mlp-block")


def _views(x):
    with pj.tile(vec=(4, 8)):
        return (x.reshape(6, 40) * 2.0).reshape(12, 20) + 1.0


CASES = [k for k in KERNELS if k[0] in NAMES] + [
    ("seed", seed_kernel, (rand((64, 64), np.float32), rand((64, 64), np.float32, 1), rand((64, 32), np.float32, 2))),
    ("reshaped-views", _views, (rand((12, 20), np.float32),)),
]


def _run(kernel, args):
    trace = execute(pj.lower(kernel, *args), *args, executor="simulated")[1]
    tasks = [(t.tid, t.name, t.reads, t.writes, t.scatters, t.cost, t.hbm, t.bytes, t.index, t.stage)
             for t in trace.graph.tasks]
    return trace.records, tasks


@pytest.mark.parametrize("name,kernel,args", CASES, ids=[c[0] for c in CASES])
def test_point_regions_keep_the_trace(name, kernel, args, monkeypatch):
    records, tasks = _run(kernel, args)
    assert len(records) == len(tasks) > 1
    assert any(len(t[2]) and len(t[3]) for t in tasks)          # tasks with read and written regions
    monkeypatch.setattr(orchestrator._Orchestrator, "point_regions", lambda *_: None)    # every task by _spans
    want_records, want_tasks = _run(kernel, args)
    assert tasks == want_tasks
    assert records == want_records                               # start, end, core, label, task ids, preds


def test_point_regions_map_reshaped_views_to_their_base(monkeypatch):
    """The views case takes the view path (boxes of a reshaped view as boxes of its base tensor), and
    every box it gives lies in its base tensor."""
    boxes, base_box = [], orchestrator._base_box
    monkeypatch.setattr(orchestrator, "_base_box", lambda *a: boxes.append((a, base_box(*a))) or boxes[-1][1])
    _run(_views, (np.ones((12, 20), np.float32),))
    assert boxes
    for (view, base, _, _), (lo, hi) in boxes:
        assert int(np.prod(view)) == int(np.prod(base))
        assert all(0 <= a < b <= n for a, b, n in zip(lo, hi, base))
