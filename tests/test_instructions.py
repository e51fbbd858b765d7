"""``ptojax.ascend.instructions`` against the real assembler: every row's dtype sets are exactly what
``ptoas`` accepts (one probe module per row x arch x dtype, ``tools/probe_isa.py``), no row is an op
ptoas does not know, and the operand/attribute forms ``text`` prints are accepted (and the other
attribute placement is not).

ptoas comes from ``$PTOAS``, ``PATH`` or ``<repo>/../shared/tools/ptoas/bin/ptoas``; without it the
ptoas tests skip, except under ``CI=true`` where they fail. Regenerate the table's dtype literals with
``python tools/probe_isa.py --write``.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _load_probe():
    name = "_ptojax_probe_isa"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "tools" / "probe_isa.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


probe = _load_probe()
ins_mod = probe.load_instructions()   # ptojax/ascend/instructions.py, without importing JAX


@pytest.fixture(scope="module")
def ptoas():
    path = probe.find_ptoas()
    if path is None:
        msg = "ptoas not found (set PTOAS, put it on PATH, or provide ../shared/tools/ptoas/bin/ptoas)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture(scope="module")
def results(ptoas):
    return probe.probe_all(ptoas)


# --- the table itself (no ptoas) ---------------------------------------------------------------------

def test_table_shape():
    assert ins_mod.TABLE
    for key, row in ins_mod.TABLE.items():
        assert key == row.mnemonic
        hash(row)
        assert row.pipe in ins_mod.PIPES, row
        assert row.attr_place in ("ins", "outs"), row
        assert [a for a, _ in row.dtypes] == list(ins_mod.ARCHS), row
        for _, dts in row.dtypes:
            assert set(dts) <= set(ins_mod.DTYPES), row
        for name, spelling in row.attrs:
            assert "{}" in spelling, (row.mnemonic, name)
        assert row.summary
        assert row.mnemonic in probe.SPECS, f"no probe for {row.mnemonic}"
    assert ins_mod.TABLE["treshape"].alias and ins_mod.TABLE["treshape"].pipe == "SCALAR"


def test_text_syntax():
    t = ins_mod.text
    assert t("tadd", [("%a", "T0"), ("%b", "T1")], [("%d", "T2")]) == "pto.tadd ins(%a, %b : T0, T1) outs(%d : T2)"
    assert (t("tcvt", [("%x", "T")], [("%y", "T")], {"rmode": "RINT", "sat_mode": "ON"})
            == "pto.tcvt ins(%x {rmode = #pto<round_mode RINT>, sat_mode = #pto<saturation_mode ON>} : T) outs(%y : T)")
    assert (t("tcmp", [("%a", "T"), ("%b", "T")], [("%m", "M")], {"cmpMode": "gt"})
            == "pto.tcmp ins(%a, %b {cmpMode = #pto<cmp gt>} : T, T) outs(%m : M)")
    assert (t("tstore", [("%t", "T")], [("%v", "V")], {"atomicType": "atomic_add"})
            == "pto.tstore ins(%t : T) outs(%v : V) {atomicType = #pto<atomic_type atomic_add>}")
    assert t("treshape", [("%s", "T")], [("%r", "T2")], {}) == "%r = pto.treshape %s : T -> T2"
    assert (t("tgather", [("%s", "T")], [("%d", "D")], {"maskPattern": "P0101"})
            == "pto.tgather ins(%s, {maskPattern = #pto.mask_pattern<P0101>} : T) outs(%d : D)")
    with pytest.raises(KeyError):
        t("tadd", [("%a", "T"), ("%b", "T")], [("%d", "T")], {"cmpMode": "gt"})


# --- against ptoas -----------------------------------------------------------------------------------

def test_dtypes_match_ptoas(results):
    """accepted by ptoas <=> listed in the table, for every row, arch and probed dtype."""
    wrong = []
    for (m, arch, dt), (ok, err) in sorted(results.items()):
        listed = dt in ins_mod.TABLE[m].dtypes_for(arch)
        if ok != listed:
            wrong.append(f"{m} {arch} {dt}: ptoas {'accepts' if ok else 'rejects'}, table "
                         f"{'lists' if listed else 'omits'} it{'' if ok else ' (' + err + ')'}")
    assert not wrong, "run `python tools/probe_isa.py --write`:\n" + "\n".join(wrong)


def test_no_unknown_ops(ptoas):
    """every row is an op ptoas knows, and assembles with a dtype the table lists for it."""
    jobs = [(m, arch, row.dtypes_for(arch)[0]) for m, row in ins_mod.TABLE.items() for arch in ins_mod.ARCHS
            if row.dtypes_for(arch)]
    assert {m for m, _, _ in jobs} == set(ins_mod.TABLE)
    with ThreadPoolExecutor(max_workers=8) as pool:
        verdicts = list(pool.map(lambda j: probe.run_ptoas(ptoas, probe.build_probe(*j), j[1]), jobs))
    unknown = sorted({m for (m, _, _), (_, err) in zip(jobs, verdicts) if "is unknown" in err})
    assert not unknown, f"ptoas does not know: {unknown}"
    bad = [f"{m} {arch} {dt}: {err}" for (m, arch, dt), (ok, err) in zip(jobs, verdicts) if not ok]
    assert not bad, "\n".join(bad)


def _run_forms(ptoas, entries, misplace):
    jobs = [(label, arch, *probe.build_form(build, arch, misplace))
            for label, build in entries.items() for arch in ins_mod.ARCHS]
    with ThreadPoolExecutor(max_workers=8) as pool:
        verdicts = list(pool.map(lambda j: probe.run_ptoas(ptoas, j[2], j[1]), jobs))
    return [(label, arch, line, ok, err) for (label, arch, _, line), (ok, err) in zip(jobs, verdicts)]


def test_operand_forms(ptoas):
    bad = [f"{label} [{arch}]: {line}\n    {err}" for label, arch, line, ok, err in
           _run_forms(ptoas, probe.FORMS, misplace=False) if not ok]
    assert not bad, "\n".join(bad)


def test_misplaced_attributes_rejected(ptoas):
    """attr_place matters: the other placement is a parse error for these ops."""
    bad = [f"{label} [{arch}] accepted: {line}" for label, arch, line, ok, _ in
           _run_forms(ptoas, probe.MISPLACED, misplace=True) if ok]
    assert not bad, "\n".join(bad)


def test_unknown_mnemonic_is_detected(ptoas):
    """the unknown-op check above can fire: ptoas names an op it does not know."""
    text = probe.build_probe("tadd", "a3", "f32").replace("pto.tadd ", "pto.tpow ")
    ok, err = probe.run_ptoas(ptoas, text, "a3")
    assert not ok and "custom op 'pto.tpow' is unknown" in err
