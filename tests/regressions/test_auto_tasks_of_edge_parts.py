"""``tiles_per_block="auto"`` on an odd-sized GEMM, whose block call has interior, edge and corner
programs sharing the cube cores: each part was priced alone ([3, 1, 2, 1] points per task, 21 tasks,
10.36 µs, 13 % slower than 4 points for all); the parts' counts are now priced together too."""
import jax
import jax.numpy as jnp

import ptojax as pj


def _gemm(a, b):
    with pj.tile(cube=(64, 64, 64)), jax.named_scope("G"):
        return pj.ops.matmul(a, b)


def test_auto_is_no_slower_than_a_fixed_count_for_every_part():
    args = [jax.ShapeDtypeStruct(s, jnp.float16) for s in ((200, 520), (520, 712))]
    makespan = {n: pj.kernel(_gemm, options={"tiles_per_block": {"G": n}}).lower(*args).compile().profile().makespan_us
                for n in (1, 2, 3, 4, "auto")}
    assert makespan["auto"] <= min(makespan[n] for n in (1, 2, 3, 4)) * 1.01, makespan   # auto's prices vs the run's schedule
