"""Calibration through ``profile()`` on kernels written with ptojax (benchmarks/calibration.py): each
published point's band, A2 = A3, and docs/calibration.md holds the table this code generates."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import jax.numpy as jnp
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "calibration.md"
BEGIN, END = "<!-- table: benchmarks/calibration.py -->", "<!-- end of table -->"


def _load():
    spec = importlib.util.spec_from_file_location("benchmark_calibration", ROOT / "benchmarks" / "calibration.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


C = _load()
_PROFILES: dict = {}


def profile(name):
    if name not in _PROFILES:
        _PROFILES[name] = C.predict(next(p for p in C.POINTS if p.name == name))
    return _PROFILES[name]


def _point(name):
    return next(p for p in C.POINTS if p.name == name)


GEMMS = [p.name for p in C.POINTS if p.name.startswith("GEMM")]
TOPKS = [p.name for p in C.POINTS if p.name.startswith("top-")]


def _within_band(name):
    """Assert ``name``'s prediction within its band and at or above the lower bound; its profile."""
    point, prof = _point(name), profile(name)
    ratio = prof.makespan_us / point.published_us
    print(f"\n[calibration] {name}: {prof.makespan_us:.1f} us vs {point.published_us} us published ({ratio:.3f})")
    assert abs(ratio - 1) <= point.band
    assert prof.makespan_us >= prof.lower_bound_us
    return prof


@pytest.mark.parametrize("name", GEMMS)
def test_gemm_within_its_band(name):
    prof = _within_band(name)
    assert prof.utilisation["AIC"] > 0.5 and prof.utilisation["AIV"] == 0.0


@pytest.mark.parametrize("name", TOPKS)
def test_topk_within_its_band(name):
    prof = _within_band(name)
    assert prof.utilisation["AIV"] > 0.5 and prof.utilisation["AIC"] == 0.0


PROLOGS = [p.name for p in C.POINTS if p.name.startswith("QuantIndexerProlog")]


@pytest.mark.parametrize("name", PROLOGS)
def test_indexer_prolog_step_within_its_band(name):
    _within_band(name)


def test_indexer_prolog_steps_are_pyptos_three():
    """One point per published step, in order, each faster than the one before -- as published."""
    assert [_point(n).published_us for n in PROLOGS] == [76.0, 56.0, 49.0]
    times = [profile(n).makespan_us for n in PROLOGS]
    assert times[0] > times[1] > times[2], times


@pytest.mark.parametrize("name", PROLOGS)
def test_indexer_prolog_streams_its_weights_from_hbm(name):
    """The prolog's weights are read once: from HBM, and the bound's bandwidth term counts at least them."""
    from ptojax.ascend.targets import A3

    weights = 1536 * 64 * 128 + (7168 * 128 + 7168 * 64) * 2          # Q int8, K and weights-path bf16
    prof = profile(name)
    assert prof.bound.bandwidth * A3.hbm_bytes_per_s >= weights
    assert prof.makespan_us >= prof.lower_bound_us


def test_a2_and_a3_give_the_same_predictions():
    """One die of either target has the same cores, rates and memory (ptojax/ascend/targets.py)."""
    point = _point(GEMMS[0])
    assert C.predict(point, "a2").makespan_us == profile(point.name).makespan_us


def test_the_doc_holds_the_generated_table():
    text = DOC.read_text()
    assert BEGIN in text and END in text, f"{DOC} lacks the table markers"
    table = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    generated = C.table({p.name: profile(p.name) for p in C.POINTS})
    assert table == generated, "docs/calibration.md is out of date: paste `python benchmarks/calibration.py`'s table"


def _n(value) -> str:
    """A number as the doc writes it: thousands split by a space."""
    return f"{value:,.0f}".replace(",", " ")


