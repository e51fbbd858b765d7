"""A tile codegen cannot place although fewer bytes are live than the UB lacks for it (the free bytes
lie apart) is refused with that said, not only "49408 of 196608 bytes are live" beside a 65536-byte
tile, which read as a contradiction."""
import types

import pytest

from ptojax.ascend.codegen import _Allocator
from ptojax.errors import PtoCapacityError
from ptojax.lowering.memory import ASCEND_CORE


def test_a_fragmented_ub_says_its_free_bytes_lie_apart():
    ub = ASCEND_CORE.buffer("vec")
    alloc = _Allocator(ASCEND_CORE, types.SimpleNamespace(name="gt+where", core="AIV", label=""))
    first = alloc.alloc("vec", ub // 2)
    alloc.alloc("vec", ub // 4)
    alloc.release("vec", first, ub // 2)          # ub/2 free below the live quarter, ub/4 above it
    with pytest.raises(PtoCapacityError, match=rf"{ub // 4} of {ub} bytes are live.*free {3 * ub // 4} bytes lie "
                                               rf"apart \(the widest free span is {ub // 2} bytes\)"):
        alloc.alloc("vec", ub // 2 + 1024)
    with pytest.raises(PtoCapacityError) as full:
        alloc.alloc("vec", ub)                    # more than the free bytes: no word of spans
    assert "lie apart" not in str(full.value)
