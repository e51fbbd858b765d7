"""The lower bound bounds: no simulated schedule beats it, on random task graphs and random kernels,
bandwidth-bound ones included; the L2 rule (ptojax/mpmd/l2.py) that decides the HBM bytes."""
from __future__ import annotations

import collections
import random
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ptojax as pj
from ptojax.ascend.targets import A3
from ptojax.mpmd import Machine, Plan, Region, Task, TaskGraph, simulate
from ptojax.mpmd.l2 import L2, Access, reuse_miss
from ptojax.mpmd.synthetic import layered_dag

MIB = 1 << 20
BINDS: collections.Counter = collections.Counter()


def _machine(rng):
    return Machine(((("AIC", rng.randint(1, 24)), ("AIV", rng.randint(1, 48)))), rng.randint(1, 6),
                   rng.uniform(0.0, 3e-6), rng.uniform(0.0, 2e-6), rng.choice([0.5e12, 1.42e12, 1.6e12]))


@settings(max_examples=1000, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2 ** 32 - 1), hbm=st.sampled_from([0.0, 10.0, 100.0, 1000.0]),
       policy=st.sampled_from(["mpmd", "spmd"]))
def test_no_schedule_of_a_random_task_graph_beats_the_bound(seed, hbm, policy):
    """Random layered DAGs (1 to 8 stages of 1 to 60 tasks, random costs) on random machines; tasks
    read up to ``hbm`` x their GM bytes from HBM, so the HBM channel binds on many of them."""
    rng = random.Random(seed)
    plan = layered_dag(seed, stages=rng.randint(1, 8), width=(1, rng.randint(1, 60)), fan_in=rng.randint(0, 4),
                       cost=(rng.uniform(0.0, 5e-6), rng.uniform(5e-6, 50e-6)), hbm=hbm)
    profile = simulate(plan, _machine(rng), policy=policy, execute=False).profile()
    assert profile.makespan_us >= profile.lower_bound_us, profile.summary()
    BINDS[hbm > 0, profile.bound.binding] += 1


def test_the_bandwidth_term_binds_on_streaming_graphs_and_the_summary_says_so():
    """Independent vector tasks that each read 4 MB from HBM: the die's channel, not the cores, sets the
    pace; the bound is the bytes over the bandwidth and the run stays within a few percent of it."""
    m = Machine((("AIC", 24), ("AIV", 48)), 6, 2e-6, 1e-6, 1.42e12)
    tasks = [Task(i, "stream", "AIV", "S", 5e-6, None, (), (Region(i, (0,), (1,)),), hbm=4_000_000) for i in range(480)]
    profile = simulate(Plan(TaskGraph(tasks), [], [], 1), m, execute=False).profile()
    assert profile.bound.binding == "bandwidth"
    assert profile.bound.bandwidth == pytest.approx(480 * 4e6 / 1.42e12)
    assert profile.bound.bandwidth > 3 * max(profile.bound.vector, profile.bound.scheduler)
    assert 1.0 <= profile.makespan_us / profile.lower_bound_us < 1.01
    assert "bound by bandwidth" in profile.summary()


def test_binding_terms_of_the_random_graphs():
    """A census over the property test's graphs (run here when that test ran first, else on a fresh
    sample): the bandwidth term binds on some of the graphs that read from HBM, never on the others."""
    census = BINDS if sum(BINDS.values()) >= 200 else collections.Counter()
    if census is not BINDS:
        for seed in range(300):
            rng = random.Random(seed)
            hbm = rng.choice([0.0, 100.0, 1000.0])
            plan = layered_dag(seed, stages=rng.randint(1, 8), width=(1, rng.randint(1, 60)), hbm=hbm)
            profile = simulate(plan, _machine(rng), execute=False).profile()
            assert profile.makespan_us >= profile.lower_bound_us
            census[hbm > 0, profile.bound.binding] += 1
    print("\n[bound] binding terms (reads HBM, term): " + ", ".join(f"{k}: {v}" for k, v in sorted(census.items())))
    assert census[True, "bandwidth"] > 0
    assert census[False, "bandwidth"] == 0


