"""Scale-out, every part a real process: two API servers and two workers on one PostgreSQL
database, one Redis and one anvil chain; and five processes opening one empty store at
once."""

from __future__ import annotations

import secrets
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
import pytest
import redis

from treasury import Treasury
from treasury._infra.schema import MIGRATIONS
from treasury.anvil import fund
from treasury.config import Settings, dump_toml, write_chain

from .conftest import MASTER_KEY, POSTGRES_SERVER, make_tenant, on_postgres, open_storage
from .processes import Server, clean_env, serving, stop
from .webhook_receiver import Receiver, receiving

CHAIN = 31337
REDIS = "redis://127.0.0.1:6379/11"  # a database of its own, emptied before and after
EVENTS = ["transaction.confirmed"]


@dataclass
class Cluster:
    config: Path
    treasury: Treasury  # the same settings in this process: tenants, and a look inside
    servers: list[Server]
    workers: list[subprocess.Popen[bytes]]
    receiver: Receiver
    anvil: dict[str, Any]

    def start_worker(self) -> None:
        log = (self.config.parent / f"worker-{len(self.workers)}.log").open("wb")
        self.workers.append(
            subprocess.Popen(
                [sys.executable, "-m", "treasury.cli", "worker", "--interval", "0.2", "--json"],
                env=clean_env({"TREASURY_CONFIG": str(self.config)}),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )

    def passes(self) -> list[int]:
        """How many passes each live worker has finished (`--json`: a summary line each)."""
        counts = []
        for i, worker in enumerate(self.workers):
            if worker.poll() is None:
                lines = (self.config.parent / f"worker-{i}.log").read_bytes().splitlines()
                counts.append(sum(line.startswith(b"{") for line in lines))
        return counts

    def client(self, server: int, secret: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.servers[server].base, headers={"x-api-key": secret}, timeout=60
        )


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A PostgreSQL database of its own (whatever storage this run is on)."""
    name = "scale_" + secrets.token_hex(6)
    with psycopg.connect(POSTGRES_SERVER, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base = POSTGRES_SERVER.split("?")[0].rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with psycopg.connect(POSTGRES_SERVER, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def cluster(
    database: str, anvil_config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    limits = redis.Redis.from_url(REDIS)
    limits.flushdb()
    cwd = tmp_path_factory.mktemp("cluster")
    config = cwd / "treasury.toml"
    config.write_text(
        dump_toml(
            {
                "storage": database,
                "master_key": MASTER_KEY,
                "rate_limit_storage": REDIS,
                "allow_private_webhook_urls": True,
            }
        )
    )
    write_chain(config, CHAIN, anvil_config)
    t = Treasury.open(settings=Settings.load(env={}, toml_file=config))
    env = {"TREASURY_CONFIG": str(config)}
    with (
        receiving() as receiver,
        serving(cwd, "--no-worker", env=env) as first,
        serving(cwd, "--no-worker", env=env) as second,
    ):
        cluster = Cluster(config, t, [first, second], [], receiver, anvil_config)
        cluster.start_worker()
        cluster.start_worker()
        try:
            yield cluster
        finally:
            for worker in cluster.workers:
                stop(worker)
    t.close()
    limits.flushdb()


def test_one_idempotency_key_across_two_servers_creates_one_wallet(cluster: Cluster) -> None:
    tenant = make_tenant(cluster.treasury)
    key = "create-" + secrets.token_hex(8)
    clients = [cluster.client(i, tenant.secret) for i in (0, 1)]

    def post(i: int) -> httpx.Response:
        return clients[i % 2].post(
            "/wallets", json={"label": "Ops"}, headers={"Idempotency-Key": key}
        )

    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(post, range(40)))
    assert [r.status_code for r in answers] == [201] * 40, [r.text for r in answers]
    assert len({r.json()["address"] for r in answers}) == 1
    assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in answers) == 39
    listed = clients[0].get("/wallets").json()
    assert listed["count"] == 1 and listed["data"][0]["address"] == answers[0].json()["address"]


def test_a_key_s_rate_limit_is_shared_by_both_servers(cluster: Cluster) -> None:
    tenant = make_tenant(cluster.treasury)
    clients = [cluster.client(i, tenant.secret) for i in (0, 1)]
    remaining = []
    for n in range(100):  # the default: 100 per 60 s per key, alternating servers
        answer = clients[n % 2].get("/wallets")
        assert answer.status_code == 200, answer.text
        remaining.append(int(answer.headers["X-RateLimit-Remaining"]))
    assert remaining == list(range(99, -1, -1))  # one count, whichever server answered
    for client in clients:
        over = client.get("/wallets")
        assert over.status_code == 429 and int(over.headers["Retry-After"]) >= 1
        assert over.json()["error"]


@dataclass
class OneOrganization:
    """One organization's requests from both servers at once (`one_organization`)."""

    org_id: str
    secret: str
    #: Each client thread's created recipients' numbers, in the order it created them.
    numbers: list[list[int]]
    requests: int  # every request sent (each one audited once)
    checkpoint: Path  # taken while the load ran


@pytest.fixture(scope="module")
def one_organization(cluster: Cluster) -> OneOrganization:
    """16 client threads on one organization (a key each), each sending requests one after
    another to the two servers in turn while both workers run: recipients created (every
    fifth one an address already saved: 409, a number taken and skipped) and re-labelled;
    a checkpoint of the organization's chain taken halfway."""
    tenant = make_tenant(cluster.treasury, "One")
    org_id = tenant.org.id
    threads, each = 16, 30
    checkpoint = cluster.config.parent / "one-checkpoint.json"
    done = Counter[str]()  # requests answered, so far

    # a key per thread (each key's rate limit is 100 requests a minute)
    secrets_ = [
        cluster.treasury.admin.create_api_key(org_id, user_id=f"u{thread}").secret
        for thread in range(threads)
    ]

    def load(thread: int) -> list[int]:
        clients = [cluster.client(i, secrets_[thread]) for i in (0, 1)]
        numbers: list[int] = []
        address = "0x" + secrets.token_hex(20)
        for i in range(each):
            api = clients[i % 2]
            done["requests"] += 1
            if i % 5 == 4:  # an address this thread already saved
                answer = api.post(
                    "/recipients",
                    json={"address": address, "label": "again"},
                    headers={"Idempotency-Key": secrets.token_hex(8)},
                )
                assert answer.status_code == 409, answer.text
                continue
            address = "0x" + secrets.token_hex(20)
            answer = api.post(
                "/recipients",
                json={"address": address, "label": f"t{thread}"},
                headers={"Idempotency-Key": secrets.token_hex(8)},
            )
            assert answer.status_code == 201, answer.text
            numbers.append(answer.json()["id"])
            if i % 7 == 6:
                changed = api.patch(f"/recipients/{numbers[-1]}", json={"label": "x"})
                assert changed.status_code == 200, changed.text
        return numbers

    with ThreadPoolExecutor(threads) as pool:
        loads = [pool.submit(load, thread) for thread in range(threads)]
        while done["requests"] < threads * each // 2:
            failed = [load for load in loads if load.done()]
            assert not failed, failed[0].result()
            time.sleep(0.02)
        taken = audit_cli(cluster, "checkpoint", "--org", org_id)
        assert taken.returncode == 0, taken.stderr
        checkpoint.write_text(taken.stdout)
        numbers = [load.result() for load in loads]
    patches = sum(1 for i in range(each) if i % 5 != 4 and i % 7 == 6)
    return OneOrganization(org_id, tenant.secret, numbers, threads * (each + patches), checkpoint)


def audit_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """``treasury audit ARGS`` on the cluster's settings."""
    return subprocess.run(
        [sys.executable, "-m", "treasury.cli", "audit", *args],
        env=clean_env({"TREASURY_CONFIG": str(cluster.config)}),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_one_organization_s_chain_written_at_full_speed_verifies(
    cluster: Cluster, one_organization: OneOrganization
) -> None:
    load = one_organization
    storage = cluster.treasury.storage
    with storage.read() as tx:  # the workers sealed while the servers wrote
        chained = tx.one("SELECT COUNT(*) AS n FROM audit_events WHERE org_id = ?", (load.org_id,))
    assert chained is not None and chained["n"] > 0
    verified = audit_cli(cluster, "verify", "--checkpoint", str(load.checkpoint))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    with storage.read() as tx:
        events = tx.query(
            "SELECT seq, operation, status FROM audit_events WHERE org_id = ? ORDER BY seq",
            (load.org_id,),
        )
        head = tx.one("SELECT seq FROM audit_heads WHERE org_id = ?", (load.org_id,))
    # every request recorded once, in one unbroken chain: 1, 2, 3, ... up to its head
    assert sum(event["operation"].startswith("recipients.") for event in events) == load.requests
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    assert head is not None and head["seq"] == len(events)
    assert sum(event["status"] == 409 for event in events) == 16 * 6


def test_one_organization_s_numbers_stay_unique_and_increasing(
    cluster: Cluster, one_organization: OneOrganization
) -> None:
    load = one_organization
    given = [number for numbers in load.numbers for number in numbers]
    assert len(set(given)) == len(given)  # unique
    for numbers in load.numbers:  # each client saw them grow
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    # the numbers the API lists are those it answered; a refused create skips one
    with cluster.client(0, load.secret) as api:
        listed, cursor = [], None
        while True:
            page = api.get(
                "/recipients", params={"limit": 100, **({"cursor": cursor} if cursor else {})}
            ).json()
            listed += [row["id"] for row in page["data"]]
            if not (cursor := page.get("nextCursor")):
                break
    assert sorted(listed) == sorted(given)
    assert max(given) <= 16 * 30  # at most one number per create tried


def record_transactions(
    cluster: Cluster, api: httpx.Client, wallet: dict[str, Any], n: int
) -> set[str]:
    """`n` real transfers to `wallet` on anvil, each recorded through the API."""
    hashes = set()
    for _ in range(n):
        tx_hash = fund(cluster.anvil["url"], cluster.anvil, wallet["address"], "ETH", "0.001")
        body = {
            "hash": tx_hash,
            "type": "deposit",
            "from": "0x" + secrets.token_hex(20),
            "contract": cluster.anvil["addresses"]["USDC"],
            "token": cluster.anvil["addresses"]["USDC"],
            "amount": "1000",
            "walletId": wallet["id"],
        }
        answer = api.post(f"/{CHAIN}/transactions", json=body)
        assert answer.status_code == 201, answer.text
        hashes.add(tx_hash.lower())
    return hashes


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(0.1)


def deliveries(cluster: Cluster, org_id: str) -> Counter[str]:
    with cluster.treasury.storage.read() as tx:
        rows = tx.query(
            "SELECT d.status FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id"
            " WHERE w.org_id = ?",
            (org_id,),
        )
    return Counter(row["status"] for row in rows)


def test_deliveries_by_two_workers_once_each_and_none_lost_when_one_is_killed(
    cluster: Cluster,
) -> None:
    tenant = make_tenant(cluster.treasury)
    rx = cluster.receiver
    api = cluster.client(0, tenant.secret)
    hook = api.post("/webhooks", json={"url": rx.at(f"/{tenant.org.id}"), "events": EVENTS})
    assert hook.status_code == 201, hook.text
    address = "0x" + secrets.token_hex(20)
    tracked = api.post("/wallets/track", json={"address": address, "label": "Watched"})
    assert tracked.status_code == 201, tracked.text
    wallet = tracked.json()["wallet"]

    def ours() -> list[Any]:
        with rx.lock:
            return [r for r in rx.got if r.path == f"/{tenant.org.id}"]

    # 40 confirmed transactions, two workers indexing and delivering at once
    hashes = record_transactions(cluster, api, wallet, 40)
    wait_for(lambda: deliveries(cluster, tenant.org.id)["delivered"] == 40, 60, "40 delivered")
    before = cluster.passes()  # two more passes of each worker: nothing more may arrive
    wait_for(
        lambda: all(now >= then + 2 for now, then in zip(cluster.passes(), before, strict=True)),
        60,
        "two more passes of each worker",
    )
    got = ours()
    assert len(got) == 40 and len({r.message_id for r in got}) == 40  # none twice
    assert {r.payload()["data"]["hash"].lower() for r in got} == hashes
    assert deliveries(cluster, tenant.org.id) == {"delivered": 40}

    # 20 more, answered slowly: the worker sending them is killed (SIGKILL) mid-batch
    def slow(_: object) -> int:
        time.sleep(0.5)
        return 204

    rx.decide = slow
    more = record_transactions(cluster, api, wallet, 20)
    wait_for(lambda: len(ours()) >= 43, 60, "the second batch under way")
    senders: list[psutil.Process] = []

    def sending() -> bool:
        """A live worker holds a connection that a request of this batch came on (the
        one that sent the latest may have closed it meanwhile: look again)."""
        ports = {r.port for r in ours()[40:]}
        senders[:] = [
            process
            for process in map(psutil.Process, (w.pid for w in cluster.workers if w.poll() is None))
            for connection in process.net_connections("tcp")
            if connection.laddr and connection.laddr.port in ports
        ]
        return bool(senders)

    wait_for(sending, 30, "a worker sending the second batch")
    sender = senders[0]
    in_flight = {r.message_id for r in ours()[40:]}
    sender.kill()
    rx.decide = None
    cluster.start_worker()  # a replacement, as a supervisor would start one
    # the survivors take the dead worker's deliveries over when its 30 s lease passes
    wait_for(lambda: deliveries(cluster, tenant.org.id)["delivered"] == 60, 120, "60 delivered")
    got = ours()
    received = Counter(r.message_id for r in got)
    assert len(received) == 60  # every event, at least once
    assert {r.payload()["data"]["hash"].lower() for r in got} == hashes | more
    twice = {message for message, n in received.items() if n > 1}
    assert twice <= in_flight  # only what was in flight at the kill is sent again
    assert all(n <= 2 for n in received.values())


OPEN = textwrap.dedent(
    """
    import sys, time
    from treasury import Treasury
    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # all start at once
    Treasury.open(sys.argv[1], master_key="0" * 64, chains={}).close()
    """
)


def schema_of(url: str) -> list[Any]:
    """The tables, columns and indexes of a store, comparable between two stores."""
    storage = open_storage(url)
    try:
        with storage.read() as tx:
            if on_postgres():
                return tx.query(
                    "SELECT table_name, column_name, data_type, is_nullable, column_default"
                    " FROM information_schema.columns WHERE table_schema = current_schema()"
                    " ORDER BY 1, 2"
                ) + tx.query(
                    "SELECT tablename, indexname, replace(indexdef, current_schema() || '.', '')"
                    " AS definition FROM pg_indexes WHERE schemaname = current_schema()"
                    " ORDER BY 1, 2"
                )
            return tx.query("SELECT type, name, sql FROM sqlite_master ORDER BY name")
    finally:
        storage.close()


def test_five_processes_opening_one_empty_store_at_once_leave_one_schema(
    new_storage_url: Callable[[str], str],
) -> None:
    url, reference = new_storage_url("together.db"), new_storage_url("alone.db")
    start = f"{time.time() + 3:.3f}"
    processes = [
        subprocess.Popen([sys.executable, "-c", OPEN, url, start], stderr=subprocess.PIPE)
        for _ in range(5)
    ]
    errors = [p.communicate(timeout=120)[1].decode() for p in processes]
    assert [p.returncode for p in processes] == [0] * 5, errors
    Treasury.open(reference, master_key=MASTER_KEY, chains={}).close()
    assert schema_of(url) == schema_of(reference)
    storage = open_storage(url)
    with storage.read() as tx:
        applied = tx.query("SELECT version FROM schema_migrations ORDER BY version")
    storage.close()
    assert [row["version"] for row in applied] == [number for number, *_ in MIGRATIONS]
    t = Treasury.open(url, master_key=MASTER_KEY, chains={})
    org = make_tenant(t).org
    assert (
        t.for_organization(org.id)
        .recipients.create(address="0x" + secrets.token_hex(20), label="r")
        .id
        == 1
    )
    t.close()


def test_serve_with_processes_runs_gunicorn_workers_on_the_shared_settings(
    cluster: Cluster,
) -> None:
    tenant = make_tenant(cluster.treasury)
    env = {"TREASURY_CONFIG": str(cluster.config)}
    with serving(cluster.config.parent, "--processes", "2", "--no-worker", env=env) as server:
        arbiter = psutil.Process(server.process.pid)  # gunicorn's, with its two workers
        wait_for(lambda: len(arbiter.children()) == 2, 30, "two worker processes")
        with httpx.Client(base_url=server.base, headers={"x-api-key": tenant.secret}) as api:
            created = api.post(
                "/recipients",
                json={"address": "0x" + "ab" * 20, "label": "r"},
                headers={"Idempotency-Key": "k1"},
            )
            assert created.status_code == 201, created.text
            listed = cluster.client(1, tenant.secret).get("/recipients").json()
            assert [r["id"] for r in listed["data"]] == [created.json()["id"]]
        assert "Serving the treasury API" in server.output()


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({}, "in-process devnet"),  # the default chain lives inside one process
        ({"chains": {}}, "rate_limit_storage"),  # memory counters are per process
    ],
)
def test_serve_with_processes_refuses_what_processes_cannot_share(
    tmp_path: Path, settings: dict[str, Any], refusal: str
) -> None:
    (tmp_path / "treasury.toml").write_text(dump_toml({"master_key": MASTER_KEY, **settings}))
    done = subprocess.run(
        [sys.executable, "-m", "treasury.cli", "serve", "--processes", "2"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1 and refusal in done.stderr.decode(), done.stderr
