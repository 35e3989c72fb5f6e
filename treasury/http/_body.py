"""Reading a request's JSON body, bounded before and while parsing.

The body is read in chunks up to `max_bytes` (413 past it, chunked uploads included); a
body the server already refused unread reaches the app marked (`BODY_REFUSED`), so that
the 413 is the app's, recorded like any refusal.
Its nesting is measured before it is parsed: Python's JSON parser recurses in C, and a
library that raises the recursion limit (py_ecc, imported with web3, sets 100,000) lets
a body of 75,000 ``[`` overflow the C stack and kill the process. Numbers are bounded
in length while parsing (``int("9" * 5000)`` fails deep inside), the non-standard
``NaN``/``Infinity`` are refused, and so is an object that gives a key twice, at any
depth (parsers disagree on which one wins). Every refusal is a 400 with details.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

from flask import request

from ..errors import PayloadTooLarge, UnsupportedMediaType, ValidationError

MAX_DEPTH = 64
MAX_NUMBER_LENGTH = 80  # characters; a uint256 has 78 digits
_CHUNK = 64 * 1024
_SPECIAL = re.compile(rb'[\[\]{}"\\]')


#: The WSGI environ key of a request whose body the server refused unread (above the
#: limit; `treasury serve`'s waitress): the app answers it 413, and records the refusal
#: for the key's organization. Its value is the limit, in bytes.
BODY_REFUSED = "treasury.body_refused"


def refused_body() -> None:
    """Nothing, unless the server refused this request's body (`BODY_REFUSED`): 413."""
    limit = request.environ.get(BODY_REFUSED)
    if limit is not None:
        raise too_large(limit)


def too_large(max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"Request body exceeds {max_bytes} bytes")


def json_body(max_bytes: int) -> Any:
    """The parsed JSON body; {} when empty. 413 over the limit, 415 if not JSON."""
    length = request.content_length  # read once: each `request.` use goes through its proxy
    if length is not None and length > max_bytes:
        raise too_large(max_bytes)
    raw = _read_at_most(max_bytes, length)
    if not raw.strip():
        return {}
    if request.mimetype != "application/json":
        raise UnsupportedMediaType()
    body = parse_json(raw)
    if not isinstance(body, dict):
        _refuse("must be a JSON object")
    return body


def parse_json(raw: bytes) -> Any:
    """`raw` as JSON within the bounds above, or a 400."""
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth(raw) > MAX_DEPTH:
        _refuse(f"nests deeper than {MAX_DEPTH} levels")
    try:
        return _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        _refuse(str(error), "Malformed JSON")


def _depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects outside strings (only the bytes that
    matter are visited)."""
    depth = deepest = 0
    in_string, skip = False, -1
    for match in _SPECIAL.finditer(raw):
        at, found = match.start(), match.group()
        if at == skip:  # the character after a backslash
            continue
        if in_string:
            if found == b"\\":
                skip = at + 1
            elif found == b'"':
                in_string = False
        elif found == b'"':
            in_string = True
        elif found in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif found in (b"]", b"}"):
            depth -= 1
    return deepest


def _integer(text: str) -> int:
    _check_length(text)
    return int(text)


def _decimal_number(text: str) -> float:
    _check_length(text)
    return float(text)


def _check_length(text: str) -> None:
    if len(text) > MAX_NUMBER_LENGTH:
        _refuse(f"has a number longer than {MAX_NUMBER_LENGTH} characters")


def _constant(text: str) -> NoReturn:
    _refuse(f"{text} is not JSON")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of the body; 400 naming a key it gives twice."""
    built = dict(pairs)
    if len(built) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                _refuse(f"has the key {json.dumps(key)} more than once", field=key)
            seen.add(key)
    return built


#: Built once: `json.loads` with hooks builds a decoder per call.
_DECODER = json.JSONDecoder(
    object_pairs_hook=_object,
    parse_int=_integer,
    parse_float=_decimal_number,
    parse_constant=_constant,
)


def _refuse(message: str, title: str | None = None, field: str = "") -> NoReturn:
    problem = {"location": "body", "field": field, "message": message}
    raise ValidationError.fields([problem], title)


def _read_at_most(max_bytes: int, length: int | None) -> bytes:
    """The body: at once when its `length` is declared (and within the limit, checked
    before), else in chunks (chunked uploads), 413 past the limit."""
    if length is not None:  # straight from the server's stream: no wrapper to build
        return request.environ["wsgi.input"].read(length)  # type: ignore[no-any-return]
    parts, size = [], 0
    while chunk := request.stream.read(_CHUNK):
        size += len(chunk)
        if size > max_bytes:
            raise too_large(max_bytes)
        parts.append(chunk)
    return b"".join(parts)
