"""`org.ledger`, `org.statements`, `org.reconciliation`: the books of an organization.

Balances and statements are read from the journal's running sums: a balance at a time
is one index seek, a statement's opening and closing two, and its entries a range of one
index, whatever the journal's length. Reconciliation runs on demand here (admin) and
each pass as a job (`reconcile.reconcile`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

from .._infra import audit
from .._infra.clock import to_text
from .._infra.group import Group
from .._infra.models import Address, ListOf, Page, RowId
from .._infra.pagination import Cursors
from .._infra.validation import parse_input, parse_value
from .._records import breaks, journal, wallets
from .._records.transfers import reservations
from ..backends.storage.base import Row, Transaction
from ..errors import Conflict, NotFound, ValidationError
from . import provider, reconcile, store
from .models import (
    Break,
    BreaksQuery,
    LedgerBalance,
    LedgerBalances,
    LedgerQuery,
    Reconciliation,
    ReconciliationRun,
    ResolveBreak,
    RunReconciliation,
    Statement,
    StatementEntry,
    StatementLine,
    StatementQuery,
)

#: The most entries a statement answers as JSON (the CSV streams any number).
MAX_ENTRIES = 10_000


class Ledger(Group):
    name = "ledger"

    def balances(
        self, address: str, query: LedgerQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> LedgerBalances:
        """A wallet's balances from the journal at `at` (default now), per chain and
        token: `posted`, `pending` (outgoing reservations not posted yet), `available`."""
        address = str(parse_value(Address, address, "path", "address"))
        query = parse_input(LedgerQuery, query, params, "query")
        runtime, org_id = self._scope.runtime, self._scope.org_id
        moment = query.at or runtime.now()
        at = to_text(moment)
        account = journal.wallet(address)
        shown = []
        with runtime.storage.read() as tx:
            _require_wallet(tx, org_id, address)
            held = reservations(tx, org_id, address, at)
            done = store.moved_out(tx, org_id, [r.transfer_id for r in held], account, at)
            for chain_id in runtime.chains.ids():
                chain = runtime.chains.get(chain_id)
                pending: dict[str, int] = defaultdict(int)
                for reserved in held:
                    symbol = journal.symbol_of(chain.addresses, reserved.token)
                    if (
                        reserved.chain_id == chain_id
                        and symbol
                        and reserved.transfer_id not in done
                    ):
                        pending[symbol] += reserved.raw
                for token in journal.TOKENS:
                    if token not in chain.addresses:
                        continue
                    posted = store.balance_before(tx, org_id, account, chain_id, token, at)
                    places = runtime.chains.decimals(chain_id, token)
                    shown.append(
                        LedgerBalance(
                            chain_id=chain_id,
                            token=token,  # type: ignore[arg-type]
                            posted=journal.signed_units(posted, places),
                            pending=journal.signed_units(pending[token], places),
                            available=journal.signed_units(posted - pending[token], places),
                        )
                    )
        return LedgerBalances(wallet=address, at=moment, balances=shown)


class Statements(Group):
    name = "statements"

    def get(
        self, query: StatementQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> Statement:
        """A wallet's entries in one token between two times (`from_` included, `to`
        excluded), oldest first, each with the balance after it: opening + Σ amounts =
        closing. At most `MAX_ENTRIES` (400 beyond: a narrower window, or the CSV)."""
        query = parse_input(StatementQuery, query, params, "query")
        chain_id, places, start, end = self._window(query)
        runtime, org_id = self._scope.runtime, self._scope.org_id
        account = journal.wallet(query.wallet)
        with runtime.storage.read() as tx:
            _require_wallet(tx, org_id, query.wallet)
            if (
                store.count_entries(tx, org_id, account, chain_id, query.token, start, end)
                > MAX_ENTRIES
            ):
                raise ValidationError.field(
                    "query",
                    "from",
                    f"the window holds more than {MAX_ENTRIES} entries: narrow it, or ask for"
                    " CSV (Accept: text/csv), which streams any number",
                )
            opening = store.balance_before(tx, org_id, account, chain_id, query.token, start)
            closing = store.balance_before(tx, org_id, account, chain_id, query.token, end)
            rows = [
                row
                for chunk in store.entries(tx, org_id, account, chain_id, query.token, start, end)
                for row in chunk
            ]
        return Statement.model_validate(
            {
                "wallet": query.wallet,
                "chain_id": chain_id,
                "token": query.token,
                "from": query.from_,
                "to": query.to or runtime.now(),
                "opening": journal.signed_units(opening, places),
                "closing": journal.signed_units(closing, places),
                "entries": [_entry(row, places) for row in rows],
            }
        )

    def csv(
        self, query: StatementQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> ListOf[StatementLine]:
        """The statement as the rows of its CSV (``Accept: text/csv``): an ``opening``
        row at `from`, one row per entry, a ``closing`` row at `to`."""
        return ListOf[StatementLine](
            data=[line for chunk in self.csv_chunks(query, **params) for line in chunk]
        )

    def csv_chunks(
        self, query: StatementQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> Iterator[list[StatementLine]]:
        """`csv`'s rows a few hundred at a time, read as they are consumed (how HTTP
        streams the CSV); it holds a read snapshot of this thread until exhausted."""
        query = parse_input(StatementQuery, query, params, "query")
        chain_id, places, start, end = self._window(query)
        runtime, org_id = self._scope.runtime, self._scope.org_id
        account = journal.wallet(query.wallet)
        with runtime.storage.read() as tx:
            _require_wallet(tx, org_id, query.wallet)
            opening = store.balance_before(tx, org_id, account, chain_id, query.token, start)
            closing = store.balance_before(tx, org_id, account, chain_id, query.token, end)
            yield [
                StatementLine(
                    at=query.from_,
                    amount=None,
                    balance=journal.signed_units(opening, places),
                    kind="opening",
                )
            ]
            for chunk in store.entries(tx, org_id, account, chain_id, query.token, start, end):
                yield [StatementLine.model_validate(_entry(row, places).to_json()) for row in chunk]
            yield [
                StatementLine(
                    at=query.to or runtime.now(),
                    amount=None,
                    balance=journal.signed_units(closing, places),
                    kind="closing",
                )
            ]

    def _window(self, query: StatementQuery) -> tuple[int, int, str, str]:
        """The chain (its primary by default), the token's decimals, and the window's
        bounds as stored times."""
        chains = self._scope.runtime.chains
        chain_id = chains.primary if query.chain_id is None else chains.require(query.chain_id)
        if query.token not in chains.get(chain_id).addresses:
            raise ValidationError.field("query", "token", f"chain {chain_id} has no {query.token}")
        start = store.BEGINNING if query.from_ is None else to_text(query.from_)
        end = to_text(query.to or self._scope.runtime.now())
        if end <= start:
            raise ValidationError.field("query", "to", "must be after from")
        return chain_id, chains.decimals(chain_id, query.token), start, end


class ReconciliationGroup(Group):
    name = "reconciliation"

    def run(
        self, body: RunReconciliation | Mapping[str, Any] | None = None, **fields: Any
    ) -> ReconciliationRun:
        """Reconcile the organization's wallets on a chain (default the primary chain) now,
        at one height: 409 while the deposit detector has not scanned the chain."""
        request = parse_input(RunReconciliation, body, fields)
        chains = self._scope.runtime.chains
        chain_id = chains.primary if request.chain_id is None else chains.require(request.chain_id)
        (outcome,) = reconcile.run(self._scope.runtime, chain_id, self._scope.org_id)
        return ReconciliationRun(
            id=outcome.id,
            at=outcome.at,  # type: ignore[arg-type]
            chain_id=chain_id,
            block_number=outcome.block_number,
            pairs=outcome.pairs,
            tied_out=outcome.tied,
            pairs_tied_out=outcome.tied_out,
            in_flight=outcome.in_flight,
            breaks_open=outcome.breaks_open,
        )

    def get(self) -> Reconciliation:
        """The last run and the open breaks."""
        org_id = self._scope.org_id
        with self._scope.runtime.storage.read() as tx:
            last = store.last_run(tx, org_id)
            opened = store.open_breaks(tx, org_id)
        return Reconciliation(
            last_run=None if last is None else _run(last),
            open=[Break.model_validate(breaks.shown(row)) for row in opened],
        )

    def breaks(
        self, query: BreaksQuery | Mapping[str, Any] | None = None, **params: Any
    ) -> Page[Break]:
        """The breaks, newest first (`status`: only open or resolved ones); pass
        `next_cursor` back as `cursor` for the next page."""
        query = parse_input(BreaksQuery, query, params, "query")
        org_id = self._scope.org_id
        cursors = Cursors(self._scope.runtime.secrets.derive("cursor:breaks"), "breaks")
        after = None if query.cursor is None else int(cursors.decode(org_id, query.cursor)[0])
        with self._scope.runtime.storage.read() as tx:
            rows, last = store.breaks_page(tx, org_id, query.status, after, query.limit)
        following = None if last is None else cursors.encode(org_id, (last, 0))
        return Page[Break](
            data=[Break.model_validate(breaks.shown(row)) for row in rows], next_cursor=following
        )

    def resolve(
        self, break_id: int, body: ResolveBreak | Mapping[str, Any] | None = None, **fields: Any
    ) -> Break:
        """Accept an open break's difference (admin): a correction group books it to
        ``external`` at the break's block, and who accepted it and why (`note`) are kept
        with it and in the audit log. 409 when it is resolved already."""
        number = int(parse_value(RowId, break_id, "path", "id"))
        request = parse_input(ResolveBreak, body, fields)
        scope = self._scope
        runtime, org_id = scope.runtime, scope.org_id
        by = (
            {"admin": True}
            if scope.api_key_id is None
            else {"apiKeyId": scope.api_key_id, "userId": scope.user_id}
        )
        now = runtime.now_text()
        with runtime.storage.transaction() as tx:
            tx.lock(f"break:{org_id}:{number}")
            row = breaks.by_number(tx, org_id, number)
            if row is None:
                raise NotFound(f"No break {number}")
            if row["status"] != breaks.OPEN:
                raise Conflict(f"break {number} is resolved already")
            if row["kind"] == reconcile.MISMATCH:
                postings = provider.correction(runtime, tx, row)
            else:
                difference = int(row["difference"])
                postings = [
                    (journal.wallet(str(row["wallet"])), str(row["token"]), difference),
                    (journal.EXTERNAL, str(row["token"]), -difference),
                ]
                store.accepted(
                    tx,
                    org_id,
                    int(row["chain_id"]),
                    str(row["wallet"]),
                    str(row["token"]),
                    int(row["block_number"]),
                )
            journal.post(
                tx,
                org_id=org_id,
                group_id=f"correction:{number}",
                at=now,
                chain_id=int(row["chain_id"]),
                kind="correction",
                postings=postings,
                block_number=int(row["block_number"]),
            )
            done = breaks.resolve(tx, row, now, note=request.note, by=by)
            assert done is not None
            result = Break.model_validate(breaks.shown(done))
            audit.record(tx, result)
        return result


def _require_wallet(tx: Transaction, org_id: str, address: str) -> None:
    """404 unless `address` is a wallet of the organization (any type, virtual included)."""
    if wallets.by_address(tx, org_id, address) is None and not wallets.held(tx, org_id, [address]):
        raise NotFound(f"No wallet {address}")


def _entry(row: Row, places: int) -> StatementEntry:
    return StatementEntry(
        at=row["at"],
        amount=journal.signed_units(int(row["amount"]), places),
        balance=journal.signed_units(int(row["balance"]), places),
        transfer_id=row["transfer_id"],
        deposit_id=row["deposit_id"],
        transaction_hash=row["transaction_hash"],
        kind=str(row["kind"]),
    )


def _run(row: Row) -> ReconciliationRun:
    return ReconciliationRun(
        id=int(row["number"]),
        at=row["at"],
        chain_id=int(row["chain_id"]),
        block_number=int(row["block_number"]),
        pairs=int(row["pairs"]),
        tied_out=reconcile.tied(
            int(row["pairs"]), int(row["tied_out"]), int(row["in_flight"]), int(row["breaks_open"])
        ),
        pairs_tied_out=int(row["tied_out"]),
        in_flight=int(row["in_flight"]),
        breaks_open=int(row["breaks_open"]),
    )
