"""L1/UB reuse: a task of several grid points (``tiles_per_block``) loads a GM window its points share
once and keeps the tile resident (``ascend/isel/task.py``), and the cost model charges that load once
(``cost.task_time``), so the task's MTE2 time, its GM bytes, the swimlane and the makespan drop.

Kernels: a matmul over N blocks (the left operand shared; with a K chain of two steps, whose peeled
first step is shared and whose loop step is not) and an attention-like score of query rows against
key blocks (keys transposed), at 4 tiles per task (the window never changes within a task: the load
is hoisted before the task loop) and 3 (tasks cross rows: the load is guarded by ``scf.if``); a
vector kernel whose every grid point loads the same row into UB; ``tiles_per_block="auto"``, the
count the cost model (reuse included) predicts fastest; and the K strip: a K chain's left operand kept
whole in L1 (each step a subset), its GM bytes, its numbers, ptoas at level2 and level3 (which once
aborted on the task function of a (128, 256, 64) chain), and the per-step fallback where it does
not fit."""
import dataclasses
import math

import jax
import numpy as np
import pytest

import ptojax as pj
import vendor_tools
from ptojax.ascend import crosscheck as xc
from ptojax.ascend import engine, engine_parse
from ptojax.ascend.ptoas import assemble
from ptojax.ascend.targets import target

A3 = target("a3")
RNG = np.random.default_rng(0)


def _matmul(a, b):
    with pj.tile(cube=(64, 128, 64)), jax.named_scope("MM"):
        return pj.ops.matmul(a, b)


def _scores(q, k):
    with pj.tile(cube=(32, 128, 64)), jax.named_scope("Score"):
        return pj.ops.matmul(q, k, transpose_b=True)


def _f16(*shape):
    return RNG.standard_normal(shape).astype(np.float16)


# name -> (function, args, float32 reference, bytes of the shared (left) window, of the other windows
# a grid point loads, the grid, the number of K steps)
CASES = {
    "matmul": (_matmul, (_f16(128, 128), _f16(128, 256)), lambda a, b: a.astype(np.float32) @ b.astype(np.float32),
               64 * 128 * 2, 128 * 64 * 2, (2, 4), 1),
    "matmul K chain": (_matmul, (_f16(128, 256), _f16(256, 256)),
                       lambda a, b: a.astype(np.float32) @ b.astype(np.float32), 64 * 128 * 2, 128 * 64 * 2, (2, 4),
                       2),
    "scores": (_scores, (_f16(2, 32, 128), _f16(2, 256, 128)),
               lambda q, k: np.einsum("bmd,bnd->bmn", q.astype(np.float32), k.astype(np.float32)), 32 * 128 * 2,
               64 * 128 * 2, (2, 1, 4), 1),
}
# a cube-bound kernel for the makespan: 48 tasks of 4 grid points, two rounds on the 24 cube cores
BUSY = (_f16(256, 128), _f16(128, 3072))


def _compiled(case, n):
    fn, args, *_ = CASES[case]
    label = "MM" if fn is _matmul else "Score"
    return pj.kernel(fn, options={"tiles_per_block": {label: n}}).lower(*args).compile()


def _without_reuse(compiled):
    """The same kernel and tasks priced as before reuse: n x one grid point (no task functions)."""
    return dataclasses.replace(compiled, code=dataclasses.replace(compiled.code, tasks={}), plans={})


def _task_function(compiled):
    (key, n), = compiled.code.tasks.items()
    name = compiled.code.entries()[-1][0]
    return key, n, engine.parse(compiled.code.pto()).function(name)


def _tloads(body, where=()):
    """(enclosing statement kinds, ...) of every tload in ``body``."""
    out = []
    for s in body:
        if isinstance(s, engine_parse.For):
            out += _tloads(s.body, where + ("for",))
        elif isinstance(s, engine_parse.If):
            out += _tloads(s.then, where + ("if",)) + _tloads(s.orelse, where + ("if",))
        elif isinstance(s, engine_parse.Instr) and s.op == "tload":
            out.append(where)
    return out


def _task_bytes(first, count, grid, steps, shared, other):
    """GM bytes a task over flat grid points first .. first+count-1 reads when it keeps the left
    operand's strip resident (the windows of all ``steps`` K steps: the peeled first step's and, as
    subsets, the loop's): the strip once per run of points with the same leading grid indices (all
    but the last), every right window at every point."""
    row = grid[-1]
    shared_loads = sum(1 for f in range(first, first + count) if f == first or f % row == 0)
    return shared_loads * steps * shared + count * steps * other


