"""The shared look-ups: what more than one domain reads or writes of the same rows, below
the domains and above `_infra`. Nothing here is a domain's own business: a statement
that only its owning domain makes lives in that domain's `store.py`.

The domains are independent (no domain imports another); what two of them need of the
same rows lives here, once: the event outbox (`events`: every domain emits, in its own
transaction, and the deliveries each event owes are written with it; the webhooks domain
delivers), the look-ups on wallets managed, tracked and virtual (`wallets`: the wallets
domain writes them in `wallets.store`), how a transfer names and shows a bank account
(`bank_accounts`: the bank_accounts domain registers them in `bank_accounts.store`),
each organization's fiat customer (`customers`), tracked transactions as transfers record
their legs (`transactions`: the feed and the indexer's statements are in
`transactions.store`), and of the transfers what others read: the state table, the
hashes each organization's transfers sent, and the open on-ramps (`transfers`), the
nonces and holds of signed legs (`nonces`), each organization's policy as transfers
check it (`policy`: the policy domain sets it in `policy.store`), the blocks acted on
(`marks`), and the books: the journal's writer (`journal`), what each fact posts
(`postings`, called by the domain that owns the fact, in its transaction), the history
migration 22 posts (`journal_history`), and reconciliation breaks (`breaks`: opened by
reconciliation and by the transfers' reorg pass). A table read by several domains is
touched only here and by its owning domain's store.
"""
