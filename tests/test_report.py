"""The tuning loop: the HTML report's data, per-label overrides, profile diffs, the CLI, and the
page opened in headless Chromium."""
import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax import report
from ptojax.cli import main as cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from examples.deepseek_v32 import kernels as K  # noqa: E402
from examples.deepseek_v32 import reference as R  # noqa: E402

SOURCE = '''
import jax, jax.numpy as jnp
import ptojax as pj

def f(a, b, w):
    with pj.tile(vec=(32, 32)), jax.named_scope("Scale"):
        x = a * 2.0 + b
    with pj.tile(cube=(64, 64, 32)), jax.named_scope("Linear"):
        y = pj.ops.matmul(x, w)
    with pj.tile(vec=(32, 32)), jax.named_scope("Rowsum"):
        return jnp.sum(y, axis=-1)
'''
SHAPES = ["128x64:float16", "128x64:float16", "64x32:float16"]


_NAMESPACE: dict = {}
exec(compile(SOURCE, "report_kernel", "exec"), _NAMESPACE)
kernel_fn = _NAMESPACE["f"]                            # the same kernel the CLI tests load from a file


def _args():
    rng = np.random.default_rng(0)
    return [rng.uniform(-1, 1, s).astype(np.float16) for s in [(128, 64), (128, 64), (64, 32)]]


def _want(a, b, w):
    x = (a.astype(np.float32) * 2 + b.astype(np.float32)).astype(np.float16).astype(np.float32)
    return (x @ w.astype(np.float32)).sum(-1)


def _block_parts(compiled):
    """label -> [(program, grid shape, tiles_per_block, instances)] from the Block graph."""
    out = {}
    for node in report.block_graph(compiled.lowering)["nodes"]:
        if node["kind"] == "block":
            out.setdefault(node["label"], []).extend(
                (p["program"], tuple(p["grid"]), p["tiles_per_block"], p["instances"]) for p in node["parts"])
    return out


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    args = _args()
    compiled = pj.kernel(kernel_fn).lower(*args).compile()
    path = tmp_path_factory.mktemp("report") / "report.html"
    profile = compiled.report(path, *args)
    return compiled, profile, path, args


# ------------------------------------------------------------------------------------- the data
def test_report_data_matches_the_profile(profiled):
    compiled, profile, path, _ = profiled
    data = report.build(profile, compiled)
    assert data["makespan_us"] == profile.makespan_us and data["lower_bound_us"] == profile.lower_bound_us
    assert data["tasks"] == profile.tasks == len(data["records"])
    bound = {b["term"]: b["us"] for b in data["bound"]}
    assert bound == {k: v * 1e6 for k, v in dataclasses.asdict(profile.bound).items()}
    assert [b["term"] for b in data["bound"] if b["binding"]] == [max(bound, key=bound.get)]
    assert {lab["label"]: lab["us"] for lab in data["labels"]} == profile.label_us
    assert sum(lab["tasks"] for lab in data["labels"]) == profile.tasks
    assert {"Scale", "Linear", "Rowsum"} <= set(profile.label_us)
    assert {i["kind"]: i["idle_us"] for i in data["idle"]} == profile.idle_us
    assert {i["kind"]: i["utilisation"] for i in data["idle"]} == profile.utilisation
    assert data["critical_path"]["tids"] == profile.critical_path
    assert [t["tid"] for t in data["critical_path"]["tasks"]] == profile.critical_path
    assert [(b["gap_us"], b["kind"], b["core"], b["after"]) for b in data["bubbles"]] == profile.bubbles(10)
    for r, rec in zip(data["records"], sorted(profile.trace.records, key=lambda r: r.tid)):
        assert (r["tid"], r["start_us"], r["end_us"], r["preds"]) == (rec.tid, rec.start * 1e6, rec.end * 1e6,
                                                                       list(rec.preds))
    assert set(data["levels"]) == {"tensor", "tile", "block", "pto"}
    assert data["levels"]["block"] == compiled.as_text("block") and "pto.tload" in data["levels"]["pto"]
    # the block graph: three block calls (Scale AIV, Linear AIC, Rowsum AIV) chained through GM
    graph = data["graph"]
    blocks = {n["label"]: n for n in graph["nodes"] if n["kind"] == "block"}
    assert {k: v["core"] for k, v in blocks.items()} == {"Scale": "AIV", "Linear": "AIC", "Rowsum": "AIV"}
    assert sum(n["instances"] for n in blocks.values()) == profile.tasks
    pairs = {(e["src"], e["dst"]) for e in graph["edges"]}
    assert (blocks["Scale"]["id"], blocks["Linear"]["id"]) in pairs
    assert (blocks["Linear"]["id"], blocks["Rowsum"]["id"]) in pairs
    assert sum(n["kind"] == "input" for n in graph["nodes"]) == 3 and sum(n["kind"] == "output" for n in graph["nodes"]) == 1


