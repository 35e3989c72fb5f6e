"""The organization's virtual account (USD in, USDB out) and virtual wallet (sweeps to c0)."""

from __future__ import annotations

from typing import Literal

from .._infra.models import Timestamped


class VirtualAccount(Timestamped):
    id: int
    organization_id: str
    user_id: str
    provider_virtual_account_id: str
    provider_customer_id: str
    provider_wallet_id: str
    destination_currency: Literal["usdb"] = "usdb"
    source_currency: Literal["usd"] = "usd"
    developer_fee_percent: str
    active: bool = True
    usdb_balance: str
    label: str
    deposit_bank_name: str
    deposit_bank_address: str
    deposit_routing_number: str
    deposit_account_number: str
    deposit_beneficiary_name: str
    deposit_beneficiary_address: str
    deposit_message: str


class VirtualWallet(Timestamped):
    id: int
    organization_id: str
    address: str
    custody_wallet_id: str
