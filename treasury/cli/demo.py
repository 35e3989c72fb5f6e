"""``treasury demo``: the whole product, step by step, over real HTTP on loopback.

On the embedded defaults (a temporary SQLite file, the in-process devnet, the sandbox
fiat provider, unless the settings say otherwise) it serves the API, drives it with the
typed client as a user would, runs the background passes a server would, and receives a
webhook on a local receiver that checks its Standard Webhooks signature. A step that does
not give what it should stops the demo with exit code 1, naming the step.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from .._treasury import Treasury
from ..client import TreasuryClient
from ..config import Settings
from ..money import to_units
from ..test_helpers.samples import BANK_ACCOUNT
from ._shared import State, load_settings

CHAIN = 31337


class StepFailed(Exception):
    """A step of the demo did not give what it should."""


@click.command()
@click.option(
    "--passes",
    default=12,
    show_default=True,
    type=click.IntRange(1),
    help="Background passes to wait for a transfer or a delivery at most.",
)
@click.pass_context
def demo(ctx: click.Context, passes: int) -> None:
    """Run the whole product once, with progress: wallets, faucet, an on-ramp, a deposit
    into c0, the yield estimate, a verified webhook, an off-ramp and the feed."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log per request
    settings = load_settings(ctx)
    state = ctx.find_object(State)
    with tempfile.TemporaryDirectory() as directory:
        if state is None or state.storage is None:
            settings = settings.merged({"storage": f"sqlite:///{Path(directory) / 'demo.db'}"})
        settings = settings.merged({"allow_private_webhook_urls": True})  # the receiver
        try:
            _run(settings, passes)
        except StepFailed as failed:
            click.echo(f"demo failed: {failed}", err=True)
            ctx.exit(1)
    click.echo("demo: every step gave what it should")


def _run(settings: Settings, passes: int) -> None:
    key = secrets.token_hex(32)
    with (
        Treasury.open(settings=settings, master_key=key) as t,
        serve(_app(t)) as url,
        _receiver() as receiver,
    ):
        org = t.admin.create_organization("Demo")
        secret = t.admin.create_api_key(org.id, user_id="demo").secret
        c = TreasuryClient(url, api_key=secret)
        step = _Stepper(t, passes)
        click.echo(f"treasury serving on {url} ({settings.storage})")
        wallet = step("a managed wallet", lambda: c.wallets.create(label="Operations"))
        step(
            "the faucet: 1 ETH and 100 USDC",
            lambda: [
                c.test_helpers.faucet(CHAIN, address=wallet.address, token=token, amount=amount)
                for token, amount in (("ETH", "1"), ("USDC", "100"))
            ],
        )
        hook = step(
            "a webhook to a local receiver",
            lambda: c.webhooks.create(url=receiver.url, events=["transaction.confirmed"]),
        )
        receiver.secret = hook.secret
        bank = step("a bank account", lambda: c.bank_accounts.create(BANK_ACCOUNT))
        onramp = step(
            "an on-ramp of 250 USD to the wallet",
            lambda: c.transfers.create(
                amount="250",
                source={
                    "currency": "usd",
                    "payment_rail": "ach_push",
                    "external_account_id": bank.provider_external_account_id,
                },
                destination={
                    "currency": "usdc",
                    "payment_rail": "ethereum",
                    "to_address": wallet.address,
                },
            ),
        )
        step.until(
            f"the on-ramp {onramp.id[:8]} completed",
            lambda: c.transfers.get(onramp.id).status == "completed",
        )
        deposit = step(
            "a deposit of 100 USDC into c0",
            lambda: c.transfers.create(
                amount="100",
                source={
                    "currency": "usdc",
                    "payment_rail": "ethereum",
                    "from_address": wallet.address,
                },
                destination={
                    "currency": "c0",
                    "payment_rail": "ethereum",
                    "to_address": wallet.address,
                },
            ),
        )
        step.until(
            f"the deposit {deposit.id[:8]} completed",
            lambda: c.transfers.get(deposit.id).status == "completed",
        )
        estimate = step("the yield estimate", lambda: c.yields.estimate(CHAIN, wallet.address))
        if estimate.earning != str(100 * 10**estimate.decimals):
            raise StepFailed(f"the yield estimate: earning {estimate.earning}, not 100 c0")
        yearly = to_units(estimate.annual_yield, estimate.decimals)
        click.echo(f"    apy {estimate.rate.apy:.4%}: {yearly} c0 a year on 100 c0")
        step.until("a webhook delivered and its signature verified", lambda: receiver.verified)
        offramp = step(
            "an off-ramp of 50 USDC to the bank",
            lambda: c.transfers.create(
                amount="50",
                source={
                    "currency": "usdc",
                    "payment_rail": "ethereum",
                    "from_address": wallet.address,
                },
                destination={
                    "currency": "usd",
                    "payment_rail": "ach",
                    "external_account_id": bank.provider_external_account_id,
                },
            ),
        )
        step.until(
            f"the off-ramp {offramp.id[:8]} completed",
            lambda: c.transfers.get(offramp.id).status == "completed",
        )
        feed = step("the transfers feed", lambda: c.transfers.list())
        for transfer in feed.data:
            click.echo(
                f"    {transfer.from_.currency} -> {transfer.to.currency}"
                f" {transfer.from_.amount}: {transfer.status}"
            )
        if [x.id for x in feed.data] != [offramp.id, deposit.id, onramp.id]:
            raise StepFailed("the transfers feed does not list the three transfers, newest first")
        c.close()


