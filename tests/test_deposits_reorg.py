"""What is a deposit when the chain can go back (DESIGN §3), on a real anvil node: logs
of value 0 are none; another organization's transfer into a wallet is its deposit; an
on-ramp's payout is announced once, as the on-ramp's, even when the provider answers
late; a reorg reverses an announced deposit once, the same log coming back is the same
deposit, and deposits mined after the reorg are found.

The in-process devnet never reorganises: these run on anvil (`evm_snapshot`/`evm_revert`,
`anvil_reorg`, `anvil_rollback`), each through a `Treasury` as a user runs it, reading
the events in its outbox. Skipped without the anvil binary, except under ``CI``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils.address import to_checksum_address

from treasury import Treasury
from treasury.anvil import fund
from treasury.backends.fiat.http import HttpFiat
from treasury.evm.abi import TRANSFER, Function
from treasury.testing.fake_provider import fake_provider, onboard

from .conftest import MASTER_KEY, make_tenant
from .helpers import BANK_ACCOUNT, address, events, onramp, swap
from .webhook_receiver import receiving, verify_standard

CHAIN = 31337
TRANSFER_FROM = Function("transferFrom(address,address,uint256)", ("bool",))


class Node:
    """The anvil node of the module: JSON-RPC, and payments signed by outside accounts."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.url = str(config["url"])
        self.usdc = str(config["addresses"]["USDC"])

    def rpc(self, method: str, *params: Any) -> Any:
        answer = httpx.post(
            self.url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
        ).json()
        assert "error" not in answer, answer
        return answer["result"]

    def head(self) -> int:
        return int(self.rpc("eth_blockNumber"), 16)

    def mine(self, blocks: int = 1) -> None:
        self.rpc("anvil_mine", hex(blocks))

    def payer(self, usdc: str = "100") -> LocalAccount:
        account: LocalAccount = Account.create()
        fund(self.url, self.config, account.address, "ETH", "1")
        if usdc != "0":
            fund(self.url, self.config, account.address, "USDC", usdc)
        return account

    def signed(self, payer: LocalAccount, data: bytes, token: str | None = None) -> bytes:
        """A call of `token` (USDC) signed by `payer` at its next nonce, not sent."""
        nonce = int(self.rpc("eth_getTransactionCount", payer.address, "pending"), 16)
        signed = payer.sign_transaction(
            {
                "to": to_checksum_address(token or self.usdc),
                "value": 0,
                "gas": 100_000,
                "data": "0x" + data.hex(),
                "chainId": CHAIN,
                "nonce": nonce,
                "maxFeePerGas": 10**11,
                "maxPriorityFeePerGas": 10**9,
            }
        )
        return bytes(signed.raw_transaction)

    def send(self, raw: bytes) -> str:
        """Broadcast signed bytes (anvil mines them at once); the transaction's hash."""
        return str(self.rpc("eth_sendRawTransaction", "0x" + raw.hex())).lower()

    def pay(self, payer: LocalAccount, to: str, raw_amount: int) -> tuple[str, bytes]:
        raw = self.signed(payer, TRANSFER.encode(to, raw_amount))
        return self.send(raw), raw


@pytest.fixture(scope="module")
def node(anvil_config: dict[str, Any]) -> Node:
    return Node(anvil_config)


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


@pytest.fixture
def open_treasury(node: Node, new_storage_url) -> Iterator[Any]:
    """Opens treasuries on the anvil node with the chain's settings given (closed after)."""
    opened: list[Treasury] = []

    def open_one(options: dict[str, Any] | None = None, **chain: Any) -> Treasury:
        chains = {CHAIN: {**node.config, "confirmations": 0, **chain}}
        t = Treasury.open(
            new_storage_url(f"t{len(opened)}.db"),
            master_key=MASTER_KEY,
            chains=chains,
            allow_private_webhook_urls=True,
            **(options or {}),
        )
        opened.append(t)
        return t

    yield open_one
    for t in opened:
        t.close()


def passes(t: Treasury, n: int = 1) -> None:
    """`n` passes of the background jobs, without errors."""
    for _ in range(n):
        summary = t.run_once()
        assert not summary.errors, summary.errors


def provider_id(t: Treasury, transfer_id: str) -> str:
    with t.storage.read() as tx:
        row = tx.one("SELECT provider_transfer_id FROM transfers WHERE id = ?", (transfer_id,))
    assert row is not None
    return str(row["provider_transfer_id"])


