"""Findings of a probe of the report's views against the profile (about 3 300 checks, no number that
disagrees): the swimlane's zoom re-placed tasks with a 6-decimal scale (35 px off at 16x over a 16.8 s host
run); labels past the 20th took the colours of the first ones; the diff table padded a CJK or emoji label by
code points (its row 6 columns off); a polymorphic kernel's report said it was built "from a profile
alone" and its subtitle began with an empty signature."""
import re
import unicodedata

import jax
import numpy as np

import ptojax as pj
from ptojax.mpmd.trace import colour


def _width(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def test_every_label_has_its_own_colour():
    colours = [colour(i) for i in range(200)]
    assert len(set(colours)) == 200 and all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colours)


def test_the_diff_table_aligns_wide_labels():
    def f(x):
        with pj.tile(vec=(32, 64)), jax.named_scope("中文ラベル🚀"):
            y = x * 2.0
        with pj.tile(vec=(32, 64)), jax.named_scope("Plain"):
            return y + 1.0

    p = pj.kernel(f).lower(np.ones((128, 128), np.float32)).compile().profile()
    rows = [line for line in str(pj.report.diff(p, p)).splitlines() if line.endswith("%")]
    assert any("中文" in line for line in rows) and len({_width(line) for line in rows}) == 1


def test_a_report_keeps_its_zoom_scale_exact_and_says_why_a_view_is_missing(tmp_path):
    x = np.ones((64, 64), np.float32)
    compiled = pj.kernel(lambda a: a * 2, polymorphic_shapes=("m, 64",)).compiled_for(x)
    compiled.report(tmp_path / "r.html", m=64)
    page = (tmp_path / "r.html").read_text()
    scale = re.search(r'data-scale="([^"]+)"', page).group(1)
    assert len(scale.split(".")[-1]) > 6 or "e" in scale
    assert "or of a polymorphic compile" in page and "<div class='sub'>machine" in page
