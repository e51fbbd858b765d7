"""benchmarks/suite.py: its measures on tiny inputs produce well-formed rows, the specs it compiles from
match the example inputs, and the JSON / markdown it writes hold every row. No timing is asserted."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def suite():
    spec = importlib.util.spec_from_file_location("benchmark_suite", ROOT / "benchmarks" / "suite.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _check_row(r):
    assert {"section", "name", "value", "unit", "target", "passed", "detail"} <= set(r)
    assert r["section"] in "abcd" and r["name"]
    assert r["passed"] in (True, False, None)
    assert (r["passed"] is None) == (r["target"] is None)
    assert r["value"] is None or r["value"] > 0


@pytest.mark.parametrize("which", ["prolog", "indexer", "attention", "dia"])
def test_specs_match_the_example_inputs(suite, which):
    import numpy as np
    for shape in (suite.SMALL, suite.SMALL.at_kv(256)):
        specs = [(tuple(s.shape), np.dtype(s.dtype)) for s in suite.make_specs(which, shape)]
        args = [(np.shape(a), np.asarray(a).dtype) for a in suite.make_args(which, shape)]
        assert specs == args


def test_quick_measures_on_tiny_inputs_give_well_formed_rows(suite, tmp_path):
    tiny = suite.SMALL.at_kv(256)
    rows = [suite.host_seed_example(repeats=1), suite.host_deepseek("indexer", tiny, repeats=1)]
    rows += suite.host_nn(repeats=1, only=("softmax",), rows=8, d=16)
    rows += suite.compile_times(kvs=(256, 512), kernels=("attention",), base=tiny, repeats=1)
    rows += suite.makespans(tiny, kernels=("dia",))
    rows += suite.executor_throughput(tasks=1000)
    for r in rows:
        _check_row(r)
        assert r["value"] is not None, r
    sections = {r["section"] for r in rows}
    assert sections == set("abcd")
    assert rows[0]["target"] and rows[0]["detail"]["sim_s"] > 0 and rows[0]["detail"]["jit_s"] > 0
    assert any(r["name"].startswith("DIA") and "SPMD" in r["name"] for r in rows)

    out = suite.result("test", suite.machine_info(), rows, 1.0)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(out))
    back = json.loads(path.read_text())
    assert back["format"] == suite.FORMAT and back["mode"] == "test"
    assert {"platform", "cpu_count", "python", "jax"} <= set(back["machine"])
    assert len(back["rows"]) == len(rows) and all(_check_row(r) is None for r in back["rows"])
    assert sum(back["summary"].values()) == len(rows)
    table = suite.markdown(rows)
    assert table.count("\n| ") == len(rows) + sum(1 for s in "abcd")     # a header per section, a line per row


def test_a_failed_measure_is_a_row_that_says_why(suite):
    r = suite.failed_row("b", "broken", "s", "≤ 2 s", ValueError("no\nmore"))
    _check_row(r)
    assert r["value"] is None and r["passed"] is False and r["detail"]["error"] == "ValueError: no"
    assert "not measured" in suite.markdown([r])


def test_the_exit_status_says_whether_every_target_held(suite):
    ok = suite.result("test", {}, [suite.row("d", "fast", 3.0, "x", "≥ 2×", True)], 1.0)
    assert suite.exit_status(ok) == 0
    missed = suite.result("test", {}, [suite.row("d", "slow", 1.0, "x", "≥ 2×", False)], 1.0)
    assert suite.exit_status(missed) == 1
    raised = suite.result("test", {}, [suite.failed_row("a", "broken", "x", None, ValueError("no"))], 1.0)
    assert raised["summary"]["failed"] == 0 and suite.exit_status(raised) == 1


def test_the_quick_suite_exits_1_when_a_target_is_out_of_reach(tmp_path):
    """The quick suite's executor measure against a target no machine reaches: the run says FAIL and
    exits 1."""
    import subprocess

    out = tmp_path / "rows.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "suite.py"), "--quick", "--only", "executor",
                          "--executor-tasks", "2000", "--target", "tasks_per_s=1e15", "--json", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    (r,) = json.loads(out.read_text())["rows"]
    assert r["passed"] is False and r["target"] == "≥ 1,000,000,000,000,000 tasks/s" and r["value"] > 0
    assert "| FAIL |" in run.stdout


def test_an_unknown_target_is_refused_before_anything_runs(suite, capsys):
    with pytest.raises(SystemExit) as exit_:
        suite.main(["--quick", "--target", "speed=1"])
    assert exit_.value.code == 2 and "no target 'speed'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        suite.main(["--quick", "--target", "host=fast"])
    assert "'fast' is not a number" in capsys.readouterr().err