def test_report_html_is_self_contained_with_every_section(profiled):
    _, profile, path, _ = profiled
    page = path.read_text()
    for section in ("overview", "swimlane-section", "load", "bound", "idle", "labels", "critical", "bubbles", "fusion",
                    "graph", "levels"):
        assert f"id='{section}'" in page, section
    for level in ("tensor", "tile", "block", "pto"):
        assert f"data-level='{level}'" in page
    assert page.count('class="task') == profile.tasks
    assert f"{profile.makespan_us:.2f} µs" in page and f"{profile.lower_bound_us:.2f} µs" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)      # nothing fetched
    assert "<script src" not in page and "<link" not in page
    tasks = json.loads(re.search(r"id='taskdata'>(.*?)</script>", page).group(1))
    assert len(tasks) == profile.tasks


def test_summary_diff_and_chrome_trace(profiled, tmp_path):
    compiled, profile, _, args = profiled
    tuned = pj.kernel(kernel_fn, options={"tiles": {"Linear": {"cube": (32, 64, 32)}}}).lower(*args).compile()
    other = tuned.profile(*args)
    d = report.diff(profile, other)
    rows = {r[0]: r[1:] for r in d.rows}
    assert rows["makespan us"] == (profile.makespan_us, other.makespan_us, other.makespan_us - profile.makespan_us)
    assert rows["tasks"][:2] == (profile.tasks, other.tasks)
    assert rows["label Linear tasks"][:2] == (2, 4)
    assert rows["label Linear us"][:2] == (profile.label_us["Linear"], other.label_us["Linear"])
    text = str(d)
    assert "makespan us" in text and "label Linear tasks" in text and "utilisation AIC %" in text
    # saved summaries and a Chrome trace give the same figures
    a, b, t = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "a.trace.json"
    report.save_summary(profile, a)
    report.save_summary(other, b)
    profile.save(t)
    assert report.diff(a, b).rows == d.rows
    from_trace = report.diff(t, b).rows
    for (w1, x1, y1, _), (w2, x2, y2, _) in zip(d.rows, from_trace):
        assert w1 == w2 and y1 == y2
        if w1 != "lower bound us":
            assert x1 == pytest.approx(x2, rel=1e-9, abs=1e-9), w1
    assert report.diff(t, b).rows[1][1] is None             # a trace holds no lower bound
    assert json.loads(a.read_text())["format"] == report.SUMMARY_FORMAT
    assert d.makespan_ratio == other.makespan_us / profile.makespan_us


