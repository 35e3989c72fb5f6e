"""Bank accounts as the API takes and shows them: ABA-checked routing numbers, US addresses."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self

from pydantic import Field, StringConstraints, field_validator, model_validator

from .._infra.models import Body, PlainText, Timestamped

_US_ZIP = re.compile(r"^[0-9]{5}(-[0-9]{4})?$")  # ASCII digits: \d takes any Unicode digit
Text = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256), PlainText
]

#: The account owner's name as the provider takes it for ACH: 3 to 35 characters ("For
#: ach or wire transfers, this field must be at least 3 characters, at most 35
#: characters", apidocs.bridge.xyz/api-reference/external-accounts, `account_owner_name`).
OwnerName = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=3, max_length=35), PlainText
]


def aba_checksum_ok(routing_number: str) -> bool:
    """The ABA routing-number check: 3·(d1+d4+d7) + 7·(d2+d5+d8) + (d3+d6+d9) ≡ 0 (mod 10)."""
    d = [int(c) for c in routing_number]
    return (3 * (d[0] + d[3] + d[6]) + 7 * (d[1] + d[4] + d[7]) + d[2] + d[5] + d[8]) % 10 == 0


class AccountDetails(Body):
    account_number: Annotated[str, StringConstraints(pattern=r"^[0-9]{4,17}$")]
    routing_number: Annotated[str, StringConstraints(pattern=r"^[0-9]{9}$")]

    @field_validator("routing_number")
    @classmethod
    def _checksum(cls, value: str) -> str:
        if not aba_checksum_ok(value):
            raise ValueError("routing number checksum is invalid")
        return value


class PostalAddress(Body):
    street_line_1: Text
    street_line_2: Text | None = None
    city: Text
    state: Annotated[str, StringConstraints(pattern=r"^[A-Z]{2}$")] | None = None
    postal_code: Text
    country: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")] = Field(
        description="ISO 3166-1 alpha-3, e.g. USA"
    )

    @model_validator(mode="after")
    def _us_rules(self) -> Self:
        if self.country == "USA":
            if self.state is None:
                raise ValueError("state is required when country is USA")
            if not _US_ZIP.match(self.postal_code):
                raise ValueError("postal_code must be a US ZIP code (12345 or 12345-6789)")
        return self


class CreateBankAccount(Body):
    account_type: Literal["us"]
    currency: Literal["usd"]
    bank_name: Text
    business_name: Text
    account_owner_name: OwnerName
    account_owner_type: Literal["business"]
    checking_or_savings: Literal["checking", "savings"] = "checking"
    account: AccountDetails
    address: PostalAddress


class UpdateBankAccount(Body):
    """``PUT /v1/bank-accounts/{id}``: the account's new details, in the creation's shapes."""

    account: AccountDetails
    address: PostalAddress


#: A bank account in a path: the integer `id` its creation answered, or its uuid.
BankAccountRef = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True,
        pattern=r"^([0-9]{1,18}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$",
    ),
    Field(description="The integer id its creation answered, or the row's uuid"),
]


class BankAccount(Timestamped):
    """The creation response; `provider_external_account_id` is the list row's `id`."""

    id: int
    organization_id: str
    user_id: str
    bank_name: str
    account_owner_name: str
    routing_number: str
    account_number_last4: str
    checking_or_savings: Literal["checking", "savings"]
    provider_external_account_id: str | None = None
    business_name: str | None = None
    account_type: str = "us"
    currency: str = "usd"
    account_owner_type: str = "business"
    active: bool = True


class BankAccountRow(Timestamped):
    """A row of `GET /v1/bank-accounts`; `id` is what transfers call external_account_id."""

    id: str
    bank_name: str
    account_owner_name: str
    account_number_last4: str
    routing_number: str
    checking_or_savings: Literal["checking", "savings"]
    business_name: str | None
    account_type: str
    currency: str
    account_owner_type: str
    active: bool
