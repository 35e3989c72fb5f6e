"""`TreasuryClient`: the /v1 API of a remote treasury, with the library's own groups,
models and errors. Its groups and methods are declared in `_generated` (written from the
table of operations by ``scripts/generate_client.py``; nothing is written per endpoint),
so that mypy and IDEs see each method's parameters and the core's own return models.

``c.wallets.create(label="Ops")`` sends ``POST /v1/wallets`` and returns a `Wallet`, as
``org.wallets.create(label="Ops")`` does in-process; an error answer raises the class the
library raises (`NotFound`, `ValidationError` with its fields, ...). Arguments are those
of the in-process methods: path parameters in order, then the body (a model, a mapping,
or keyword fields) or the query (likewise), and ``idempotency_key=``.

Retries (at most `max_retries`, waiting `backoff` * 2^n): a connection that could not be
made; any connection error of a request carrying an Idempotency-Key or of a GET; 409
while the same key is in flight; 429 after its ``Retry-After``. Every POST that takes an
Idempotency-Key gets one when none is given, the same for all its retries.

Importing the client loads the models and the errors, not the core (no storage, no
chain, no operations).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Self, TypeVar, cast
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, TypeAdapter

from .._infra import replays
from ..errors import IdempotencyInFlight, RateLimited, TreasuryError
from ..transfers.models import Transfer
from ._generated import IDEMPOTENCY_HEADER, PREFIX, Groups
from ._spec import Spec

__all__ = ["TreasuryClient"]

RETRY_AFTER_CAP = 60.0  # seconds: a longer Retry-After is raised, not slept through

R = TypeVar("R")


class TreasuryClient(Groups):
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
        super().__init__(self._call)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._base}>"

    def close(self) -> None:
        if self._owned:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def iterate_transfers(self, *, limit: int = 200) -> Iterator[Transfer]:
        """Every transfer of the feed, newest first, page after page."""
        cursor = None
        while True:
            page = self.transfers.list(limit=limit, cursor=cursor)
            yield from page.data
            cursor = page.next_cursor
            if cursor is None:
                return

    def _call(
        self,
        spec: Spec[R],
        path: tuple[Any, ...],
        args: tuple[Any, ...],
        fields: dict[str, Any],
        idempotency_key: str | None,
    ) -> R:
        """One operation as a method: the in-process method's arguments, sent."""
        url = spec.path
        for name, value in zip(spec.params, path, strict=True):
            url = url.replace("{" + name + "}", str(value))
        model = spec.body or spec.query
        if model is None and (args or fields):
            raise TypeError(f"{spec.name} takes no body or query")
        payload = _payload(model, args, fields) if model is not None else None
        if spec.selected_by is not None and (payload or {}).get(spec.selected_by) is None:
            raise TypeError(f"{spec.name} takes {spec.selected_by}")  # else another operation
        headers = dict(self._headers)
        if spec.accept is not None:  # the same route, answered in that media type
            headers["Accept"] = spec.accept
        if spec.idempotency is not None and (idempotency_key or spec.method == "POST"):
            headers[IDEMPOTENCY_HEADER] = idempotency_key or f"trc_{uuid.uuid4().hex}"
        request = self._http.build_request(
            spec.method,
            self._base + url,
            headers=headers,
            json=payload if spec.body is not None else None,
            params=payload if spec.query is not None else None,
        )
        return self._send(spec, request)

    def _send(self, spec: Spec[R], request: httpx.Request) -> R:
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
                if answer.status_code == spec.status:
                    if spec.csv:  # the CSV document itself
                        return cast(R, answer.text)
                    result = TypeAdapter(spec.response).validate_json(answer.content)
                    replayed = answer.headers.get("Idempotent-Replayed") == "true"
                    if replayed:
                        replays.mark(result)
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
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)
