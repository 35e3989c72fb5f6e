"""Settings: `Treasury.open` arguments, else `TREASURY_*` variables, else the defaults.

The CLI also reads a TOML file (``--config treasury.toml``) with the same keys in
lowercase and a ``[chains]`` table mapping chain ids to backend URLs.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

ENV_PREFIX = "TREASURY_"


def _default_chains() -> dict[int, str]:
    return {31337: "devnet://"}


@dataclass(frozen=True)
class Settings:
    storage: str = "sqlite:///treasury.db"
    chains: dict[int, Any] = field(default_factory=_default_chains)
    primary_chain: int | None = None  # the chain of the `ethereum` rail; default the lowest
    fiat: str = "sandbox://"
    custody: str = "local://"
    master_key: str | None = field(default=None, repr=False)  # never in logs
    allow_private_webhook_urls: bool = False
    rate_limit: str = "100/60 seconds"  # per API key
    anonymous_rate_limit: str = "100/60 seconds"  # per client address, without a valid key
    rate_limit_storage: str = "memory://"
    max_body_bytes: int = 256 * 1024
    sweep_minimum: str = "1.00"  # virtual wallets sweep USDC/USDT above this into c0
    snapshot_interval: int = 3600  # seconds between snapshots of holders' c0 (yield)
    deposit_confirmations: int | None = None  # None: 0 on a chain that can mint, 12 elsewhere

    @classmethod
    def load(
        cls,
        overrides: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        toml_file: str | Path | None = None,
    ) -> Settings:
        """Defaults, then the TOML file, then the environment, then `overrides` (non-None)."""
        settings = cls()
        if toml_file is not None:
            settings = settings.merged(tomllib.loads(Path(toml_file).read_text()))
        settings = settings.merged(_from_env(os.environ if env is None else env))
        return settings.merged({k: v for k, v in (overrides or {}).items() if v is not None})

    def merged(self, values: Mapping[str, Any]) -> Settings:
        known = {f.name: f.type for f in fields(self)}
        unknown = set(values) - set(known)
        if unknown:
            raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
        cleaned: dict[str, Any] = {}
        for name, value in values.items():
            if name == "chains":
                value = _parse_chains(value)
            elif name == "allow_private_webhook_urls":
                value = _parse_bool(value)
            elif name in (
                "max_body_bytes", "primary_chain", "snapshot_interval", "deposit_confirmations"
            ):  # fmt: skip
                value = int(value)
            elif name == "sweep_minimum":
                value = str(Decimal(str(value)))
            cleaned[name] = value
        return replace(self, **cleaned)


def _from_env(env: Mapping[str, str]) -> dict[str, str]:
    names = {f.name for f in fields(Settings)}
    found = {}
    for name in names:
        value = env.get(ENV_PREFIX + name.upper())
        if value:
            found[name] = value
    return found


def _parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def _parse_chains(value: object) -> dict[int, Any]:
    """Text such as ``31337=devnet://,1=https://rpc.example``, or a mapping of chain id to
    a URL or a table ``{url, addresses, tokens}`` (see `ChainConfig.parse`)."""
    if isinstance(value, str):
        pairs = (item.split("=", 1) for item in value.split(",") if item.strip())
        return {int(chain_id): url.strip() for chain_id, url in pairs}
    if isinstance(value, Mapping):
        return {int(chain_id): spec for chain_id, spec in value.items()}
    raise ValueError("chains must be a mapping of chain id to backend URL")


def write_chain(toml_file: str | Path, chain_id: int, spec: Mapping[str, Any]) -> None:
    """Set ``[chains.<chain_id>]`` in a TOML settings file, keeping everything else."""
    path = Path(toml_file)
    data = tomllib.loads(path.read_text()) if path.exists() else {}
    data.setdefault("chains", {})[str(chain_id)] = dict(spec)
    path.write_text(dump_toml(data))


def dump_toml(data: Mapping[str, Any], prefix: str = "") -> str:
    """TOML for settings: strings, numbers, booleans, lists of those, nested tables."""
    scalars = [f"{key} = {_toml_value(v)}" for key, v in data.items() if not isinstance(v, Mapping)]
    text = "\n".join(scalars) + ("\n" if scalars else "")
    for key, value in data.items():
        if isinstance(value, Mapping):
            name = f"{prefix}.{key}" if prefix else str(key)
            inner = dump_toml(value, name)
            has_scalars = any(not isinstance(v, Mapping) for v in value.values())
            text += f"\n[{name}]\n{inner}" if has_scalars or not value else inner
    return text


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")