def _app(t: Treasury) -> Any:
    from ..http import create_app

    return create_app(t)


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """The app on a free loopback port (the `http` extra's server)."""
    from ..http.loopback import serve as loopback

    with loopback(app) as url:
        yield url


class _Stepper:
    """Numbered steps with progress output; `until` runs background passes meanwhile."""

    def __init__(self, t: Treasury, passes: int) -> None:
        self._t, self._passes, self._n = t, passes, 0

    def __call__(self, name: str, action: Callable[[], Any]) -> Any:
        self._n += 1
        click.echo(f"[{self._n}] {name} ...", nl=False)
        try:
            result = action()
        except Exception as error:  # any failure of a step is the demo's answer
            click.echo(" failed")
            raise StepFailed(f"step {self._n} ({name}): {error}") from error
        click.echo(" ok")
        return result

    def until(self, name: str, done: Callable[[], bool]) -> None:
        def wait() -> None:
            for _ in range(self._passes):
                self._t.run_once()
                if done():
                    return
                time.sleep(0.05)
            raise StepFailed(f"not after {self._passes} background passes")

        self(name, wait)


@dataclass
class _Inbox:
    """What the local receiver saw: whether a confirmed transaction arrived, verified."""

    url: str = ""
    secret: str = ""
    verified: bool = False


@contextmanager
def _receiver() -> Iterator[_Inbox]:
    """A webhook receiver on loopback that checks each delivery's Standard Webhooks
    signature (HMAC-SHA256 of ``id.timestamp.body`` under the secret after ``whsec_``)."""
    from flask import Flask, Response, request

    inbox, app = _Inbox(), Flask("demo-receiver")

    @app.post("/hook")
    def receive() -> Response:
        body, headers = request.get_data(), request.headers
        signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
        key = base64.b64decode(inbox.secret.removeprefix("whsec_"))
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        given = [s.split(",", 1)[1] for s in headers["webhook-signature"].split()]
        if not any(hmac.compare_digest(expected, s) for s in given):
            return Response("bad signature", status=400)
        if json.loads(body)["type"] == "transaction.confirmed":
            inbox.verified = True
        return Response(status=204)

    with serve(app) as url:
        inbox.url = url + "/hook"
        yield inbox