def test_saved_summaries_count_the_tiles_a_task_runs(tmp_path):
    """A label of 4 tiles in one task (``tiles_per_block``) ran on one core: the saved summary and the
    diff flag it as the HTML report does (they counted each task as one tile: 'tiles 1', not flagged),
    and so does the diff of two Chrome traces (their events did not hold a task's tile count)."""
    def fn(a, b):
        with pj.tile(cube=(32, 64, 32)), jax.named_scope("Linear"):
            return pj.ops.matmul(a, b)

    args = [np.ones((128, 64), np.float16), np.ones((64, 32), np.float16)]
    one_task = pj.kernel(fn, options={"tiles_per_block": {"Linear": 4}}).lower(*args).compile().profile()
    spread = pj.kernel(fn).lower(*args).compile().profile()
    saved = report.summary(one_task)
    assert one_task.tasks == 1 and saved["load"]["single_core"] == ["Linear (AIC 0)"]
    assert [(x["tasks"], x["tiles"]) for x in saved["load"]["labels"]] == [(1, 4)]
    assert report.summary(spread)["load"]["single_core"] == []
    rows = {r[0]: r[1:] for r in report.diff(spread, one_task).rows}
    assert rows["single-core labels"][:2] == (0, 1)
    spread.save(tmp_path / "spread.json")
    one_task.save(tmp_path / "one.json")
    traced = report.diff(tmp_path / "spread.json", tmp_path / "one.json")
    assert {r[0]: r[1:] for r in traced.rows}["single-core labels"] == (0, 1, 1)
    assert traced.after["load"]["labels"] == saved["load"]["labels"]


def test_diff_of_runs_of_no_tasks():
    """A loop of 0 trips against one of 2: the ratio is 1 between two runs of no time, inf from none to
    some (it was 0.0, 'faster')."""
    def loop(x, n):
        return jax.lax.fori_loop(0, n, lambda i, c: c * 0.5 + x, x)

    x = np.ones((40, 64), np.float32)
    compiled = pj.kernel(loop).lower(x, np.int32(0)).compile()
    none, some = (compiled.profile(x, np.int32(n)) for n in (0, 2))
    assert report.diff(none, none).makespan_ratio == 1.0
    assert report.diff(none, some).makespan_ratio == float("inf")
    assert report.diff(some, none).makespan_ratio == 0.0


# ------------------------------------------------------------------------ fusion and core load
def _tensor_ops(compiled):
    """(op, label) of the Tensor level's eqns, reshapes (GM views) left out."""
    from ptojax.lowering.scope import read
    return [(e.primitive.name.removeprefix("pto."), read(str(e.source_info.name_stack))[1])
            for e in compiled.lowering.tensor.jaxpr.eqns if e.primitive.name != "pto.reshape"]


def _fusion_table(fz):
    """block -> (core, label, ops merged), and each op node's (op, label, block)."""
    blocks = [(b["core"], b["label"], b["ops"]) for b in fz["blocks"]]
    return blocks, [(n["op"], n["label"], n["block"]) for n in fz["nodes"] if n["kind"] == "op"]


def _check_against_the_block_level(compiled, fz):
    """The fusion view's blocks are the Block level's block calls: same programs, instances, op names."""
    graph = [n for n in report.block_graph(compiled.lowering)["nodes"] if n["kind"] == "block"]
    assert [list(dict.fromkeys(p["program"] for p in n["parts"])) for n in graph] == [b["programs"] for b in fz["blocks"]]
    assert [n["instances"] for n in graph] == [b["instances"] for b in fz["blocks"]]
    for b in fz["blocks"]:
        assert {p.split("#")[0] for p in b["programs"]} == {"+".join(b["ops"])}
        assert [fz["nodes"][i]["block"] for i in b["op_ids"]] == [b["id"]] * len(b["ops"])


