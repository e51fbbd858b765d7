"""The house: no import circles among ptojax's modules, every declared dependency imported, test
modules that share fixtures through fixture modules rather than through each other."""
import ast
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Declared but not imported by name, and why.
NOT_IMPORTED = {"jaxlib": "jax's runtime, pinned with jax"}


def _imported_modules(paths) -> set:
    """Top-level names of every module imported anywhere in ``paths`` (lazy imports in functions too)."""
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_declared_dependency_is_imported_by_the_package():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {_normal(re.match(r"[A-Za-z0-9_.-]+", d).group()) for d in declared}
    distributions = packages_distributions()
    imported = {_normal(dist) for module in _imported_modules((ROOT / "ptojax").rglob("*.py"))
                for dist in distributions.get(module, [module])}
    unused = names - imported - set(NOT_IMPORTED)
    assert not unused, f"declared in pyproject.toml but never imported by ptojax: {sorted(unused)}"
    assert set(NOT_IMPORTED) <= names, "an exception for a dependency that is no longer declared"
    assert not set(NOT_IMPORTED) & imported, "an exception for a dependency that is imported after all"


def test_no_import_circles():
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "check_cycles.py"), str(ROOT)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, f"import circles among ptojax's modules:\n{run.stdout}{run.stderr}"


def test_the_cycle_check_finds_a_circle(tmp_path):
    """The check itself: a package whose two modules import each other at module level is reported,
    an import inside a function is not."""
    package = tmp_path / "ptojax"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("from .a import name\n\n\ndef late():\n    from . import c\n")
    (package / "c.py").write_text("from . import b\n")
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "check_cycles.py"), str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1 and run.stdout.splitlines() == ["ptojax.a -> ptojax.b -> ptojax.a"]


def test_test_modules_do_not_import_each_other():
    tests = sorted((ROOT / "tests").glob("test_*.py"))
    own = {p.stem for p in tests}
    crossing = {p.name: sorted(_imported_modules([p]) & own) for p in tests}
    assert not {k: v for k, v in crossing.items() if v}, "share fixtures through tests/kernels.py or helpers.py"


# What an eager call never needs: the jitted replay, the dynamic-shape runtime, the vendor's simulator,
# the report, and jax.extend (its import brings Pallas).
ON_FIRST_USE = ("ptojax.ascend.replay", "ptojax.ascend.replay_graph", "ptojax.ascend.dynamic",
                "ptojax.ascend.dynamic_tasks", "ptojax.ascend.cpusim", "ptojax.ascend.crosscheck", "ptojax.report",
                "jax.extend")

FIRST_CALL = f"""
import sys, jax, numpy as np
compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: compiles.append(event) if "backend_compile" in event else None)
import ptojax as pj
f = pj.kernel(lambda x: x * 2.0 + 1.0)
out = f(np.ones((8, 32), np.float32))
assert isinstance(out, jax.Array) and (np.asarray(out) == 3.0).all()
print(sorted(m for m in {ON_FIRST_USE!r} if m in sys.modules), compiles)
"""


def test_import_and_the_first_eager_call_load_only_what_they_run():
    """``import ptojax`` and a kernel's first eager call import none of :data:`ON_FIRST_USE` (each is
    imported where it is used) and compile nothing with XLA (the outputs become ``jax.Array`` s by
    ``device_put``)."""
    run = subprocess.run([sys.executable, "-c", FIRST_CALL], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split("\n")[-2] == "[] []", run.stdout


def test_jax_extension_names_are_jax_extends():
    """``ptojax._jax`` takes ``jax.extend.core``'s names from the module that defines them: the same
    objects, without importing all of ``jax.extend``."""
    import jax.extend.core as public

    from ptojax import _jax

    for name in ("ClosedJaxpr", "Jaxpr", "Literal", "Primitive", "Var", "jaxprs_in_params"):
        assert getattr(_jax, name) is getattr(public, name), name
