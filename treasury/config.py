"""Settings: `Treasury.open` arguments, else `TREASURY_*` variables, else the defaults.

The CLI also reads a TOML file (``--config treasury.toml``) with the same keys in
lowercase and a ``[chains]`` table mapping chain ids to backend URLs. Values are checked
by pydantic: a value that does not fit its field is a `ValueError` naming the setting.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any

import tomlkit
from pydantic import Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, SettingsConfigDict
from pydantic_settings.sources import PydanticBaseSettingsSource
from pydantic_settings.sources.utils import parse_env_vars

__all__ = ["ENV_PREFIX", "Settings", "dump_toml", "write_chain"]

ENV_PREFIX = "TREASURY_"


def _default_chains() -> dict[int, Any]:
    return {31337: "devnet://"}


class Settings(BaseSettings):
    """Every setting; `Settings()` is the defaults alone, `Settings.load()` reads sources."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="forbid", frozen=True
    )

    storage: str = "sqlite:///treasury.db"
    chains: Annotated[dict[int, Any], NoDecode] = Field(default_factory=_default_chains)
    primary_chain: int | None = None  # the chain of the `ethereum` rail; default the lowest
    fiat: str = "sandbox://"
    custody: str = "local://"
    master_key: str | None = Field(default=None, repr=False)  # never in logs
    allow_private_webhook_urls: bool = False
    rate_limit: str = "100/60 seconds"  # per API key
    anonymous_rate_limit: str = "100/60 seconds"  # per client address, without a valid key
    rate_limit_storage: str = "memory://"
    max_body_bytes: int = 1024 * 1024  # a payout run of 1,000 transfers fits
    send_timeout_s: float = 30.0  # a client that reads nothing of its answer this long is dropped
    sweep_minimum: str = "1.00"  # virtual wallets sweep USDC/USDT above this into c0
    snapshot_interval: int = 3600  # seconds between snapshots of holders' c0 (yield)
    reconcile_interval: int = 600  # seconds between reconciliation runs of a chain (books)
    deposit_confirmations: int | None = None  # None: each chain's (`Chain.confirmations`)
    max_in_flight: Annotated[int, Field(ge=1)] = 64  # signed legs in flight per wallet

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # the environment is read by `load` alone

    @classmethod
    def load(
        cls,
        overrides: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        toml_file: str | Path | None = None,
    ) -> Settings:
        """Defaults, then the TOML file, then the environment, then `overrides` (non-None)."""
        values: dict[str, Any] = {}
        if toml_file is not None:
            values |= _known(tomllib.loads(Path(toml_file).read_text()))
        values |= _EnvMapping(cls, os.environ if env is None else env)()
        values |= _known({k: v for k, v in (overrides or {}).items() if v is not None})
        return _validated(values)

    def merged(self, values: Mapping[str, Any]) -> Settings:
        """A copy with the fields of `values` replaced (checked like any other source)."""
        current = {name: getattr(self, name) for name in type(self).model_fields}
        return _validated(current | _known(values))

    @field_validator("chains", mode="before")
    @classmethod
    def _parse_chains(cls, value: object) -> object:
        """Text such as ``31337=devnet://,1=https://rpc.example``, or a mapping of chain id
        to a URL or a table ``{url, addresses, tokens}`` (see `ChainConfig.parse`)."""
        if isinstance(value, str):
            pairs = [item.split("=", 1) for item in value.split(",") if item.strip()]
            if any(len(pair) != 2 for pair in pairs):
                raise ValueError("chains as text is CHAIN_ID=URL pairs separated by commas")
            return {chain_id.strip(): url.strip() for chain_id, url in pairs}
        if not isinstance(value, Mapping):
            raise ValueError("chains must be a mapping of chain id to backend URL")
        return value

    @field_validator("sweep_minimum", mode="before")
    @classmethod
    def _parse_decimal(cls, value: object) -> str:
        if isinstance(value, bool):
            raise ValueError("a decimal number is expected")
        try:
            number = Decimal(str(value))
        except InvalidOperation:
            raise ValueError("a decimal number is expected") from None
        if not number.is_finite():
            raise ValueError("a finite decimal number is expected")
        return str(number)


class _EnvMapping(EnvSettingsSource):
    """pydantic-settings' reading of ``TREASURY_*`` variables, from any mapping."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._env = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._env, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


def _known(values: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(values) - set(Settings.model_fields)
    if unknown:
        raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
    return dict(values)


def _validated(values: Mapping[str, Any]) -> Settings:
    try:
        return Settings(**values)
    except ValidationError as error:
        raise ValueError("; ".join(_describe(problem) for problem in error.errors())) from None


def _describe(problem: Mapping[str, Any]) -> str:
    """One invalid value: the setting, its variable and the reason (never a secret)."""
    name = str(problem["loc"][0]) if problem["loc"] else "settings"
    where = f"{name} ({ENV_PREFIX}{name.upper()})" if name in Settings.model_fields else name
    field: FieldInfo | None = Settings.model_fields.get(name)
    shown = "" if field is None or not field.repr else f": {problem['input']!r}"
    return f"invalid setting {where}: {problem['msg']}{shown}"


def write_chain(toml_file: str | Path, chain_id: int, spec: Mapping[str, Any]) -> None:
    """Set ``[chains.<chain_id>]`` in a TOML settings file, keeping everything else
    (comments, other keys, their order)."""
    path = Path(toml_file)
    document = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
    if "chains" not in document:
        document["chains"] = tomlkit.table(is_super_table=True)
    document["chains"][str(chain_id)] = dict(spec)
    path.write_text(tomlkit.dumps(document))


def dump_toml(data: Mapping[str, Any]) -> str:
    """TOML for settings: strings, numbers, booleans, lists of those, nested tables."""
    return tomlkit.dumps(_with_text_keys(data))


def _with_text_keys(data: Mapping[Any, Any]) -> dict[str, Any]:
    return {
        str(key): _with_text_keys(value) if isinstance(value, Mapping) else value
        for key, value in data.items()
    }
