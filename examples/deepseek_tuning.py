"""The tuning loop on DeepSeek-V3.2's Lightning Indexer — per-label overrides, no kernel edits.

The seed article tunes its kernels in three steps, reading the swimlane after each. Here the same
steps are pass options given to ``pj.kernel(options=...)`` (keyed by the kernel's semantic labels:
``Gather``, ``Score``, ``Reduce``, ``TopK`` in ``examples/deepseek_v32/kernels.py``); after each step
the profile is compared with the previous one (``ptojax.report.diff``: makespan, lower bound, tasks,
utilisation, time and tasks per label):

0. baseline — the kernel's own tiles.
1. L1 reuse — ``tiles_per_block["Score"] = 4``: one cube task computes 4 consecutive score tiles
   (n direction) with the query tile kept in L1, instead of one task per tile.
2. vector tile — ``tiles["Reduce"] = {"vec": (64, 256)}``: the ReLU / weighting / head-sum / mask ops
   work on 64 x 256 tiles instead of 8 x 128, so far fewer (scheduler-bound) vector tasks.
3. top-k merge — ``tiles["TopK"] = {"vec": (1, 1, 1024)}``: each query row's top-k is selected in two
   stages, a partial top-k per 1 024-position chunk on its own AIV, then a merge (TMRGSORT) of the
   chunks' lists. At KV 2048 the sort is off the critical path, so the extra tasks cost more than the
   parallel sorts save: the profile says so (at 64K KV a row no longer fits one tile and the staged
   top-k is the only way, with 2 048-position chunks).

Run: ``python examples/deepseek_tuning.py [--kv 2048] [--html tuned.html]`` (a few seconds).
"""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ptojax as pj  # noqa: E402
from ptojax import report  # noqa: E402
from examples.deepseek_v32 import kernels as K  # noqa: E402
from examples.deepseek_v32 import reference as R  # noqa: E402

STEPS = [
    ("baseline", {}),
    ("1. L1 reuse: tiles_per_block Score=4", {"tiles_per_block": {"Score": 4}}),
    ("2. vector tile (64, 256) on Reduce", {"tiles": {"Reduce": {"vec": (64, 256)}},
                                            "tiles_per_block": {"Score": 4}}),
    ("3. top-k merge: TopK in chunks of 1024", {"tiles": {"Reduce": {"vec": (64, 256)},
                                                          "TopK": {"vec": (1, 1, 1024)}},
                                                "tiles_per_block": {"Score": 4}}),
]


def _same_selection(got, want, scores) -> bool:
    """Whether the kernel's top-k indices [T, 1, k] are the reference's: the same, but for entries whose
    scores tie to float32 rounding trading places (the kernel and the reference sum in other orders)."""
    def picked(idx):
        idx = idx[:, 0]
        return np.where(idx >= 0, np.take_along_axis(scores, np.maximum(idx, 0), -1), -np.inf)
    return np.array_equal(got < 0, want < 0) and np.allclose(picked(got), picked(want), rtol=1e-6, atol=0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kv", type=int, default=2048, help="KV positions per batch (multiple of 128, < 4096)")
    ap.add_argument("--html", default=None, help="write the last step's HTML report here")
    a = ap.parse_args(argv)
    if a.kv < 128 or a.kv % 128 or a.kv >= 4096:
        ap.error(f"--kv {a.kv}: a multiple of 128 below 4096")
    b, s1, n, topk = 4, 2, 64, 512
    args = R.indexer_inputs(b, s1, n, [a.kv] * b, seed=0)
    want = np.asarray(R.lightning_indexer(*args, sparse_count=topk))
    scores = np.asarray(R.lightning_indexer_scores(*args)).reshape(b * s1, -1)
    fn = functools.partial(K.lightning_indexer, sparse_count=topk)
    print(f"Lightning Indexer, a3: B={b} S1={s1} heads={n}x128 KV={a.kv} top-k={topk} (int8, paged cache)")
    first = previous = None
    for name, options in STEPS:
        compiled = pj.kernel(fn, options=options).lower(*args).compile()
        out, trace = compiled.run(*args)
        assert _same_selection(np.asarray(out), want, scores), f"{name}: indices differ from the reference"
        profile = trace.profile()
        print(f"\n== {name}\n   options {options}")
        print(f"   makespan {profile.makespan_us:.2f} us, lower bound {profile.lower_bound_us:.2f} us, "
              f"{profile.tasks} tasks; indices match the reference")
        if previous is not None:
            print("\n".join("   " + line for line in str(report.diff(previous, profile)).splitlines()))
        first = first or profile
        previous = profile
    print(f"\n== all steps against the baseline: makespan {first.makespan_us:.2f} -> {previous.makespan_us:.2f} us "
          f"({previous.makespan_us / first.makespan_us:.2f}x)")
    print("\n".join("   " + line for line in str(report.diff(first, previous)).splitlines()))
    if a.html:
        report.write(a.html, previous, compiled, title="lightning_indexer (tuned)")
        print(f"\nHTML report of the last step written to {a.html}")


if __name__ == "__main__":
    main()