def test_the_docs_figures_come_from_the_model():
    """The figures in docs/calibration.md's prose, recomputed."""
    from ptojax.ascend.cost import price_real
    from ptojax.ascend.targets import A3
    from ptojax.mpmd.l2 import reuse_miss

    text = " ".join(DOC.read_text().split())
    gemm = profile("GEMM fp16 6144³").bound
    assert f"bandwidth term is {_n(gemm.bandwidth * 1e6)} µs, far under the cube's {_n(gemm.cube * 1e6)} µs" in text
    n = 7680
    distinct, read = 2 * n * n * 2, (n // 128) * (n // 256) * (128 * n + n * 256) * 2
    miss = reuse_miss(distinct, A3.l2_bytes)
    hbm = (distinct + miss * (read - distinct)) / read
    assert f"so {miss * 100:.0f} % of the re-reads miss" in text
    assert f"({128 * n * 2 / 2 ** 20:.1f} MiB + {n * 256 * 2 / 2 ** 20:.2f} MiB per block" in text
    assert f"at a mixed {A3.gm_read_rate(1 - hbm):.0f} B/cycle" in text
    kernel, specs = C.topk(4800)
    code = kernel.lower(*specs).compile()._code()
    (key, cost), = code.costs(A3).items()
    sort = sum(price_real(s, A3)[1] for s in code.functions()[key].body if getattr(s, "op", None) in ("tsort32", "tmrgsort"))
    assert (f"Of the {_n(cost.cycles)} cycles a row costs, {_n(sort)} are the sort, {_n(cost.pipes['VECTOR'])} the "
            f"whole vector pipe and {_n(cost.fill)} the fill") in text
    rows = dict(dict(kernel.options.passes)["tiles_per_block"])["DEFAULT"]
    task = code.task_cost(key, A3, 0.0, 0, rows)
    assert task.fill == pytest.approx(cost.fill)                                # one fill per task
    assert f"A task loops over its {rows} rows" in text
    assert f"pays the fill once: {_n(task.cycles / rows)} cycles a row" in text
    ratios = [profile(name).makespan_us / _point(name).published_us for name in TOPKS]
    assert f"(the four points land at {min(ratios):.2f}–{max(ratios):.2f} of the" in text
    row = _point(TOPKS[0]).published_us * 1e-6 * 48 / 4800 * A3.clock_hz        # cycles a row, published
    vector = 0.94 * row                                                          # its aiv_vec_ratio
    assert f"{_n(vector)} of the {_n(row)} cycles a row takes" in text
    # the merge rate is fitted to that vector time: the model's vector pipe of a row lands on it
    assert cost.pipes["VECTOR"] == pytest.approx(vector, rel=1e-3)
    assert f"at a rate fitted to that vector time: {A3.merge_cycles * 128:g} cycles per 128 structs" in text
    f16, f16_specs = C.topk(4800, dtype=jnp.float16)
    f16_code = f16.lower(*f16_specs).compile()._code()
    (f16_key, f16_cost), = f16_code.costs(A3).items()
    sorts = [s for s in f16_code.functions()[f16_key].body if getattr(s, "op", None) == "tsort32"]
    (sort32,) = sorts                                       # of the row seen as one 32-value block per row:
    assert (sort32.in_types[0].v_row, sort32.in_types[0].v_col) == (1024 // 32, 32)   # a startup each, dearer
    assert f16_cost.cycles > cost.cycles
    assert max(ratios) == ratios[TOPKS.index(next(n for n in TOPKS if "fp16" in n))]
    _prolog_prose(text)
    _shared_reads_prose(text)


def _shared_reads_prose(text):
    """The small GEMM that gets faster with more rows (shared reads shared out over the tasks)."""
    import jax

    import ptojax as pj

    def gemm(a, b):
        with pj.tile(cube=(128, 64, 256)):
            return pj.ops.matmul(a, b)

    runs = {}
    for m in (128, 256):
        specs = (jax.ShapeDtypeStruct((m, 512), jnp.float16), jax.ShapeDtypeStruct((512, 512), jnp.float16))
        runs[m] = pj.kernel(gemm).lower(*specs).compile().profile(compute=False)
    assert (runs[128].tasks, runs[256].tasks) == (2, 4) and runs[256].makespan_us < runs[128].makespan_us
    assert (f"profiles at {runs[128].makespan_us:.1f} µs for M = 128 (two tasks) and "
            f"{runs[256].makespan_us:.1f} µs for M = 256 (four)") in text
    k_runs = {}
    for k in (128, 129):                         # the fill around a busiest pipe that moves
        specs = (jax.ShapeDtypeStruct((512, k), jnp.float16), jax.ShapeDtypeStruct((k, 1000), jnp.float16))
        k_runs[k] = pj.kernel(gemm).lower(*specs).compile().profile(compute=False).makespan_us
    assert k_runs[129] < k_runs[128]
    assert f"profiles at {k_runs[128]:.2f} µs for K = 128 and {k_runs[129]:.2f} µs for K = 129" in text


def _stage(prof, label):
    """(tasks, longest task µs) of ``label`` in ``prof``'s run."""
    spans = [r.end - r.start for r in prof.trace.records if r.title == label]
    return len(spans), max(spans) * 1e6


def _prolog_prose(text):
    """docs/calibration.md's paragraph on PyPTO's QuantIndexerProlog steps, recomputed."""
    one, two, three = (profile(n) for n in PROLOGS)
    ratios = [profile(n).makespan_us / _point(n).published_us for n in PROLOGS]
    assert ("QuantIndexerProlog's three steps are predicted at " + ", ".join(f"{r:.2f}" for r in ratios)
            + "× PyPTO's 76, 56 and 49 µs") in text
    assert f"({1536 * 8192 / 2 ** 20:.0f} MiB of int8 Q weights, {7168 * 192 * 2 / 2 ** 20:.1f} MiB of bf16" in text
    k1, k2 = _stage(one, "KMatmul"), _stage(two, "KMatmul")
    assert k1[0] == 1 and k2[0] == 2
    assert f"one `KMatmul` task of {k1[1]:.1f} µs" in text and f"two of {k2[1]:.1f} µs" in text
    q1, q2, q3 = (_stage(p, "QMatmul") for p in (one, two, three))
    assert f"{q1[0]} `QMatmul` tasks of {q1[1]:.1f} µs at k128 and {q2[1]:.1f} µs at k512" in text
    assert q3[0] == q2[0] // 4 and f"{q2[0]} `QMatmul` tasks become {q3[0]}" in text
    drops = [f"{1 - b.makespan_us / a.makespan_us:.0%}".replace("%", " %") for a, b in ((one, two), (two, three))]
    assert (f"{one.makespan_us:.1f} → {two.makespan_us:.1f} → {three.makespan_us:.1f} µs "
            f"(−{drops[0]}, −{drops[1]})") in text
    vec = dict(vec_dequant=(2, 2048), vec_head=(1, 32, 128), vec_quant=(32, 128))
    pypto = []
    for _, _, tiles, options in C.D.PYPTO_PROLOG_STEPS:
        kernel, args = C.indexer_prolog(dict(tiles, **vec), options)
        pypto.append(kernel.lower(*args).compile().profile(*args, compute=False).makespan_us)
    assert f"PyPTO's own vector tiles ({', '.join(f'{t:.1f}' for t in pypto)} µs)" in text
