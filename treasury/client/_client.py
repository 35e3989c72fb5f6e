"""`TreasuryClient`: the /v1 API of a remote treasury, with the library's own groups,
models and errors, built from the table of operations (nothing is written per endpoint).

``c.wallets.create(label="Ops")`` sends ``POST /v1/wallets`` and returns a `Wallet`, as
``org.wallets.create(label="Ops")`` does in-process; an error answer raises the class the
library raises (`NotFound`, `ValidationError` with its fields, ...). Arguments are those
of the in-process methods: path parameters in order, then the body (a model, a mapping,
or keyword fields) or the query (likewise), and ``idempotency_key=``.

Retries (at most `max_retries`, waiting `backoff` * 2^n): a connection that could not be
made; any connection error of a request carrying an Idempotency-Key or of a GET; 409
while the same key is in flight; 429 after its ``Retry-After``. Every POST that takes an
Idempotency-Key gets one when none is given, the same for all its retries.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Self
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, TypeAdapter

from .._infra.models import Replayable
from ..errors import IdempotencyInFlight, RateLimited, TreasuryError
from ..operations import IDEMPOTENCY_HEADER, OPERATIONS, PREFIX, Operation

__all__ = ["TreasuryClient"]

RETRY_AFTER_CAP = 60.0  # seconds: a longer Retry-After is raised, not slept through


class TreasuryClient:
    """A typed client of ``{base_url}/v1`` (``prefix``), authenticated by `api_key`.

    `base_url` may end with the prefix or not: ``http://127.0.0.1:8000`` and the
    ``http://127.0.0.1:8000/v1`` that ``treasury serve`` prints are the same service."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        prefix: str = PREFIX,
        http_client: httpx.Client | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        self._owned = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)
        base, prefix = base_url.rstrip("/"), prefix.rstrip("/")
        given = urlsplit(base).path  # "…/v1" as `serve` prints it, or the root
        self._base = base if prefix and given.endswith(prefix) else base + prefix
        self._headers = {"x-api-key": api_key} if api_key else {}
        self.max_retries, self.backoff = max_retries, backoff
        groups: dict[str, _Group] = {}
        for operation in OPERATIONS:
            group, method = operation.name.split(".")
            setattr(groups.setdefault(group, _Group(group)), method, _Call(self, operation))
        for name, group_object in groups.items():
            setattr(self, name, group_object)

    def __getattr__(self, name: str) -> Any:  # the groups, for type checkers
        raise AttributeError(f"{type(self).__name__} has no group {name!r}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._base}>"

    def close(self) -> None:
        if self._owned:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def iterate_transfers(self, *, limit: int = 200) -> Iterator[Any]:
        """Every transfer of the feed, newest first, page after page."""
        cursor = None
        while True:
            page = self.transfers.list(limit=limit, **({"cursor": cursor} if cursor else {}))
            yield from page.data
            cursor = page.next_cursor
            if cursor is None:
                return

    def _send(self, operation: Operation[Any], request: httpx.Request) -> Any:
        """Send with the retry policy; the answer parsed as the operation's response."""
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                answer = self._http.send(request)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                if last:
                    raise
            except httpx.TransportError:  # sent, perhaps performed: only if safe to repeat
                if last or not (request.method == "GET" or IDEMPOTENCY_HEADER in request.headers):
                    raise
            else:
                if answer.status_code == operation.status:
                    if operation.csv is not None:  # the CSV document itself
                        return answer.text
                    result = TypeAdapter(operation.response).validate_json(answer.content)
                    replayed = answer.headers.get("Idempotent-Replayed") == "true"
                    if replayed and isinstance(result, Replayable):
                        result.mark_replayed()
                    return result
                error = _error(answer)
                wait = self._pause(error, attempt)
                if last or wait is None:
                    raise error
                time.sleep(wait)
                continue
            time.sleep(self.backoff * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _pause(self, error: TreasuryError, attempt: int) -> float | None:
        """How long to wait before retrying after `error`; None: do not retry."""
        if isinstance(error, IdempotencyInFlight):
            return float(self.backoff * 2**attempt)
        if isinstance(error, RateLimited):
            wait = float(error.retry_after)
            return wait if wait <= RETRY_AFTER_CAP else None
        return None


def _error(answer: httpx.Response) -> TreasuryError:
    try:
        body = answer.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"error": f"HTTP {answer.status_code}"}
    error = TreasuryError.from_body(answer.status_code, body)
    if isinstance(error, RateLimited):
        error.retry_after = int(answer.headers.get("Retry-After", error.retry_after))
    return error


class _Group:
    """One resource group (``c.wallets``); its methods are `_Call`s."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"<TreasuryClient.{self._name}>"


class _Call:
    """One operation as a method, taking the in-process method's arguments."""

    def __init__(self, client: TreasuryClient, operation: Operation[Any]) -> None:
        self._client, self._operation = client, operation
        self.__doc__ = operation.summary

    def __call__(self, *args: Any, idempotency_key: str | None = None, **fields: Any) -> Any:
        op = self._operation
        names = [param.name for param in op.path_params]
        if len(args) < len(names):
            raise TypeError(f"{op.name} takes {', '.join(names)} first")
        path = op.path
        for name, value in zip(names, args, strict=False):
            path = path.replace("{" + name + "}", str(value))
        rest = args[len(names) :]
        model = op.body or op.query
        payload = _payload(model, rest, fields) if model is not None else None
        if op.selected_by is not None and (payload or {}).get(op.selected_by) is None:
            raise TypeError(f"{op.name} takes {op.selected_by}")  # else another operation
        headers = dict(self._client._headers)
        if op.accept is not None:  # the same route, answered in that media type
            headers["Accept"] = op.accept
        if op.idempotency is not None and (idempotency_key or op.method == "POST"):
            headers[IDEMPOTENCY_HEADER] = idempotency_key or f"trc_{uuid.uuid4().hex}"
        request = self._client._http.build_request(
            op.method,
            self._client._base + path,
            headers=headers,
            json=payload if op.body is not None else None,
            params=payload if op.query is not None else None,
        )
        return self._client._send(op, request)


def _payload(model: type[BaseModel], args: tuple[Any, ...], fields: Mapping[str, Any]) -> Any:
    """What the in-process method would be given, as JSON: a model or mapping, or the
    model's fields by position and by name. Validated where the server validates."""
    if len(args) == 1 and isinstance(args[0], BaseModel | Mapping):
        given = args[0]
        if isinstance(given, BaseModel):
            return given.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return dict(given)
    values = dict(zip(model.model_fields, args, strict=False))
    values.update(fields)
    aliases = {name: info.alias or name for name, info in model.model_fields.items()}
    return {aliases.get(k, k): _plain(v) for k, v in values.items() if v is not None}


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True) if isinstance(value, BaseModel) else value
