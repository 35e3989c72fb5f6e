# %% [markdown]
# # A walk through treasury, in Python
#
# A notebook in the percent format (open it with Jupyter through jupytext, or run it as
# a script: `python examples/walkthrough.py`). Everything runs in this process: a SQLite
# file, the in-process devnet (chain 31337) and the sandbox fiat provider.

# %%
import tempfile
from pathlib import Path

from treasury import Treasury

folder = Path(tempfile.mkdtemp())
t = Treasury.open(f"sqlite:///{folder / 'walkthrough.db'}", master_key="0" * 64)
org = t.for_organization(t.admin.create_organization("Walkthrough").id)

# %% [markdown]
# ## A wallet, funded from the devnet's faucet

# %%
wallet = org.wallets.create(label="Operations")
devnet = t.chain(31337)
devnet.faucet(wallet.address, "ETH", "1")
devnet.faucet(wallet.address, "USDC", "500")
usdc = next(b for b in org.balances.get(31337, wallet.address).data if b.symbol == "USDC")
print(wallet.address, usdc.raw)
assert usdc.raw == "500000000"

# %% [markdown]
# ## Into c0: a deposit transfer, completed by the background passes

# %%
deposit = org.transfers.create(
    {
        "amount": "200",
        "source": {"currency": "usdc", "payment_rail": "ethereum", "from_address": wallet.address},
        "destination": {"currency": "c0", "payment_rail": "ethereum", "to_address": wallet.address},
    },
    idempotency_key="walkthrough-deposit",
)
while org.transfers.get(deposit.id).status != "completed":
    t.run_once()
print(deposit.id, org.transfers.get(deposit.id).status)

# %% [markdown]
# ## What it earns

# %%
estimate = org.yields.estimate(31337, wallet.address)
print(f"apy {estimate.rate.apy:.4%}; a year: {estimate.annual_yield} raw c0")
assert estimate.earning == str(200 * 10**estimate.decimals)  # c0's decimals, from the chain

# %% [markdown]
# ## The feed

# %%
for transfer in org.transfers.list().data:
    print(
        transfer.from_.currency, "->", transfer.to.currency, transfer.from_.amount, transfer.status
    )
t.close()
