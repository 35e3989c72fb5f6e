"""What the layers below a transfer's request refuse, and the request's field each
refusal is about.

The chain helpers, the wallet's reservation and the facility know amounts and
addresses, not the request they came from: they raise a refusal that names no field
(`AmountRefused`, `GasShort`, `DestinationRefused`). The operation that read the
request (`Transfers.create`, each item of a payout run) answers it as the 400 naming
the field (`request_error`), as it always did.
"""

from __future__ import annotations

from .._infra.chains import DestinationRefused
from ..errors import TreasuryError, ValidationError
from ..money import AmountRefused


class GasShort(ValidationError):
    """The source wallet, with the organization's gas station if any, cannot pay a
    transfer's gas: a 400 that names no request field (the operation names its
    ``source``)."""


#: What the layers below the request refuse without naming a field (they do not know the
#: request), and the field of `CreateTransfer` each refusal is about (`request_error`).
REFUSED_AT: tuple[tuple[type[ValidationError], str], ...] = (
    (AmountRefused, "amount"),
    (GasShort, "source"),
    (DestinationRefused, "destination.to_address"),
)
REFUSALS = tuple(kind for kind, _ in REFUSED_AT)


def request_error(error: TreasuryError) -> TreasuryError:
    """A refusal of a layer below the request (an amount a wallet cannot cover, a
    destination value must not reach) as the 400 naming the request's field it is
    about, as `create` and each item of a payout run answer it; any other error as is."""
    for kind, field in REFUSED_AT:
        if isinstance(error, kind):
            return error.at("body", field)
    return error
