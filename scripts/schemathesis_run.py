"""Run schemathesis against a live treasury: a real threaded server on loopback over a
fresh SQLite file (the in-process devnet, the sandbox provider), a fresh organization
and API key, checks for server errors and response-schema conformance.

    python scripts/schemathesis_run.py [schemathesis options...]

Exits with schemathesis's status. Used by ``nox -s schemathesis`` (and CI).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from treasury import Treasury
from treasury.http import create_app
from treasury.testing.server import serve

CHECKS = "not_a_server_error,response_schema_conformance"


def main(extra: list[str]) -> int:
    with tempfile.TemporaryDirectory() as directory:
        database = Path(directory) / "schemathesis.db"
        t = Treasury.open(
            f"sqlite:///{database}", master_key="0" * 64, rate_limit="1000000/1 second"
        )
        org = t.admin.create_organization("Schemathesis")
        key = t.admin.create_api_key(org.id, user_id="schemathesis").secret
        with serve(create_app(t)) as url:
            command = [
                sys.executable,
                "-m",
                "schemathesis.cli",
                "run",
                f"{url}/v1/openapi.json",
                "--header",
                f"x-api-key:{key}",
                "--checks",
                CHECKS,
                "--seed",
                "1",
                "--max-examples",
                "25",
                "--no-color",
                *extra,
            ]
            status = subprocess.run(command, check=False).returncode  # noqa: S603
        t.close()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
