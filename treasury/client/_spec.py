"""What the generated groups (`_generated`) are made of: one `Spec` per operation, read
from the table of operations when the module was generated, and `Group`, whose methods
hand their arguments to the client's one `Call`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

__all__ = ["Call", "Group", "Spec"]

R = TypeVar("R")


@dataclass(frozen=True)
class Spec(Generic[R]):
    """One operation as the client sends it: its name, method and path (under the
        prefix) with the names of the path's parameters, its answer's type (`str` for a CSV
        document), its success status, its body or query model, whether it takes an
        Idempotency-Key, the query parameter that selects it (`selected_by`), and the media type
    it asks for when the same route answers it by the Accept header (`accept`)."""

    name: str
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: str
    response: type[R]
    params: tuple[str, ...] = ()
    status: int = 200
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    idempotency: Literal["required", "optional"] | None = None
    selected_by: str | None = None
    csv: bool = False
    accept: str | None = None  # the media type it asks for (the same route's CSV answer)


class Call(Protocol):
    """The client's sending of one operation: path values in order, then the body or
    query given by position (a model, a mapping, or fields) and by name, and a key."""

    def __call__(
        self,
        spec: Spec[R],
        path: tuple[Any, ...],
        args: tuple[Any, ...],
        fields: dict[str, Any],
        idempotency_key: str | None,
    ) -> R: ...


class Group:
    """One resource group of the client (``c.wallets``)."""

    def __init__(self, call: Call) -> None:
        self._call = call

    def __repr__(self) -> str:
        return f"<TreasuryClient.{type(self).__name__}>"
