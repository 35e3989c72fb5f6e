"""The documentation cannot go stale: every setting, command, option, error and operation
is documented, every relative link resolves, and no page tells a user to install a
package of someone else's (in the manner of datasette's ``test_docs.py``)."""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from treasury import errors
from treasury.cli import main
from treasury.config import ENV_PREFIX, Settings
from treasury.operations import OPERATIONS, Operation

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
SKIPPED_DIRS = {"node_modules", "__pycache__", "build", "dist"}


def text(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def mentions(page: str, word: str) -> bool:
    """Whether `word` appears in `page` on its own (not inside a longer name)."""
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", page) is not None


# -- settings ------------------------------------------------------------------------------

SETTINGS = list(Settings.model_fields)


@pytest.mark.parametrize("name", SETTINGS)
def test_every_setting_is_documented(name: str) -> None:
    page = text("configuration.md")
    assert f"`{name}`" in page, f"setting {name} is missing from docs/configuration.md"
    variable = ENV_PREFIX + name.upper()
    assert f"`{variable}`" in page, f"{variable} is missing from docs/configuration.md"


# -- the command line ----------------------------------------------------------------------


def commands(group: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every command and subcommand under `group` (the root is ``()``)."""
    yield path
    if isinstance(group, click.Group):
        for name, command in sorted(group.commands.items()):
            yield from commands(command, (*path, name))


def command_at(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def section_of(page: str, path: tuple[str, ...]) -> str:
    """The part of cli.md that documents `path`: under the heading naming the command,
    or its group (``## `treasury keys` `` for ``keys create``); the whole page for the root."""
    sections = [s for s in re.split(r"(?m)^(?=#{1,6} )", page) if s.startswith("#")]
    for depth in range(len(path), 0, -1):
        title = "treasury " + " ".join(path[:depth])
        found = [s for s in sections if mentions(s.splitlines()[0], title)]
        if found:
            return "\n".join(found)
    return page


CLI_PATHS = list(commands(main))


def test_the_cli_walk_finds_the_commands() -> None:
    assert {("serve",), ("keys", "create"), ("orgs", "list")} <= set(CLI_PATHS)


@pytest.mark.parametrize("path", CLI_PATHS, ids=lambda path: " ".join(path) or "treasury")
def test_every_command_and_option_is_documented(path: tuple[str, ...]) -> None:
    page = text("cli.md")
    name = " ".join(("treasury", *path))
    assert mentions(page, name), f"`{name}` is missing from docs/cli.md"
    section = section_of(page, path)
    for parameter in command_at(path).params:
        if isinstance(parameter, click.Option):
            for option in (*parameter.opts, *parameter.secondary_opts):
                assert mentions(section, option), f"`{name} {option}` is not in docs/cli.md"
        elif isinstance(parameter, click.Argument):
            metavar = (parameter.name or "").upper()
            assert mentions(section, metavar), f"`{name} {metavar}` is not in docs/cli.md"


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_is_documented(name: str) -> None:
    assert re.search(rf"`{name}\b", text("errors.md")), f"{name} is missing from docs/errors.md"


# -- operations ----------------------------------------------------------------------------


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.name)
def test_every_operation_is_in_the_http_reference(operation: Operation[Any]) -> None:
    line = f"{operation.method} /v1{operation.path}"
    assert mentions(text("http-api.md"), line), f"`{line}` is missing from docs/http-api.md"


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.name)
def test_every_operation_is_in_the_python_reference(operation: Operation[Any]) -> None:
    call = ".".join(operation.method_path)  # "yields.estimate" for yields.get
    assert re.search(rf"(?<![\w-]){re.escape(call)}\(", text("python-api.md")), (
        f"the call `{call}(…)` ({operation.name}) is missing from docs/python-api.md"
    )


# -- links ---------------------------------------------------------------------------------

_FENCED = re.compile(r"(?ms)^(```|~~~).*?^\1")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"(?m)^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
_AUTOLINK = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.-]*:[^>\s]+)>")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def links(page: Path) -> list[str]:
    """Every link target of a Markdown page, outside code."""
    prose = _INLINE_CODE.sub("", _FENCED.sub("", page.read_text(encoding="utf-8")))
    return [
        m.group(1) for pattern in (_LINK, _REFERENCE, _AUTOLINK) for m in pattern.finditer(prose)
    ]


def local_target(page: Path, target: str) -> Path | None:
    """The file a relative link points at (anchors ignored); None for a URL or an anchor."""
    if _SCHEME.match(target) or target.startswith("#"):
        return None
    return (page.parent / target.split("#", 1)[0]).resolve()


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_relative_links_resolve_inside_the_repository(page: Path) -> None:
    for target in links(page):
        path = local_target(page, target)
        if path is None:
            continue
        assert path.is_relative_to(ROOT), f"{page.name}: {target} leaves the repository"
        assert path.exists(), f"{page.name}: {target} does not exist"


def test_readme_links_only_into_docs() -> None:
    targets = links(README)
    assert targets, "README.md links to nothing"
    for target in targets:
        path = local_target(README, target)
        assert path is not None and not target.startswith("#"), f"README.md links to {target}"
        assert path.is_relative_to(DOCS), f"README.md links outside docs/: {target}"


# -- installing ----------------------------------------------------------------------------


def markdown_files() -> Iterator[Path]:
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in SKIPPED_DIRS]
        for name in files:
            if name.endswith(".md"):
                yield Path(folder) / name


_OTHER_PACKAGE = re.compile(r"pip install\s+(?:-\S+\s+)*['\"]?treasury(?![\w-])")


def test_the_markdown_walk_finds_the_docs() -> None:
    found = set(markdown_files())
    assert README in found and DOCS / "cli.md" in found


@pytest.mark.parametrize(
    "page", sorted(markdown_files()), ids=lambda page: page.relative_to(ROOT).as_posix()
)
def test_no_page_installs_someone_elses_package(page: Path) -> None:
    """The distribution is treasury-api; `treasury` on the package index is another project."""
    content = page.read_text(encoding="utf-8")
    assert not _OTHER_PACKAGE.search(content), f"{page.name} says `pip install treasury`"
    assert "treasury[" not in content, f"{page.name} names the extras of `treasury`"


CODE_NAME = re.compile(r"`((?:[a-z_]+/)*[a-z_]+)\.([a-z_]+)`")


def test_the_architecture_names_code_that_exists() -> None:
    """`_infra/sql.insert_numbered` names a function of treasury/_infra/sql.py, and
    `_infra/schema.py` a file: a page describing removed code fails here."""
    text = (DOCS / "architecture.md").read_text()
    named = CODE_NAME.findall(text)
    assert sum("/" in path for path, _ in named) >= 5  # the walk finds the names
    for path, name in named:
        if "/" not in path:
            continue  # `idempotency.run` and the like: a name in a module named above
        if name == "py":
            assert (ROOT / "treasury" / f"{path}.py").exists(), f"{path}.py"
        else:
            module = importlib.import_module("treasury." + path.replace("/", "."))
            assert hasattr(module, name), f"{path}.{name}"
