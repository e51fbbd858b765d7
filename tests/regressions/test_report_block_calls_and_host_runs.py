"""The report's per-block task counts are each block call's own (two calls of one program counted the
run's tasks of that program each: they added up to more than the run), and a run on host threads is
not presented as a simulated schedule against the chip's bound."""
import re

import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj

S = jax.ShapeDtypeStruct


def _counts(fn, *shapes):
    compiled = pj.kernel(fn).lower(*shapes).compile()
    profile = compiled.profile(compute=False)
    data = pj.report.build(profile, compiled)
    blocks = [n for n in data["graph"]["nodes"] if n["kind"] == "block"]
    fusion = [b["tasks"] for b in data["fusion"]["blocks"]]
    assert [n["tasks"] for n in blocks] == fusion
    assert all(n["tasks"] == sum(p["tasks"] for p in n["parts"]) for n in blocks)
    return profile, fusion


def test_two_calls_of_one_program_count_their_own_tasks():
    def two_casts(a, b):
        with jax.named_scope("Cast"):
            return a.astype(jnp.float32) * 2.0, b.astype(jnp.float32) * 2.0

    profile, fusion = _counts(two_casts, S((256, 512), jnp.float16), S((256, 512), jnp.float16))
    assert fusion == [16, 16] and profile.tasks == 32


def test_a_call_in_a_loop_counts_each_of_its_runs():
    def loop(x):
        y = jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0 + 1.0, x)
        return y * 2.0 + 1.0, x * 2.0 + 1.0

    profile, fusion = _counts(loop, S((256, 512), jnp.float32))
    assert sum(fusion) == profile.tasks and sorted(fusion) == [16, 16, 48]


def test_a_run_on_host_threads_has_no_chip_ratio(tmp_path):
    x = np.ones((64, 256), np.float32)
    compiled = pj.kernel(lambda x: jnp.exp(x) * 2.0).lower(x).compile()
    _, trace = compiled.run(x, executor="threads")
    path = tmp_path / "host.html"
    pj.report.write(str(path), trace.profile(), compiled)
    page = path.read_text()
    cards = dict(re.findall(r"<div class='k'>(.*?)</div><div class='v'>(.*?)</div>", page))
    assert cards["makespan / bound"] == cards["bound set by"] == "- (host threads)"
    assert cards["makespan"].endswith("on the host&#x27;s clock") and "the simulated schedule" not in page
