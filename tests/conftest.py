"""Test session set-up: eight host CPU devices (for jax.shard_map tests), set before JAX starts; the
vendor's tools (``PTOAS``, ``PTO_ISA_ROOT``) from this workspace's ``shared/tools`` when the
environment names none (the library itself reads only the environment and PATH); cases marked
``long`` (minutes each, in the default run) collected first, so that pytest-xdist's workers start on
them and finish together rather than one waiting on a long case at the end."""
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(__file__))

_TOOLS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "tools")
if os.access(os.path.join(_TOOLS, "ptoas", "bin", "ptoas"), os.X_OK):
    os.environ.setdefault("PTOAS", os.path.abspath(os.path.join(_TOOLS, "ptoas", "bin", "ptoas")))
if os.path.isfile(os.path.join(_TOOLS, "pto-isa", "include", "pto", "pto-inst.hpp")):
    os.environ.setdefault("PTO_ISA_ROOT", os.path.abspath(os.path.join(_TOOLS, "pto-isa")))


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.get_closest_marker("long") is None)   # stable: otherwise in order
