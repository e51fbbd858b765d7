"""L1/UB reuse and tasks of several grid points, predicted on the simulated A3.

A K-chained matmul (256 x 1024) @ (1024 x 3072) fp16 at cube tiles (128, 256, 64) and (128, 64, 256),
at 1, 2 and 4 grid points per task and ``"auto"``, and the Lightning Indexer's ``Score`` (KV 8K) at
1 and 4 points per task and ``"auto"``. Each task count is profiled twice in one run: priced as ``n``
separate grid points (no reuse: every load and a pipeline fill per point) and by its task function
(``ascend/isel/task.py``, priced by ``cost.task_time``: shared windows loaded once, one fill per task). Per row: makespan and the label's summed task time, both ways,
and the task's MTE2 cycles and GM bytes.

Then the K strip: the (128, 256, 64) matmul's task of 4 points with A's whole strip resident (one
load, each K step a subset) against per-step loads of A (task time, MTE2 cycles, GM bytes).

Exits 1 when reuse does not lower the label's time at some ``n > 1``, when ``"auto"`` is slower
than the fastest fixed count of the table, or when the strip does not lower the task's time.

Run: ``python benchmarks/l1_reuse.py``
"""
from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ptojax as pj  # noqa: E402
from ptojax.ascend.targets import A3  # noqa: E402

FAILED: list = []


def _without_reuse(compiled):
    """The same tasks priced as ``n`` separate grid points (no task functions)."""
    return dataclasses.replace(compiled, code=dataclasses.replace(compiled.code, tasks={}), plans={})


def _row(name, fn, args, label, n, options=None):
    options = dict(options or {})
    options["tiles_per_block"] = {label: n}
    compiled = pj.kernel(fn, options=options).lower(*args).compile()
    code = compiled.code
    key = next(k for k in code.kernels if code.kernels[k].label == label)
    per_task = code.tasks.get(key, 1)
    reuse = compiled.profile(*args, compute=False)
    # auto: without task functions the runtime's count is 1, so the row shows the pick alone
    plain = _without_reuse(compiled).profile(*args, compute=False) if per_task > 1 and n != "auto" else reuse
    task = code.task_cost(key, A3, 0.0, 0, per_task) if per_task > 1 else code.cost(key, A3, 0.0)
    print(f"  {name:<28} n={n!s:<5}({per_task:>2}) {reuse.tasks:>4} tasks  makespan {plain.makespan_us:8.2f} -> "
          f"{reuse.makespan_us:8.2f} us  {label} {plain.label_us[label]:8.2f} -> {reuse.label_us[label]:8.2f} us  "
          f"task: MTE2 {task.pipes.get('MTE2', 0):7.0f} cyc, fill {task.fill:6.0f} cyc, {task.bytes_in:>8} B in")
    if per_task > 1 and n != "auto" and not reuse.label_us[label] < plain.label_us[label]:
        FAILED.append(f"{name} n={n}: reuse does not lower {label}")
    return reuse.makespan_us


def _check_auto(name, makespans):
    best = min(v for k, v in makespans.items() if k != "auto")
    if makespans["auto"] > best * (1 + 1e-9):
        FAILED.append(f"{name}: auto {makespans['auto']:.2f} us is slower than the best fixed count {best:.2f} us")


def matmuls():
    a = np.zeros((256, 1024), np.float16)
    b = np.zeros((1024, 3072), np.float16)
    for tile in ((128, 256, 64), (128, 64, 256)):
        def fn(a, b, tile=tile):
            with pj.tile(cube=tile), jax.named_scope("MM"):
                return pj.ops.matmul(a, b)

        name = f"matmul cube {tile}"
        _check_auto(name, {n: _row(name, fn, (a, b), "MM", n) for n in (1, 2, 4, "auto")})


def k_strip():
    """The matmul at cube tile (128, 256, 64), 4 points per task: its task function with the A strip
    resident (one load of the 128 x 1024 strip, each K step a subset) against per-step loads of A."""
    from ptojax.ascend import engine
    from ptojax.ascend.cost import task_time
    from ptojax.ascend.isel.task import TaskSelector

    a, b = np.zeros((256, 1024), np.float16), np.zeros((1024, 3072), np.float16)

    def fn(a, b):
        with pj.tile(cube=(128, 256, 64)), jax.named_scope("MM"):
            return pj.ops.matmul(a, b)

    code = pj.kernel(fn, options={"tiles_per_block": {"MM": 4}}).lower(a, b).compile().code
    (key, n), = code.tasks.items()
    name = code.entries()[-1][0]
    plain = TaskSelector(code.kernels[key], "a3", "level2", code.memory, n, strips=False).run(name)
    module = f'module attributes {{pto.target_arch = "a3"}} {{\n{plain}\n}}\n'
    costs = [task_time(engine.parse(text).function(name), A3, block=0) for text in (module, code.pto())]
    print("K strip, matmul cube (128, 256, 64), 4 points per task: per-step A loads -> A strip resident")
    for what, (before, after) in (("task us", [c.seconds * 1e6 for c in costs]),
                                  ("MTE2 cyc", [c.pipes["MTE2"] for c in costs]),
                                  ("GM bytes in", [c.bytes_in for c in costs])):
        print(f"  {what:<12} {before:12.2f} -> {after:12.2f}  ({after / before:.3f}x)")
    if not costs[1].seconds < costs[0].seconds:
        FAILED.append("K strip: the task function with the A strip is not faster")


def indexer():
    from examples.deepseek_v32 import kernels as K
    from examples.deepseek_v32 import reference as R

    args = R.indexer_inputs(4, 2, 64, [8192] * 4, seed=0)
    fn = functools.partial(K.lightning_indexer, sparse_count=2048)
    options = {"tiles": {"Gather": {"vec": (1, 8)}}}
    name = "Lightning Indexer KV 8K"
    _check_auto(name, {n: _row(name, fn, args, "Score", n, options) for n in (1, 4, "auto")})


def main() -> int:
    print("makespan and label time: n separate grid points -> the task function (L1/UB reuse)")
    matmuls()
    k_strip()
    indexer()
    for line in FAILED:
        print("FAILED:", line)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