@pytest.mark.parametrize("case", list(CASES))
def test_the_text_loads_a_shared_window_once_per_task(case):
    fn, args, ref, shared, other, grid, steps = CASES[case]
    hoisted, guarded = _compiled(case, 4), _compiled(case, 3)
    _, _, func = _task_function(hoisted)
    where = _tloads(func.body)
    # 4 tiles per task: the shared strip's load sits before the task loop; the right windows' in it
    assert where.count(()) == 1 and sum(w[:1] == ("for",) for w in where) == steps, where
    _, _, func = _task_function(guarded)
    where = _tloads(func.body)
    tail = math.prod(grid) % 3 != 0            # the tail task's points sit under scf.if too
    inner = ("for", "if") if tail else ("for",)
    assert where.count(inner + ("if",)) == 1 and len(where) == 1 + steps and () not in where, where
    # executed loads per task (the cost model walks the text point by point) against the grid's rows
    for compiled, n in ((hoisted, 4), (guarded, 3)):
        key, _, _ = _task_function(compiled)
        for first in range(0, math.prod(grid), n):
            count = min(n, math.prod(grid) - first)
            cost = compiled.code.task_cost(key, A3, 0.0, first, count)
            assert cost.bytes_in == _task_bytes(first, count, grid, steps, shared, other), (case, n, first)


@pytest.mark.parametrize("case", list(CASES))
def test_reuse_computes_the_same_numbers(case):
    fn, args, ref, *_ = CASES[case]
    one = _compiled(case, 1)
    plain, plain_text = np.asarray(one(*args)), np.asarray(one.run(*args)[0])
    for out in (plain, plain_text):
        np.testing.assert_allclose(out, ref(*args), rtol=1e-5, atol=1e-4)
    for n in (3, 4):
        compiled = _compiled(case, n)
        np.testing.assert_array_equal(np.asarray(compiled(*args)), plain)
        text, _ = compiled.run(*args)          # the task functions of the real text run
        np.testing.assert_array_equal(np.asarray(text), plain_text)


def _scale(x, w):
    with pj.tile(vec=(8, 128)), jax.named_scope("Scale"):
        return x * w[None, :] + np.float32(1.0)


def test_a_vector_task_keeps_a_row_in_ub():
    """UB: every grid point of x * w loads the same row w; a task of 3 loads it once (8 points: the
    last task has 2)."""
    x, w = RNG.standard_normal((64, 128)).astype(np.float32), RNG.standard_normal(128).astype(np.float32)
    one = pj.kernel(_scale).lower(x, w).compile()
    compiled = pj.kernel(_scale, options={"tiles_per_block": {"Scale": 3}}).lower(x, w).compile()
    np.testing.assert_array_equal(np.asarray(compiled(x, w)), x * w + 1)
    np.testing.assert_array_equal(np.asarray(compiled.run(x, w)[0]),
                                  np.asarray(one.run(x, w)[0]))
    key, n, func = _task_function(compiled)
    assert sorted(_tloads(func.body)) == [("for", "if"), ("for", "if", "if")]
    for first in range(0, 8, n):
        count = min(n, 8 - first)
        assert compiled.code.task_cost(key, A3, 0.0, first, count).bytes_in == count * 8 * 128 * 4 + 128 * 4


@pytest.mark.parametrize("case", ["matmul", "scores"])
def test_a_task_charges_the_shared_load_once(case):
    fn, args, ref, shared, other, grid, steps = CASES[case]
    n = 4
    key, _, _ = _task_function(compiled := _compiled(case, n))
    one = compiled.code.cost(key, A3, 0.0)
    task = compiled.code.task_cost(key, A3, 0.0, 0, n)
    load = shared / A3.gm_read_rate(1.0) + A3.dma_issue_cycles         # one load of the shared window
    assert task.pipes["MTE2"] == pytest.approx(n * one.pipes["MTE2"] - (n - 1) * load)
    for pipe in ("MTE1", "CUBE", "FIXPIPE"):
        assert task.pipes[pipe] == pytest.approx(n * one.pipes[pipe])
    assert task.bytes_in == n * one.bytes_in - (n - 1) * shared
    assert task.seconds < n * one.seconds


@pytest.mark.parametrize("case", list(CASES))
def test_a_task_pays_the_pipeline_fill_once(case):
    """A task's points run as one pipeline (double buffering carries on across them): the task pays
    one grid point's fill (GM latencies, prologue, epilogue) once, not once per point."""
    n = 3
    key, _, _ = _task_function(compiled := _compiled(case, n))
    one = compiled.code.cost(key, A3, 0.0)
    task = compiled.code.task_cost(key, A3, 0.0, 0, n)
    assert task.bottleneck == one.bottleneck
    assert task.fill == pytest.approx(one.fill) and one.fill >= A3.gm_read_latency + A3.gm_write_latency
    assert task.cycles == pytest.approx(task.pipes[task.bottleneck] + one.fill)
    assert task.cycles < n * one.cycles - (n - 1) * one.fill * (1 - 1e-9)


