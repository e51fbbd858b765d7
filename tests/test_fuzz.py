"""Fuzzing the whole stack: random kernels (tests/fuzz.py) run on the simulated A3 and on XLA.

Property: ``pj.kernel(fn, backend="sim")`` equals ``pj.kernel(fn, backend="xla")`` (exact for integer
and bool results, 2x the per-level float tolerance of ``ptojax.lowering.pipeline.TOLERANCE``), and
``pj.lower(fn, *args).verify(*args)`` passes at every level.

* CI: 100 derandomized examples of short chains (1-3 ops, small shapes; about two minutes on one core).
* Long campaign: ``python -m pytest -m slow tests/test_fuzz.py`` (2 000 examples of 1-10 ops), or
  ``python benchmarks/fuzz_campaign.py --examples 10000``, which saves every failing kernel as
  ``tests/regressions/fuzz_<seed>.py``; :func:`test_regression` reruns those files.
"""
import importlib.util
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings

import fuzz

REGRESSIONS = sorted((pathlib.Path(__file__).parent / "regressions").glob("fuzz_*.py"))


@pytest.mark.long
@settings(max_examples=100, derandomize=True, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fuzz.kernels(max_ops=3))
def test_sim_matches_xla_and_every_level_verifies(spec):
    fuzz.check(spec)


@pytest.mark.slow
@settings(max_examples=2000, derandomize=True, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fuzz.kernels(max_ops=10))
def test_long_campaign(spec):
    fuzz.check(spec)


def _load(path):
    module = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(module)
    module.loader.exec_module(mod)
    return mod.SPEC


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression(path):
    fuzz.check(_load(path))


def test_specs_round_trip_through_a_regression_file(tmp_path):
    spec = {"seed": 7, "inputs": [((5, 16), "float16", ("uniform", -2.0, 2.0)), ((16, 17), "float16", ("uniform", -2.0, 2.0))],
            "steps": [("exp", {}, {"vec": (2, 16)}),
                      ("matmul", {"y": 1, "bias": None, "out_dtype": None, "transpose_a": False, "transpose_b": False},
                       {"cube": (16, 16, 16)}),
                      ("amax", {"axis": -1, "keepdims": True}, None)]}
    path = tmp_path / "fuzz_7.py"
    path.write_text(fuzz.regression_source(spec, "example"))
    assert _load(path) == spec
    fuzz.check(spec)