def test_fusion_view_names_the_ops_merged_into_each_block(profiled):
    compiled, profile, path, args = profiled
    fz = report.build(profile, compiled)["fusion"]
    _check_against_the_block_level(compiled, fz)
    blocks, ops = _fusion_table(fz)
    assert blocks == [("AIV", "Scale", ["mul", "add"]), ("AIC", "Linear", ["matmul"]), ("AIV", "Rowsum", ["sum"])]
    assert [(op, label) for op, label, _ in ops] == _tensor_ops(compiled)
    by_op = {n["op"]: n["id"] for n in fz["nodes"] if n["kind"] == "op"}
    fused = {(e["src"], e["dst"]): e["fused"] for e in fz["edges"]}
    assert fused[by_op["mul"], by_op["add"]] is True                 # mul's tile stays in UB for add
    assert fused[by_op["add"], by_op["matmul"]] is False             # vector -> cube: through GM
    assert fused[by_op["matmul"], by_op["sum"]] is False
    scale = fz["blocks"][0]
    assert (scale["gm_in_bytes"], scale["gm_out_bytes"]) == (2 * 128 * 64 * 2, 128 * 64 * 2)   # a, b in; x out
    page = path.read_text()
    assert page.count('class="fnode op"') == 4 and page.count('class="fedge fused"') == 1
    assert "<td class=\"\">mul + add</td>" in page


def test_fusion_view_a_matmul_epilogue_fuses_and_split_rows_do_not():
    """The elementwise ops after a matmul are one vector program (the matmul its own cube block); a
    softmax is one program, or four blocks through GM with ``row_loops`` off for its label."""
    def gemm(x, w, b):
        with pj.tile(cube=(64, 64, 64)), jax.named_scope("Gemm"):
            y = pj.ops.matmul(x, w)
        with pj.tile(vec=(32, 64)), jax.named_scope("Epilogue"):
            return jnp.maximum(y + b, 0.0) * 2.0

    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(128, 64), (64, 128), (128,)]]
    compiled = pj.kernel(gemm).lower(*args).compile()
    fz = report.build(compiled.profile(*args), compiled)["fusion"]
    _check_against_the_block_level(compiled, fz)
    blocks, ops = _fusion_table(fz)
    assert blocks == [("AIC", "Gemm", ["matmul"]), ("AIV", "Epilogue", ["add", "maximum", "mul"])]
    assert [(op, label) for op, label, _ in ops] == _tensor_ops(compiled)
    assert sum(e["fused"] for e in fz["edges"]) == 2                  # add -> maximum -> mul on chip

    def softmax(x):
        with pj.tile(vec=(8, 128)), jax.named_scope("Softmax"):
            m = jnp.max(x, axis=-1, keepdims=True)
            e = jnp.exp(x - m)
            return e / jnp.sum(e, axis=-1, keepdims=True)

    x = rng.standard_normal((16, 512)).astype(np.float32)
    for options, want in ((None, [["amax", "sub", "exp", "sum", "div"]]),
                          ({"row_loops": {"Softmax": False}}, [["amax"], ["sub", "exp"], ["sum"], ["div"]])):
        compiled = pj.kernel(softmax, options=options).lower(x).compile()
        fz = report.build(compiled.profile(x), compiled)["fusion"]
        _check_against_the_block_level(compiled, fz)
        assert [b["ops"] for b in fz["blocks"]] == want, options
        assert sorted(op for op, _, _ in _fusion_table(fz)[1]) == sorted(op for op, _ in _tensor_ops(compiled))
        # amax -> sub -> exp -> sum -> div and exp -> div on chip; split: only sub -> exp
        assert sum(e["fused"] for e in fz["edges"]) == (5 if options is None else 1), options


def test_fusion_view_a_group_too_large_for_the_ub_is_split_in_order():
    """Elementwise ops and a scan along the rows on 32 x 448 f32 tiles: fused as written the last group
    needs more UB than a core has and, holding a scan, cannot run each tile in pieces, so partition splits
    it into consecutive blocks; each op is in exactly one of them."""
    def fn(x, y):
        with pj.tile(vec=(32, 448)):
            s, d, p = x + y, x - y, x * y
            q = s * d + p
            return jnp.cumsum(q * s + d * p, axis=-1) * q

    x = np.random.default_rng(5).standard_normal((96, 448)).astype(np.float32)
    compiled = pj.kernel(fn).lower(x, x).compile()
    fz = report.build(compiled.profile(x, x), compiled)["fusion"]
    _check_against_the_block_level(compiled, fz)
    split = [b for b in fz["blocks"] if b["note"].startswith("split from a fused group")]
    assert len(split) == 2 and [b["ops"] for b in split] == [["mul", "add", "mul", "mul", "add", "cumsum"], ["mul"]]
    assert sorted(op for op, _, _ in _fusion_table(fz)[1]) == sorted(op for op, _ in _tensor_ops(compiled))
    first, second = split
    crossing = [e for e in fz["edges"] if e["src"] in first["op_ids"] and e["dst"] in second["op_ids"]]
    assert crossing and not any(e["fused"] for e in crossing)          # between the two halves: GM