def test_the_swimlane_and_the_makespan_show_the_reuse():
    compiled = pj.kernel(_matmul, options={"tiles_per_block": {"MM": 4}}).lower(*BUSY).compile()
    with_reuse, without = compiled.profile(*BUSY), _without_reuse(compiled).profile(*BUSY)
    assert with_reuse.tasks == without.tasks == 48
    assert with_reuse.makespan_us < without.makespan_us
    assert with_reuse.label_us["MM"] < without.label_us["MM"]
    for prof in (with_reuse, without):
        assert prof.makespan_us >= prof.lower_bound_us
    shorter = {r.tid: r.end - r.start for r in with_reuse.trace.records}
    assert all(shorter[r.tid] < r.end - r.start for r in without.trace.records)
    print(f"\n(256x128)@(128x3072) fp16, 4 tiles per task: makespan {without.makespan_us:.2f} -> "
          f"{with_reuse.makespan_us:.2f} us, MM {without.label_us['MM']:.2f} -> {with_reuse.label_us['MM']:.2f} us")


def test_the_lightning_indexer_reuse_step_lowers_score():
    """docs/deepseek_v32.md step 1 (tiles_per_block Score=4), at a KV of 8K: Score's own time drops."""
    import functools

    from examples.deepseek_v32 import kernels as K
    from examples.deepseek_v32 import reference as R

    args = R.indexer_inputs(4, 2, 64, [8192] * 4, seed=0)
    fn = functools.partial(K.lightning_indexer, sparse_count=2048)
    gather = {"Gather": {"vec": (1, 8)}}
    before = pj.kernel(fn, options={"tiles": gather}).lower(*args).compile().profile(*args, compute=False)
    compiled = pj.kernel(fn, options={"tiles": gather, "tiles_per_block": {"Score": 4}}).lower(*args).compile()
    after = compiled.profile(*args, compute=False)
    same_tasks = _without_reuse(compiled).profile(*args, compute=False)
    assert after.label_us["Score"] < min(before.label_us["Score"], same_tasks.label_us["Score"])
    print(f"\nLightning Indexer KV 8K, Score: {before.label_us['Score']:.2f} us (1 tile per task) -> "
          f"{same_tasks.label_us['Score']:.2f} (4 per task, no reuse) -> {after.label_us['Score']:.2f} (reuse)")


@vendor_tools.needed
def test_ptoas_and_the_simulator_take_the_task_functions():
    jobs = []
    for case in CASES:
        for n in (3, 4):
            code = _compiled(case, n).code
            for level in ("level2", "level3"):
                assemble(code.pto(level=level), arch="a3", level=level)
            if case == "matmul K chain":          # the simulator: both forms, one g++ compile
                jobs += [job for job in xc.jobs_of(code) if "_tasks" in job[1]]
    results = xc.run(jobs, seed=0)
    assert len(results) == 2
    assert all(r.status == "exact" for r in results), xc.table(results)


def test_auto_picks_the_count_the_cost_model_predicts_fastest():
    """tiles_per_block="auto" on the cube-bound matmul: the count whose task function (reuse priced)
    runs no slower in the simulated run than any fixed count; its text keeps the A tile resident."""
    auto = pj.kernel(_matmul, options={"tiles_per_block": {"MM": "auto"}}).lower(*BUSY).compile()
    (key, n), = auto.code.tasks.items()
    assert n > 1 and "_tasks" in auto.code.pto()
    fastest = auto.profile(*BUSY, compute=False).makespan_us
    for fixed in (1, 2, 4, 8):
        other = pj.kernel(_matmul, options={"tiles_per_block": {"MM": fixed}}).lower(*BUSY).compile()
        assert fastest <= other.profile(*BUSY, compute=False).makespan_us * (1 + 1e-9), fixed


# the K strip: a (128, 256, 64) cube tile over K = 1024 (4 steps), 4 grid points per task along N
STRIP_TILE, STRIP_K = (128, 256, 64), 1024


def _strip_matmul(a, b):
    with pj.tile(cube=STRIP_TILE), jax.named_scope("MM"):
        return pj.ops.matmul(a, b)


def _strip_args(m=256, n=512):
    """Small integers: every product and sum is exact in fp32, so any order of the K sum is exact."""
    a = RNG.integers(-4, 5, (m, STRIP_K)).astype(np.float16)
    b = RNG.integers(-4, 5, (STRIP_K, n)).astype(np.float16)
    return a, b


def _strip_compiled(args, n=4):
    return pj.kernel(_strip_matmul, options={"tiles_per_block": {"MM": n}}).lower(*args).compile()


def _module(function_text):
    return f'module attributes {{pto.target_arch = "a3"}} {{\n{function_text}\n}}\n'


