"""The `treasury` command line, driven as a user would: in a fresh directory."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from treasury import AuthenticationError, Treasury
from treasury.cli import main

from .conftest import MASTER_KEY, on_postgres, require_anvil, sqlite_only


@pytest.fixture(autouse=True)
def _no_outside_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TREASURY_"):
            monkeypatch.delenv(name)


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage_url: str) -> Path:
    """A fresh working directory, like a user's empty project folder (on a PostgreSQL
    run, TREASURY_STORAGE names a fresh schema).

    (click 8.5 deprecates `CliRunner.isolated_filesystem`; chdir does the same.)
    """
    monkeypatch.chdir(tmp_path)
    if on_postgres():
        monkeypatch.setenv("TREASURY_STORAGE", storage_url)
    return tmp_path


def run(*args: str, master_key: str | None = MASTER_KEY, code: int = 0) -> Result:
    env = {"TREASURY_MASTER_KEY": master_key} if master_key else {}
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def run_json(*args: str, **kw: Any) -> Any:
    return json.loads(run(*args, "--json", **kw).stdout)


def open_db() -> Treasury:
    storage = os.environ.get("TREASURY_STORAGE", "sqlite:///treasury.db")
    return Treasury.open(storage, master_key=MASTER_KEY)


def test_init_prints_a_secret_that_authenticates(cwd: Path) -> None:
    result = run("init", "--org-name", "Acme", "--user-id", "alice")
    secret = next(w for w in result.stdout.split() if w.startswith("trk_"))
    assert "cannot be shown again" in result.stdout
    with open_db() as t:
        org = t.for_api_key(secret)
        assert org.user_id == "alice"
        assert t.admin.get_organization(org.id).name == "Acme"


@sqlite_only
def test_zero_config_init_writes_the_master_key_beside_the_database(cwd: Path) -> None:
    result = run("init", "--json", master_key=None)
    secret = json.loads(result.stdout)["apiKey"]["secret"]
    assert (cwd / "treasury.db").exists()
    assert (cwd / "treasury.db.key").exists()
    assert "master key" in result.stderr
    with Treasury.open("sqlite:///treasury.db") as t:  # the key file is found again
        t.for_api_key(secret)


def test_init_json_fields(cwd: Path) -> None:
    doc = run_json("init", "--org-name", "Acme")
    assert doc["organization"]["name"] == "Acme"
    key = doc["apiKey"]
    assert key["organizationId"] == doc["organization"]["id"]
    assert key["userId"] == "admin"
    assert key["id"].startswith("key_")
    assert key["secret"].startswith("trk_")
    assert key["expiresAt"] is None and key["revokedAt"] is None


def test_init_again_changes_nothing_says_so_and_exits_0(cwd: Path) -> None:
    first = run_json("init")
    with open_db() as t:
        before = (t.admin.list_organizations(), t.admin.list_api_keys(first["organization"]["id"]))
    again = run("init")  # exit 0: `treasury init && treasury serve` can be run again
    assert "already initialized" in again.stdout and "nothing changed" in again.stdout
    assert "--force" in again.stdout
    assert "Traceback" not in again.output and "trk_" not in again.output
    shown = run_json("init")
    assert shown["alreadyInitialized"] is True
    assert [o["id"] for o in shown["organizations"]] == [first["organization"]["id"]]
    assert "apiKey" not in shown
    with open_db() as t:
        after = (t.admin.list_organizations(), t.admin.list_api_keys(first["organization"]["id"]))
    assert after == before
    run("init", "--force", "--org-name", "Second")
    names = [o["name"] for o in run_json("orgs", "list")["data"]]
    assert names == ["My organization", "Second"]


def test_orgs_create_and_list(cwd: Path) -> None:
    created = run_json("orgs", "create", "Globex")
    assert created["name"] == "Globex"
    listed = run_json("orgs", "list")
    assert listed["count"] == 1 and listed["data"][0]["id"] == created["id"]
    table = run("orgs", "list").stdout
    assert created["id"] in table and "Globex" in table


def test_invalid_org_name_is_an_error_not_a_traceback(cwd: Path) -> None:
    result = run("orgs", "create", " ", code=1)
    assert result.stderr.strip() == "Error: Invalid input; name: must be 1 to 200 characters"
    error = json.loads(run("orgs", "create", " ", "--json", code=1).stderr)
    assert error["details"]["fields"][0]["field"] == "name"
    assert "Traceback" not in result.output


def test_keys_create_list_and_revoke(cwd: Path) -> None:
    org_id = run_json("orgs", "create", "Acme")["id"]
    created = run_json("keys", "create", org_id, "--user-id", "bob")
    secret = created["secret"]
    with open_db() as t:
        assert t.for_api_key(secret).user_id == "bob"

    listed = run("keys", "list")
    table = run("keys", "list", "--org", org_id).stdout
    as_json = run("keys", "list", "--json").stdout
    for output in (listed.stdout, table, as_json):
        assert created["id"] in output
        assert secret not in output and "trk_" not in output
    doc = json.loads(as_json)
    assert doc["count"] == 1 and "secret" not in doc["data"][0]
    assert "active" in table

    revoked = run_json("keys", "revoke", created["id"])
    assert revoked["id"] == created["id"] and revoked["revokedAt"] is not None
    assert "trk_" not in json.dumps(revoked)
    with open_db() as t, pytest.raises(AuthenticationError) as error:
        t.for_api_key(secret)
    assert error.value.status == 401 and error.value.message == "Unauthorized"
    assert "revoked" in run("keys", "list").stdout


def test_keys_of_unknown_things_fail_cleanly(cwd: Path) -> None:
    assert run("keys", "revoke", "key_nope", code=1).stderr.strip() == "Error: API key not found"
    assert json.loads(run("keys", "revoke", "key_nope", "--json", code=1).stderr) == {
        "error": "API key not found"
    }
    assert "Organization not found" in run("keys", "create", "nope", code=1).stderr
    assert "Organization not found" in run("keys", "list", "--org", "nope", code=1).stderr


def test_expired_key_creation(cwd: Path) -> None:
    org_id = run_json("orgs", "create", "Acme")["id"]
    past = run_json("keys", "create", org_id, "--expires-at", "2020-01-01T00:00:00Z")
    assert past["expiresAt"].startswith("2020-01-01T00:00:00")
    future = run_json("keys", "create", org_id, "--expires-at", "2999-01-01")  # naive: UTC
    assert future["expiresAt"].startswith("2999-01-01T00:00:00")
    with open_db() as t:
        with pytest.raises(AuthenticationError, match="API key expired"):
            t.for_api_key(past["secret"])
        t.for_api_key(future["secret"])
    assert "expired" in run("keys", "list").stdout
    bad = run("keys", "create", org_id, "--expires-at", "soon", code=2)
    assert "ISO 8601" in bad.stderr


@sqlite_only  # sqlite files named in TOML
def test_toml_config_is_honoured(cwd: Path) -> None:
    (cwd / "treasury.toml").write_text(
        f'storage = "sqlite:///from-toml.db"\nmaster_key = "{"1" * 64}"\n'
    )
    secret = run_json("init", master_key=None)["apiKey"]["secret"]
    assert (cwd / "from-toml.db").exists() and not (cwd / "treasury.db").exists()
    assert not (cwd / "from-toml.db.key").exists()  # the configured master key was used
    with Treasury.open("sqlite:///from-toml.db", master_key="1" * 64) as t:
        t.for_api_key(secret)

    (cwd / "other.toml").write_text('storage = "sqlite:///other.db"\n')
    run("--config", "other.toml", "orgs", "create", "Other")
    assert (cwd / "other.db").exists()
    run("--config", "other.toml", "--storage", "sqlite:///flag.db", "orgs", "create", "Flag")
    assert (cwd / "flag.db").exists()
    assert run_json("--storage", "sqlite:///flag.db", "orgs", "list")["count"] == 1


def test_broken_config_is_an_error(cwd: Path) -> None:
    (cwd / "treasury.toml").write_text('colour = "blue"\n')
    result = run("orgs", "list", code=1)
    assert "unknown settings: colour" in result.stderr
    assert "Traceback" not in result.output
    assert run("--config", "missing.toml", "orgs", "list", code=2).exit_code == 2


def test_worker_refuses_the_in_process_devnet(cwd: Path) -> None:
    refused = run("worker", "--once", code=1)
    assert "in-process devnet" in refused.stderr and "treasury devnet" in refused.stderr
    assert "Traceback" not in refused.output
    assert "treasury devnet" in run("faucet", "0x" + "42" * 20, "1", "ETH", code=1).stderr


def test_devnet_refuses_c0_decimals_it_cannot_deploy(cwd: Path) -> None:
    refused = run("devnet", "--c0-decimals", "5", "--no-write", code=1)  # before anvil starts
    assert "c0_decimals must be a whole number from 6 to 18, got 5" in refused.stderr
    assert "Traceback" not in refused.output


def test_worker_once_exits_1_when_a_job_failed(cwd: Path) -> None:
    (cwd / "treasury.toml").write_text('[chains.5]\nurl = "http://127.0.0.1:9"\n')
    failed = run("worker", "--once", "--json", code=1)
    assert "index_transactions: chain 5" in json.loads(failed.stdout)["errors"]


def test_worker_once(cwd: Path) -> None:
    (cwd / "treasury.toml").write_text("[chains]\n")  # no chain: nothing in-process
    summary = run_json("worker", "--once")
    assert summary["counts"]["idempotency_keys_purged"] == 0 and summary["errors"] == {}
    assert "jobs pass: " in run("worker", "--once").stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@sqlite_only  # zero-config: a SQLite file and its key file
def test_serve_answers_on_v1(cwd: Path) -> None:
    secret = run_json("init", master_key=None)["apiKey"]["secret"]  # zero-config, key file
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
    log = (cwd / "serve.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "treasury.cli", "serve", "--port", str(port)],
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (cwd / "serve.log").read_text()
            try:
                response = httpx.get(f"{base}/wallets", headers={"x-api-key": secret}, timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "server did not answer in 30 s"
                time.sleep(0.1)
        assert response.status_code == 200
        assert response.json() == {"data": [], "count": 0}
        assert httpx.get(f"{base}/wallets", headers={"x-api-key": "trk_x_y"}).status_code == 401
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    output = (cwd / "serve.log").read_text()
    assert f"Serving the treasury API on {base}" in output
    assert secret not in output
    assert proc.returncode == 0  # SIGTERM stops it cleanly


def test_serve_on_a_busy_port_fails_cleanly(cwd: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = subprocess.run(  # a subprocess: waitress leaks its sockets when bind fails
            [sys.executable, "-m", "treasury.cli", "serve", "--port", str(busy.getsockname()[1])],
            env=os.environ | {"TREASURY_MASTER_KEY": MASTER_KEY},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert "cannot listen on 127.0.0.1" in result.stderr
    assert "Traceback" not in result.stderr


@sqlite_only  # zero-config: a SQLite file and its key file
def test_devnet_runs_anvil_and_serve_uses_it(cwd: Path) -> None:
    """`treasury devnet` writes the chain into treasury.toml; `serve` then uses anvil."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
    env["TREASURY_ANVIL"] = require_anvil()  # the tmp cwd has no node_modules
    anvil_port, api_port = _free_port(), _free_port()
    devnet_log = (cwd / "devnet.log").open("w+")
    devnet = subprocess.Popen(
        [sys.executable, "-m", "treasury.cli", "devnet", "--port", str(anvil_port)],
        cwd=cwd,
        env=env,
        stdout=devnet_log,
        stderr=subprocess.STDOUT,
    )
    serve = None
    try:
        deadline = time.monotonic() + 60
        while "Ctrl+C to stop" not in (cwd / "devnet.log").read_text():
            assert devnet.poll() is None, (cwd / "devnet.log").read_text()
            assert time.monotonic() < deadline, "devnet did not start in 60 s"
            time.sleep(0.1)
        import tomllib

        chain = tomllib.loads((cwd / "treasury.toml").read_text())["chains"]["31337"]
        assert chain["url"] == f"http://127.0.0.1:{anvil_port}"
        assert set(chain["addresses"]) == {
            "USDC",
            "USDT",
            "c0",
            "swap_facility",
            "earner_rate_source",
            "multicall",
            "yield_distributor",
        }

        secret = run_json("init", master_key=None)["apiKey"]["secret"]
        serve = subprocess.Popen(
            [sys.executable, "-m", "treasury.cli", "serve", "--port", str(api_port)],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        holder = "0x" + "42" * 20
        base = f"http://127.0.0.1:{api_port}/v1"
        while True:
            try:
                r = httpx.get(f"{base}/31337/balances/{holder}", headers={"x-api-key": secret})
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "serve did not answer"
                time.sleep(0.1)
        assert r.status_code == 200, r.text
        items = {item["symbol"]: item for item in r.json()["data"]}
        assert items["USDC"]["token"] == chain["addresses"]["USDC"]

        # the chain of `treasury devnet` can mint: the faucet works from the shell
        funded = run_json("faucet", holder, "250.5", "usdc", master_key=None)
        assert funded["token"] == "USDC" and funded["transactionHash"].startswith("0x")
        r = httpx.get(f"{base}/31337/balances/{holder}", headers={"x-api-key": secret})
        assert {i["symbol"]: i["raw"] for i in r.json()["data"]}["USDC"] == "250500000"
        assert run_json("worker", "--once", master_key=None)["errors"] == {}  # a shared chain
        assert "minter_key" not in (cwd / "devnet.log").read_text()
    finally:
        for proc in (serve, devnet):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=15)
        devnet_log.close()
    assert devnet.returncode == 0
    with pytest.raises(httpx.TransportError):  # anvil stopped with the command
        httpx.post(chain["url"], json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"})


def test_yield_periods_show_and_publish(cwd: Path) -> None:
    """A week published through the Python API (an injected clock) is listed and shown
    by the CLI; an unknown period exits 1; `publish` runs the two yield jobs."""
    from datetime import UTC, datetime, timedelta

    from treasury.money import to_units
    from treasury.yields.periods import bounds, period_of

    tuesday = datetime(2026, 11, 17, 9, 30, tzinfo=UTC)
    now = [tuesday]
    storage = os.environ.get("TREASURY_STORAGE", "sqlite:///treasury.db")
    with Treasury.open(storage, master_key=MASTER_KEY, clock=lambda: now[0]) as t:
        org = t.for_organization(t.admin.create_organization("Acme").id)
        wallet = org.wallets.create(label="Ops").address
        t.chain(31337).faucet(wallet, "c0", "500")
        places = t.decimals(31337, "c0")
        t.run_once()
        now[0] = bounds(period_of(tuesday))[1] + timedelta(minutes=1)
        assert t.run_once()["yield_periods_published"] == 1
    week = str(period_of(tuesday))
    (listed,) = run_json("yield", "periods")["data"]
    assert listed["periodId"] == week and listed["count"] == 1
    assert week in run("yield", "periods").stdout
    shown = run_json("yield", "show", week, "--chain", "31337")
    assert [leaf["account"] for leaf in shown["leaves"]] == [wallet]
    text = run("yield", "show", week).stdout
    assert "Root 0x" in text and "raw" not in text
    assert f"{to_units(shown['total'], places)} c0" in text  # token units, not raw
    assert "not published" in run("yield", "show", "1", code=1).stderr
    published = run_json("yield", "publish")
    assert published["errors"] == {} and set(published["counts"]) <= {
        "yield_snapshots",
        "yield_periods_published",
    }


def test_orgs_onboard_starts_the_fiat_onboarding(cwd: Path) -> None:
    created = run_json("orgs", "create", "Globex")
    shown = run_json("orgs", "onboard", created["id"])
    assert shown == {"status": "approved", "url": None}  # the sandbox approves at once
    assert "Onboarding approved" in run("orgs", "onboard", created["id"]).stdout
    run("orgs", "onboard", "no-such-org", code=1)


@sqlite_only  # the devnet's chain lives beside the SQLite file, for the next command to read
def test_reconcile_and_statement(cwd: Path) -> None:
    t = open_db()
    org = t.admin.create_organization("Books")
    wallet = t.for_organization(org.id).wallets.create(label="Ops").address
    t.run_once()  # the deposit detector starts: the books start with it
    t.chain(31337).faucet(wallet, "USDC", "12.5")
    t.run_once()
    t.close()

    tied = run_json("reconcile", org.id)
    assert tied["run"]["tiedOut"] is True and tied["run"]["pairs"] == 3 and tied["open"] == []
    assert "tied out (3 of 3 pairs" in run("reconcile", org.id).stdout
    shown = run_json("statement", org.id, wallet, "USDC")
    assert (shown["opening"], shown["closing"]) == ("0", "12.5")
    assert [e["kind"] for e in shown["entries"]] == ["deposit"]
    lines = run("statement", org.id, wallet, "USDC", "--csv").stdout.splitlines()
    assert lines[0] == "at,kind,amount,balance,transferId,depositId,transactionHash"
    assert [line.split(",")[1:4] for line in lines[1:]] == [
        ["opening", "", "0"],
        ["deposit", "12.5", "12.5"],
        ["closing", "", "12.5"],
    ]
    assert "closing 12.5" in run("statement", org.id, wallet, "USDC").stdout
    run("statement", org.id, wallet, "USDC", "--from", "tomorrow", code=1)

    t = open_db()  # a break the books cannot explain: the command says so, and exits 1
    from treasury._records import breaks

    with t.storage.transaction() as tx:
        breaks.report(
            tx,
            org_id=org.id,
            kind="unexplained_outflow",
            chain_id=31337,
            wallet="0x" + "ab" * 20,
            token="USDC",
            decimals=6,
            expected=5_000_000,
            actual=0,
            difference=-5_000_000,
            block_number=1,
            evidence=[],
            now=t.now().isoformat(),
        )
    t.close()
    failing = run("reconcile", org.id, "--json", code=1)
    assert json.loads(failing.stdout)["open"][0]["difference"] == "-5"
    assert "unexplained_outflow" in run("reconcile", org.id, code=1).stdout


def test_orgs_onboard_without_an_email_fails_naming_email(
    cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a provider whose KYB link needs the business's contact email (the `http`
    plugin against the fake provider), `orgs onboard` without --email exits non-zero
    and says to pass --email; with it, the onboarding starts and shows its link."""
    from treasury.testing.fake_provider import fake_provider

    with fake_provider() as fake:
        monkeypatch.setenv("TREASURY_FIAT", fake.url)
        monkeypatch.setenv("TREASURY_FIAT_API_KEY", fake.api_key)
        created = run_json("orgs", "create", "Initech")
        refused = run("orgs", "onboard", created["id"], code=1)
        assert "--email" in refused.stderr and "email" in refused.stderr
        body = json.loads(run("orgs", "onboard", created["id"], "--json", code=1).stderr)
        assert "--email" in body["error"] and body["details"]["fields"][0]["field"] == "email"
        assert not fake.kyc_links
        shown = run_json("orgs", "onboard", created["id"], "--email", "ops@initech.example")
        assert shown["url"].startswith("https://") and len(fake.kyc_links) == 1