def deposits_of(t: Treasury, tx_hash: str) -> list[dict[str, Any]]:
    with t.storage.read() as tx:
        return tx.query(
            "SELECT org_id, log_index, block_number, reversed_at FROM deposits WHERE hash = ?",
            (tx_hash,),
        )


# -- what is not a deposit ---------------------------------------------------------------


def test_logs_of_value_zero_are_no_deposits(node: Node, open_treasury) -> None:
    """Address poisoning: an outsider's `transfer(wallet, 0)` and `transferFrom(x, wallet,
    0)` (no allowance needed for 0) log a Transfer into the wallet; neither is a deposit,
    while a real payment in the same scan is one."""
    t = open_treasury()
    org = make_tenant(t).org
    wallet = org.wallets.track(address=address(), label="Poisoned").wallet.address.lower()
    poisoner, payer = node.payer("0"), node.payer()
    passes(t)  # the detector starts at the head
    zero, _ = node.pay(poisoner, wallet, 0)
    victim = address()  # a look-alike sender that never agreed to anything
    zero_from = node.send(node.signed(poisoner, TRANSFER_FROM.encode(victim, wallet, 0)))
    paid, _ = node.pay(payer, wallet, 3_000_000)
    receipts = [node.rpc("eth_getTransactionReceipt", h) for h in (zero, zero_from)]
    assert [len(r["logs"]) for r in receipts] == [1, 1]  # both logged a Transfer into it
    assert receipts[1]["logs"][0]["topics"][1].endswith(victim[2:].lower())

    passes(t, 2)

    got = events(t, "deposit.")
    assert [(kind, data["transactionHash"], data["raw"]) for kind, data in got] == [
        ("deposit.received", paid, "3000000")
    ]
    assert deposits_of(t, zero) == deposits_of(t, zero_from) == []


def test_another_organizations_transfer_into_a_wallet_is_its_deposit(
    node: Node, open_treasury
) -> None:
    """Globex swaps its USDC into c0 paid to Acme's wallet: for Acme that is a deposit;
    for Globex, which tracks the same address, it is its own transfer, not a deposit."""
    t = open_treasury()
    acme, globex = make_tenant(t).org, make_tenant(t, "Globex").org
    received = acme.wallets.create(label="Receiving").address
    globex.wallets.track(address=received, label="Acme's")
    sender = globex.wallets.create(label="Treasury").address
    fund(node.url, node.config, sender, "ETH", "1")
    fund(node.url, node.config, sender, "USDC", "50")
    passes(t)
    moved = globex.transfers.create(swap("deposit", sender, received, "5"))
    for _ in range(6):
        passes(t)
        if globex.transfers.get(moved.id).status == "completed":
            break
    done = globex.transfers.get(moved.id)
    assert done.status == "completed"
    passes(t)

    got = events(t, "deposit.")
    assert [(kind, data["address"], data["token"]) for kind, data in got] == [
        ("deposit.received", received.lower(), "c0")
    ]
    assert got[0][1]["transactionHash"] == done.transaction_hash
    found = deposits_of(t, str(done.transaction_hash))
    assert [row["org_id"] for row in found] == [acme.id]  # none for Globex