# ------------------------------------------------------------------------------------ random kernels
def _kernel(case):
    op, dtype, tile, tpb = case
    if op == "sum":
        tile = (16, 256)

    def elementwise(x, y):
        with pj.tile(vec=tile):
            return x * 2.0 + y if op == "axpy" else jnp.exp(x) - y

    def reduce(x, y):
        with pj.tile(vec=tile):
            return jnp.sum(x + y, axis=-1)

    def matmul(x, y):
        with pj.tile(cube=(128, 64, 256)):
            z = pj.ops.matmul(x, y)
        with pj.tile(vec=tile):
            return z * 0.5

    fn = {"axpy": elementwise, "exp": elementwise, "sum": reduce, "matmul": matmul}[op]
    return pj.kernel(fn, options={"tiles_per_block": {"DEFAULT": tpb}})


KERNEL_CASES = st.tuples(st.sampled_from(["axpy", "exp", "sum", "matmul"]), st.sampled_from([jnp.float16, jnp.float32]),
                         st.sampled_from([(16, 256), (32, 128), (64, 64)]), st.sampled_from([1, 4, "auto"]))


def _profile_kernel(case, rows, cols):
    op, dtype = case[0], case[1]
    if op == "sum":                     # whole rows in UB: fp32 rows up to 1 024 wide
        dtype, cols = jnp.float32, min(cols, 1024)
    if op == "matmul":
        x, y = jax.ShapeDtypeStruct((rows, cols), jnp.float16), jax.ShapeDtypeStruct((cols, cols), jnp.float16)
    else:
        x = y = jax.ShapeDtypeStruct((rows, cols), dtype)
    profile = _kernel(case).lower(x, y).compile().profile(compute=False)
    assert profile.makespan_us >= profile.lower_bound_us, (case, rows, cols, profile.summary())
    return profile


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=KERNEL_CASES, rows=st.sampled_from([256, 1024, 4096]), cols=st.sampled_from([256, 1024, 2048]))
def test_no_schedule_of_a_random_kernel_beats_the_bound(case, rows, cols):
    _profile_kernel(case, rows, cols)


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=KERNEL_CASES, rows=st.sampled_from([256, 1024]), cols=st.sampled_from([256, 1024]))
def test_the_tasks_hbm_bytes_are_the_l2_rules_however_points_are_grouped(case, rows, cols):
    """The tasks' HBM bytes add up to the L2 rule's for every block call, at 1, 2, 4 and "auto" grid
    points per task: here the inputs' bytes, read once from HBM (every later read, of them or of the
    intermediate results, hits the L2), whatever the grouping; and the bound holds."""
    rule = []                                   # (the run's L2, its HBM bytes) per block call
    hbm_fraction = L2.hbm_fraction

    def recorded(self, reads, writes):
        fraction, spill = hbm_fraction(self, reads, writes)
        rule.append((self, fraction * sum(a.nbytes for a in reads.values()) + spill))
        return fraction, spill

    for tpb in (1, 2, 4, "auto"):
        rule.clear()
        with mock.patch.object(L2, "hbm_fraction", recorded):
            profile = _profile_kernel(case[:3] + (tpb,), rows, cols)
        op = case[0]
        inputs = rows * min(cols, 1024) * 4 * 2 if op == "sum" else (
            (rows * cols + cols * cols) * 2 if op == "matmul" else rows * cols * jnp.dtype(case[1]).itemsize * 2)
        hbm = sum(t.hbm for t in profile.trace.graph.tasks)
        calls = [b for l2, b in rule if l2 is rule[-1][0]]        # the profiled run's calls
        assert abs(hbm - sum(calls)) <= len(calls), (case, tpb, hbm, sum(calls))
        assert hbm == inputs, (case, tpb, hbm, inputs)
        assert profile.bound.bandwidth == pytest.approx(hbm / A3.hbm_bytes_per_s)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=KERNEL_CASES, rows=st.sampled_from([128, 512, 2048, 8192]), cols=st.sampled_from([256, 1024, 4096]))
