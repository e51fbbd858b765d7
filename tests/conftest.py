"""Test session set-up: eight host CPU devices (for jax.shard_map tests), set before JAX starts; the
vendor's tools (``PTOAS``, ``PTO_ISA_ROOT``) from this workspace's ``shared/tools`` when the
environment names none (the library itself reads only the environment and PATH); cases marked
``long`` (minutes each, in the default run) collected first, so that pytest-xdist's workers start on
them and finish together rather than one waiting on a long case at the end; and the large
parametrizations of :data:`THINNED` thinned in the default run (every n-th case; ``-m slow`` runs
the rest), so that the default run stays near a quarter of an hour on two cores."""
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(__file__))

_TOOLS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "tools")
if os.access(os.path.join(_TOOLS, "ptoas", "bin", "ptoas"), os.X_OK):
    os.environ.setdefault("PTOAS", os.path.abspath(os.path.join(_TOOLS, "ptoas", "bin", "ptoas")))
if os.path.isfile(os.path.join(_TOOLS, "pto-isa", "include", "pto", "pto-inst.hpp")):
    os.environ.setdefault("PTO_ISA_ROOT", os.path.abspath(os.path.join(_TOOLS, "pto-isa")))


import pytest  # noqa: E402

# test function -> n: the default run keeps every n-th of its cases, in collection order (the first one
# included); the others are marked ``slow``. Each of these sweeps one rule over many ops or shapes.
THINNED = {
    "tests/test_grads.py::test_check_grads": 2,
    "tests/test_semantics.py::test_matches_reference": 2,
    "tests/test_isel_column_composites.py::test_tensor_op_on_a_column_tile": 2,
    "tests/test_isel_group_broadcast.py::test_binary_ops_broadcast_a_column_in_groups": 2,
    "tests/test_broadcast_composites.py::test_jnp_power_broadcasts": 2,
    "tests/test_broadcast_composites.py::test_clip_tensor_bounds_broadcast": 2,
    "tests/test_lowering.py::test_verify_every_level": 2,
    "tests/test_scans.py::test_column_cumsum_every_axis": 2,
    "tests/test_tile_semantics.py::test_jit_matches_eager": 2,
    "tests/test_isel_sort.py::test_int32_top_k_and_sort_equal_xla": 2,
}


@pytest.hookimpl(tryfirst=True)         # before ``-m`` selects by the marks
def pytest_collection_modifyitems(items):
    seen: dict = {}
    for item in items:
        test = item.nodeid.split("[")[0]
        if test in THINNED:
            seen[test] = seen.get(test, -1) + 1
            if seen[test] % THINNED[test]:
                item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("long") is None)   # stable: otherwise in order
