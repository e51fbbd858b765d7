"""The vendor's assembler accepts what ptojax emits: every program of the seed example, the lowering
test kernels, the DeepSeek-V3.2 kernels and the pj.nn kernels (forward and backward), for A2/A3 and
A5 (``benchmarks/ptoas_conformance.py``, which also prints the table the docs quote). The CI fuzz set is
checked in ``fuzz.check``. Without ``ptoas`` these tests skip, except in CI, where they fail."""
import os
import sys
from pathlib import Path

import pytest

from ptojax.ascend.ptoas import PtoasError, find_ptoas

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import ptoas_conformance as conformance  # noqa: E402

pytestmark = pytest.mark.skipif(not find_ptoas() and os.environ.get("CI") != "true",
                                reason="no ptoas: set PTOAS to Huawei's PTO assembler (hw-native-sys/PTOAS)")

FAMILIES = {"lowering": conformance.lowering_kernels, "deepseek": conformance.deepseek_kernels,
            "nn": conformance.nn_kernels}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_program_is_accepted_for_a3_and_a5(family):
    for name, kernels in FAMILIES[family]().items():
        for arch in ("a3", "a5"):
            programs, accepted, first = conformance.judge(kernels, arch)
            assert programs and accepted == programs, \
                f"{name} ({arch}): {programs - accepted} of {programs} rejected: {first}"
        used, total, real = conformance.kinds(kernels)
        assert total and real == total or family == "deepseek", f"{name}: {total - real} instructions not real PTO"


def test_a_rejection_names_the_program_line_and_message():
    (compiled,) = conformance.lowering_kernels()["seed example"]
    text = compiled.pto().replace("pto.tmatmul ins(", "pto.tmatmul_acc ins(", 1)
    with pytest.raises(PtoasError, match=r"@matmul, line \d+:\d+: `pto.tmatmul_acc ins.*error: .*tmatmul_acc"):
        conformance.assemble(text)


def test_the_benchmark_fails_when_a_program_is_rejected(monkeypatch):
    good = conformance.lowering_kernels
    monkeypatch.setattr(conformance, "deepseek_kernels", dict)
    monkeypatch.setattr(conformance, "nn_kernels", dict)
    assert conformance.main([]) == 0
    broken = {name: kernels for name, kernels in good().items()}
    (seed,) = broken["seed example"]
    seed._pto["a3", "level2"] = "module {\n  pto.nonsense\n}\n"        # the text it would print, broken
    monkeypatch.setattr(conformance, "lowering_kernels", lambda: broken)
    assert conformance.main([]) == 1
