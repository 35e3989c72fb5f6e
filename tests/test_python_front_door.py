"""The library as a Python user first meets it: pages and lists iterate over their items,
amounts are taken as `int`, `Decimal` or decimal strings (never a float), texts quote
token units, a missing extra is named, and the main objects have a useful `repr`."""

from __future__ import annotations

import re
import subprocess
import sys
from decimal import Decimal

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treasury import Treasury, ValidationError
from treasury.money import to_raw, to_units
from treasury.transfers.models import Transfer
from treasury.wallets import Wallet

from .conftest import Tenant
from .helpers import BANK_ACCOUNT, onramp, swap

CHAIN = 31337


def test_a_page_and_a_list_iterate_over_their_items(tenant: Tenant) -> None:
    org = tenant.org
    wallet = org.wallets.create(label="Ops", idempotency_key="w")
    bank = org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
    org.transfers.create(onramp(bank, wallet.address, amount="5"), idempotency_key="a")
    org.transfers.create(onramp(bank, wallet.address, amount="6"), idempotency_key="b")

    page = org.transfers.list()
    amounts = [t.from_.amount for t in page]  # not the model's (field, value) pairs
    assert amounts == ["6", "5"]
    assert all(isinstance(t, Transfer) for t in page)
    assert len(page) == page.count == 2 and page[0].id == page.data[0].id
    assert page.next_cursor is None
    assert "Page[Transfer]" in repr(page) and "next_cursor=None" in repr(page)

    wallets = org.wallets.list()
    assert [w.label for w in wallets] == ["Ops"] and isinstance(wallets[0], Wallet)
    assert len(wallets) == wallets.count == 1


@pytest.mark.parametrize(
    ("given_amount", "shown"),
    [(5, "5"), (Decimal("2.5"), "2.5"), (Decimal("1E+1"), "10"), ("0.25", "0.25")],
)
def test_amounts_are_taken_as_int_decimal_or_decimal_string(
    tenant: Tenant, given_amount: object, shown: str
) -> None:
    org = tenant.org
    wallet = org.wallets.create(label="Ops", idempotency_key="w")
    bank = org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
    transfer = org.transfers.create(
        onramp(bank, wallet.address, amount=given_amount), idempotency_key="k"
    )  # type: ignore[arg-type]
    assert transfer.from_.amount == shown
    funded = org.test_helpers.faucet(
        CHAIN, address=wallet.address, token="USDC", amount=given_amount
    )
    assert funded.amount == shown


def test_a_float_amount_is_a_400_saying_why(tenant: Tenant, base_url: str) -> None:
    org = tenant.org
    wallet = org.wallets.create(label="Ops", idempotency_key="w")
    with pytest.raises(ValidationError) as refused:
        org.transfers.create(
            swap("deposit", wallet.address, wallet.address, amount=5.5), idempotency_key="f"
        )  # type: ignore[arg-type]
    assert refused.value.status == 400
    assert "float" in str(refused.value) and "decimal string" in str(refused.value)
    with pytest.raises(ValidationError, match="float"):
        org.test_helpers.faucet(CHAIN, address=wallet.address, token="ETH", amount=0.1)
    answer = httpx.post(
        f"{base_url}/v1/transfers",
        json=swap("deposit", wallet.address, wallet.address, amount=5.5),
        headers={"x-api-key": tenant.secret, "Idempotency-Key": "h"},
    )
    assert answer.status_code == 400
    assert "float" in answer.json()["details"]["fields"][0]["message"]


#: An integer of seven digits or more, not part of a decimal: a raw amount of any real size.
RAW_NUMBER = re.compile(r"(?<![\d.])\d{7,}(?![\d.])")


def _refusal(tenant: Tenant, body: dict[str, object]) -> str:
    with pytest.raises(ValidationError) as refused:
        tenant.org.transfers.create(body, idempotency_key="r")
    return str(refused.value)


@pytest.mark.parametrize("amount", ["372.5000001", "0", "-5", "0.0000001", "1e3", "5.5.5"])
def test_refused_amounts_are_quoted_in_token_units(tenant: Tenant, amount: str) -> None:
    wallet = tenant.org.wallets.create(label="Ops", idempotency_key="w")
    text = _refusal(tenant, swap("deposit", wallet.address, wallet.address, amount=amount))
    assert not RAW_NUMBER.search(text), text
    assert "raw" not in text, text
    swap_text = ""
    with pytest.raises(ValidationError) as refused:
        tenant.org.swaps.prepare_deposit(
            CHAIN, token="USDC", amount=amount, **{"from": wallet.address}
        )
    swap_text = str(refused.value)
    assert not RAW_NUMBER.search(swap_text) and "raw" not in swap_text, swap_text


