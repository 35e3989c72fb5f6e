"""Heavy dependencies imported on first use, one thread at a time.

web3, eth-account and eth-tester import each other; two threads importing them at once
(a request creating a wallet while the background jobs open the chain) can meet a
half-initialised module and fail with "cannot import name ... (circular import)". Every
first use goes through `load`, under one lock (then a look-up in ``sys.modules``).
"""

from __future__ import annotations

import importlib
import sys
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


def lazy_attributes(package: str, names: dict[str, str]) -> Any:
    """A package's module ``__getattr__``: each of `names` imported from its module
    (relative to `package`) on first use, then kept on the package. A domain package
    exports its models at once and its operations this way, so importing a model (as
    the typed client does) does not load the operations, the storage or the chains."""

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(load_relative(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


def load_relative(name: str, package: str) -> ModuleType:
    """The module `name` relative to `package`, imported under the lock."""
    with _LOCK:
        return importlib.import_module(name, package)
