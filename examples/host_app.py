"""A host Flask app that mounts treasury's API beside its own routes.

    python examples/host_app.py        # http://127.0.0.1:5000/health and /treasury/v1/...

The host keeps its own routes and error pages; under the prefix every answer, errors
included, is treasury's JSON. The background jobs run in a thread of the same process.
"""

from __future__ import annotations

from flask import Flask, jsonify

from treasury import Treasury
from treasury.http import create_blueprint


def create_host_app(treasury: Treasury) -> Flask:
    app = Flask("host")

    @app.get("/health")
    def health():  # the host's own route
        return jsonify(ok=True)

    app.register_blueprint(create_blueprint(treasury, url_prefix="/treasury/v1"))
    return app


if __name__ == "__main__":
    t = Treasury.open("sqlite:///host.db")
    with t.run_in_background():  # what `treasury serve` runs: transfers, deliveries, ...
        create_host_app(t).run(port=5000)
