"""User ids as identities (DESIGN §3 "Controls, second round").

Two spellings of one person are one user: the four-eyes rule compares `identity(a)` with
`identity(b)` (NFKC, case folding, surrounding spaces and invisible format characters
dropped), never the bytes. A new key's user id is refused (`user_id_problem`) when it
holds a control, format (zero-width, bidi, BOM, soft hyphen), private-use, surrogate or
unassigned character, or letters of more than one script (Latin with Cyrillic
look-alikes): what cannot be told apart on a screen cannot name two people.
"""

from __future__ import annotations

import unicodedata

#: Scripts written together in one language count as one (Japanese, Korean, Chinese).
_ONE_SCRIPT = {"HIRAGANA": "HAN", "KATAKANA": "HAN", "CJK": "HAN", "HANGUL": "HAN"}
_REFUSED = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def identity(user_id: str) -> str:
    """The identity a user id names: NFKC, case-folded (then NFKC again, as folding can
    leave a form NFKC would change), format characters removed, surrounding spaces
    stripped."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", user_id).casefold())
    return "".join(c for c in folded if unicodedata.category(c) != "Cf").strip()


def same_user(a: str | None, b: str | None) -> bool:
    """Whether two user ids name one identity (None names nobody)."""
    return a is not None and b is not None and identity(a) == identity(b)


def user_id_problem(user_id: str) -> str | None:
    """Why `user_id` may not name a new key's user, or None."""
    for at, char in enumerate(user_id):
        if unicodedata.category(char) in _REFUSED:
            return (
                "must not contain control, format (zero-width, bidi, BOM, soft hyphen) or"
                f" unassigned characters (U+{ord(char):04X} at {at})"
            )
    scripts = sorted({s for c in unicodedata.normalize("NFKC", user_id) if (s := _script(c))})
    if len(scripts) > 1:
        return f"must not mix letters of several scripts ({', '.join(scripts)})"
    if not identity(user_id):
        return "must name someone: not only spaces"
    return None


def _script(char: str) -> str | None:
    """The script of a letter, from its Unicode name (``LATIN SMALL LETTER A``), or None
    for what is not a letter (digits, punctuation, spaces)."""
    if not unicodedata.category(char).startswith("L"):
        return None
    first = unicodedata.name(char, "").split(" ", 1)[0]
    return _ONE_SCRIPT.get(first, first) or None
