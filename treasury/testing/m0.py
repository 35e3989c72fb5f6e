"""M0's real swap facility and a JMI extension as c0, deployed on a running anvil.

::

    with start_anvil() as node:
        m0 = deploy_m0(node.url)                     # M, registrar, facility, c0, USDC
        m0.mint_usdc(user, 1_000_000)                # raw units, 6 decimals
        m0.seed_m_backing(5_000_000)                 # lets c0 be exchanged back to USDC

The contracts come from the fixture ``tests/fixtures/m0/`` of a source checkout (its
README names the repositories and commits; it is not shipped in the package, one of its
licences being BUSL-1.1): `SwapFacility` and `JMIExtension` each behind OpenZeppelin's
`TransparentUpgradeableProxy` and initialised through it, as M0's deploy scripts do;
M0's `MToken`, whose minter gateway is the deployer's address so that it mints M
directly; `TestRegistrar`, a test double of the TTG registrar. USDC is our
`TestStablecoin`. Transactions are sent from anvil's unlocked dev accounts; the first
(`ADMIN`) holds every role: facility admin and pauser, c0's admin, asset cap manager,
freeze manager, pauser and yield recipient, the M swapper role and the USDC mint.

The paths the facility offers, in raw units (c0, M and USDC all have 6 decimals):

* deposit: ``usdc.approve(facility, a)``, ``facility.swap(usdc, c0, a, recipient)``
  (an allowed asset into a JMI extension; ``a`` must fit under c0's USDC cap);
* ``facility.swap(c0, usdc, a, recipient)`` reverts ``InvalidSwapPath(c0, usdc)``;
* withdraw: ``c0.approve(facility, a)``,
  ``facility.replaceAssetWithM(usdc, c0, c0, a, recipient)``: the facility unwraps ``a``
  c0 to M, and c0 takes that M in place of ``a`` of its USDC, which goes to `recipient`.
  The unwrap needs c0 to hold at least ``a`` M beyond its USDC (`InsufficientMBacking`
  otherwise), which an M holder provides with ``swapInM`` (`seed_m_backing`); the
  exchange gives that M back, so the backing is a float, not spent.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from eth_abi.abi import encode
from eth_utils.crypto import keccak

__all__ = [
    "ADMIN",
    "DEFAULT_ARTIFACTS",
    "M0Deployment",
    "deploy_m0",
    "error_data",
    "m0_artifacts",
]

#: The fixture's artifacts in a source checkout (``npm run compile:m0`` rebuilds them).
DEFAULT_ARTIFACTS = Path(__file__).resolve().parents[2] / "tests/fixtures/m0/artifacts.json"
#: Anvil's first dev account, which deploys and holds every role.
ADMIN = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
#: c0's cap on the USDC it holds, raw (10^12 whole USDC).
DEFAULT_USDC_CAP = 10**18

_NAME, _SYMBOL = "c0 Yield Token", "c0"


@functools.cache
def m0_artifacts(path: Path = DEFAULT_ARTIFACTS) -> dict[str, dict[str, Any]]:
    """ABI and creation bytecode of each fixture contract, with our `TestStablecoin`."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the M0 fixture is in a source checkout")
    contracts: dict[str, dict[str, Any]] = json.loads(path.read_text("utf-8"))["contracts"]
    ours = json.loads(files("treasury.contracts").joinpath("artifacts.json").read_text("utf-8"))
    return {**contracts, "TestStablecoin": ours["contracts"]["TestStablecoin"]}


def error_data(abi: Sequence[Mapping[str, Any]], name: str, *args: Any) -> str:
    """The revert data of custom error `name` of `abi` with `args`, ``0x``-prefixed."""
    (error,) = (e for e in abi if e["type"] == "error" and e["name"] == name)
    types = [i["type"] for i in error["inputs"]]
    selector = keccak(text=f"{name}({','.join(types)})")[:4]
    return "0x" + (selector + encode(types, list(args))).hex()


