"""Heavy dependencies imported on first use, one thread at a time.

web3, eth-account and eth-tester import each other; two threads importing them at once
(a request creating a wallet while the background jobs open the chain) can meet a
half-initialised module and fail with "cannot import name ... (circular import)". Every
first use goes through `load`, under one lock (then a look-up in ``sys.modules``).
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any

_LOCK = threading.RLock()


def load(name: str) -> ModuleType:
    """The module `name`, imported under the lock."""
    with _LOCK:
        return importlib.import_module(name)


def call_locked(function: Any, *args: Any) -> Any:
    """Run `function` (e.g. an entry point's ``load``) under the same lock."""
    with _LOCK:
        return function(*args)


#: The extra of ``treasury-api`` that installs each optional top-level module.
EXTRAS: dict[str, str] = {
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "redis": "redis",
    "flask": "http",
    "werkzeug": "http",
    "waitress": "http",
    "gunicorn": "http",
}


def install_hint(error: ImportError, what: str) -> str:
    """Why `what` cannot run, naming the extra that installs the missing module."""
    module = (getattr(error, "name", None) or "").split(".")[0]
    extra = EXTRAS.get(module)
    if extra is None:
        return f"{what} cannot be imported: {error}"
    return f"{what} needs {module!r}, which is not installed: pip install 'treasury-api[{extra}]'"
