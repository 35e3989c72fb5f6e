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