def _busy_from_rows(trace):
    """(kind, core) -> summed task µs, straight from the trace's rows."""
    busy = {}
    for start, tid, core, _, end in trace.rows:
        key = (trace.graph.tasks[tid].core, core)
        busy[key] = busy.get(key, 0.0) + (end - start) * 1e6
    return busy


def test_load_figures_are_the_trace_sums(profiled):
    compiled, profile, path, _ = profiled
    data = report.build(profile, compiled)
    assert data["load"] == data["summary"]["load"]
    busy = _busy_from_rows(profile.trace)
    cores = dict(profile.trace.machine.cores)
    for kind, k in data["load"]["kinds"].items():
        assert k["cores"] == cores[kind]
        want = [busy.get((kind, c), 0.0) for c in range(cores[kind])]
        assert k["busy_us"] == pytest.approx(want, rel=1e-12, abs=1e-12)
        ran = {c for _, t, c, *_ in profile.trace.rows if profile.trace.graph.tasks[t].core == kind}
        mean = sum(want[c] for c in ran) / len(ran)         # the mean of the cores that ran tasks
        assert k["mean_us"] == pytest.approx(mean, rel=1e-12)
        # flags: per block call (stage), against the mean of the cores of this kind that ran tasks of it
        per_call = {}
        for start, t, c, _, end in profile.trace.rows:
            task = profile.trace.graph.tasks[t]
            if task.core == kind:
                on = per_call.setdefault(task.stage, {})
                on[c] = on.get(c, 0.0) + (end - start) * 1e6
        over, under = set(), set()
        for on in per_call.values():
            call_mean = sum(on.values()) / len(on)
            over |= {c for c, b in on.items() if b > 1.25 * call_mean}
            under |= {c for c, b in on.items() if b < 0.75 * call_mean}
        assert k["over"] == sorted(over) and k["under"] == sorted(under)
        assert k["idle"] == [c for c in range(cores[kind]) if c not in ran]
        assert sum(k["tasks"]) == sum(profile.trace.graph.tasks[t].core == kind for _, t, *_ in profile.trace.rows)
    # Linear: two equal tiles on 24 cube cores -- two cores do all the cube work, evenly: none flagged, 22 idle
    aic = data["load"]["kinds"]["AIC"]
    assert aic["over"] == aic["under"] == [] and len(aic["idle"]) == 22 and aic["max_over_mean"] == pytest.approx(1.0)
    assert data["load"]["single_core"] == []
    page = path.read_text()
    assert "AIC 2–23" in page and "idle (22 cores)" in page
    assert page.count("<tr class=\"load-over\">") == len(data["load"]["kinds"]["AIV"]["over"])


def _elementwise(x):
    with pj.tile(vec=(16, 64)), jax.named_scope("Ew"):
        return jnp.exp(x) * 2.0 + 1.0