@dataclass(frozen=True)
class M0Deployment:
    """Addresses of one `deploy_m0`, and its contracts as web3 objects."""

    w3: Any
    m_token: str
    registrar: str
    swap_facility: str
    c0: str
    usdc: str

    @property
    def facility(self) -> Any:
        """The swap facility (its proxy) with `SwapFacility`'s ABI."""
        return self._contract("SwapFacility", self.swap_facility)

    @property
    def c0_token(self) -> Any:
        """c0 (its proxy) with `JMIExtension`'s ABI."""
        return self._contract("JMIExtension", self.c0)

    @property
    def usdc_token(self) -> Any:
        return self._contract("TestStablecoin", self.usdc)

    @property
    def m(self) -> Any:
        return self._contract("MToken", self.m_token)

    def transact(self, call: Any, sender: str = ADMIN) -> Any:
        """Send a contract function call from `sender` (unlocked on anvil); its receipt
        once mined, or `RuntimeError` if it reverted."""
        return _transact(self.w3, call, sender)

    def mint_usdc(self, to: str, raw: int) -> None:
        self.transact(self.usdc_token.functions.mint(to, raw))

    def seed_m_backing(self, raw: int, holder: str = ADMIN) -> None:
        """Mint `raw` M to `holder` (an M swapper), who swaps it into c0 (`swapInM`): c0 then
        holds `raw` M beyond its USDC, the float that withdrawals unwrap through."""
        self.transact(self.m.functions.mint(holder, raw))
        self.transact(self.m.functions.approve(self.swap_facility, raw), holder)
        self.transact(self.facility.functions.swapInM(self.c0, raw, holder), holder)

    def _contract(self, name: str, address: str) -> Any:
        return self.w3.eth.contract(address=address, abi=m0_artifacts()[name]["abi"])


def deploy_m0(url: str, *, usdc_cap: int = DEFAULT_USDC_CAP) -> M0Deployment:
    """Deploy the fixture on the anvil at `url` and wire it (see the module's docstring):
    c0 (a `JMIExtension` with 6 decimals) on the registrar's earners list, so the facility
    approves it; USDC allowed into c0 up to `usdc_cap` raw; `ADMIN` an M swapper."""
    from web3 import HTTPProvider, Web3

    w3 = Web3(HTTPProvider(url))
    registrar = _deploy(w3, "TestRegistrar")
    m_token = _deploy(w3, "MToken", registrar, ADMIN)  # ADMIN is the minter gateway
    facility_logic = _deploy(w3, "SwapFacility", m_token, registrar)
    facility = _proxy(w3, facility_logic, "SwapFacility", "initialize", ADMIN, ADMIN)
    # initialize(name, symbol, yieldRecipient, admin, assetCapManager, freezeManager,
    #            pauser, yieldRecipientManager)
    c0_logic = _deploy(w3, "JMIExtension", m_token, facility)
    c0 = _proxy(w3, c0_logic, "JMIExtension", "initialize", _NAME, _SYMBOL, *[ADMIN] * 6)
    usdc = _deploy(w3, "TestStablecoin", "USD Coin", "USDC")
    m0 = M0Deployment(w3, m_token, registrar, facility, c0, usdc)
    earners = m0.facility.functions.EARNERS_LIST_NAME().call()
    m0.transact(m0._contract("TestRegistrar", registrar).functions.addToList(earners, c0))
    swapper = m0.facility.functions.M_SWAPPER_ROLE().call()
    m0.transact(m0.facility.functions.grantRole(swapper, ADMIN))
    m0.transact(m0.c0_token.functions.setAssetCap(usdc, usdc_cap))
    return m0


def _deploy(w3: Any, name: str, *args: Any) -> str:
    artifact = m0_artifacts()[name]
    factory = w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    address: str = _transact(w3, factory.constructor(*args), ADMIN)["contractAddress"]
    return address


def _proxy(w3: Any, implementation: str, name: str, initializer: str, *args: Any) -> str:
    """A `TransparentUpgradeableProxy` of `implementation` (its `ProxyAdmin` owned by
    `ADMIN`), initialised by calling `initializer(*args)` of `name` through it."""
    abi = m0_artifacts()[name]["abi"]
    data = w3.eth.contract(abi=abi).encode_abi(initializer, args=list(args))
    return _deploy(w3, "TransparentUpgradeableProxy", implementation, ADMIN, data)


def _transact(w3: Any, call: Any, sender: str) -> Any:
    tx_hash = call.transact({"from": sender})
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=60, poll_latency=0.05)
    if receipt["status"] != 1:
        raise RuntimeError(f"transaction {tx_hash.hex()} reverted")
    return receipt
