"""Write treasury/client/_generated.py from the table of operations (`nox -s client`).

The typed client's groups and methods are declared there, one method per operation of
`treasury.operations.OPERATIONS`, with its parameters and the core's own models as its
return type, so that mypy and IDEs see ``c.wallets.create(label="x")`` as a `Wallet`.
The client imports that module, never the table (which loads the core);
tests/test_client_typed.py keeps it in step with the table.

Run: ``python scripts/generate_client.py`` (rewrites the module), or ``--check``.
"""

from __future__ import annotations

import keyword
import re
import sys
import types
import uuid
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator
from pydantic.fields import FieldInfo

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "treasury" / "client" / "_generated.py"

HEADER = '''"""The typed client's groups and methods, one per operation of the table.

Generated from `treasury.operations.OPERATIONS` by ``scripts/generate_client.py``
(``nox -s client``); do not edit: tests/test_client_typed.py keeps it in step with the
table. Each method is declared with its parameters and returns the core's own model.
A method with a body or a query takes it as a model or a mapping, or its fields by name
(or by position where the model's required fields come first); path parameters come
first, in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, overload
from uuid import UUID

'''


def snake(name: str) -> str:
    """A parameter's Python name (``chainId``: ``chain_id``; ``id``: ``id_``)."""
    text = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    return text + "_" if keyword.iskeyword(text) or text in {"id", "hash", "type"} else text


def camel_group(group: str) -> str:
    return "".join(part.capitalize() for part in group.split("_")) + "Group"


class Renderer:
    """Annotations as source text, remembering the model classes they name."""

    def __init__(self) -> None:
        self.models: dict[str, set[str]] = {}

    def model(self, cls: type) -> str:
        self.models.setdefault(public_module(cls), set()).add(cls.__name__)
        return cls.__name__

    def response(self, cls: Any) -> str:
        meta = getattr(cls, "__pydantic_generic_metadata__", None)
        if meta and meta.get("origin") is not None:
            origin, args = meta["origin"], meta["args"]
            return f"{self.model(origin)}[{', '.join(self.response(a) for a in args)}]"
        return self.model(cls)

    def field(self, info: FieldInfo) -> str:
        if _decimal_text(info.metadata) or _decimal_text_in(info.annotation):
            return "str | int | Decimal"
        if get_origin(info.annotation) is Literal and _before(info.metadata):
            return "str"  # a validator widens what is accepted (a symbol in any case)
        return self.annotation(info.annotation)

    def annotation(self, annotation: Any) -> str:
        origin, args = get_origin(annotation), get_args(annotation)
        if origin is Annotated:
            if _decimal_text(args[1:]):
                return "str | int | Decimal"
            return self.annotation(args[0])
        if annotation is type(None):
            return "None"
        if origin in (Union, types.UnionType):
            parts: list[str] = []
            for arg in args:
                for part in self.annotation(arg).split(" | "):
                    if part not in parts:
                        parts.append(part)
            return " | ".join(parts)
        if origin is Literal:
            named = _named(annotation)
            if named is not None:  # the models' own name for it: one list of its values
                self.models.setdefault(named[0], set()).add(named[1])
                return named[1]
            return f"Literal[{', '.join(repr(arg) for arg in args)}]"
        if origin is list:
            return f"list[{self.annotation(args[0])}]"
        if annotation in (str, int, bool, float):
            return str(annotation.__name__)
        if annotation is Decimal:
            return "Decimal"
        if annotation is uuid.UUID:
            return "UUID | str"
        if isinstance(annotation, type) and (
            issubclass(annotation, datetime) or annotation.__name__ == "AwareDatetime"
        ):
            return "datetime | str"
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return f"{self.model(annotation)} | Mapping[str, Any]"
        return "Any"


def _decimal_text(metadata: Any) -> bool:
    return any(
        isinstance(item, BeforeValidator) and item.func.__name__ == "_decimal_text"
        for item in metadata
    )


def _named(annotation: Any) -> tuple[str, str] | None:
    """A Literal that a models module names at its top (``EventName``): that module and
    name, so the client refers to it instead of repeating its values."""
    for module_name, module in sorted(sys.modules.items()):
        if not module_name.startswith("treasury.") or module_name.endswith(".operations"):
            continue
        for name, value in vars(module).items():
            if value is annotation and not name.startswith("_") and len(get_args(value)) > 2:
                source = Path(module.__file__ or "").read_text()
                if f"\n{name} = Literal[" in source:  # defined there, not imported
                    return module_name, name
    return None


def _before(metadata: Any) -> bool:
    return any(isinstance(item, BeforeValidator) for item in metadata)


