"""The documentation runs and its figures are the code's: every ```python block of README.md and
docs/*.md runs, each block's marked output (``<!-- output -->`` + ```text) is what it prints, every
``<!-- figures:NAME -->`` table is what tools/gen_figures.py makes, and docs/api.md is up to date.

Each Markdown file's python blocks run in order in one namespace (a later block uses what an earlier
one defined), in a temporary working directory (the docs write traces, reports and pictures).
Blocks fenced as ```bash / ```text / ``` are shell commands or output and are not executed.
"""
from __future__ import annotations

import difflib
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _tool(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module                 # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


FIGURES = _tool("gen_figures")
DOC_FILES = FIGURES.doc_files()
REGENERATE = "run `python tools/gen_figures.py`"


def test_the_docs_exist():
    names = {p.name for p in DOC_FILES}
    assert {"README.md", "quickstart.md", "concepts.md", "training.md", "deepseek_v32.md", "design.md"} <= names
    assert (DOCS / "api.md").exists()


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert "python -m pytest -q" in text and "ptojax demo" in text       # .ci/run runs the README's test command
    assert "../shared" not in text and "(docs/design.md)" in text
    for link in ["docs/quickstart.md", "docs/concepts.md", "docs/api.md"]:
        assert f"({link})" in text


def _outputs(path):
    blocks = FIGURES.python_blocks(path.read_text())
    return blocks, FIGURES.run_blocks(path, blocks)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.name)
def test_python_blocks_run_and_print_their_outputs(path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))          # docs may import examples.deepseek_v32
    blocks, printed = _outputs(path)
    text = path.read_text()
    stale = FIGURES.stale_outputs(text, blocks, printed)
    if stale:
        block, out = next((b, o) for b, o in zip(blocks, printed) if b.line == stale[0])
        diff = "\n".join(difflib.unified_diff(text[slice(*block.output)].splitlines(), FIGURES.lines(out), "shown",
                                               "printed", lineterm="", n=0))
        pytest.fail(f"{path.name}: the outputs shown after the blocks at lines {stale} are not what they print; "
                    f"{REGENERATE}\n{diff}")


def test_output_blocks_are_found_and_compared(tmp_path):
    md = tmp_path / "x.md"
    md.write_text("a\n```bash\nrm -rf /\n```\n```python\nx = 1\nprint(x * 6, 'us')\n```\n\n<!-- output -->\n"
                  "```text\n7 us\n```\n- item\n\n  ```python\n  y = x + 1\n  ```\n```text\nnot python\n```\n")
    blocks, printed = _outputs(md)
    assert [b.code for b in blocks] == ["x = 1\nprint(x * 6, 'us')\n", "y = x + 1\n"]
    assert blocks[0].output is not None and blocks[1].output is None       # unmarked text is not an output
    assert printed == ["6 us\n", ""]
    assert FIGURES.stale_outputs(md.read_text(), blocks, printed) == [6]
    assert FIGURES.stale_outputs(md.read_text(), blocks, ["6 us  \n\n", ""]) == [6]
    assert FIGURES.stale_outputs(md.read_text(), blocks, ["7 us  \n\n", ""]) == []
    fixed = FIGURES.with_outputs(md.read_text(), blocks, printed)
    assert "```text\n6 us\n```" in fixed and "7 us" not in fixed and "not python" in fixed


def test_figure_regions_name_known_tables():
    for path in DOC_FILES:
        for name in FIGURES.regions(path.read_text()):
            assert name in FIGURES.TABLES, f"{path.name}: figures region {name!r} has no table"
    used = {name for path in DOC_FILES for name in FIGURES.regions(path.read_text())}
    assert used == set(FIGURES.TABLES), "every table is shown somewhere, once"


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in FIGURES.SLOW else n
                                  for n in FIGURES.TABLES])
