"""Isolation between organizations, checked over random sequences of operations."""

from __future__ import annotations

import secrets
import tempfile
from contextlib import ExitStack
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from treasury import Conflict, NotFound, Treasury

from .conftest import MASTER_KEY, fresh_storage, make_tenant
from .helpers import BANK_ACCOUNT

orgs = st.sampled_from([0, 1])
labels = st.text(alphabet="abcXYZ 12", min_size=1, max_size=8)
# A small pool of addresses makes both organizations pick the same ones often.
addresses = st.sampled_from(["0x" + c * 40 for c in "123456"])


class TwoOrganizations(RuleBasedStateMachine):
    """Two organizations act at random; each must only ever see its own data."""

    def __init__(self) -> None:
        super().__init__()
        self.stack = ExitStack()  # a store for each example
        folder = Path(self.stack.enter_context(tempfile.TemporaryDirectory()))
        self.t = Treasury.open(
            self.stack.enter_context(fresh_storage(folder / "t.db")),
            master_key=MASTER_KEY,
            allow_private_webhook_urls=True,
        )
        self.orgs = [make_tenant(self.t, name).org for name in ("Acme", "Globex")]
        self.wallets: list[dict[str, str]] = [{}, {}]  # address -> label
        self.recipients: list[dict[str, str]] = [{}, {}]
        self.webhooks: list[set[int]] = [set(), set()]
        self.banks: list[dict[str, None]] = [{}, {}]  # ordered: uuids are random

    def teardown(self) -> None:
        self.t.close()
        self.stack.close()

    @rule(who=orgs, label=labels, key=st.sampled_from(["k1", "k2", None]))
    def create_wallet(self, who, label, key):
        try:
            wallet = self.orgs[who].wallets.create(label=label, idempotency_key=key)
        except Exception as error:  # same key, other label: 422
            assert getattr(error, "status", None) == 422
            return
        if not wallet.replayed:
            self.wallets[who][wallet.address] = label

    @rule(who=orgs, address=addresses, label=labels)
    def track_wallet(self, who, address, label):
        try:
            self.orgs[who].wallets.track(address=address, label=label)
        except Conflict:
            assert address in self.wallets[who]
            return
        assert address not in self.wallets[who]
        self.wallets[who][address] = label

    @precondition(lambda self: any(self.wallets))
    @rule(who=orgs, data=st.data())
    def delete_someones_wallet(self, who, data):
        owner = data.draw(st.sampled_from([i for i in (0, 1) if self.wallets[i]]))
        address = data.draw(st.sampled_from(list(self.wallets[owner])))  # creation order
        if owner == who or address in self.wallets[who]:
            self.orgs[who].wallets.delete(address)
            del self.wallets[who][address]
        else:
            with pytest.raises(NotFound):
                self.orgs[who].wallets.delete(address)

    @rule(who=orgs, address=addresses, label=labels)
    def create_recipient(self, who, address, label):
        try:
            self.orgs[who].recipients.create(
                address=address, label=label, idempotency_key=secrets.token_hex(4)
            )
        except Conflict:
            assert address in self.recipients[who]
            return
        self.recipients[who][address] = label

    @rule(who=orgs)
    def create_webhook(self, who):
        hook = self.orgs[who].webhooks.create(
            url="http://127.0.0.1:1/h", events=["transaction.failed"]
        )
        self.webhooks[who].add(hook.id)

    @precondition(lambda self: any(self.webhooks))
    @rule(who=orgs, data=st.data())
    def delete_someones_webhook(self, who, data):
        owner = data.draw(st.sampled_from([i for i in (0, 1) if self.webhooks[i]]))
        hook = data.draw(st.sampled_from(sorted(self.webhooks[owner])))
        if hook in self.webhooks[who]:  # ids are numbered per organization
            self.orgs[who].webhooks.delete(hook)
            self.webhooks[who].discard(hook)
        else:
            with pytest.raises(NotFound):
                self.orgs[who].webhooks.delete(hook)

    @rule(who=orgs)
    def create_bank_account(self, who):
        account = self.orgs[who].bank_accounts.create(BANK_ACCOUNT)
        self.banks[who][account.provider_external_account_id] = None

    @precondition(lambda self: any(self.banks))
    @rule(who=orgs, data=st.data())
    def read_someones_bank_account(self, who, data):
        owner = data.draw(st.sampled_from([i for i in (0, 1) if self.banks[i]]))
        external_id = data.draw(st.sampled_from(list(self.banks[owner])))
        if owner == who:
            assert self.orgs[who].bank_accounts.get(external_id).id == external_id
        else:
            with pytest.raises(NotFound):
                self.orgs[who].bank_accounts.get(external_id)

    @invariant()
    def each_sees_exactly_its_own(self):
        for who, org in enumerate(self.orgs):
            assert {w.address: w.label for w in org.wallets.list().data} == self.wallets[who]
            assert {r.address: r.label for r in org.recipients.list().data} == self.recipients[who]
            assert {h.id for h in org.webhooks.list().data} == self.webhooks[who]
            assert [b.id for b in org.bank_accounts.list().data] == list(self.banks[who])


TwoOrganizations.TestCase.settings = settings(
    max_examples=30, stateful_step_count=25, deadline=None
)
test_two_organizations = TwoOrganizations.TestCase


def test_over_http_another_organizations_resources_are_404(treasury, base_url, tenant):
    import httpx

    other = make_tenant(treasury, "Globex")
    wallet = other.org.wallets.create(label="Theirs")
    hook = other.org.webhooks.create(url="http://127.0.0.1:1/h", events=["transaction.failed"])
    with httpx.Client(base_url=base_url, headers={"x-api-key": tenant.secret}) as mine:
        assert mine.delete(f"/v1/wallets/{wallet.address}").status_code == 404
        assert mine.delete(f"/v1/webhooks/{hook.id}").status_code == 404
        assert mine.get("/v1/wallets").json() == {"data": [], "count": 0}
        assert mine.get("/v1/webhooks").json() == {"data": [], "count": 0}
    assert other.org.wallets.list().count == 1 and other.org.webhooks.list().count == 1
