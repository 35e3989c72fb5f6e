"""The policy of the organization: read it, replace it. The transfers apply it at their
claim (`treasury._records.policy`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._infra import audit
from .._infra.group import Group
from .._infra.validation import parse_input
from .._records import policy
from .models import Policy, SetPolicy


class Policies(Group):
    name = "policy"

    def get(self) -> Policy:
        """The policy in force (every control off until one is set)."""
        with self._scope.runtime.storage.read() as tx:
            return Policy.of(policy.read(tx, self._scope.org_id))

    def put(self, body: SetPolicy | Mapping[str, Any] | None = None, **fields: Any) -> Policy:
        """Replace the policy: `approval_threshold`, `daily_limit` (dollars, None: off)
        and `destinations` (``"any"`` or ``"known"``); a field left out is off."""
        request = parse_input(SetPolicy, body, fields)
        rules = request.rules()
        with self._scope.runtime.storage.transaction() as tx:
            policy.write(tx, self._scope.org_id, rules, self._scope.runtime.now_text())
            audit.record(tx)
        return Policy.of(rules)
