"""A host Flask app that mounts treasury's API beside its own routes.

    python examples/host_app.py            # http://127.0.0.1:8001/health and /treasury/v1/...
    PORT=9001 python examples/host_app.py  # another port (5000 is often taken, e.g. on macOS)

The host keeps its own routes and error pages; under the prefix every answer, errors
included, is treasury's JSON. The background jobs run in a thread of the same process.
"""

from __future__ import annotations

import os

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
        port = int(os.environ.get("PORT", "8001"))
        print(f"host app on http://127.0.0.1:{port}/health, treasury under /treasury/v1")
        create_host_app(t).run(host="127.0.0.1", port=port)