def test_imbalance_is_flagged_and_balance_is_not(tmp_path):
    """48 equal tiles on 48 vector cores: no core off the mean; the same tiles as one block instance
    (tiles_per_block 48): one core does all, the label is flagged as run on a single core and the 47
    other cores are counted idle (not each flagged 'under')."""
    x = np.random.default_rng(4).standard_normal((48 * 16, 64)).astype(np.float32)
    balanced = pj.kernel(_elementwise).lower(x).compile()
    forced = pj.kernel(_elementwise, options={"tiles_per_block": {"Ew": 48}}).lower(x).compile()
    a, b = balanced.profile(x), forced.profile(x)
    la, lb = report.build(a, balanced)["load"], report.build(b, forced)["load"]
    assert (a.tasks, b.tasks) == (48, 1)
    aiv = la["kinds"]["AIV"]
    assert aiv["tasks"] == [1] * 48 and aiv["over"] == aiv["under"] == [] and la["single_core"] == []
    assert la["labels"] == [{"label": "Ew", "kind": "AIV", "tasks": 48, "tiles": 48, "cores": list(range(48)),
                             "single_core": False, "single_core_on": None}]
    aiv = lb["kinds"]["AIV"]
    (core,) = [c for c in range(48) if aiv["tasks"][c]]
    assert aiv["over"] == aiv["under"] == [] and aiv["idle"] == [c for c in range(48) if c != core]
    assert aiv["max_over_mean"] == pytest.approx(1.0)          # one busy core: the single-core label says it
    assert lb["labels"][0]["tiles"] == 48 and lb["single_core"] == [f"Ew (AIV {core})"]
    # the summary carries the figures; the diff shows them
    rows = {r[0]: r[1:3] for r in report.diff(report.build(a, balanced)["summary"], report.build(b, forced)["summary"]).rows}
    assert rows["AIV flagged cores"] == (0, 0) and rows["AIV idle cores"] == (0, 47) and rows["single-core labels"] == (0, 1)
    page = report.write(tmp_path / "forced.html", b, forced).read_text()
    assert (f'<td class="">Ew</td><td class="">AIV</td><td class="n">48</td><td class="n">1</td><td class="">AIV {core}</td>'
            in page)


# ------------------------------------------------------------------------------------ overrides
def test_tile_overrides_change_the_lowering_and_keep_the_numbers():
    args = _args()
    base = pj.kernel(kernel_fn).lower(*args).compile()
    options = {"tiles": {"Linear": {"cube": [16, 64, 32]}, "Scale": {"vec": (64, 64)}},
               "tiles_per_block": {"Linear": 3}}
    tuned_kernel = pj.kernel(kernel_fn, options=options)
    hash(tuned_kernel.options)                                  # options stay hashable (the compile cache key)
    tuned = tuned_kernel.lower(*args).compile()
    before, after = _block_parts(base), _block_parts(tuned)
    assert before["Linear"] == [("matmul", (2, 1), 1, 2)]      # 128x32 output in 64x32 tiles
    assert after["Linear"] == [("matmul", (8, 1), 3, 3)]       # 16x32 tiles, three per block instance
    assert before["Scale"][0][1] == (4, 2) and after["Scale"][0][1] == (2, 1)
    assert before["Rowsum"] == after["Rowsum"]                 # other labels untouched
    assert "16x32" not in base.as_text("tile")
    for compiled in (base, tuned):
        got, _ = compiled.run(*args)
        np.testing.assert_allclose(np.asarray(got, np.float32), _want(*args), rtol=4e-3, atol=2e-2)
    assert tuned.profile(*args).tasks == 8 + 3 + 4 - 6         # Scale 2 instances, Linear 3, Rowsum 4
    # through pj.lower, a DEFAULT entry where every op has its own tiles would change nothing: said
    with pytest.raises(pj.PtoArgumentError, match="'DEFAULT' sets vec, but every op .* would change nothing"):
        pj.lower(kernel_fn, *args, options={"tiles": {"DEFAULT": {"vec": (16, 32)}}})


def test_override_errors_name_the_label():
    args = _args()
    with pytest.raises(pj.PtoArgumentError, match=r"\['Lineer'\].*Linear"):
        pj.kernel(kernel_fn, options={"tiles": {"Lineer": {"cube": (16, 64, 32)}}}).lower(*args)
    with pytest.raises(pj.PtoArgumentError, match="tiles\\['Linear'\\].*fractal"):
        pj.kernel(kernel_fn, options={"tiles": {"Linear": {"cube": (10, 64, 32)}}}).lower(*args)
    with pytest.raises(pj.PtoArgumentError, match="'vec' and/or 'cube'"):
        pj.kernel(kernel_fn, options={"tiles": {"Linear": {"cubes": (16, 64, 32)}}}).lower(*args)


