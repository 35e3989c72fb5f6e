"""Settings from the environment, a TOML file and arguments: types checked, errors that
name the setting, and a chain written into a TOML file that keeps the user's comments."""

from __future__ import annotations

import tomllib
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treasury.config import Settings, write_chain


def test_precedence_is_defaults_then_toml_then_environment_then_arguments(tmp_path: Path) -> None:
    toml = tmp_path / "treasury.toml"
    toml.write_text('rate_limit = "1/second"\nfiat = "sandbox://"\nmax_body_bytes = 1000\n')
    env = {"TREASURY_RATE_LIMIT": "2/second", "TREASURY_MAX_BODY_BYTES": "2000"}
    settings = Settings.load({"max_body_bytes": 3000, "fiat": None}, env=env, toml_file=toml)
    assert settings.rate_limit == "2/second"  # the environment beats the file
    assert settings.max_body_bytes == 3000  # an argument beats the environment
    assert settings.fiat == "sandbox://"  # a None argument is no argument
    assert settings.custody == "local://"  # the default


def test_environment_values_are_typed_and_empty_ones_ignored() -> None:
    env = {
        "TREASURY_CHAINS": "31337=devnet://, 1=https://rpc.example",
        "TREASURY_PRIMARY_CHAIN": "1",
        "TREASURY_ALLOW_PRIVATE_WEBHOOK_URLS": "yes",
        "TREASURY_SNAPSHOT_INTERVAL": "60",
        "TREASURY_SWEEP_MINIMUM": "2.50",
        "TREASURY_STORAGE": "",  # empty: not set
        "TREASURY_CONFIG": "other.toml",  # not a setting: the CLI's
    }
    settings = Settings.load(env=env)
    assert settings.chains == {31337: "devnet://", 1: "https://rpc.example"}
    assert settings.primary_chain == 1 and settings.snapshot_interval == 60
    assert settings.allow_private_webhook_urls is True
    assert Decimal(settings.sweep_minimum) == Decimal("2.5")
    assert settings.storage == "sqlite:///treasury.db"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TREASURY_ALLOW_PRIVATE_WEBHOOK_URLS", "flase"),
        ("TREASURY_MAX_BODY_BYTES", "256k"),
        ("TREASURY_PRIMARY_CHAIN", "mainnet"),
        ("TREASURY_SNAPSHOT_INTERVAL", "1.5"),
        ("TREASURY_SWEEP_MINIMUM", "one"),
        ("TREASURY_CHAINS", "devnet://"),
    ],
)
def test_a_value_of_the_wrong_type_is_an_error_naming_the_setting(
    variable: str, value: str
) -> None:
    with pytest.raises(ValueError) as error:
        Settings.load(env={variable: value})
    name = variable.removeprefix("TREASURY_").lower()
    assert f"invalid setting {name} ({variable})" in str(error.value)


def test_a_wrong_type_in_the_toml_file_names_the_setting(tmp_path: Path) -> None:
    toml = tmp_path / "treasury.toml"
    toml.write_text('allow_private_webhook_urls = "flase"\n')
    with pytest.raises(ValueError, match="invalid setting allow_private_webhook_urls"):
        Settings.load(env={}, toml_file=toml)


def test_an_unknown_setting_is_refused_from_every_source(tmp_path: Path) -> None:
    toml = tmp_path / "treasury.toml"
    toml.write_text('colour = "blue"\n')
    with pytest.raises(ValueError, match="unknown settings: colour"):
        Settings.load(env={}, toml_file=toml)
    with pytest.raises(ValueError, match="unknown settings: colour"):
        Settings().merged({"colour": "blue"})


def test_an_invalid_master_key_is_refused_without_showing_it() -> None:
    with pytest.raises(ValueError, match="invalid setting master_key") as error:
        Settings.load({"master_key": 123456789}, env={})
    assert "123456789" not in str(error.value)
    assert "s3cr3t" not in repr(Settings.load({"master_key": "s3cr3t"}, env={}))


def test_settings_are_frozen_and_merged_returns_a_checked_copy() -> None:
    settings = Settings()
    with pytest.raises(ValueError):
        settings.merged({"max_body_bytes": "lots"})
    copy = settings.merged({"max_body_bytes": "65536"})
    assert copy.max_body_bytes == 65536 and settings.max_body_bytes == 1024 * 1024
    with pytest.raises(ValueError):
        settings.storage = "sqlite:///other.db"  # type: ignore[misc]


@given(st.sampled_from(["1", "true", "yes", "on", "TRUE", "0", "false", "no", "off", "Off"]))
def test_the_usual_spellings_of_a_boolean_are_read(text: str) -> None:
    settings = Settings.load(env={"TREASURY_ALLOW_PRIVATE_WEBHOOK_URLS": text})
    assert settings.allow_private_webhook_urls is (text.lower() in {"1", "true", "yes", "on"})


@given(st.text(min_size=1).filter(lambda t: t.strip().lower() not in BOOLEAN_WORDS))
def test_any_other_text_for_a_boolean_is_an_error(text: str) -> None:
    with pytest.raises(ValueError, match="allow_private_webhook_urls"):
        Settings.load(env={"TREASURY_ALLOW_PRIVATE_WEBHOOK_URLS": text})


BOOLEAN_WORDS = {"1", "0", "true", "false", "yes", "no", "on", "off", "t", "f", "y", "n", ""}


EDITED = """\
# Our treasury: keep this file under version control.
storage = "sqlite:///data/treasury.db"  # the shared volume
rate_limit = "1000/minute"

[chains]
# the local chain
31337 = "devnet://"

[chains.1]  # mainnet, through our node
url = "https://eth.example/rpc"
"""


def test_write_chain_keeps_comments_and_other_keys(tmp_path: Path) -> None:
    toml = tmp_path / "treasury.toml"
    toml.write_text(EDITED)
    spec = {"url": "http://127.0.0.1:8545", "addresses": {"USDC": "0xaa", "c0": "0xbb"}}
    write_chain(toml, 31338, spec)
    text = toml.read_text()
    for line in EDITED.splitlines():
        assert line in text  # every comment and key, as the user wrote it
    data = tomllib.loads(text)
    assert data["chains"]["31338"] == spec
    assert data["chains"]["31337"] == "devnet://" and data["rate_limit"] == "1000/minute"
    settings = Settings.load(env={}, toml_file=toml)
    assert settings.chains[31338] == spec and settings.chains[1] == {
        "url": "https://eth.example/rpc"
    }


def test_write_chain_replaces_that_chain_and_creates_a_missing_file(tmp_path: Path) -> None:
    toml = tmp_path / "new.toml"
    write_chain(toml, 31337, {"url": "http://127.0.0.1:8545"})
    write_chain(toml, 31337, {"url": "http://127.0.0.1:9545"})
    assert tomllib.loads(toml.read_text()) == {
        "chains": {"31337": {"url": "http://127.0.0.1:9545"}}
    }