def test_a_balance_short_of_the_amount_is_quoted_in_token_units(
    treasury: Treasury, tenant: Tenant
) -> None:
    """The wallet holds 372.5 USDC and 1.5 c0: asking for more names both amounts in the
    token's units, never its raw units (USDC has 6 decimals, c0 18 or 6)."""
    from .helpers import offramp

    org, dev = tenant.org, treasury.chain(CHAIN)
    wallet = org.wallets.create(label="Ops", idempotency_key="w").address
    for symbol, amount in (("ETH", "1"), ("USDC", "372.5"), ("c0", "1.5")):
        dev.faucet(wallet, symbol, amount)
    bank = org.bank_accounts.create(BANK_ACCOUNT).provider_external_account_id
    for body, expected in (
        (swap("deposit", wallet, wallet, amount="400"), "available 372.5 USDC, requested 400"),
        (offramp(wallet, bank, "372.6"), "available 372.5 USDC, requested 372.6"),
        (swap("withdraw", wallet, wallet, amount="2"), "available 1.5 c0, requested 2"),
    ):
        text = _refusal(tenant, body)
        assert expected in text and not RAW_NUMBER.search(text), text


def test_a_fee_not_below_the_amount_is_quoted_in_token_units(tenant: Tenant) -> None:
    wallet = tenant.org.wallets.create(label="Ops", idempotency_key="w")
    body = swap("deposit", wallet.address, wallet.address, amount="372.5", developer_fee="372.5")
    text = _refusal(tenant, body)
    assert not RAW_NUMBER.search(text) and "raw" not in text, text


@settings(max_examples=200, deadline=None)
@given(raw=st.integers(min_value=0, max_value=2**256 - 1), decimals=st.sampled_from([0, 6, 18]))
def test_token_units_round_trip_to_raw_units(raw: int, decimals: int) -> None:
    shown = to_units(raw, decimals)
    assert to_raw(shown, decimals) == raw if raw else shown == "0"
    assert not shown.endswith(".") and (("." not in shown) or not shown.endswith("0"))


@pytest.mark.parametrize(
    ("module", "open_call", "extra"),
    [
        (
            "psycopg",
            "Treasury.open('postgresql://postgres@127.0.0.1:5432/postgres', chains={})",
            "postgres",
        ),
        (
            "redis",
            "Treasury.open('sqlite:///:memory:', chains={}, rate_limit_storage='redis://127.0.0.1:6379')",
            "redis",
        ),
    ],
)
def test_a_missing_extra_is_named_with_its_install_command(
    module: str, open_call: str, extra: str
) -> None:
    """The extra's module is hidden from a fresh interpreter (``sys.modules[name] = None``
    is how Python itself marks a module as not importable); the fresh-install test shows
    the same with the extra really absent."""
    script = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from treasury import Treasury\n"
        f"try:\n    {open_call}\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={"TREASURY_MASTER_KEY": "0" * 64, "PATH": "/usr/bin:/bin"},
    )
    assert f"pip install 'treasury-api[{extra}]'" in done.stdout, done.stdout + done.stderr
    assert "ModuleNotFoundError" not in done.stdout


def test_the_facade_the_handle_and_the_models_say_what_they_are(storage_url: str) -> None:
    with Treasury.open(storage_url, master_key="0" * 64, chains={}) as t:
        shown = repr(t)
        assert shown.startswith("<treasury.Treasury storage=") and "chains=[]" in shown
        if "@" in storage_url and ":" in storage_url.split("@")[0].split("//")[1]:
            assert "***" in shown  # a password is never shown
        org = t.admin.create_organization("Acme")
        key = t.admin.create_api_key(org.id, user_id="alice")
        handle = t.for_api_key(key.secret)
        assert repr(handle) == f"<treasury.OrganizationHandle {org.id} user='alice'>"
        assert repr(org).startswith("Organization(") and "Acme" in repr(org)
        assert key.secret not in repr(handle)
