"""The documentation runs as written.

Every ```python block of README.md and docs/**/*.md runs, page by page: a page's blocks
run in order in one namespace of their own (a later block builds on the earlier ones),
in a temporary working directory, with a private kernel cache. A ```text block that
directly follows a python block (nothing but blank lines between) is that block's
output: what the block prints must match it, with `...` standing for any text (as in
doctest) and runs of whitespace compared as one space.

The site's structure is checked here too: mkdocs.yml's nav lists every page in docs/, and
the error catalogue has an entry for every error class axgraph defines.
"""
from __future__ import annotations

import contextlib
import doctest
import importlib
import inspect
import io
import pkgutil
import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
import yaml

import axgraph
import axgraph.errors

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md"] + sorted(DOCS.rglob("*.md"))

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_OUTPUT = doctest.OutputChecker()
_OUTPUT_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, where it is, and its text (dedented)."""

    language: str
    first_line: int  # 1-based line of the opening fence
    last_line: int   # 1-based line of the closing fence
    text: str


def fenced_blocks(markdown: str) -> List[Block]:
    """The fenced code blocks of a Markdown text, in order (indented ones in lists too)."""
    blocks: List[Block] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        info = opening["info"].strip()
        body: List[str] = []
        end = index + 1
        while end < len(lines):
            closing = _FENCE.match(lines[end])
            if (closing is not None and closing["fence"][0] == fence[0]
                    and len(closing["fence"]) >= len(fence) and not closing["info"].strip()):
                break
            line = lines[end]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
            end += 1
        language = info.split()[0] if info else ""
        blocks.append(Block(language, index + 1, end + 1, "\n".join(body) + "\n"))
        index = end + 1
    return blocks


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _shown_output(blocks: List[Block], position: int, lines: List[str]) -> Block | None:
    """The ```text block right after blocks[position], if one follows with only blank
    lines between: the output the python block is documented to print."""
    if position + 1 >= len(blocks):
        return None
    block, following = blocks[position], blocks[position + 1]
    between = lines[block.last_line:following.first_line - 1]
    if following.language != "text" or any(line.strip() for line in between):
        return None
    return following


class PageFailure(Exception):
    """A page's block failed, or printed something other than the output shown."""


def run_page(markdown: str, name: str) -> None:
    """Run a page's python blocks in order in one namespace; check each shown output.

    `name` is the file name tracebacks and axgraph's error locations give, with the
    line numbers of the page. Raises PageFailure naming the page and the block's line.
    """
    lines = markdown.splitlines()
    blocks = fenced_blocks(markdown)
    namespace: dict = {"__name__": "docs_snippets"}
    for position, block in enumerate(blocks):
        if block.language != "python":
            continue
        printed = io.StringIO()
        try:
            # padded so the code's line numbers are the page's
            code = compile("\n" * block.first_line + block.text, name, "exec")
            with contextlib.redirect_stdout(printed):
                exec(code, namespace)
        except Exception:
            raise PageFailure(f"{name}: the python block at line {block.first_line} failed:\n"
                              f"{traceback.format_exc()}") from None
        shown = _shown_output(blocks, position, lines)
        if shown is not None and not _OUTPUT.check_output(shown.text, printed.getvalue(),
                                                          _OUTPUT_FLAGS):
            raise PageFailure(f"{name}: the python block at line {block.first_line} printed\n"
                              f"{printed.getvalue()}\nnot what the page shows at line "
                              f"{shown.first_line}:\n{shown.text}")


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory) -> Path:
    """One private kernel cache for all pages, so a kernel compiles once per run."""
    return tmp_path_factory.mktemp("docs-kernels")


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_page_runs_as_written(page: Path, tmp_path, monkeypatch, kernel_cache) -> None:
    """Each page's python blocks run in a temporary directory with a private kernel cache."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(kernel_cache))
    failure = None
    try:
        run_page(page.read_text(), _page_id(page))
    except PageFailure as error:
        failure = str(error)
    if failure is not None:
        pytest.fail(failure, pytrace=False)


def test_fenced_blocks_reads_indented_and_nested_fences() -> None:
    """The parser dedents blocks inside list items and ends a fence only at its own kind."""
    markdown = ("text\n"
                "1. item\n"
                "   ```python\n"
                "   x = 1\n"
                "     y = 2\n"
                "   ```\n"
                "````text\n"
                "```\n"
                "````\n")
    blocks = fenced_blocks(markdown)
    assert [(b.language, b.first_line, b.last_line) for b in blocks] == [
        ("python", 3, 6), ("text", 7, 9)]
    assert blocks[0].text == "x = 1\n  y = 2\n"
    assert blocks[1].text == "```\n"


