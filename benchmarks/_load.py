"""A small load generator (what wrk would do), run as a separate process by writers.py.

    python benchmarks/_load.py URL [--threads 8] [--seconds 3] [--warmup 0.5] [-H NAME:VALUE]
                               [--keys FILE] [--onramp BANK_ACCOUNT_JSON_FILE]

Each thread opens its own keep-alive ``http.client`` connection and sends ``POST URL``
one request after another (a fresh random address and a fresh ``Idempotency-Key`` on
each), from a common start until ``--warmup`` + ``--seconds`` have passed. The body is a
recipient (``address``, ``label``); with ``--onramp`` (URL ending in ``/v1/transfers``,
used by scale.py) an on-ramp of 10 USD to a fresh random address, from a bank account
each thread first registers (``POST …/v1/bank-accounts`` with the file's JSON, on its own
connection, before the common start). With ``--keys`` (a file, one API key a line)
thread i sends the i-th key (round robin) as ``x-api-key``. A request
counts in the window when it completes inside ``[start + warmup, start + warmup +
seconds)``; throughput = requests completed in the window / window. Every response of
the whole run (warm-up included) is checked: anything but 201, or a connection error,
is a failure, counted by status and never dropped (the caller must treat a run with
failures as invalid: its window counts every completed request, whatever its status).
Prints one JSON object on stdout: ``requests`` (completed in the window), ``seconds``,
``latencies_us`` (one per request of the window, thread by thread), ``sent`` (all
requests, warm-up included), ``failures`` (status -> count) and ``examples`` (the first
few failing answers), ``setup_errors`` (why threads could not connect or register: then
nothing was sent). Standard library only, so that the
process starts fast and imports nothing of the server's.
"""

from __future__ import annotations

import argparse
import http.client
import json
import secrets
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

LABEL = "Benchmark recipient"
EXAMPLES = 5
ONRAMP_AMOUNT = "10"


class Start:
    """The common start: every worker connected (and set up), then the window is fixed."""

    def __init__(self, threads: int, warmup: float, seconds: float) -> None:
        self.at = 0.0
        self.window = (0.0, 0.0)
        self.barrier = threading.Barrier(threads, action=self._fix)
        self._warmup, self._seconds = warmup, seconds

    def _fix(self) -> None:  # run once, by the last worker to arrive
        self.at = time.perf_counter() + 0.05
        self.window = (self.at + self._warmup, self.at + self._warmup + self._seconds)


class Worker(threading.Thread):
    def __init__(
        self, url: str, headers: dict[str, str], start: Start, bank_account: str | None
    ) -> None:
        super().__init__(daemon=True)
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "", parts.port or 80, parts.path
        self.headers = {"Content-Type": "application/json", **headers}
        self.starting = start
        self.bank_account = bank_account  # JSON of a bank account to register: on-ramps
        self.external_account_id = ""
        self.setup_error: str | None = None
        self.latencies: list[float] = []  # seconds, of requests completed in the window
        self.sent = 0
        self.failures: Counter[str] = Counter()
        self.examples: list[str] = []

    def connect(self) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        conn.connect()
        return conn

    def register(self, conn: http.client.HTTPConnection) -> None:
        """Register the bank account on this connection; keep its id for the on-ramps."""
        assert self.bank_account is not None
        path = self.path.rsplit("/", 1)[0] + "/bank-accounts"
        headers = {**self.headers, "Idempotency-Key": secrets.token_hex(16)}
        conn.request("POST", path, body=self.bank_account, headers=headers)
        response = conn.getresponse()
        answer = response.read()
        if response.status != 201:
            raise RuntimeError(f"POST {path}: {response.status} {answer[:300]!r}")
        self.external_account_id = json.loads(answer)["providerExternalAccountId"]

    def body(self) -> str:
        address = "0x" + secrets.token_hex(20)
        if self.bank_account is None:
            return json.dumps({"address": address, "label": LABEL})
        return json.dumps(
            {
                "amount": ONRAMP_AMOUNT,
                "source": {
                    "currency": "usd",
                    "payment_rail": "ach_push",
                    "external_account_id": self.external_account_id,
                },
                "destination": {
                    "currency": "usdc",
                    "payment_rail": "ethereum",
                    "to_address": address,
                },
            }
        )

    def run(self) -> None:
        clock = time.perf_counter
        try:
            conn = self.connect()
            if self.bank_account is not None:
                self.register(conn)
        except (OSError, http.client.HTTPException, RuntimeError, KeyError) as error:
            self.setup_error = f"{type(error).__name__}: {error}"
            self.starting.barrier.abort()  # nobody starts: the run reports why
            return
        try:
            self.starting.barrier.wait()  # every thread connected, then all start together
        except threading.BrokenBarrierError:
            conn.close()
            return
        while clock() < self.starting.at:
            time.sleep(0.0005)
        begin, end = self.starting.window
        while True:
            body = self.body()
            headers = {**self.headers, "Idempotency-Key": secrets.token_hex(16)}
            sent = clock()
            if sent >= end:
                break
            try:
                conn.request("POST", self.path, body=body, headers=headers)
                response = conn.getresponse()
                answer = response.read()
                status = str(response.status)
            except (OSError, http.client.HTTPException) as error:
                status, answer = f"error {type(error).__name__}", str(error).encode()
                conn.close()
                conn = self.connect()
            done = clock()
            self.sent += 1
            if status != "201":
                self.failures[status] += 1
                if len(self.examples) < EXAMPLES:
                    self.examples.append(f"{status} {answer[:300].decode(errors='replace')}")
            if begin <= done < end:
                self.latencies.append(done - sent)
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("-H", "--header", action="append", default=[], help="NAME:VALUE")
    parser.add_argument("--keys", help="a file of API keys, one a line (thread i: the i-th)")
    parser.add_argument("--onramp", metavar="FILE", help="a bank account (JSON): send on-ramps")
    args = parser.parse_args(argv)
    headers = dict(h.split(":", 1) for h in args.header)
    keys = Path(args.keys).read_text().split() if args.keys else []
    bank_account = Path(args.onramp).read_text() if args.onramp else None
    start = Start(args.threads, args.warmup, args.seconds)
    workers = [
        Worker(
            args.url,
            {**headers, **({"x-api-key": keys[i % len(keys)]} if keys else {})},
            start,
            bank_account,
        )
        for i in range(args.threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    failures: Counter[str] = Counter()
    for worker in workers:
        failures.update(worker.failures)
    result = {
        "threads": args.threads,
        "seconds": args.seconds,
        "requests": sum(len(w.latencies) for w in workers),
        "latencies_us": [round(x * 1e6) for w in workers for x in w.latencies],
        "sent": sum(w.sent for w in workers),
        "failures": dict(failures),
        "examples": [e for w in workers for e in w.examples][:EXAMPLES],
        "setup_errors": [w.setup_error for w in workers if w.setup_error],
    }
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
