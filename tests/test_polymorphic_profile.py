"""The polymorphic compile from every door: ``k.lower(*symbolic_specs).compile()`` is the compile
``polymorphic_shapes`` makes (callable at every row count, ``profile(m=...)``, ``report``, one cache), and
its size keyword is ``m=`` or the kernel's own symbol (``b=4`` for shapes ``"b, 64"``); a wrong keyword is
a PtoArgumentError that names the keyword to use."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from kernels import seed_kernel
from ptojax.errors import PtoArgumentError, PtoUnsupportedError
from ptojax.polymorphic import PolymorphicCompiled

POLY = ("m, 64", "m, 64", None)


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _seed_specs(rows):
    return [jax.ShapeDtypeStruct((rows, 64), jnp.float32)] * 2 + [jax.ShapeDtypeStruct((64, 32), jnp.float32)]


def _seed_args(rows):
    return [_rand((rows, 64), rows), _rand((rows, 64), rows + 1), _rand((64, 32), 0)]


def _batch(x, y):
    with pj.tile(vec=(16, 64)):
        return x * 2.0 + y


@pytest.mark.parametrize("poly", [None, POLY], ids=["plain", "polymorphic_shapes"])
def test_a_symbolic_lower_compiles_to_the_polymorphic_compile(poly):
    """``lower(*symbolic specs).compile()`` profiles at ``m=`` with the makespan of the kernel compiled
    for arguments of those rows (``polymorphic_shapes``), and the tasks of a static compile at that size
    (its makespan within 0.1% at these sizes; docs/dynamic_shapes.md says why it can differ a little); it runs at every size (eager and under
    ``jax.jit``) with the numbers of ``polymorphic_shapes``' compile, which it is."""
    m, = jax.export.symbolic_shape("m")
    k = pj.kernel(seed_kernel, polymorphic_shapes=poly) if poly else pj.kernel(seed_kernel)
    lowered = k.lower(*_seed_specs(m))
    compiled = lowered.compile()
    assert isinstance(compiled, PolymorphicCompiled)
    assert compiled.as_text("block") == lowered.as_text("block")
    reference = pj.kernel(seed_kernel, polymorphic_shapes=POLY)
    for rows in (17, 1000):
        args = _seed_args(rows)
        by_size = compiled.profile(m=rows)
        assert by_size.makespan_us == reference.compiled_for(*args).profile(*args).makespan_us > 0
        static = pj.kernel(seed_kernel).lower(*_seed_specs(rows)).compile().profile()
        assert by_size.tasks == static.tasks       # its tail a program of its own, priced apart: within 0.1%
        assert by_size.makespan_us == pytest.approx(static.makespan_us, rel=1e-3)
        assert compiled.profile(*_seed_specs(rows)).makespan_us == by_size.makespan_us   # concrete specs: their size
        np.testing.assert_array_equal(np.asarray(compiled(*args)), np.asarray(reference(*args)))
        np.testing.assert_array_equal(np.asarray(jax.jit(compiled)(*args)), np.asarray(reference(*args)))
    assert k.compiled_for(*_seed_specs(m)) is compiled
    if poly:       # polymorphic_shapes' compile of concrete arguments is the same one
        assert k.compiled_for(*_seed_args(5)) is compiled
    assert k.compiles == 1
    with pytest.raises(PtoArgumentError) as err:
        compiled.profile()
    assert str(err.value) == ("pj.kernel 'seed_kernel': profile of a polymorphic kernel needs the size: pass arguments "
                              "of the shapes (float32[m, 64], float32[m, 64], float32[64, 32]), or m alone: "
                              "compiled.profile(m=...)")
    with pytest.raises(PtoArgumentError) as err:
        compiled.profile(*_seed_specs(m))
    assert str(err.value).startswith("pj.kernel 'seed_kernel': profile of a polymorphic kernel needs the size (the "
                                     "shapes given are symbolic): ")


