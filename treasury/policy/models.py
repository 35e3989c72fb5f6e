"""The policy as the API takes and shows it (DESIGN §3 Controls): amounts in dollars."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from .._infra.models import Body, DecimalText, Resource
from .._records.policy import Destinations, Rules
from ..money import to_raw


def _dollars(value: str) -> str:
    """A positive amount of at most 6 decimal places, as its plain decimal string."""
    to_raw(value, 6)
    return format(Decimal(value).normalize(), "f")


Dollars = Annotated[DecimalText, StringConstraints(max_length=100), AfterValidator(_dollars)]


#: The longest cooldown a policy takes: ten years, in hours.
MAX_COOLDOWN_HOURS = 87_600


class SetPolicy(Body):
    """The whole policy (`PUT` replaces it): every field is given, null turning a control
    off; a field left out is a 400 naming it, never "off"."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    approval_threshold: Dollars | None
    daily_limit: Dollars | None
    destinations: Destinations
    destination_cooldown_hours: Annotated[int, Field(ge=0, le=MAX_COOLDOWN_HOURS)]
    #: The id of a managed wallet of the organization, or null.
    gas_station: Annotated[int, Field(ge=1, le=2**63 - 1)] | None

    def rules(self) -> Rules:
        return Rules(
            approval_threshold=_or_none(self.approval_threshold),
            daily_limit=_or_none(self.daily_limit),
            destinations=self.destinations,
            destination_cooldown_hours=self.destination_cooldown_hours,
            gas_station=self.gas_station,
        )


class Policy(Resource):
    """`{"approvalThreshold": str|null, "dailyLimit": str|null, "destinations": "any"|"known",
    "destinationCooldownHours": int, "gasStation": int|null}`."""

    approval_threshold: str | None
    daily_limit: str | None
    destinations: Destinations
    destination_cooldown_hours: int
    gas_station: int | None

    @classmethod
    def of(cls, rules: Rules) -> Policy:
        return cls(
            approval_threshold=_shown(rules.approval_threshold),
            daily_limit=_shown(rules.daily_limit),
            destinations=rules.destinations,
            destination_cooldown_hours=rules.destination_cooldown_hours,
            gas_station=rules.gas_station,
        )


def _or_none(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text)


def _shown(value: Decimal | None) -> str | None:
    return None if value is None else format(value.normalize(), "f")
