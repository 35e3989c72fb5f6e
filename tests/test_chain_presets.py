"""Chain presets: Ethereum (1) and Sepolia (11155111) configured by URL alone.

An anvil node started with the chain id of each network stands for it: nothing is
deployed there, and nothing needs to be, since opening a chain asks only its chain id.
Needs the anvil binary of ``npm ci`` (or ``TREASURY_ANVIL``): skipped without it, except
under ``CI``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from treasury import Treasury
from treasury.anvil import AnvilNode, start_anvil
from treasury.backends.chain import ChainConfig
from treasury.backends.chain.presets import PRESETS, with_preset
from treasury.backends.chain.rpc import RpcChain
from treasury.backends.fiat.base import FiatContext, OnRamp
from treasury.backends.fiat.http import HttpFiat
from treasury.config import Settings
from treasury.errors import Conflict
from treasury.testing.fake_provider import fake_provider
from treasury.testing.fiat import ACCOUNT, new_key

from .conftest import MASTER_KEY, make_tenant, require_anvil
from .helpers import address, swap

SEPOLIA, ETHEREUM = 11155111, 1


@pytest.fixture(scope="module")
def sepolia() -> Iterator[AnvilNode]:
    require_anvil()
    with start_anvil(chain_id=SEPOLIA) as node:
        yield node


@pytest.fixture(scope="module")
def ethereum() -> Iterator[AnvilNode]:
    require_anvil()
    with start_anvil(chain_id=ETHEREUM) as node:
        yield node


@pytest.fixture
def by_url(storage_url: str, sepolia: AnvilNode, ethereum: AnvilNode) -> Iterator[Treasury]:
    t = Treasury.open(
        storage_url,
        master_key=MASTER_KEY,
        chains={SEPOLIA: sepolia.url, ETHEREUM: ethereum.url},
        settings=Settings(primary_chain=SEPOLIA),
    )
    yield t
    t.close()


def test_a_chain_given_by_url_alone_starts_from_its_public_addresses(by_url: Treasury) -> None:
    sepolia = by_url.chain(SEPOLIA)
    assert sepolia.addresses == {
        "USDC": "0x1c7d4b196cb0c7b01d743fbc6116a902379c7238",
        "swap_facility": "0xb6807116b3b1b321a390594e31ecd6e0076f6278",
        "earner_rate_source": "0x866a2bf4e572cbcf37d5071a7a58503bfb36be1b",
        "multicall": "0xca11bde05977b3631167028862be2a173976ca11",
    }
    assert (sepolia.rail, sepolia.exit_path) == ("ethereum", "replace_asset_with_m")
    assert sepolia.tokens == ["0x1c7d4b196cb0c7b01d743fbc6116a902379c7238"]
    ethereum = by_url.chain(ETHEREUM)
    assert ethereum.addresses == {
        "USDC": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
        "USDT": "0xdac17f958d2ee523a2206206994597c13d831ec7",
        "swap_facility": "0xb6807116b3b1b321a390594e31ecd6e0076f6278",
        "earner_rate_source": "0x866a2bf4e572cbcf37d5071a7a58503bfb36be1b",
        "multicall": "0xca11bde05977b3631167028862be2a173976ca11",
    }
    assert (ethereum.rail, ethereum.exit_path) == ("ethereum", "replace_asset_with_m")


def test_configured_addresses_override_the_preset(sepolia: AnvilNode) -> None:
    c0, usdc, facility = address(), address(), address()
    spec = {"url": sepolia.url, "addresses": {"c0": c0, "USDC": usdc}}
    chain = RpcChain.from_config(ChainConfig.parse(SEPOLIA, spec))
    assert chain.addresses["c0"] == c0.lower()
    assert chain.addresses["USDC"] == usdc.lower()
    assert chain.addresses["swap_facility"] == PRESETS[SEPOLIA].addresses["swap_facility"]
    assert chain.tokens == [usdc.lower(), c0.lower()]
    assert chain.exit_path == "replace_asset_with_m"
    chain.close()
    # Another facility than M0's exits by its own swap, unless configured otherwise.
    own = {"url": sepolia.url, "addresses": {"swap_facility": facility}}
    assert with_preset(ChainConfig.parse(SEPOLIA, own)).exit_path == "swap"
    named = {**own, "exit_path": "replace_asset_with_m"}
    assert with_preset(ChainConfig.parse(SEPOLIA, named)).exit_path == "replace_asset_with_m"


def test_rail_and_exit_path_come_from_the_url_query_or_the_toml_table(
    sepolia: AnvilNode, tmp_path: Path
) -> None:
    chain = RpcChain.from_config(ChainConfig.parse(SEPOLIA, f"{sepolia.url}/?rail=base"))
    assert (chain.rail, chain.url) == ("base", f"{sepolia.url}/")
    chain.close()
    toml = tmp_path / "treasury.toml"
    toml.write_text(f'[chains.{SEPOLIA}]\nurl = "{sepolia.url}"\nrail = "polygon"\n')
    settings = Settings.load(toml_file=toml, env={})
    chain = RpcChain.from_config(ChainConfig.parse(SEPOLIA, settings.chains[SEPOLIA]))
    assert chain.rail == "polygon"
    chain.close()
    with pytest.raises(ValueError, match="exit_path must be one of swap, replace_asset_with_m"):
        ChainConfig.parse(SEPOLIA, f"{sepolia.url}?exit_path=bridge")


def test_the_fiat_provider_uses_the_rail_of_the_chains_configuration(sepolia: AnvilNode) -> None:
    chain = RpcChain.from_config(ChainConfig.parse(SEPOLIA, f"{sepolia.url}?rail=base"))
    with fake_provider() as fake:
        fiat = HttpFiat(fake.url, api_key=fake.api_key)
        fiat.bind(FiatContext(chain=lambda chain_id: chain))
        email = "ops@example.com"
        customer = fiat.start_onboarding("Acme", idempotency_key=new_key(), email=email).customer_id
        fake.approve(customer)
        account = fiat.register_external_account(customer, ACCOUNT, idempotency_key=new_key())
        to = address()
        ramp = OnRamp("100", "0", account, SEPOLIA, to)
        fiat.create_transfer(customer, ramp, idempotency_key=new_key())
        (body,) = (r.body for r in fake.received("POST", "/transfers"))
        fiat.close()
    assert body["destination"]["payment_rail"] == "base"
    chain.close()


def test_an_operation_that_needs_c0_is_refused_naming_the_setting(by_url: Treasury) -> None:
    org = make_tenant(by_url).org
    wallet = org.wallets.create(label="Ops").address
    setting = f"chains.{SEPOLIA}.addresses.c0"
    with pytest.raises(Conflict, match=f"chain {SEPOLIA} has no c0 address: set {setting}") as e:
        org.swaps.prepare_deposit(SEPOLIA, {"token": "USDC", "amount": "1", "from": wallet})
    assert e.value.details == {"setting": setting}
    with pytest.raises(Conflict, match=setting):
        org.transfers.create(swap("deposit", wallet, wallet, "1"))
    with pytest.raises(Conflict, match=setting):
        org.yields.estimate(SEPOLIA, wallet)
    with pytest.raises(Conflict, match=f"chains.{SEPOLIA}.addresses.USDT"):
        org.swaps.prepare_withdraw(SEPOLIA, {"token": "USDT", "amount": "1", "from": wallet})
    with pytest.raises(Conflict, match=f"chains.{ETHEREUM}.addresses.c0"):
        org.swaps.prepare_withdraw(ETHEREUM, {"token": "USDT", "amount": "1", "from": wallet})


def test_over_http_the_refusal_is_a_409_never_a_500(by_url: Treasury) -> None:
    from treasury.http import create_app
    from treasury.testing.server import serve

    tenant = make_tenant(by_url)
    body = {"token": "USDC", "amount": "1", "from": address()}
    with (
        serve(create_app(by_url)) as base_url,
        httpx.Client(base_url=base_url, headers={"x-api-key": tenant.secret}) as client,
    ):
        answer = client.post(f"/v1/{SEPOLIA}/withdraw/prepare", json=body)
    assert answer.status_code == 409
    assert answer.json() == {
        "error": f"chain {SEPOLIA} has no c0 address: set chains.{SEPOLIA}.addresses.c0"
        f' ([chains.{SEPOLIA}.addresses] c0 = "0x…")',
        "details": {"setting": f"chains.{SEPOLIA}.addresses.c0"},
    }