def test_lightning_indexer_overrides_without_editing_the_kernel():
    """The tuning steps of examples/deepseek_tuning.py on a small indexer: Score's tiles per block,
    Reduce's vector tile, TopK's tiles per block — same indices as the reference."""
    args = list(R.indexer_inputs(2, 2, 4, [500, 300], max_blocks=4, seed=2))
    fn = functools.partial(K.lightning_indexer, sparse_count=64)
    want = np.asarray(R.lightning_indexer(*args, sparse_count=64))
    base = pj.kernel(fn).lower(*args).compile()
    tuned = pj.kernel(fn, options={"tiles": {"Reduce": {"vec": (8, 256)}},
                                   "tiles_per_block": {"Score": 4, "TopK": 2}}).lower(*args).compile()
    b, t = _block_parts(base), _block_parts(tuned)
    assert [p[3] for p in b["Score"]] == [8] and [p[3] for p in t["Score"]] == [2]
    assert sum(p[3] for p in t["TopK"]) * 2 == sum(p[3] for p in b["TopK"])
    assert sum(p[3] for p in t["Reduce"]) < sum(p[3] for p in b["Reduce"])
    for compiled in (base, tuned):
        got, _ = compiled.run(*args)
        np.testing.assert_array_equal(np.asarray(got), want)


# ----------------------------------------------------------------------------------------- CLI
def test_cli_profile_options_html_summary_and_diff(tmp_path, capsys):
    src = tmp_path / "k.py"
    src.write_text(SOURCE)
    (tmp_path / "o.json").write_text(json.dumps({"tiles": {"Linear": {"cube": [32, 64, 32]}}}))
    (tmp_path / "o.toml").write_text('[tiles.Linear]\ncube = [32, 64, 32]\n')
    shapes = [x for s in SHAPES for x in ("--shape", s)]
    assert cli(["profile", f"{src}:f", *shapes, "--html", str(tmp_path / "r.html"), "--summary", str(tmp_path / "a.json")]) == 0
    assert cli(["profile", f"{src}:f", *shapes, "--options", str(tmp_path / "o.json"),
                "--summary", str(tmp_path / "b.json")]) == 0
    assert cli(["lower", f"{src}:f", *shapes, "--options", str(tmp_path / "o.toml")]) == 0
    assert "matmul<AIC> x4" in capsys.readouterr().out
    assert (tmp_path / "r.html").stat().st_size > 10_000
    assert cli(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("label Linear tasks"))
    assert line.split()[3:5] == ["2", "4"]


# --------------------------------------------------------------------------------- the browser
def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_report_renders_in_headless_chromium(profiled, tmp_path):
    """Needs a Chromium on PATH: required in CI (``CI=true``; .ci/run installs Debian's chromium),
    skipped elsewhere."""
    _, profile, path, _ = profiled
    if not _chromium():
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("CI=true and no chromium, chromium-browser or google-chrome on PATH: the report must be "
                        "opened in a real browser in CI (apt-get install chromium)")
        pytest.skip("no chromium, chromium-browser or google-chrome on PATH (required only in CI, CI=true)")
    flags = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    url = Path(path).resolve().as_uri()
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=60).stdout
    assert 'id="swimlane"' in dom
    assert len(re.findall(r'<rect class="task[^"]*" data-tid=', dom)) == profile.tasks
    assert 'id="blockgraph"' in dom and dom.count('class="gnode block"') == 3
    assert 'id="fusiongraph"' in dom and dom.count('class="fnode op"') == 4
    png = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={png}", "--window-size=1400,1800", url], capture_output=True, timeout=60)
    assert png.exists() and png.stat().st_size > 30_000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
