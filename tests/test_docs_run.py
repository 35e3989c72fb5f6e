"""Every Python block in docs/ runs: the blocks of a page are executed in order, in one
namespace per page, in a fresh temporary directory (so a page's ``sqlite:///x.db`` is a new
file there) with no TREASURY_* setting from the environment. A block that cannot run alone
is marked just before it with ``<!-- not run: the reason -->``."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from treasury import Treasury
from treasury._infra.jobs import BackgroundWorker

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
NOT_RUN = re.compile(r"<!--\s*not run:(.*?)-->\s*\Z", re.S)


@dataclass
class Block:
    page: str
    line: int
    code: str
    not_run: str | None  # the reason given, if the block is marked


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()]
        marked = NOT_RUN.search(before)
        found.append(
            Block(
                page.name,
                before.count("\n") + 2,
                match.group(1),
                marked.group(1).strip() if marked else None,
            )
        )
    return found


PAGES = sorted(page for page in DOCS.glob("*.md") if blocks(page))
RUN = [page for page in PAGES if any(block.not_run is None for block in blocks(page))]


def test_the_walk_finds_the_blocks() -> None:
    every = [block for page in PAGES for block in blocks(page)]
    assert len(every) >= 25  # the pages hold about thirty
    assert {"python-api.md", "transfers.md", "errors.md"} <= {page.name for page in PAGES}
    skipped = [block for block in every if block.not_run is not None]
    assert all(block.not_run for block in skipped), "a `not run` marker without its reason"
    assert len(skipped) * 3 < len(every), "most blocks run: mark only those that cannot"


@pytest.mark.parametrize("page", RUN, ids=[page.name for page in RUN])
def test_the_python_blocks_of_the_page_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [name for name in os.environ if name.startswith("TREASURY_")]:
        monkeypatch.delenv(name)
    namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
    ran = 0
    try:
        for block in blocks(page):
            if block.not_run is not None:
                continue
            code = compile(block.code, f"docs/{block.page}:{block.line}", "exec")
            exec(code, namespace)  # the repository's own documentation
            ran += 1
    finally:  # what a page leaves running or open (a reader's process would exit)
        for value in namespace.values():
            if isinstance(value, BackgroundWorker):
                value.stop()
        for value in namespace.values():
            if isinstance(value, Treasury):
                value.close()
    assert ran == sum(block.not_run is None for block in blocks(page))
