"""Two API processes sign for one wallet at the same moment: no nonce is signed twice.

Two treasuries open the same store and the same anvil node, each with its own in-process
signing lock, as two API processes do. The first reads the wallet's pending nonce, and
before it stores its signed legs the second creates a whole transfer from that wallet
with the same nonces. The first must notice that its nonces were taken, sign again
above them, and both transfers must complete, each moving its own amount once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from treasury import Treasury
from treasury.anvil import fund
from treasury.evm.abi import BALANCE_OF

from .conftest import MASTER_KEY, make_tenant
from .helpers import swap

CHAIN = 31337


@pytest.fixture
def two_processes(anvil_config, new_storage_url) -> Iterator[tuple[Treasury, Treasury]]:
    url = new_storage_url("nonces.db")
    first = Treasury.open(url, master_key=MASTER_KEY, chains={CHAIN: anvil_config})
    second = Treasury.open(url, master_key=MASTER_KEY, chains={CHAIN: anvil_config})
    yield first, second
    first.close()
    second.close()


def test_a_nonce_taken_by_another_process_is_signed_again(
    two_processes: tuple[Treasury, Treasury], anvil_config: dict[str, Any], monkeypatch
) -> None:
    first, second = two_processes
    tenant = make_tenant(first)
    wallet = tenant.org.wallets.create(label="Ops").address
    fund(anvil_config["url"], anvil_config, wallet, "ETH", "1")
    fund(anvil_config["url"], anvil_config, wallet, "USDC", "100")
    chain = first.chain(CHAIN)

    def balance(token: str) -> int:
        data = chain.call(anvil_config["addresses"][token], BALANCE_OF.encode(wallet))
        return int(BALANCE_OF.decode(data)[0])

    read_by_first: list[int] = []
    made_by_second = []
    pending_nonce = chain.pending_nonce

    def racing(address: str) -> int:
        nonce = pending_nonce(address)
        if not read_by_first:  # the second process signs, stores and sends meanwhile
            read_by_first.append(nonce)
            other = second.for_organization(tenant.org.id)
            made_by_second.append(
                other.transfers.create(swap("deposit", wallet, wallet, "10"), idempotency_key="b")
            )
        return nonce

    monkeypatch.setattr(chain, "pending_nonce", racing)
    made_by_first = tenant.org.transfers.create(
        swap("deposit", wallet, wallet, "20"), idempotency_key="a"
    )

    with first.storage.read() as tx:
        legs = tx.query("SELECT transfer_id, nonce FROM transfer_legs ORDER BY nonce")
    nonces = [leg["nonce"] for leg in legs]
    assert len(nonces) == len(set(nonces)) == 4  # approval and swap each, none twice
    assert {leg["transfer_id"] for leg in legs[:2]} == {made_by_second[0].id}
    assert nonces[0] == read_by_first[0]  # the second took the nonces the first had read

    for _ in range(3):
        first.run_once()
    org = tenant.org
    assert org.transfers.get(made_by_first.id).status == "completed"
    assert org.transfers.get(made_by_second[0].id).status == "completed"
    c0 = 30 * 10 ** first.decimals(CHAIN, "c0")
    assert balance("USDC") == 70_000_000 and balance("c0") == c0  # each moved once
