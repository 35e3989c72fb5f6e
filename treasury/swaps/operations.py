"""Deposit into and withdraw from `c0`: the approval and swap steps the caller signs.

The swap steps are the facility calls of the chain's exit path (`treasury.evm.facility`):
a withdrawal on M0's facility is one or more ``replaceAssetWithM`` steps (type ``swap``),
each within c0's M float, after one approval of the whole amount."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from .._infra.group import Group
from .._infra.validation import parse_input
from ..errors import UpstreamError
from ..evm.abi import ALLOWANCE, APPROVE
from ..evm.facility import MAX_SPLIT, exchanges
from ..evm.multicall import multicall
from ..money import Amount, AmountRefused, to_units
from .models import Prepared, PrepareSummary, PrepareSwap, Step, StepTransaction

Direction = Literal["deposit", "withdraw"]


class Swaps(Group):
    name = "swaps"

    def prepare_deposit(
        self, chain_id: int, body: PrepareSwap | Mapping[str, Any] | None = None, **fields: Any
    ) -> Prepared:
        """Steps to swap USDC/USDT into c0: [reset-approval (USDT)], [approval], swap."""
        return self._prepare(chain_id, "deposit", parse_input(PrepareSwap, body, fields))

    def prepare_withdraw(
        self, chain_id: int, body: PrepareSwap | Mapping[str, Any] | None = None, **fields: Any
    ) -> Prepared:
        """Steps to swap c0 back into USDC/USDT: [approval], swap."""
        return self._prepare(chain_id, "withdraw", parse_input(PrepareSwap, body, fields))

    def _prepare(self, chain_id: int, direction: Direction, request: PrepareSwap) -> Prepared:
        try:
            return self._steps(chain_id, direction, request)
        except AmountRefused as refused:  # more decimals than a token has, more than c0 gives
            raise refused.at("body", "amount") from None

    def _steps(self, chain_id: int, direction: Direction, request: PrepareSwap) -> Prepared:
        chain = self._scope.runtime.chains.get(chain_id)
        stable, c0 = chain.address(request.token), chain.address("c0")
        facility = chain.address("swap_facility")
        token_in, token_out = (stable, c0) if direction == "deposit" else (c0, stable)
        owner = request.from_
        tokens = self._scope.runtime.chains
        tokens.metadata(chain_id, [token_in, token_out])  # both in one read, once per chain
        places = tokens.decimals(chain_id, token_in)
        symbol_in = request.token if direction == "deposit" else "c0"
        symbol_out = "c0" if direction == "deposit" else request.token
        amount = Amount.of(request.amount, symbol_in)
        # no finer than either token: the swap would drop what the other cannot hold
        amount.to_raw(min(places, tokens.decimals(chain_id, token_out)))
        raw = amount.to_raw(places)
        (allowance,) = multicall(chain, [(token_in, ALLOWANCE, (owner, facility))])
        if allowance is None:
            raise UpstreamError(f"token {token_in} did not answer its allowance")
        current = int(str(allowance[0]))
        steps: list[Step] = []
        if symbol_in == "USDT" and 0 < current < raw:
            steps.append(
                _step(
                    "reset-approval",
                    f"Reset the USDT allowance of the swap facility from {to_units(current, places)} USDT"
                    " to 0",
                    token_in,
                    APPROVE.encode(facility, 0),
                )
            )
        if current < raw:
            steps.append(
                _step(
                    "approval",
                    f"Approve the swap facility to spend {request.amount} {symbol_in}",
                    token_in,
                    APPROVE.encode(facility, raw),
                )
            )
        recipient = request.recipient or owner
        calls = exchanges(
            chain, token_in, token_out, raw, recipient, decimals=places, most=MAX_SPLIT
        )
        for call in calls:
            part = request.amount if len(calls) == 1 else to_units(call.raw, places)
            description = f"Swap {part} {symbol_in} for {symbol_out} to {recipient}"
            if call.method != "swap":
                description += f" ({call.method} on the swap facility)"
            steps.append(_step("swap", description, facility, call.data))
        summary = PrepareSummary(
            token_in=token_in, token_out=token_out, amount_in=request.amount, amount_in_raw=str(raw)
        )
        return Prepared(steps=steps, summary=summary)


def _step(kind: Any, description: str, to: str, data: bytes) -> Step:
    return Step(
        type=kind,
        description=description,
        transaction=StepTransaction(to=to, data="0x" + data.hex(), value="0"),
    )