def test_a_size_given_to_a_concrete_compile_is_an_error_naming_its_shapes():
    """``profile(m=...)`` / ``report(path, m=...)`` of a compile for concrete shapes: a PtoArgumentError that
    names the size given and the compiled shapes (it has no symbol to bind), not a TypeError."""
    compiled = pj.kernel(seed_kernel).lower(*_seed_args(16)).compile()
    for call in (lambda: compiled.profile(m=3), lambda: compiled.report("unused.html", m=3)):
        with pytest.raises(PtoArgumentError, match=r"\(m=3\): this compile has the concrete shapes "
                                                   r"\(float32\[16, 64\], float32\[16, 64\], float32\[64, 32\]\)"):
            call()


def test_a_symbolic_lower_then_export_is_one_compile():
    """``jax.export`` of the kernel after ``lower(...).compile()`` replays the same compile: no second one."""
    m, = jax.export.symbolic_shape("m")
    k = pj.kernel(seed_kernel)
    compiled = k.lower(*_seed_specs(m)).compile()
    exported = jax.export.export(jax.jit(k))(*_seed_specs(m))
    args = _seed_args(17)
    np.testing.assert_array_equal(np.asarray(exported.call(*args)), np.asarray(compiled(*args)))
    assert k.compiles == 1


def test_a_symbolic_lower_keeps_its_constraints():
    m16, = jax.export.symbolic_shape("m", constraints=("mod(m, 16) == 0",))
    spec = jax.ShapeDtypeStruct((m16, 64), jnp.float32)
    compiled = pj.kernel(_batch).lower(spec, spec).compile()
    x = _rand((32, 64), 3)
    np.testing.assert_array_equal(np.asarray(compiled(x, x)), x * 2.0 + x)
    with pytest.raises(PtoArgumentError) as err:
        compiled(x[:17], x[:17])
    assert str(err.value) == "pj.kernel '_batch': m = 17 violates the constraint 'mod(m, 16) == 0'"
    with pytest.raises(PtoArgumentError) as err:
        compiled.profile(m=17)
    assert str(err.value) == "pj.kernel '_batch': m = 17 violates the constraint 'mod(m, 16) == 0'"


def test_the_size_keyword_is_the_kernels_own_symbol(tmp_path):
    """Shapes ``"b, 64"``: ``profile(b=4)`` is ``profile(m=4)`` and the profile at arguments of 4 rows, with
    the makespan of a static compile at 4 rows; ``report(path, b=4)`` too."""
    f = pj.kernel(_batch, polymorphic_shapes=("b, 64", "b, 64"))
    x = _rand((5, 64), 0)
    compiled = f.compiled_for(x, x)
    four = _rand((4, 64), 1)
    by_symbol = compiled.profile(b=4)
    static = pj.kernel(_batch).lower(four, four).compile().profile()
    assert by_symbol.makespan_us == compiled.profile(m=4).makespan_us == compiled.profile(four, four).makespan_us
    assert (by_symbol.tasks, by_symbol.makespan_us) == (static.tasks, static.makespan_us)
    assert compiled.report(tmp_path / "b.html", b=4).makespan_us == by_symbol.makespan_us
    assert "_batch (b = 4)" in (tmp_path / "b.html").read_text()
    b, = jax.export.symbolic_shape("b")
    spec = jax.ShapeDtypeStruct((b, 64), jnp.float32)
    assert pj.kernel(_batch).lower(spec, spec).compile().profile(b=4).makespan_us == by_symbol.makespan_us
    assert f.compiles == 1


