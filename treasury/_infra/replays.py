"""Which answers an Idempotency-Key replayed: a fact about a call, kept beside the answer
and not in it.

The idempotency store (`treasury._infra.idempotency`) marks the answer it rebuilt from
a stored outcome; the typed client marks the answer a server sent with
``Idempotent-Replayed: true``. The HTTP layer reads the mark to send that header, and
a Python caller reads it as `Resource.replayed`. The mark holds the answer weakly: it
goes with the answer, and no answer's fields or JSON carry it.
"""

from __future__ import annotations

import threading
import weakref

_lock = threading.Lock()
_replayed: weakref.WeakValueDictionary[int, object] = weakref.WeakValueDictionary()


def mark(answer: object) -> None:
    """Remember that `answer` is a replay of a stored outcome."""
    with _lock:
        _replayed[id(answer)] = answer


def replayed(answer: object) -> bool:
    """Whether `answer` was marked a replay (`mark`)."""
    with _lock:
        return _replayed.get(id(answer)) is answer