def _task_texts(compiled, level="level2"):
    """The task function with the K strip (as compiled) and without it (per-step loads of A)."""
    from ptojax.ascend.isel.task import TaskSelector

    (key, n), = compiled.code.tasks.items()
    kernel = compiled.code.kernels[key]
    plain = TaskSelector(kernel, "a3", level, compiled.code.memory, n, strips=False).run("plain")
    return compiled.code.pto(level=level), _module(plain)


@vendor_tools.needed
def test_ptoas_takes_the_task_function_of_a_k_chain_at_every_level():
    """A K chain at cube tile (128, 256, 64): its first step's and its loop's left tiles are 64 KiB each,
    all of L0A. Allocated before the task loop, PTOAS's level2 memory plan kept both live over the whole
    loop and aborted ("missing failed storage entry"); a grid point's tiles are allocated in the loop."""
    compiled = _strip_compiled(_strip_args(128, 256))
    for level in ("level2", "level3"):
        strip, plain = _task_texts(compiled, level)          # with A's K strip and with per-step loads
        assert "pto.subset" in strip.split("@matmul_tasks4")[1] and "pto.subset" not in plain
        for text in (strip, plain):
            assemble(text, arch="a3", level=level)


def test_a_k_strip_loads_a_once_per_task():
    """Points along N share A's rows: the task loads the whole strip (128 x 1024) once and takes each K
    step's chunk as a subset; GM bytes and MTE2 drop by the 3 other points' 3 loop steps' A windows."""
    from ptojax.ascend.cost import task_time

    args = _strip_args()
    compiled = _strip_compiled(args)
    (key, n), = compiled.code.tasks.items()
    strip_text, plain_text = _task_texts(compiled)
    name = compiled.code.entries()[-1][0]
    strip = task_time(engine.parse(strip_text).function(name), A3, block=0)
    plain = task_time(engine.parse(plain_text).function("plain"), A3, block=0)
    m, k, nb = STRIP_TILE
    steps, chunk = STRIP_K // k, m * k * 2                  # bytes of one K step's A window
    b_bytes = n * steps * k * nb * 2
    assert plain.bytes_in == chunk + n * (steps - 1) * chunk + b_bytes
    assert strip.bytes_in == steps * chunk + b_bytes
    assert plain.bytes_in - strip.bytes_in == (n - 1) * (steps - 1) * chunk
    assert strip.pipes["MTE2"] < plain.pipes["MTE2"] and strip.seconds < plain.seconds
    func = engine.parse(strip_text).function(name)
    assert strip_text.count("pto.subset") == 2 and _tloads(func.body).count(()) == 1
    assert compiled.code.task_cost(key, A3, 0.0, 0, n).bytes_in == strip.bytes_in
    # the numbers: the text engine, the replay (jax.jit of the sim kernel), the eager call
    ref = args[0].astype(np.float32) @ args[1].astype(np.float32)
    np.testing.assert_array_equal(np.asarray(compiled.run(*args)[0]), ref)
    np.testing.assert_array_equal(np.asarray(jax.jit(compiled)(*args)), ref)
    np.testing.assert_array_equal(np.asarray(compiled(*args)), ref)


@vendor_tools.needed
def test_ptoas_and_the_simulator_take_the_k_strip():
    """ptoas at both levels; pto-isa's CPU simulator runs the task function (the strip's subsets in
    its NZ layout) and matches the engine exactly."""
    code = _strip_compiled(_strip_args()).code
    assert "cols=1024" in code.pto(level="level2")
    for level in ("level2", "level3"):
        assemble(code.pto(level=level), arch="a3", level=level)
    results = xc.run([job for job in xc.jobs_of(code) if "_tasks" in job[1]], seed=0)
    assert len(results) == 1 and results[0].status == "exact", xc.table(results)


def test_a_k_strip_that_does_not_fit_l1_falls_back_to_per_step_loads():
    """K = 4096 at (128, 256, 64): the strip (1 MiB) exceeds L1 (512 KiB): each step loads its A chunk."""
    from ptojax.ascend.isel.task import k_strips, resident_loads

    a, b = RNG.integers(-4, 5, (128, 4096)).astype(np.float16), RNG.integers(-4, 5, (4096, 256)).astype(np.float16)
    compiled = _strip_compiled((a, b))
    (key, _), = compiled.code.tasks.items()
    kernel = compiled.code.kernels[key]
    assert resident_loads(kernel) and not k_strips(kernel, resident_loads(kernel), {}, compiled.code.memory.l1)
    text = compiled.code.pto()
    assert "pto.subset" not in text.split("_tasks4")[1]
    np.testing.assert_array_equal(np.asarray(compiled.run(a, b)[0]),
                                  a.astype(np.float32) @ b.astype(np.float32))
