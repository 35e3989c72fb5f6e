"""The policy of the organization: read it, replace it. The transfers apply it at their
claim (`treasury._records.policy`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._infra import audit
from .._infra.group import Group
from .._infra.validation import parse_input
from .._records import policy
from ..errors import ValidationError
from . import store
from .models import Policy, SetPolicy


class Policies(Group):
    name = "policy"

    def get(self) -> Policy:
        """The policy in force (every control off until one is set)."""
        with self._scope.runtime.storage.read() as tx:
            return Policy.of(policy.read(tx, self._scope.org_id))

    def put(self, body: SetPolicy | Mapping[str, Any] | None = None, **fields: Any) -> Policy:
        """Replace the whole policy: `approval_threshold`, `daily_limit` (dollars, None:
        off), `destinations` (``"any"`` or ``"known"``), `destination_cooldown_hours` and
        `gas_station` (a managed wallet's id, or None), every one given (a field left out
        is a 400 naming it)."""
        request = parse_input(SetPolicy, body, fields)
        rules = request.rules()
        with self._scope.runtime.storage.transaction() as tx:
            station = rules.gas_station
            if station is not None and not policy.managed_wallet(tx, self._scope.org_id, station):
                raise ValidationError.field(
                    "body", "gasStation", "must be the id of a managed wallet of the organization"
                )
            store.write(tx, self._scope.org_id, rules, self._scope.runtime.now_text())
            audit.record(tx)
        return Policy.of(rules)