def test_a_failing_block_names_its_page_and_line() -> None:
    """Blocks share the page's namespace; an error names the page and the block's line."""
    page = "# A page\n\n```python\nx = 1\n```\n\n```python\ny = x + 1\nundefined_name\n```\n"
    with pytest.raises(PageFailure, match=r"(?s)broken\.md: the python block at line 7 failed"
                                          r".*broken\.md\", line 9.*NameError"):
        run_page(page, "broken.md")


def test_shown_output_must_match_what_the_block_prints() -> None:
    """A ```text block right after a python block is checked; `...` stands for any text."""
    good = "```python\nprint('a  b'); print(1, 2, 3)\n```\n\n```text\na b\n1 ... 3\n```\n"
    run_page(good, "good.md")
    bad = "```python\nprint(2)\n```\n```text\n3\n```\n"
    with pytest.raises(PageFailure, match="bad.md: the python block at line 1 printed"):
        run_page(bad, "bad.md")
    separated = "```python\nprint(2)\n```\nnot output:\n```text\n3\n```\n"
    run_page(separated, "separated.md")


# -- the error catalogue ---------------------------------------------------------------------

def _catalogue_sections() -> Dict[str, str]:
    """docs/errors.md's entries: "## `Name`" heading -> the text up to the next heading."""
    parts = re.split(r"^## ", (DOCS / "errors.md").read_text(), flags=re.MULTILINE)[1:]
    sections = {}
    for part in parts:
        heading, _, body = part.partition("\n")
        match = re.fullmatch(r"`(\w+)`", heading.strip())
        if match:
            sections[match[1]] = body
    return sections


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


#: Every error class axgraph/errors.py defines, read from the module itself.
ERROR_CLASSES = sorted(cls.__name__
                       for _, cls in inspect.getmembers(axgraph.errors, inspect.isclass)
                       if issubclass(cls, axgraph.errors.AxgraphError)
                       and cls.__module__ == axgraph.errors.__name__)


def test_error_classes_are_found() -> None:
    """The list the catalogue is checked against is the module's (not empty, not stale)."""
    assert {"AxgraphError", "FeedError", "ShapeError", "TransformerClosedError"} <= set(
        ERROR_CLASSES)


@pytest.mark.parametrize("name", ERROR_CLASSES)
def test_error_catalogue_explains_every_error_class(name: str) -> None:
    """Each class of axgraph/errors.py has an entry: when it is raised, an example that
    runs (so its message shown is checked), and how to fix it."""
    sections = _catalogue_sections()
    assert name in sections, f"docs/errors.md has no '## `{name}`' entry"
    body = sections[name]
    assert "**Raised" in body or "**Also" in body, f"{name}: say when it is raised"
    assert "**Fix:**" in body, f"{name}: say how to fix it"
    assert any(block.language == "python" for block in fenced_blocks(body)), (
        f"{name}: give an example that raises it")


def test_error_catalogue_lists_the_error_classes_of_particular_parts() -> None:
    """Every other AxgraphError subclass in the package has a row naming its module."""
    for module in pkgutil.walk_packages(axgraph.__path__, "axgraph."):
        importlib.import_module(module.name)
    page = (DOCS / "errors.md").read_text()
    others = {(cls.__name__, cls.__module__) for cls in _subclasses(axgraph.errors.AxgraphError)
              if cls.__module__.startswith("axgraph.") and cls.__module__ != "axgraph.errors"}
    assert others, "the walk found none (the check would pass vacuously)"
    missing = sorted(f"{name} ({module})" for name, module in others
                     if f"| `{name}` | `{module}` |" not in page)
    assert not missing, f"docs/errors.md's table lacks {missing}"


# -- the site ----------------------------------------------------------------------------------

def _nav_pages(entry) -> Iterator[str]:
    """The page paths a mkdocs nav (lists of {title: path or nested list}) names."""
    if isinstance(entry, str):
        yield entry
    elif isinstance(entry, list):
        for item in entry:
            yield from _nav_pages(item)
    elif isinstance(entry, dict):
        for value in entry.values():
            yield from _nav_pages(value)


def test_the_site_nav_lists_every_page_once() -> None:
    """No page of docs/ is left out of mkdocs.yml's nav (an orphan), none listed is missing."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs"
    listed = list(_nav_pages(config["nav"]))
    pages = sorted(str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md"))
    assert sorted(listed) == pages
    assert len(listed) == len(set(listed))