def test_figure_tables_are_up_to_date(name, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    for path in DOC_FILES:
        text = path.read_text()
        if name in FIGURES.regions(text):
            assert FIGURES.with_tables(text, {name}) == text, f"{path.name}: table {name!r} is out of date; {REGENERATE}"


FIGURE = re.compile(r"\d[\d\u2009 ,.]*\s?(?:µs|us|ms)\b|\b\d[\d\u2009 ]* tasks\b")   # 12.4 us, 1 028 tasks


def hand_written_figures(text: str) -> list[str]:
    """Times and task counts in ``text`` outside code, marked outputs and generated tables."""
    blocks = FIGURES.python_blocks(text)
    text = FIGURES.REGION.sub("", FIGURES.with_outputs(text, blocks, [""] * len(blocks)))
    text = FIGURES.FENCE.sub(lambda m: "" if m.group("lang") in ("python", "bash") else m.group(0), text)
    return FIGURE.findall(text)


FIGURES_CHECKED_ELSEWHERE = {"calibration.md": "tests/test_calibration.py"}   # recomputes its table and prose


@pytest.mark.parametrize("path", [p for p in DOC_FILES if p.name not in FIGURES_CHECKED_ELSEWHERE], ids=lambda p: p.name)
def test_every_time_and_task_count_is_generated(path):
    assert hand_written_figures(path.read_text()) == [], (
        f"{path.name}: a figure written by hand; print it from a block or put it in a generated table")


def test_hand_written_figures_are_found():
    md = ("The kernel takes 12.4 us (1 028 tasks).\n```python\nprint('3 us')\n```\n\n<!-- output -->\n```text\n"
          "3 us\n```\n<!-- figures:targets -->\n| 2 µs |\n<!-- /figures -->\n```text\n7 tasks\n```\n")
    assert hand_written_figures(md) == ["12.4 us", "1 028 tasks", "7 tasks"]


LINK = re.compile(r"\]\((?!https?:|mailto:)(?P<file>[^)#\s]*)(?:#(?P<anchor>[^)\s]+))?\)")


def anchors(text: str) -> set[str]:
    """GitHub's anchors of a Markdown text's headings."""
    text = FIGURES.FENCE.sub("", text)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.name)
def test_links_resolve(path):
    text = path.read_text()
    for m in LINK.finditer(FIGURES.FENCE.sub("", text)):
        target = (path.parent / m.group("file")).resolve() if m.group("file") else path
        assert ROOT in target.parents, f"{path.name}: {m.group(0)} leaves the repository"
        assert target.exists(), f"{path.name}: {m.group(0)}: no such file"
        if m.group("anchor"):
            assert m.group("anchor") in anchors(target.read_text()), f"{path.name}: {m.group(0)}: no such heading"


def test_a_stale_table_is_found(tmp_path):
    md = "<!-- figures:targets -->\n| made up |\n<!-- /figures -->\n"
    fixed = FIGURES.with_tables(md)
    assert fixed != md and "48 AIV" in fixed and fixed.endswith("<!-- /figures -->\n")
    with pytest.raises(KeyError, match="nope"):
        FIGURES.with_tables("<!-- figures:nope -->\n<!-- /figures -->")


def test_api_md_is_up_to_date(capsys):
    gen_api = _tool("gen_api")
    assert gen_api.main(["--check"]) == 0, capsys.readouterr().err + " — run `python tools/gen_api.py`"


def test_api_md_generation_fails_on_a_missing_docstring(monkeypatch, capsys):
    import ptojax as pj

    gen_api = _tool("gen_api")

    def undocumented(x):
        return x

    monkeypatch.setattr(pj.nn, "undocumented", undocumented, raising=False)
    monkeypatch.setattr(pj.nn, "__all__", [*pj.nn.__all__, "undocumented"])
    assert gen_api.main(["--check"]) == 2
    assert "pj.nn.undocumented" in capsys.readouterr().err


def test_api_md_lists_every_public_name():
    import ptojax as pj

    text = (DOCS / "api.md").read_text()
    for name in pj.__all__:
        assert f"`pj.{name}`" in text
    for name in pj.ops.__all__:
        assert f"| `{name}` |" in text
    for name in pj.nn.__all__:
        assert f"`pj.nn.{name}`" in text
    assert "**(no docstring)**" not in text
    assert sys.modules["ptojax"] is pj