def _decimal_text_in(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        return _decimal_text(get_args(annotation)[1:])
    return any(_decimal_text_in(arg) for arg in get_args(annotation))


def public_module(cls: type) -> str:
    """Where the client imports a model from: its defining module (a models module,
    never an operations module)."""
    module = cls.__module__
    if module.endswith(".operations") or module == "treasury.operations":
        raise ValueError(f"{cls.__name__} is defined in {module}: the client cannot import it")
    return module


def path_type(render: Renderer, annotation: Any) -> str:
    """A path parameter's type; a bank account is named by its integer id or its uuid."""
    from treasury.bank_accounts.models import BankAccountRef

    return "int | str" if annotation is BankAccountRef else render.annotation(annotation)


def source() -> str:
    """The module's text, from the table as it is now."""
    from treasury.operations import IDEMPOTENCY_HEADER, OPERATIONS, PREFIX

    render = Renderer()
    groups: dict[str, list[str]] = {}
    specs: list[str] = []
    for op in OPERATIONS:
        group, method = op.name.split(".")
        constant = "_" + op.name.replace(".", "_").upper()
        response = "str" if op.csv is not None else render.response(op.response)
        model = op.body or op.query
        spec_args = [
            repr(op.name),
            repr(op.method),
            repr(op.path),
            response,
            f"params={tuple(p.name for p in op.path_params)!r}",
            f"status={op.status}",
        ]
        if op.body is not None:
            spec_args.append(f"body={render.model(op.body)}")
        if op.query is not None:
            spec_args.append(f"query={render.model(op.query)}")
        if op.idempotency is not None:
            spec_args.append(f"idempotency={op.idempotency!r}")
        if op.selected_by is not None:
            spec_args.append(f"selected_by={op.selected_by!r}")
        if op.csv is not None:
            spec_args.append("csv=True")
        if op.accept is not None:
            spec_args.append(f"accept={op.accept!r}")
        specs.append(f"{constant} = Spec({', '.join(spec_args)})")

        path = [f"{snake(p.name)}: {path_type(render, p.type)}" for p in op.path_params]
        key = ["idempotency_key: str | None = None"] if op.idempotency is not None else []
        doc = f'        """{op.summary}: ``{op.method} /v1{op.path}``."""'
        call = f"        return self._call({constant}, ({', '.join(snake(p.name) for p in op.path_params)}{',' if op.path_params else ''}), args, fields{', idempotency_key' if key else ', None'})"
        lines: list[str] = []
        if model is None:
            params = ", ".join(
                ["self", *path, *(["/"] if path else []), *(["*", *key] if key else [])]
            )
            lines += [
                f"    def {method}({params}) -> {response}:",
                doc,
                call.replace(", args, fields", ", (), {}"),
            ]
        else:
            fields = list(model.model_fields.items())
            required = [info.is_required() for _, info in fields]
            positional = required == sorted(required, reverse=True)  # required ones first
            declared = []
            for name, info in fields:
                text = render.field(info)
                if info.is_required():
                    declared.append(f"{name}: {text}")
                else:
                    optional = (
                        text if text.endswith("| None") or text == "None" else f"{text} | None"
                    )
                    declared.append(f"{name}: {optional} = None")
            body_type = f"{render.model(model)} | Mapping[str, Any]"
            given = "body" if op.body is not None else "query"
            whole = ["self", *path, f"{given}: {body_type}", "/", *(["*", *key] if key else [])]
            by_field = ["self", *path, "/", *([] if positional else ["*"]), *declared]
            if key:
                by_field += (["*"] if positional else []) + key
            lines += [
                "    @overload",
                f"    def {method}({', '.join(whole)}) -> {response}: ...",
                "    @overload",
                f"    def {method}({', '.join(by_field)}) -> {response}: ...",
                f"    def {method}({', '.join(['self', *path, '*args: Any', *key, '**fields: Any'])}) -> {response}:",
                doc,
                call,
            ]
        groups.setdefault(group, []).append("\n".join(lines))

    out = [HEADER]
    out.append("from ._spec import Call, Group, Spec\n")
    for module in sorted(render.models):
        names = ", ".join(sorted(render.models[module]))
        relative = ".." + module.removeprefix("treasury.")
        out.append(f"from {relative} import {names}\n")
    out.append('\n__all__ = ["IDEMPOTENCY_HEADER", "PREFIX", "Groups"]\n\n')
    out.append(f"PREFIX = {PREFIX!r}  # where the API is served by default\n")
    out.append(f"IDEMPOTENCY_HEADER = {IDEMPOTENCY_HEADER!r}\n\n")
    out.append("\n".join(specs) + "\n")
    for group, methods in groups.items():
        out.append(f"\n\nclass {camel_group(group)}(Group):\n")
        out.append(f'    """``c.{group}``: its operations."""\n\n')
        out.append("\n\n".join(methods) + "\n")
    out.append('\n\nclass Groups:\n    """The groups of operations, one attribute each."""\n\n')
    out.append("    def __init__(self, call: Call) -> None:\n")
    for group in groups:
        out.append(f"        self.{group} = {camel_group(group)}(call)\n")
    return "".join(out)


def formatted(text: str) -> str:
    """`text` as ruff formats it (the committed module passes ``ruff format --check``)."""
    import subprocess

    for command in (["check", "--fix", "--quiet", "--select", "I"], ["format"]):
        text = subprocess.run(  # noqa: S603
            ["ruff", *command, "--stdin-filename", str(TARGET), "-"],  # noqa: S607
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    return text


def main() -> int:
    text = formatted(source())
    if "--check" in sys.argv[1:]:
        if TARGET.read_text() != text:
            print(f"{TARGET} is stale: run `python scripts/generate_client.py`")
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
