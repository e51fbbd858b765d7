"""The documentation runs: every ```python block of docs/*.md, and docs/api.md is up to date.

Each Markdown file's python blocks run in order in one namespace (a later block uses what an earlier
one defined), in a temporary working directory (the docs write traces, reports and pictures).
Blocks fenced as ```bash / ```text / ``` are shell commands or output and are not executed.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.M | re.S)


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """(line number, code) of every ```python block, dedented when the fence is indented (in a list)."""
    text = path.read_text()
    blocks = []
    for m in FENCE.finditer(text):
        if m.group("lang") != "python":
            continue
        indent = len(m.group("indent"))
        code = "".join(line[indent:] if line[:indent].strip() == "" else line
                       for line in m.group("body").splitlines(keepends=True))
        blocks.append((text.count("\n", 0, m.start("body")) + 1, code))
    return blocks


DOC_FILES = sorted(p for p in DOCS.glob("*.md") if p.name != "api.md")


def test_the_docs_exist():
    names = {p.name for p in DOC_FILES}
    assert {"quickstart.md", "concepts.md", "training.md", "deepseek_v32.md"} <= names
    assert (DOCS / "api.md").exists()


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.name)
def test_python_blocks_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))          # docs may import examples.deepseek_v32
    blocks = python_blocks(path)
    namespace = {"__name__": "__main__"}            # the blocks are scripts (quickstart's `if __name__ ...`)
    for line, code in blocks:
        # pad so that a traceback names the Markdown file's own line numbers
        exec(compile("\n" * (line - 1) + code, str(path), "exec"), namespace)


def test_fence_parser_skips_shell_and_output_blocks(tmp_path):
    md = tmp_path / "x.md"
    md.write_text("a\n```bash\nrm -rf /\n```\n```python\nx = 1\n```\n- item\n\n  ```python\n  y = x + 1\n  ```\n"
                  "```text\nnot python\n```\n")
    assert [code for _, code in python_blocks(md)] == ["x = 1\n", "y = x + 1\n"]


def _gen_api():
    spec = importlib.util.spec_from_file_location("gen_api", ROOT / "tools" / "gen_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_md_is_up_to_date(capsys):
    gen_api = _gen_api()
    assert gen_api.main(["--check"]) == 0, capsys.readouterr().err + " — run `python tools/gen_api.py`"


def test_api_md_generation_fails_on_a_missing_docstring(monkeypatch, capsys):
    import ptojax as pj

    gen_api = _gen_api()

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
