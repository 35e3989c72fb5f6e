"""A transfer's sides as the transfers table stores them (`transfers.store.Side`), apart
from the API's `TransferSide`: the same text the API model wrote, so every existing row
reads as it is (no migration) and the books' postings keep reading the raw JSON."""

from __future__ import annotations

import json

import pytest

from treasury.bank_accounts import BankAccountSummary
from treasury.transfers import TransferSide
from treasury.transfers.store import BankShown, Side

SIDES = [
    TransferSide(address="0x" + "ab" * 20, bank_account=None, chain_id=31337, currency="usdc",
                 amount="1.5"),
    TransferSide(address=None, chain_id=None, currency="usd", amount="250",
                 bank_account=BankAccountSummary(id="4f1c9a0e-2b8d-4c36-9a57-0d1e2f3a4b5c",
                                                 bank_name="Bänk of Zürich",
                                                 account_owner_name="Ada", account_number_last4="6789")),
]  # fmt: skip


@pytest.mark.parametrize("api", SIDES)
def test_a_stored_side_is_the_text_the_api_model_wrote(api: TransferSide) -> None:
    text = api.model_dump_json()  # how rows were written before the row shape
    side = Side.loads(text)
    assert side.dumps() == text and side.shown() == api


def test_the_postings_read_the_keys_they_always_read() -> None:
    bank = BankShown("id-1", "Bank", "Owner", "1234")
    stored = json.loads(Side("usd", "10", bank_account=bank).dumps())
    assert stored == {
        "address": None,
        "bankAccount": {"id": "id-1", "bankName": "Bank", "accountOwnerName": "Owner",
                        "accountNumberLast4": "1234"},
        "chainId": None,
        "currency": "usd",
        "amount": "10",
    }  # fmt: skip
