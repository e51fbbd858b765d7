"""Draw the swimlanes of README.md and docs/deepseek_v32.md into docs/images/ (``Profile.swimlane``;
needs matplotlib).

The README's: its python block run as the tests run it (it writes ``swimlane.png``). docs/tuning.md's
demo softmax, staged and fused.
Lightning Indexer (B=4, S1=2, 64 heads, KV 2048, top-k 512) at each step of
``examples/deepseek_tuning.py``, and the Indexer Prolog (B=4, MTP1, 64K KV) of
``benchmarks/deepseek_v32.py`` with default and tuned tiles. Run: ``python tools/gen_doc_images.py``
(about 15 s); prints each picture's makespan.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import shutil  # noqa: E402
import tempfile  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import ptojax as pj  # noqa: E402
from examples.deepseek_tuning import STEPS  # noqa: E402
from examples.deepseek_v32 import kernels as K  # noqa: E402
from examples.deepseek_v32 import reference as R  # noqa: E402
from benchmarks.deepseek_v32 import UNTUNED_TILES  # noqa: E402
from tools import gen_figures  # noqa: E402

OUT = ROOT / "docs" / "images"


def readme_swimlane():
    readme = ROOT / "README.md"
    with tempfile.TemporaryDirectory() as tmp:
        gen_figures.run_blocks(readme, gen_figures.python_blocks(readme.read_text()), cwd=tmp)
        shutil.copy(Path(tmp) / "swimlane.png", OUT / "readme_swimlane.png")
    print(f"{(OUT / 'readme_swimlane.png').relative_to(ROOT)}: the README's example")


def fusion_swimlanes():
    """docs/tuning.md's demo softmax, staged and fused."""
    from ptojax.demo import softmax_rows
    x = np.random.default_rng(3).uniform(-4, 4, (48, 1000)).astype(np.float32)
    for name, options in [("staged", {"row_loops": {"Softmax": False}}), ("fused", None)]:
        prof = pj.kernel(softmax_rows, options=options).lower(x).compile().profile()
        path = OUT / f"softmax_{name}.png"
        prof.swimlane(path)
        print(f"{path.relative_to(ROOT)}: {prof.makespan_us:.2f} us, {prof.tasks} tasks")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    readme_swimlane()
    fusion_swimlanes()
    b, s1, n, topk, kv = 4, 2, 64, 512, 2048
    args = R.indexer_inputs(b, s1, n, [kv] * b, seed=0)
    fn = functools.partial(K.lightning_indexer, sparse_count=topk)
    for i, (name, options) in enumerate(STEPS):
        prof = pj.kernel(fn, options=options).lower(*args).compile().profile(*args)
        path = OUT / f"indexer_step{i}.png"
        prof.swimlane(path)
        print(f"{path.relative_to(ROOT)}: {name}: {prof.makespan_us:.2f} us, {prof.tasks} tasks")
    pargs, _ = R.prolog_inputs(4, 2, 7168, 1536, 64, [65536] * 4)
    specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in pargs]
    for name, tiles, options, donate in [("untuned", UNTUNED_TILES, None, False),
                                         ("tuned_donated", K.PROLOG_TILES, K.PROLOG_OPTIONS, True)]:
        f = pj.kernel(functools.partial(K.indexer_prolog, n_heads=64, tiles=tiles), options=options,
                      donate_argnums=(13, 14) if donate else ())
        run_args = [np.array(a, copy=True) for a in pargs] if donate else pargs
        prof = f.lower(*specs).compile().profile(*run_args)
        path = OUT / f"prolog_{name}.png"
        prof.swimlane(path)
        print(f"{path.relative_to(ROOT)}: {prof.makespan_us:.2f} us, {prof.tasks} tasks")


if __name__ == "__main__":
    main()