def test_an_onramp_payout_seen_before_the_provider_answers_is_announced_once(
    node: Node, open_treasury
) -> None:
    """The provider pays out on-chain while its answers stall (it moves the transfer, then
    answers later than the client waits): the detector sees the payout first and holds it
    (it matches the open on-ramp: USDC, the amount, the wallet). Once the provider
    answers, the on-ramp completes with that hash: no `deposit.received`, one
    `transfer.completed`, and the payout as the wallet's tracked transaction."""

    def payout(chain_id: int, to: str, amount: str) -> str:
        return fund(node.url, node.config, to, "USDC", amount).lower()

    with fake_provider(payout=payout) as fake:
        fiat = HttpFiat(fake.url, api_key=fake.api_key, timeout=httpx.Timeout(1.0))
        t = open_treasury({"fiat": fiat}, rail="ethereum")
        org = make_tenant(t).org
        onboard(t, org.id, fake)
        wallet = org.wallets.create(label="Ops").address
        bank = org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
        passes(t)
        made = org.transfers.create(onramp(bank, wallet, "80", developer_fee="0.5"))
        fake.stall(2, times=50, method="GET", path="/transfers*")
        for _ in range(6):  # the provider's reads stall (the advance job fails); it pays
            t.run_once()
            with t.storage.read() as tx:
                held = tx.query("SELECT hash, raw FROM held_logs")
            if held:
                break
        assert [row["raw"] for row in held] == ["79500000"]
        assert org.transfers.get(made.id).status != "completed"
        t.run_once()  # seen again while still open: still held, still not announced
        assert events(t, "deposit.") == []
        fake._rules.clear()  # the provider answers again
        for _ in range(6):
            passes(t)
            if org.transfers.get(made.id).status == "completed":
                break
        passes(t)
        done = org.transfers.get(made.id)

    assert done.status == "completed" and done.transaction_hash == held[0]["hash"]
    assert events(t, "deposit.") == []
    completed = [d for kind, d in events(t, "transfer.completed")]
    assert [d["id"] for d in completed] == [made.id]
    confirmed = [d["hash"] for _, d in events(t, "transaction.confirmed")]
    assert confirmed == [done.transaction_hash]
    with t.storage.read() as tx:
        assert tx.query("SELECT hash FROM held_logs") == []


def test_a_held_log_becomes_a_deposit_when_no_open_onramp_paid_it(
    node: Node, open_treasury
) -> None:
    """An outsider pays exactly what an open on-ramp will pay into that wallet: held. The
    on-ramp fails at the provider: the log was never its payout, so it is a deposit then,
    announced once. And a held log counts as a deposit after 24 hours at the latest."""
    now = [datetime.now(UTC)]
    with fake_provider() as fake:  # pays out nothing on-chain
        fiat = HttpFiat(fake.url, api_key=fake.api_key, timeout=httpx.Timeout(5.0))
        t = open_treasury({"fiat": fiat, "clock": lambda: now[0]}, rail="ethereum")
        org = make_tenant(t).org
        onboard(t, org.id, fake)
        wallet = org.wallets.create(label="Ops").address
        bank = org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
        payer = node.payer()
        passes(t)
        failing = org.transfers.create(onramp(bank, wallet, "20"))
        waiting = org.transfers.create(onramp(bank, wallet, "30"))
        for made in (failing, waiting):  # the provider reviews both: they stay open
            fake.set_state(provider_id(t, made.id), "in_review")
        paid_20, _ = node.pay(payer, wallet, 20_000_000)
        paid_30, _ = node.pay(payer, wallet, 30_000_000)
        t.run_once()
        assert events(t, "deposit.") == []  # both held
        fake.set_state(provider_id(t, failing.id), "returned")
        passes(t, 2)
        assert org.transfers.get(failing.id).status == "failed"
        assert [d["transactionHash"] for _, d in events(t, "deposit.")] == [paid_20]
        now[0] += timedelta(hours=24, seconds=1)
        passes(t)
        assert org.transfers.get(waiting.id).status == "pending"  # still in review
    got = [d["transactionHash"] for _, d in events(t, "deposit.")]
    assert got == [paid_20, paid_30]


# -- reorgs --------------------------------------------------------------------------------


