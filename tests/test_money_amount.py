"""`treasury.money.Amount`: a value in token units that carries its token, from the
request to the chain's raw units; and the refusals below the request, which name no
field until the operation that read the request names it."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from treasury.errors import ValidationError
from treasury.money import Amount, AmountRefused
from treasury.transfers.refusals import GasShort, request_error

from .test_architecture import ROOT


def test_an_amount_carries_its_token_and_quotes_token_units() -> None:
    amount = Amount.of("250.50", "USDC")
    assert amount == Amount(Decimal("250.50"), "USDC") and amount.token == "USDC"
    assert str(amount) == "250.5 USDC" and amount.units == "250.5"
    assert str(Amount.of(100, "c0")) == "100 c0" and Amount.of(0, "ETH").units == "0"
    assert amount.to_raw(6) == 250_500_000
    assert Amount.from_raw(250_500_000, 6, "USDC") == Amount.of("250.5", "USDC")
    with pytest.raises(TypeError):
        Amount.of(1.5, "USDC")  # type: ignore[arg-type]


def test_a_token_refuses_an_amount_without_naming_a_field() -> None:
    with pytest.raises(AmountRefused) as refused:
        Amount.of("1.1234567", "USDC").to_raw(6)
    assert refused.value.message == "amount '1.1234567' has more than 6 decimal places"
    assert refused.value.status == 400 and refused.value.details is None


def test_the_operation_names_the_field_a_refusal_is_about() -> None:
    mapped = request_error(AmountRefused("insufficient balance"))
    assert isinstance(mapped, ValidationError) and not isinstance(mapped, AmountRefused)
    assert mapped.to_body()["details"] == {
        "fields": [{"location": "body", "field": "amount", "message": "insufficient balance"}]
    }
    gas = request_error(GasShort("not enough ETH for gas"))
    assert gas.to_body()["details"]["fields"][0]["field"] == "source"
    other = ValidationError("other")
    assert request_error(other) is other


def test_no_layer_below_the_request_names_a_body_field() -> None:
    below = [
        *sorted((ROOT / "_records").glob("*.py")),
        *sorted((ROOT / "_infra").glob("*.py")),
        *sorted((ROOT / "evm").glob("*.py")),
        ROOT / "money.py",
        ROOT / "transfers" / "onchain.py",
        ROOT / "transfers" / "fiat.py",
    ]
    naming = re.compile(r"ValidationError\.field\(\s*\"body\"")
    assert [str(p.relative_to(ROOT)) for p in below if naming.search(p.read_text())] == []