@pytest.mark.parametrize("call, want", [
    (lambda c: c.profile(c=4), "pj.kernel '_batch': profile(c=4): profile has no keyword c=; the size keyword is b=, "
     "the symbolic row count of the shapes (float32[b, 64], float32[b, 64]); m= works too: compiled.profile(b=...)"),
    (lambda c: c.report("unused.html", n=4), "pj.kernel '_batch': report(n=4): report has no keyword n=; the size "
     "keyword is b=, the symbolic row count of the shapes (float32[b, 64], float32[b, 64]); m= works too: "
     "compiled.report(path, b=...)"),
    (lambda c: c.profile(m=4, b=4), "pj.kernel '_batch': profile(m=4, b=4): two sizes for the one row count b; pass "
     "one of them"),
    (lambda c: c.profile(b=0), "pj.kernel '_batch': profile(b=0): b is a row count, an int >= 1"),
    (lambda c: c.profile(b=2.5), "pj.kernel '_batch': profile(b=2.5): b is a row count, an int >= 1"),
    (lambda c: c.profile(np.zeros((4, 64), np.float32), np.zeros((4, 64), np.float32), b=4),
     "pj.kernel '_batch': profile takes arguments or b=, not both"),
    (lambda c: c.profile(), "pj.kernel '_batch': profile of a polymorphic kernel needs the size: pass arguments of the "
     "shapes (float32[b, 64], float32[b, 64]), or b alone: compiled.profile(b=...)"),
    (lambda c: c.as_text("execution"), "pj.kernel '_batch': a polymorphic compile prints 'tensor', 'tile', 'block', "
     "'pto' or 'cpp', not 'execution' (its tasks depend on the size: profile(b=...) shows them)"),
], ids=["wrong-keyword", "report-wrong-keyword", "two-sizes", "zero", "float", "args-and-size", "no-size", "as-text"])
def test_a_wrong_size_keyword_names_the_one_to_use(call, want):
    x = np.zeros((5, 64), np.float32)
    compiled = pj.kernel(_batch, polymorphic_shapes=("b, 64", "b, 64")).compiled_for(x, x)
    with pytest.raises(PtoArgumentError) as err:
        call(compiled)
    assert str(err.value) == want


def test_a_symbolic_xla_compile_says_how_to_profile(tmp_path):
    """``backend="xla"`` lowered with a symbol compiles for ``jax.export``, without PTO programs: ``profile``
    and ``report`` say to lower with ``backend="sim"`` (the polymorphic compile) or concrete shapes."""
    m, = jax.export.symbolic_shape("m")
    spec = jax.ShapeDtypeStruct((m, 64), jnp.float32)
    compiled = pj.kernel(_batch, backend="xla").lower(spec, spec).compile()
    want = ("pj.kernel '_batch': profile of a kernel lowered with the symbolic shapes (float32[m, 64], float32[m, 64]) "
            "for backend='xla': it simulates the PTO programs, which this compile (for jax.export) does not have; lower "
            "with concrete shapes, or with backend='sim', whose lower(*specs).compile() is the polymorphic compile: "
            "compiled.profile(m=...)")
    with pytest.raises(PtoUnsupportedError) as err:
        compiled.profile()
    assert str(err.value) == want
    with pytest.raises(PtoUnsupportedError) as err:
        compiled.report(tmp_path / "r.html")
    assert str(err.value) == want.replace("profile", "report").replace("report(m=", "report(path, m=")


def _peak_bytes(fn) -> int:
    import tracemalloc
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_profile_of_shapes_allocates_no_tensor():
    """A profile at a size alone (``m=``, or a static compile's shapes) computes the schedule without data:
    its inputs and GM scratch are zeros that take no memory (``m=2**27`` rows was a NumPy MemoryError), and
    its makespan is the one of a profile on real zeros (bytes priced by the tensors' own dtypes)."""
    fn = lambda x: jax.nn.softmax(x * 2.0, axis=-1)       # noqa: E731
    rows, nbytes = 2 ** 20, 2 ** 20 * 64 * 4              # 256 MiB of input, as much scratch and output
    poly = pj.kernel(fn).lower(jax.ShapeDtypeStruct(jax.export.symbolic_shape("m, 64"), jnp.float32)).compile()
    static = pj.kernel(fn).lower(jax.ShapeDtypeStruct((rows, 64), jnp.float32)).compile()
    for profile in (lambda: poly.profile(m=rows), static.profile):
        assert _peak_bytes(profile) < nbytes // 8
    small = np.zeros((4096, 64), np.float32)
    assert poly.profile(m=4096).makespan_us == poly.profile(small, compute=False).makespan_us