def test_a_reorg_reverses_an_announced_deposit_once_and_the_same_log_is_the_same_deposit(
    node: Node, open_treasury, stack: ExitStack
) -> None:
    """Announced, then its block leaves the chain (`evm_revert` to a snapshot taken before
    it, empty blocks mined in its place): one `deposit.reversed` with the deposit's fields
    and ``reason: "reorg"``. The same signed transaction mined again is the same log: the
    same deposit row, counted and announced again. A payment after the reorg is found."""
    t = open_treasury()
    org = make_tenant(t).org
    wallet = org.wallets.track(address=address(), label="In").wallet.address.lower()
    rx = stack.enter_context(receiving())
    hook = org.webhooks.create(
        url=rx.at("/deposits"), events=["deposit.received", "deposit.reversed"]
    )
    payer = node.payer()
    passes(t)
    node.mine(2)
    passes(t)  # scanned up to the head: a cursor mark on a block that stays
    snapshot = node.rpc("evm_snapshot")
    paid, raw = node.pay(payer, wallet, 7_000_000)
    node.mine(1)
    passes(t)
    ((kind, received),) = events(t, "deposit.")
    assert kind == "deposit.received" and received["transactionHash"] == paid

    assert node.rpc("evm_revert", snapshot) is True
    node.mine(3)  # other blocks at those heights
    passes(t)
    passes(t)  # a second pass announces nothing more
    got = events(t, "deposit.")
    assert [kind for kind, _ in got] == ["deposit.received", "deposit.reversed"]
    assert got[1][1] == {**received, "reason": "reorg"}
    assert deposits_of(t, paid)[0]["reversed_at"] is not None

    assert node.send(raw) == paid  # the same log comes back
    later, _ = node.pay(payer, wallet, 1_000_000)  # and a payment after the reorg
    passes(t, 2)
    got = events(t, "deposit.")
    assert [(kind, d["transactionHash"]) for kind, d in got] == [
        ("deposit.received", paid),
        ("deposit.reversed", paid),
        ("deposit.received", paid),
        ("deposit.received", later),
    ]
    again = got[2][1]
    assert {**again, "blockNumber": 0} == {**received, "blockNumber": 0}
    rows = deposits_of(t, paid)
    assert len(rows) == 1 and rows[0]["reversed_at"] is None  # the same deposit
    assert rows[0]["block_number"] == again["blockNumber"]
    delivered = [verify_standard(hook.secret, r) for r in rx.got]  # what the receiver got
    delivered.sort(key=lambda p: p["sequence"])  # in order per object; by sequence overall
    assert [(p["type"], p["data"]) for p in delivered] == got


def test_a_reorg_deeper_than_the_confirmations_reverses_the_deposit(
    node: Node, open_treasury
) -> None:
    """With 2 confirmations the deposit is announced only with 2 blocks on top; a reorg
    of 4 blocks (`anvil_reorg`) that drops it reverses it once; a payment mined after
    the reorg is found once it has its confirmations."""
    t = open_treasury(confirmations=2)
    org = make_tenant(t).org
    wallet = org.wallets.track(address=address(), label="In").wallet.address.lower()
    payer = node.payer()
    node.mine(3)  # the payer's funds stay out of the reorg's reach
    passes(t)
    paid, _ = node.pay(payer, wallet, 4_000_000)
    passes(t)
    assert events(t, "deposit.") == []  # not confirmed yet
    node.mine(2)
    passes(t)
    assert [kind for kind, _ in events(t, "deposit.")] == ["deposit.received"]

    head = node.head()
    node.rpc("anvil_reorg", 4, [])  # the newest 4 blocks replaced by empty ones
    assert node.head() == head
    assert node.rpc("eth_getTransactionReceipt", paid) is None
    passes(t, 2)
    got = events(t, "deposit.")
    assert [kind for kind, _ in got] == ["deposit.received", "deposit.reversed"]
    assert got[1][1]["reason"] == "reorg" and got[1][1]["transactionHash"] == paid

    later, _ = node.pay(payer, wallet, 2_000_000)
    passes(t)
    assert len(events(t, "deposit.")) == 2
    node.mine(2)
    passes(t)
    assert [d["transactionHash"] for _, d in events(t, "deposit.")][2:] == [later]


def test_a_shorter_chain_takes_the_cursor_back_and_later_deposits_are_found(
    node: Node, open_treasury
) -> None:
    """The chain rolls back 5 blocks (`anvil_rollback`): the cursor, past the new head,
    comes back (by its marks; and, with none in reach, to the head), so a deposit mined
    at heights scanned before is found."""
    t = open_treasury()
    org = make_tenant(t).org
    wallet = org.wallets.track(address=address(), label="In").wallet.address.lower()
    payer = node.payer()
    passes(t)
    node.mine(6)
    passes(t)
    node.rpc("anvil_rollback", 5)
    first, _ = node.pay(payer, wallet, 1_000_000)
    passes(t)
    assert [d["transactionHash"] for _, d in events(t, "deposit.")] == [first]

    with t.storage.transaction() as tx:  # no mark within reach: the head bounds the cursor
        tx.execute("DELETE FROM chain_marks")
    node.mine(6)
    passes(t)
    node.rpc("anvil_rollback", 5)
    with t.storage.transaction() as tx:
        tx.execute("DELETE FROM chain_marks")
    second, _ = node.pay(payer, wallet, 2_000_000)
    passes(t)
    assert [d["transactionHash"] for _, d in events(t, "deposit.")] == [first, second]
