"""Talk to a running treasury with the typed client.

    TREASURY_URL=http://127.0.0.1:8000 TREASURY_API_KEY=trk_... python examples/client_script.py

Creates a wallet (an Idempotency-Key is added for you), renames it, lists the wallets and
walks the transfers feed, then shows how an error arrives: as the library's own class.
"""

from __future__ import annotations

import os

from treasury.client import TreasuryClient
from treasury.errors import NotFound

with TreasuryClient(os.environ["TREASURY_URL"], api_key=os.environ["TREASURY_API_KEY"]) as c:
    wallet = c.wallets.create(label="From the client")
    c.wallets.update(wallet.address, label="Renamed by the client")
    for each in c.wallets.list().data:
        print(f"wallet {each.address} {each.label!r}")
    print(f"{sum(1 for _ in c.iterate_transfers())} transfers in the feed")
    try:
        c.wallets.get("0x" + "0" * 40)
    except NotFound as error:
        print(f"as expected: {error.message}")