def test_no_schedule_of_a_random_kernel_beats_the_bound_long(case, rows, cols):
    _profile_kernel(case, rows, cols)


def test_a_large_gemm_reads_its_operands_once_from_hbm():
    """6144^3 fp16: A and B (144 MiB) fit the L2, so only their first reads come from HBM; 7680^3 (225
    MiB) does not, and a share 1 - 192/225 of the re-reads misses too -- both bounds hold."""
    for n in (6144, 7680):
        case = ("matmul", jnp.float16, (64, 256), 1)
        profile = _profile_kernel(case, n, n)
        hbm = profile.bound.bandwidth * A3.hbm_bytes_per_s
        blocks = (n // 128) * (n // 256)
        read = blocks * (128 * n + n * 256) * 2
        distinct = 2 * n * n * 2
        miss = reuse_miss(distinct, A3.l2_bytes)
        gemm_hbm = distinct + miss * (read - distinct)
        assert hbm >= gemm_hbm * 0.999
        assert (miss == 0) == (n == 6144)


@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(st.sampled_from([8192, 32768, 65536]), min_size=2, max_size=3),
       chained=st.lists(st.booleans(), min_size=3, max_size=3), tpb=st.sampled_from([16, "auto"]))
@example(rows=[65536, 65536], chained=[False] * 3, tpb="auto")       # two 256 MiB calls: 832 MiB, >= 614 us
def test_no_schedule_of_a_multi_call_streaming_kernel_beats_the_bound_or_the_hbm_floor(rows, chained, tpb):
    """Two or three elementwise block calls over f16 [rows, 2048] (32 to 256 MiB each), each on a fresh
    input or chained on the previous call's output, writing more than the 192 MiB L2 between them: the
    HBM bytes cover the inputs' first reads plus every write the L2 cannot keep at the end (written
    data that later calls push out is written back), and no schedule beats the bound or that floor."""
    cols, chained = 2048, [False] + chained[1:len(rows)]
    shapes = [(r, cols) for r, c in zip(rows, chained) if not c]

    def f(*xs):
        xs, outs = list(xs), []
        for c in chained:
            with pj.tile(vec=(16, cols)):
                outs.append(outs[-1] + 1.0 if c else xs.pop(0) * 2.0)
        return tuple(outs)

    profile = pj.kernel(f, options={"tiles_per_block": {"DEFAULT": tpb}}).lower(
        *(jax.ShapeDtypeStruct(s, jnp.float16) for s in shapes)).compile().profile(compute=False)
    sizes, size = [], 0
    for r, c in zip(rows, chained):
        size = size if c else r * cols * 2
        sizes.append(size)
    floor = sum(r * cols * 2 for r in (s[0] for s in shapes)) + max(0, sum(sizes) - A3.l2_bytes)
    hbm = sum(t.hbm for t in profile.trace.graph.tasks)
    assert hbm >= floor - len(profile.trace.graph.tasks), (rows, chained, hbm, floor)
    assert profile.bound.bandwidth == pytest.approx(hbm / A3.hbm_bytes_per_s)
    assert profile.makespan_us >= profile.lower_bound_us, (rows, chained, profile.summary())
    assert profile.makespan_us * 1e-6 >= floor / A3.hbm_bytes_per_s * (1 - 1e-6)


