"""Trying a yield distribution at once: `Treasury.close_yield_period` (and `treasury yield
publish --period-now`) closes the current period on a chain that can mint and publishes
it, root posted; `treasury yield publish` says why it published nothing."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from treasury import Conflict, Treasury
from treasury.backends.chain.devnet import DevnetChain
from treasury.cli import main
from treasury.config import write_chain
from treasury.evm.abi import ROOTS
from treasury.yields.periods import bounds, period_of

from .conftest import MASTER_KEY, make_tenant, on_postgres

CHAIN = 31337
TUESDAY = datetime(2026, 11, 17, 9, 30, tzinfo=UTC)


def test_closing_the_current_period_publishes_it_at_once(new_storage_url) -> None:
    now = [TUESDAY]

    def clock() -> datetime:  # time moves half a second at each look
        now[0] += timedelta(milliseconds=500)
        return now[0]

    chain = DevnetChain()
    t = Treasury.open(
        new_storage_url("trial.db"), master_key=MASTER_KEY, chains={CHAIN: chain}, clock=clock
    )
    org = make_tenant(t).org
    holder = org.wallets.create(label="Ops").address
    assert "no snapshot of c0 holders yet" in t.why_no_yield_period()
    chain.faucet(holder, "c0", "1000")

    period = t.close_yield_period()
    assert period is not None
    assert period.period_id == str(period_of(TUESDAY)) and period.count == 1
    assert [leaf.account for leaf in period.leaves] == [holder]
    assert int(period.total) > 0
    assert TUESDAY < period.ends_at < bounds(period_of(TUESDAY))[1]  # closed early
    assert t.yield_artifacts.get(period.period_id).root == period.root  # listed, frozen
    distributor = chain.addresses["yield_distributor"]
    (posted,) = ROOTS.decode(chain.call(distributor, ROOTS.encode(int(period.period_id))))
    assert "0x" + bytes(posted).hex() == period.root  # claimable on the chain

    with pytest.raises(Conflict, match="already closed"):
        t.close_yield_period()
    assert "closed early" in t.why_no_yield_period()
    now[0] = bounds(period_of(TUESDAY))[1] + timedelta(minutes=1)  # the week's real end
    t.run_once()
    assert t.yield_artifacts.get(period.period_id) == period  # never rebuilt
    t.close()


def test_closing_a_period_early_needs_a_chain_that_can_mint(anvil_config, new_storage_url):
    real = {k: v for k, v in anvil_config.items() if k != "minter_key"}
    with (
        Treasury.open(new_storage_url("real.db"), master_key=MASTER_KEY, chains={CHAIN: real}) as t,
        pytest.raises(Conflict, match="cannot mint"),
    ):
        t.close_yield_period(CHAIN)


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage_url: str) -> Path:
    for name in list(os.environ):
        if name.startswith("TREASURY_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TREASURY_MASTER_KEY", MASTER_KEY)
    if on_postgres():
        monkeypatch.setenv("TREASURY_STORAGE", storage_url)
    return tmp_path


def cli(*args: str, code: int = 0) -> str:
    """What the command printed, its stderr included (where refusals are said)."""
    return invoke(*args, code=code).output


def cli_json(*args: str) -> Any:
    """The command's `--json` document (stdout alone: a warning goes to stderr)."""
    return json.loads(invoke(*args, "--json").stdout)


def invoke(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, (result.output, result.stderr)
    return result


def test_publish_says_why_it_published_nothing(cwd: Path) -> None:
    cli("init")
    said = cli("yield", "publish")
    assert "periods published: 0" in said
    assert "no period has ended since the first snapshot" in said
    assert "the current period ends at" in said
    shown = cli_json("yield", "publish")
    assert "the current period ends at" in shown["reasons"][0]


def test_period_now_from_the_shell_on_a_chain_that_can_mint(cwd: Path, anvil_config) -> None:
    write_chain(cwd / "treasury.toml", CHAIN, anvil_config)  # as `treasury devnet` does
    storage = os.environ.get("TREASURY_STORAGE", "sqlite:///treasury.db")
    with Treasury.open(storage, chains={CHAIN: anvil_config}) as t:
        org = t.for_organization(t.admin.create_organization("Acme").id)
        holder = org.wallets.create(label="Ops").address
        t.chain(CHAIN).faucet(holder, "c0", "500")
    said = cli("yield", "publish", "--period-now")
    assert "closed at" in said and "published: 1 claims" in said and "raw" not in said
    listed = cli_json("yield", "periods")["data"]
    assert [p["count"] for p in listed] == [1]
    again = cli("yield", "publish", "--period-now", code=1)
    assert "already closed" in again


def test_period_now_from_the_shell_on_the_devnet_kept_beside_the_store(cwd: Path) -> None:
    """The default devnet keeps its chain in a file beside a SQLite store, so the shell
    opens the same chain (when no `serve` holds it); a devnet in memory (a PostgreSQL
    store without a chain file) lives only in the process that serves it: refused."""
    cli("init")
    if on_postgres():
        refused = cli("yield", "publish", "--period-now", code=1)
        assert "lives in memory" in refused and "t.close_yield_period()" in refused
        return
    with Treasury.open("sqlite:///treasury.db") as t:
        org = t.for_organization(t.admin.create_organization("Acme").id)
        t.chain(CHAIN).faucet(org.wallets.create(label="Ops").address, "c0", "500")
    said = cli("yield", "publish", "--period-now")
    assert "closed at" in said and "published: 1 claims" in said


def test_a_trial_period_runs_until_the_largest_balance_earns_whatever_the_decimals() -> None:
    """1 s is enough for 500 c0 of 18 decimals; of 6 decimals, 500 c0 earn two raw units
    in about 3.4 s (10¹² times fewer raw units); a balance that would need longer than the
    limit is not waited for."""
    from treasury.yields import project
    from treasury.yields.trial import SETTLE, SETTLE_LIMIT, settle

    apy = project(0, 415).apy
    assert settle(500 * 10**18, apy) == SETTLE
    assert 3 * SETTLE < settle(500 * 10**6, apy) < 4 * SETTLE
    assert settle(10**6, apy) == SETTLE_LIMIT
    assert settle(0, apy) == settle(10**6, 0) == SETTLE
