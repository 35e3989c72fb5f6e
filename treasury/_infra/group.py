"""`Group`: the base of every resource group of the organization handle (`org.wallets`, …).

It holds the one way an operation that creates something is run: its input parsed from
a model, a mapping or keyword arguments (`parse_input`), then run under its
Idempotency-Key in one of the two shapes of `idempotency`. The operation's name, which
the idempotency fingerprint uses, is read from the table of operations
(`treasury.operations`, given to the runtime as `Runtime.operation_names`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, TypeVar

from pydantic import BaseModel

from ..backends.storage.base import Transaction
from . import idempotency
from .models import Resource
from .runtime import Scope

R = TypeVar("R", bound=Resource)
S = TypeVar("S")


class Group:
    """The operations of one domain, isolated to one organization."""

    #: The handle's attribute for this group, e.g. ``"wallets"``.
    name: ClassVar[str]

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def _in_one_transaction(
        self,
        action: str,
        key: str | None,
        request: BaseModel,
        write: Callable[[Transaction], R],
        result: type[R],
        path: tuple[object, ...] = (),
        *,
        look_first: bool = False,
    ) -> R:
        """Run `write` in one storage transaction, at most once per Idempotency-Key
        (`path`: the operation's path parameters, part of the fingerprint; `look_first`:
        replay a held key before writing, see `idempotency.run`)."""
        operation = self._operation(action)
        return idempotency.run(
            self._scope, key, operation, request, write, result, path, look_first=look_first
        )

    def _in_two_phases(
        self,
        action: str,
        key: str | None,
        request: BaseModel,
        prepare: Callable[[], idempotency.WriteAhead],
        steps: idempotency.Upstream[S, R],
        result: type[R],
        path: tuple[object, ...] = (),
    ) -> R:
        """Run an operation with an effect outside the database (see `idempotency`):
        `prepare` checks and signs outside any transaction and returns the claim."""
        operation = self._operation(action)
        return idempotency.run_in_two_phases(
            self._scope, key, operation, request, prepare, steps, result, path
        )

    def _operation(self, action: str) -> str:
        """The table's name of this group's method `action` (an idempotent operation)."""
        return self._scope.runtime.operation_names[(self.name, action)]
