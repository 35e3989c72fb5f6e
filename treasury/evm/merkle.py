"""OpenZeppelin's ``StandardMerkleTree`` (``standard-v1``, `@openzeppelin/merkle-tree`).

A leaf is ``keccak256(keccak256(abi.encode(types, value)))``; a node hashes its two
children sorted (``keccak256(min ++ max)``), as OpenZeppelin's ``MerkleProof`` checks.
Leaves are sorted by hash and laid out as the JavaScript package does: the tree is one
array, the root at 0, the children of node i at 2i+1 and 2i+2, the leaves at the end
(the first sorted leaf last). `dump` gives the same document as its ``dump()``, which
``StandardMerkleTree.load`` reads; the same values give the same root, tree and proofs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from eth_hash.auto import keccak

__all__ = ["StandardMerkleTree", "leaf_hash", "verify"]

FORMAT = "standard-v1"
_WORD = re.compile(r"^(u?int\d*|address|bool|bytes(\d+))$")


def leaf_hash(leaf_encoding: Sequence[str], value: Sequence[Any]) -> bytes:
    """The double keccak of a value's ABI encoding."""
    return keccak(keccak(_encode(leaf_encoding, value)))


def _encode(types: Sequence[str], value: Sequence[Any]) -> bytes:
    """`abi.encode`: by hand for one-word types (the common case, and ten times faster),
    else through eth-abi."""
    if len(types) != len(value):
        raise ValueError(f"expected {len(types)} values, got {len(value)}")
    if not all(_WORD.match(t) for t in types):
        from eth_abi.abi import encode

        return encode(list(types), [_typed(t, v) for t, v in zip(types, value, strict=True)])
    return b"".join(_word(t, v) for t, v in zip(types, value, strict=True))


def _typed(kind: str, value: Any) -> Any:
    """A JSON value as eth-abi takes it: integers from decimal strings, bytes from hex."""
    if kind.endswith("]"):
        return [_typed(kind[: kind.rindex("[")], v) for v in value]
    if re.fullmatch(r"u?int\d*", kind):
        return int(value)
    if kind.startswith("bytes") and isinstance(value, str):
        return bytes.fromhex(value.removeprefix("0x"))
    return value


def _word(kind: str, value: Any) -> bytes:
    if kind == "address":
        raw = bytes.fromhex(str(value).removeprefix("0x"))
        if len(raw) != 20:
            raise ValueError(f"not an address: {value!r}")
        return raw.rjust(32, b"\0")
    if kind == "bool":
        return (1 if value else 0).to_bytes(32, "big")
    if kind.startswith("bytes"):
        raw = bytes.fromhex(str(value).removeprefix("0x"))
        if len(raw) != int(kind[5:]):
            raise ValueError(f"not {kind}: {value!r}")
        return raw.ljust(32, b"\0")
    bits = int(kind.removeprefix("u").removeprefix("int") or 256)
    number = int(value)
    signed = kind.startswith("int")
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1)) if signed else (0, 2**bits)
    if not low <= number < high:
        raise ValueError(f"{number} does not fit {kind}")
    return number.to_bytes(32, "big", signed=True) if signed else number.to_bytes(32, "big")


def _node(a: bytes, b: bytes) -> bytes:
    return keccak(a + b if a < b else b + a)


def _hex(node: bytes) -> str:
    return "0x" + node.hex()


class StandardMerkleTree:
    """A tree over `values` (each a sequence matching `leaf_encoding`), with a proof for
    each value by its position in `values`."""

    def __init__(
        self, tree: Sequence[bytes], values: Sequence[tuple[Any, int]], leaf_encoding: Sequence[str]
    ) -> None:
        self._tree = list(tree)
        self._values = list(values)  # (value, tree index), in the order given
        self.leaf_encoding = list(leaf_encoding)

    @classmethod
    def of(
        cls, values: Sequence[Sequence[Any]], leaf_encoding: Sequence[str]
    ) -> StandardMerkleTree:
        """Hash, sort and lay out the leaves of `values` (at least one)."""
        if not values:
            raise ValueError("a merkle tree needs at least one value")
        hashed = sorted((leaf_hash(leaf_encoding, v), i) for i, v in enumerate(values))
        size = 2 * len(hashed) - 1
        tree = [b""] * size
        position = [0] * len(values)
        for rank, (leaf, i) in enumerate(hashed):
            tree[size - 1 - rank] = leaf
            position[i] = size - 1 - rank
        for node in range(size - 1 - len(hashed), -1, -1):
            tree[node] = _node(tree[2 * node + 1], tree[2 * node + 2])
        return cls(tree, [(v, position[i]) for i, v in enumerate(values)], leaf_encoding)

    @classmethod
    def load(cls, data: dict[str, Any]) -> StandardMerkleTree:
        """A tree from a `dump` (or the JavaScript package's); checked node by node."""
        if data.get("format") != FORMAT:
            raise ValueError(f"unknown format {data.get('format')!r}")
        tree = [bytes.fromhex(node.removeprefix("0x")) for node in data["tree"]]
        values = [(entry["value"], int(entry["treeIndex"])) for entry in data["values"]]
        loaded = cls(tree, values, data["leafEncoding"])
        internal = (len(tree) - 1) // 2
        if any(tree[i] != _node(tree[2 * i + 1], tree[2 * i + 2]) for i in range(internal)):
            raise ValueError("the tree's nodes do not hash to their parents")
        for value, index in values:
            if not internal <= index < len(tree) or tree[index] != leaf_hash(
                loaded.leaf_encoding, value
            ):
                raise ValueError(f"value {value!r} is not the leaf at {index}")
        return loaded

    @property
    def root(self) -> str:
        return _hex(self._tree[0])

    def proof(self, index: int) -> list[str]:
        """The sibling hashes from the leaf of ``values[index]`` up to the root."""
        return [_hex(self._tree[sibling]) for sibling in siblings(self._values[index][1])]

    def dump(self) -> dict[str, Any]:
        """The ``standard-v1`` document of the JavaScript package's ``dump()``."""
        return {
            "format": FORMAT,
            "leafEncoding": self.leaf_encoding,
            "tree": [_hex(node) for node in self._tree],
            "values": [{"value": list(v), "treeIndex": i} for v, i in self._values],
        }


def siblings(node: int) -> list[int]:
    """The positions of the sibling nodes from tree position `node` up to the root."""
    found = []
    while node > 0:
        found.append(node + 1 if node % 2 else node - 1)
        node = (node - 1) // 2
    return found


def dumped_proofs(dump: dict[str, Any]) -> list[list[str]]:
    """The proof of each value of a ``standard-v1`` `dump` we wrote, in the order of its
    values, read from its nodes (no hashing: the dump is trusted, not `load`ed)."""
    tree = dump["tree"]
    return [[tree[i] for i in siblings(int(entry["treeIndex"]))] for entry in dump["values"]]


def verify(
    root: str, leaf_encoding: Sequence[str], value: Sequence[Any], proof: Sequence[str]
) -> bool:
    """Whether `proof` proves `value` under `root` (``StandardMerkleTree.verify``)."""
    node = leaf_hash(leaf_encoding, value)
    for sibling in proof:
        node = _node(node, bytes.fromhex(sibling.removeprefix("0x")))
    return _hex(node) == root.lower()
