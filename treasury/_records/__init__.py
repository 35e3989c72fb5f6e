"""The records more than one domain reads, below the domains and above `_infra`.

The domains are independent (no domain imports another); what two of them need of the
same rows lives here, once: the event outbox (`events`: every domain emits, webhooks
delivers), wallets managed, tracked and virtual (`wallets`), registered bank accounts
and the id transfers name them by (`bank_accounts`), each organization's fiat customer
(`customers`), tracked transactions (`transactions`), and of the transfers what others
read: the state table, the hashes each organization's transfers sent, and the open
on-ramps (`transfers`), the
nonces and holds of signed legs (`nonces`), each organization's policy, which transfers
check (`policy`), the blocks acted on (`marks`), and the books: the journal's writer
(`journal`), what each fact posts (`postings`, called by the domain that owns the fact, in
its transaction), the history migration 22 posts (`journal_history`), and reconciliation
breaks (`breaks`: opened by reconciliation and by the transfers' reorg pass). A table read by several domains is touched
only here (the domain that owns it may keep its own writes and reads elsewhere).
"""