# ------------------------------------------------------------------------------------------ L2 rule
def _access(nbytes: int, size: int, lo: int = 0) -> Access:
    """``nbytes`` read (or written) of a tensor of ``size`` bytes: whole passes over it, then the
    ``[lo, lo + rest)`` part."""
    access = Access((size,), 1)
    for _ in range(nbytes // size):
        access.add((0,), (size,))
    if nbytes % size:
        access.add((lo,), (lo + nbytes % size,))
    return access


def _call(l2, reads, writes):
    """``l2.hbm_fraction`` of a call given as tensor -> (bytes, tensor bytes[, first byte of a part])."""
    return l2.hbm_fraction({t: _access(*a) for t, a in reads.items()}, {t: _access(*a) for t, a in writes.items()})


def test_l2_rule_compulsory_reads_reuse_and_residency():
    l2 = L2(100 * MIB)
    # A first call reads 10 MiB ten times over: its first read from HBM, the re-reads hit.
    assert _call(l2, {"a": (100 * MIB, 10 * MIB)}, {"b": (10 * MIB, 10 * MIB)}) == (pytest.approx(0.1), 0)
    # Its output b and input a are resident now: a later call reads both from L2.
    assert _call(l2, {"a": (10 * MIB, 10 * MIB), "b": (10 * MIB, 10 * MIB)}, {}) == (0.0, 0)
    # A call whose reads (150 MiB distinct) overflow the L2: 1 - 100/150 of its re-reads miss.
    fraction, _ = _call(l2, {"c": (300 * MIB, 150 * MIB)}, {})
    assert fraction == pytest.approx((150 + (1 - 100 / 150) * 150) / 300)
    # c (150 MiB) pushed a and b out: reading a again goes to HBM.
    assert not l2.resident("a") and _call(l2, {"a": (10 * MIB, 10 * MIB)}, {})[0] == 1.0
    # A call writing 250 MiB (its distinct bytes) into the 100 MiB L2 writes 150 MiB back to HBM.
    assert _call(l2, {"a": (10 * MIB, 10 * MIB)}, {"d": (300 * MIB, 250 * MIB)}) == (0.0, 150 * MIB)
    assert reuse_miss(50, 100) == 0.0 and reuse_miss(400, 100) == 0.75
    # A resident tensor read once beside a new one that overflows the L2: its distinct bytes hit, only
    # re-reads miss (it charged 1 - 100/120 of the resident tensor's bytes as misses).
    l2 = L2(100 * MIB)
    assert _call(l2, {}, {"e": (60 * MIB, 60 * MIB)}) == (0.0, 0)
    assert _call(l2, {"e": (60 * MIB, 60 * MIB), "x": (60 * MIB, 60 * MIB)}, {})[0] == pytest.approx(0.5)


def test_l2_rule_first_reads_of_a_tensors_parts_come_from_hbm():
    """Two calls reading a tensor's two halves pay for both from HBM (the first marked the whole tensor
    resident: the second half's first read was a hit); re-reading a half, or the whole once both were
    read, hits; a write makes its part resident."""
    l2 = L2(100 * MIB)
    assert _call(l2, {"a": (5 * MIB, 10 * MIB, 0)}, {})[0] == 1.0
    assert _call(l2, {"a": (5 * MIB, 10 * MIB, 5 * MIB)}, {})[0] == 1.0
    assert _call(l2, {"a": (5 * MIB, 10 * MIB, 0)}, {})[0] == 0.0
    assert _call(l2, {"a": (10 * MIB, 10 * MIB)}, {})[0] == 0.0
    # a tensor written in part, then read whole: the part written hits, the rest comes from HBM
    assert _call(l2, {}, {"b": (4 * MIB, 10 * MIB, 0)}) == (0.0, 0)
    assert _call(l2, {"b": (10 * MIB, 10 * MIB)}, {})[0] == pytest.approx(0.6)
    # a part of a tensor the L2 no longer holds is read from HBM again, as a whole one is
    _call(l2, {"c": (100 * MIB, 100 * MIB)}, {})
    assert _call(l2, {"a": (5 * MIB, 10 * MIB, 0)}, {})[0] == 1.0


def test_l2_rule_interleaved_parts_pay_for_their_own_bytes():
    """What the L2 holds of a tensor is the bytes calls touched: the odd rows (or columns) read after the
    even ones come from HBM (a box spanning the even ones held them all)."""
    def part(lo, hi, shape):
        access = Access((256, 512), 1)
        access.add(lo, hi, shape)
        return access

    l2 = L2(100 * MIB)
    assert l2.hbm_fraction({"a": part((0, 0, 0), (128, 1, 512), (128, 2, 512))}, {})[0] == 1.0
    assert l2.hbm_fraction({"a": part((0, 1, 0), (128, 2, 512), (128, 2, 512))}, {})[0] == 1.0
    assert l2.hbm_fraction({"a": part((0, 0, 0), (128, 2, 512), (128, 2, 512))}, {})[0] == 0.0
    assert l2.hbm_fraction({"b": part((0, 0, 0), (256, 256, 1), (256, 256, 2))}, {})[0] == 1.0
    assert l2.hbm_fraction({"b": part((0, 0, 1), (256, 256, 2), (256, 256, 2))}, {})[0] == 1.0
    assert l2.hbm_fraction({"b": part((0, 0), (256, 512), (256, 512))}, {})[0] == 0.0


def test_a_footprint_of_many_close_runs_is_held_as_few():
    """A call reading a large tensor's even columns (33 M one-element runs) holds runs closer than an L2
    line as one per row: bounded memory and time, as whole lines would hold them; a smaller read keeps
    its exact runs (the even columns of 258 x 128)."""
    big = Access((8192, 8192), 2)
    big.add((0, 0, 0), (8192, 4096, 1), (8192, 4096, 2))
    starts, ends = big.runs()
    assert len(starts) == 8192 and (ends - starts == (8192 - 1) * 2).all()
    small = Access((258, 128), 4)
    small.add((0, 0, 0), (258, 64, 1), (258, 64, 2))
    starts, ends = small.runs()
    assert len(starts) == 258 * 64 and (ends - starts == 4).all()


def test_l2_rule_writes_back_dirty_data_that_later_calls_push_out():
    """Dirty bytes go back to HBM when later traffic (reads or writes, of later calls or copies) pushes
    them out of the L2, not only when one call writes more than the L2 holds; at most the capacity stays
    dirty at the end."""
    l2 = L2(100 * MIB)
    assert _call(l2, {}, {"a": (60 * MIB, 60 * MIB)}) == (0.0, 0)           # a fits, dirty
    assert _call(l2, {}, {"b": (60 * MIB, 60 * MIB)}) == (0.0, 20 * MIB)    # b pushes 20 MiB of a out
    assert _call(l2, {"c": (100 * MIB, 100 * MIB)}, {}) == (1.0, 100 * MIB)  # reading c pushes out the rest
    assert l2.dirty == {}
    # Rewriting a tensor dirties its distinct bytes once; a partial write, only the bytes written.
    assert _call(l2, {}, {"d": (30 * MIB, 30 * MIB)}) == (0.0, 0)
    assert _call(l2, {}, {"d": (30 * MIB, 30 * MIB), "e": (10 * MIB, 70 * MIB)}) == (0.0, 0)
    assert l2.dirty == {"d": 30 * MIB, "e": 10 * MIB}
    l2.touch("f", 100 * MIB)                                                 # as a copy does
    assert l2.evict() == 40 * MIB and l2.dirty == {}


class _PlainL2:
    """The L2 rule as its docstring states it, by walking every tensor: the reference for :class:`L2`.
    Tensors are 1-D; what the L2 holds of one is a set of its bytes (None: all of it)."""

    def __init__(self, capacity):
        self.capacity, self.recent, self.dirty, self.part = capacity, {}, {}, {}

    def held(self, tensor):
        order = list(self.recent)
        after = sum(self.recent[t] for t in order[order.index(tensor) + 1:])
        return min(max(self.capacity - after, 0), self.recent[tensor])

    def resident(self, tensor):
        return tensor in self.recent and self.held(tensor) == self.recent[tensor]

    def touch(self, tensor, nbytes, written=0, part=None):
        self.recent.pop(tensor, None)
        self.recent[tensor] = nbytes
        self.part[tensor] = part
        if written:
            self.dirty[tensor] = min(nbytes, self.dirty.get(tensor, 0) + written)

    def touch_parts(self, tensor, parts, size, written=0):
        held = self.part.get(tensor, set())
        held = set(range(size)) if held is None else held.union(*(range(a, b) for a, b in parts))
        self.touch(tensor, len(held), written, None if len(held) == size else held)

    def unseen(self, tensor, parts, distinct, size):
        if not self.resident(tensor):
            return distinct
        if self.part[tensor] is None:
            return 0
        return min(len(set().union(*(range(a, b) for a, b in parts)) - self.part[tensor]), distinct)

    def evict(self):
        out = 0
        for tensor in list(self.dirty):
            out += max(self.dirty[tensor] - self.held(tensor), 0)
            self.dirty[tensor] = min(self.dirty[tensor], self.held(tensor))
            if not self.dirty[tensor]:
                del self.dirty[tensor]
        return out


_PART = st.tuples(st.integers(0, 40), st.integers(0, 63), st.integers(1, 64))      # tensor, first byte, bytes


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(calls=st.lists(st.tuples(st.lists(_PART, max_size=4), st.lists(_PART, max_size=3), st.booleans()),
                      max_size=60),
       capacity=st.sampled_from([1, 50, 100, 400]))
def test_the_l2_rule_is_its_plain_statement(calls, capacity):
    """Residency, HBM fractions and write-backs of random call sequences (tensors re-read in parts,
    rewritten, copied) equal those of the rule walked tensor by tensor: a run of thousands of small
    tensors (a scan's steps) costs a logarithm per touch, not such a walk."""
    fast, plain = L2(capacity), _PlainL2(capacity)
    size = {t: 16 + 7 * t % 49 for t in range(41)}

    def accesses(parts, times):
        out = {}
        for t, first, n in parts:
            lo = first % size[t]
            hi = min(lo + n, size[t])
            access = out.setdefault(f"t{t}", Access((size[t],), 1))
            for _ in range(times):
                access.add((lo,), (hi,))
        return out

    for reads, writes, copy in calls:
        r, w = accesses(reads, 2), accesses(writes, 1)
        if copy:                                     # a copy touches, then writes back what it pushes out
            for t, a in r.items():
                fast.touch(t, a.size)
                plain.touch(t, a.size)
            assert fast.evict() == plain.evict()
            continue
        assert [fast.resident(t) for t in r] == [plain.resident(t) for t in r]
        parts = {t: [(lo[0], hi[0]) for _, lo, hi in a.boxes] for t, a in r.items()}
        distinct = {t: min(a.nbytes, a.size) for t, a in r.items()}
        miss = reuse_miss(sum(distinct.values()), capacity)
        total = sum(a.nbytes for a in r.values())
        hbm = sum(plain.unseen(t, parts[t], distinct[t], a.size) + miss * (a.nbytes - distinct[t])
                  for t, a in r.items())
        for t, a in r.items():
            plain.touch_parts(t, [(lo[0], hi[0]) for _, lo, hi in a.boxes], a.size)
        for t, a in w.items():
            plain.touch_parts(t, [(lo[0], hi[0]) for _, lo, hi in a.boxes], a.size, min(a.nbytes, a.size))
        fraction, back = fast.hbm_fraction(r, w)
        assert fraction == pytest.approx(hbm / total if total else 0.0) and back == plain.evict()
        assert fast.dirty == plain.dirty


def test_writes_past_the_l2_cost_hbm_bandwidth():
    """An outer sum writing 1 GiB of float32 from two small vectors: the 832 MiB the 192 MiB L2 cannot
    hold go to HBM, so the run takes at least their time at the die's HBM bandwidth (it was 353 us,
    3 TB/s of writes, with a bandwidth term of 0.09 us); at 64 MiB the writes stay in the L2."""
    def outer(a, b):
        with pj.tile(vec=(16, 1024)):
            return a[:, None] + b[None, :]

    for n, spill in ((4096, 0), (16384, 1024 * MIB - A3.l2_bytes)):
        v = jax.ShapeDtypeStruct((n,), jnp.float32)
        profile = pj.kernel(outer).lower(v, v).compile().profile(compute=False)
        hbm = sum(t.hbm for t in profile.trace.graph.tasks)
        assert hbm == pytest.approx(2 * n * 4 + spill, abs=len(profile.trace.graph.tasks))
        assert profile.makespan_us * 1e-6 >= hbm / A3.hbm_bytes_per_s


def test_task_costs_price_their_hbm_bytes_at_the_hbm_rate():
    """A streamed input (read once) costs more per tile than the same program re-reading a resident one:
    the task records carry the HBM bytes the bound charges."""
    def f(x):
        with pj.tile(vec=(32, 256)):
            y = x * 2.0
        with pj.tile(vec=(32, 256)):
            return y + 1.0, x * 3.0

    x = jax.ShapeDtypeStruct((1024, 1024), jnp.float32)
    compiled = pj.kernel(f).lower(x).compile()
    profile = compiled.profile(compute=False)
    tasks = profile.trace.graph.tasks
    assert all(t.hbm >= 0 for t in tasks)
    assert sum(t.hbm for t in tasks) >= x.size * 4 * 0.999        # x comes from HBM once
    assert sum(t.hbm for t in tasks) <= x.size * 4 * 1.001        # and only once: y, and x again, hit L2
    assert profile.bound.bandwidth == pytest.approx(sum(t.hbm for t in tasks) / A3.hbm_bytes_per_s)
    # The first call reads x once, all from HBM: its tasks cost what the block costs with no L2 hit; the
    # second re-reads x and y from L2: the block's cost at full L2 hits.
    from ptojax.ascend.cost import kernel_time

    code = compiled._code()
    for task in tasks:
        key = next(k for k in code.kernels if k[0] == task.name)
        l2_hit = 0.0 if task.stage == 0 else 1.0
        assert task.cost == pytest.approx(kernel_time(code.functions()[key], A3, l2_hit=l2_hit).seconds)
    assert {t.stage for t in tasks} == {0, 1}


def test_a_binding_phase_names_what_dominates_it():
    """``phases`` generalises the work terms, so it bound nearly every kernel and the summary said only
    ``phases``; it names what dominates the phase: 256 small vector tasks are the schedulers'
    dispatches (tiles_per_block cuts them), 16 long ones a chain, exp/tanh chains the AIVs' work."""
    def ew(x, y):
        with pj.tile(vec=(8, 512)), jax.named_scope("EW"):
            return x * y + 1.0

    def heavy(x, y):
        with pj.tile(vec=(8, 512)), jax.named_scope("EW"):
            for _ in range(8):
                x = jnp.tanh(jnp.exp(x) * 0.5)
            return x

    x = np.ones((1024, 1024), np.float32)
    profile = {(f.__name__, n): pj.kernel(f, options={"tiles_per_block": {"EW": n}}).lower(x, x).compile().profile()
               for f, n in ((ew, 1), (ew, 16), (heavy, 1))}
    assert profile["ew", 1].binding == "phases (scheduler)" and "bound by phases (scheduler))" in profile["ew", 1].summary()
    assert profile["ew", 16].binding == "phases (chain)"
    assert profile["heavy", 1].binding == "phases (AIV)"
    assert profile["ew", 16].makespan_us < profile["ew", 1].makespan_us
