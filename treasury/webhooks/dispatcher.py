"""The dispatcher job: send every delivery due at the start of the pass.

Due deliveries are claimed in batches under a lease (two dispatchers never send one at
once; a dead one's claims are taken over when the lease passes), sent concurrently by a
bounded pool over keep-alive connections (urllib3: it costs a third of httpx's CPU per
request, which bounds throughput here; see docs/performance.md), each attempt signed for
its own timestamp, and recorded batch by batch. Every attempt resolves the target again
and connects to an address checked now (`targets.pin`); redirects are never followed;
15 s timeout.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import certifi
import urllib3
from urllib3.exceptions import HTTPError, NewConnectionError
from urllib3.exceptions import TimeoutError as Timeout

from .._infra.clock import to_text
from .._infra.jobs import Report
from .._infra.runtime import Runtime
from .._records.events import opened
from ..backends.storage.base import Row
from . import deliveries, targets
from .signing import SECRET_PURPOSE, signed_headers

POOL = 32  # deliveries sent at once
TIMEOUT = urllib3.Timeout(15.0)
LEASE = timedelta(seconds=30)  # twice the timeout of the one round a batch takes
_USER_AGENT = "treasury-webhooks/1"


def deliver_webhooks(runtime: Runtime, report: Report) -> None:
    """Job: attempt every delivery due when the pass started."""
    started, rng = runtime.now(), random.SystemRandom()
    with _client() as client, ThreadPoolExecutor(POOL, thread_name_prefix="webhooks") as pool:
        while True:
            now = runtime.now()
            with runtime.storage.transaction() as tx:
                batch = deliveries.lease_due(  # one round of the pool: done within a timeout
                    tx, to_text(started), to_text(now), to_text(now + LEASE), POOL
                )
            if not batch:
                return
            attempts = list(pool.map(lambda row: attempt(runtime, client, row), batch))
            with runtime.storage.transaction() as tx:
                report.add(deliveries.record(tx, attempts, runtime.now(), rng))


def attempt(runtime: Runtime, client: urllib3.PoolManager, row: Row) -> deliveries.Attempt:
    """Send one delivery once; what it gave (never raises)."""
    began = time.monotonic()
    status: int | None = None
    error: str | None = None
    retry_after: timedelta | None = None
    try:
        if not row["active"]:
            error = "the webhook is disabled"
        else:
            response = _send(runtime, client, row)
            status, retry_after = response.status, _retry_after(response, runtime.now())
            if not 200 <= status < 300:
                error = f"HTTP {status}" + (
                    " (redirects are not followed)" if 300 <= status < 400 else ""
                )
    except targets.TargetRefused as refused:
        error = str(refused)
    except NewConnectionError as failed:  # a ConnectTimeoutError to urllib3, but not a timeout
        error = f"could not connect: {failed.__cause__ or failed}"[:500]
    except Timeout:
        error = "timed out after 15 s"
    except (HTTPError, OSError) as failed:
        error = f"{type(failed).__name__}: {failed}"[:500]
    return deliveries.Attempt(
        delivery_id=row["id"],
        webhook_id=row["webhook_id"],
        attempts_before=row["attempts"],
        status_code=status,
        error=error,
        duration_ms=int((time.monotonic() - began) * 1000),
        retry_after=retry_after,
    )


def _send(runtime: Runtime, client: urllib3.PoolManager, row: Row) -> urllib3.BaseHTTPResponse:
    body = opened(runtime.secrets, row["payload"]).encode()
    secret = runtime.secrets.decrypt(SECRET_PURPOSE, bytes(row["secret"]))
    timestamp = int(runtime.now().timestamp())
    target = targets.pin(row["url"], allow_private=runtime.allow_private_webhook_urls)
    headers = {
        **signed_headers(secret, row["message_id"], timestamp, body),
        "Content-Type": "application/json",
        "User-Agent": _USER_AGENT,
        "Host": target.host,
    }
    tls: dict[str, Any] = {} if target.sni is None else {"server_hostname": target.sni}
    pool = client.connection_from_url(target.url, pool_kwargs=tls)  # one per address and name
    return pool.urlopen(
        "POST", target.path, body=body, headers=headers, redirect=False, assert_same_host=False
    )


def _client() -> urllib3.PoolManager:
    """Keep-alive connections, POOL per target; certificates checked against certifi's."""
    return urllib3.PoolManager(
        num_pools=64, maxsize=POOL, retries=False, timeout=TIMEOUT, ca_certs=certifi.where()
    )


def _retry_after(response: urllib3.BaseHTTPResponse, now: datetime) -> timedelta | None:
    """A failed answer's ``Retry-After``: seconds, or an HTTP date."""
    value = response.headers.get("Retry-After")
    if value is None or 200 <= response.status < 300:
        return None
    if value.strip().isdigit():
        return timedelta(seconds=int(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(timedelta(0), when - now)


def resend(runtime: Runtime, delivery_id: int) -> None:
    """Send one (already leased) delivery now, in this thread, outside its schedule;
    record it as a manual resend (`deliveries.record_resend`)."""
    with runtime.storage.read() as tx:
        rows = deliveries.sending(tx, [delivery_id])
    with _client() as client:
        attempts = [attempt(runtime, client, row) for row in rows]
    with runtime.storage.transaction() as tx:
        for one in attempts:
            deliveries.record_resend(tx, one, runtime.now())
