"""The vendor's tools for the tests that run them: ptoas, pto-isa's CPU simulator headers and a C++20
compiler, found the way the library finds them (``PTOAS`` / ``PTO_ISA_ROOT`` / ``CXX`` / PATH;
``conftest.py`` points the first two at this workspace's copies). Missing tools skip those tests,
except in CI (``CI=true``), where they fail."""
import os
import re

import pytest

from ptojax.ascend import cpusim
from ptojax.ascend.ptoas import find_ptoas

PTOAS = find_ptoas()
PTO_ISA_ROOT = cpusim.find_pto_isa()
CXX = cpusim.find_cxx()
MISSING = [name for name, found in [("ptoas (PTOAS)", PTOAS), ("pto-isa (PTO_ISA_ROOT)", PTO_ISA_ROOT),
                                    ("a C++20 compiler (CXX)", CXX)] if not found]
REASON = "vendor tools not found: " + ", ".join(MISSING)
IN_CI = os.environ.get("CI") == "true"

#: ``pytestmark`` of a module that needs all three.
needed = pytest.mark.skipif(bool(MISSING) and not IN_CI, reason=REASON)


@pytest.fixture(autouse=True)
def tools(monkeypatch):
    """Fails the test in CI when a tool is missing; pins PTOAS / PTO_ISA_ROOT for the library."""
    if MISSING:
        pytest.fail(REASON + " (in CI the vendor tools are required)")
    monkeypatch.setenv("PTOAS", PTOAS)
    monkeypatch.setenv("PTO_ISA_ROOT", PTO_ISA_ROOT)


_FLOAT = re.compile(r"dtype=(f16|f32|bf16)\b")


def assert_no_float_int_views(text):
    """No ``treshape`` between a float and an integer tile in PTO-AS ``text``: pto-isa's CPU simulator
    static_asserts both sides float or both integer (include/pto/cpu/TReshape.hpp), which ptoas does
    not check."""
    for line in text.splitlines():
        if "pto.treshape" in line:
            src, dst = line.split(":", 1)[1].split("->")
            assert bool(_FLOAT.search(src)) == bool(_FLOAT.search(dst)), line.strip()
