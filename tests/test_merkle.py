"""`treasury.evm.merkle` against OpenZeppelin's JavaScript ``@openzeppelin/merkle-tree``
(run with node: the same root, dump and proofs; our dump loads and verifies there), and
against the test's own keccak code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treasury.evm.merkle import StandardMerkleTree, verify

from .helpers import proof_root

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "merkle_reference.mjs"
ENCODING = ["uint256", "address", "uint256"]


def javascript(request: dict[str, Any]) -> dict[str, Any]:
    """Run the JavaScript reference; skip without node and the package, except under CI."""
    node = shutil.which("node")
    if node is None or not (ROOT / "node_modules" / "@openzeppelin" / "merkle-tree").is_dir():
        reason = "node or @openzeppelin/merkle-tree missing (run `npm ci`)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set")
        pytest.skip(reason)
    done = subprocess.run(
        [node, str(SCRIPT)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def claims(n: int) -> list[list[Any]]:
    accounts = sorted(f"0x{(i * 7919 + 13):040x}" for i in range(n))
    return [[i, account, str(10**18 + i * 123_456_789)] for i, account in enumerate(accounts)]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 300])
def test_the_same_tree_as_openzeppelin(n):
    values = claims(n)
    ours = StandardMerkleTree.of(values, ENCODING)
    theirs = javascript({"leafEncoding": ENCODING, "values": values, "load": ours.dump()})
    assert ours.dump() == theirs["dump"]  # root, layout, leaf order, tree indices
    assert [ours.proof(i) for i in range(n)] == theirs["proofs"]
    assert theirs["loaded"] == {"root": ours.root, "verified": [True] * n}
    for i, (index, account, amount) in enumerate(values):
        assert proof_root(index, account, int(amount), ours.proof(i)) == ours.root
    if n == 1:
        assert ours.proof(0) == [] and ours.root == proof_root(
            0, values[0][1], int(values[0][2]), []
        )


def test_other_leaf_types_encode_as_eth_abi_and_openzeppelin():
    """Dynamic types go through eth-abi; signed, bool and bytes32 words by hand."""
    words = ["int64", "bool", "bytes32", "uint8"]  # one word each: encoded by hand
    values = [[-5, True, "0x" + "ab" * 32, 255], [7, False, "0x" + "00" * 32, "0"]]
    dynamic = [["hi", ["1", "2"]], ["", []]]
    for encoding, rows in ((words, values), (["string", "uint256[]"], dynamic)):
        ours = StandardMerkleTree.of(rows, encoding)
        assert ours.dump() == javascript({"leafEncoding": encoding, "values": rows})["dump"]
    with pytest.raises(ValueError, match="does not fit"):
        StandardMerkleTree.of([[256]], ["uint8"])


def test_load_checks_what_it_reads():
    tree = StandardMerkleTree.of(claims(5), ENCODING)
    dump = tree.dump()
    assert StandardMerkleTree.load(dump).root == tree.root
    tampered = json.loads(json.dumps(dump))
    tampered["values"][0]["value"][2] = "1"
    with pytest.raises(ValueError, match="is not the leaf"):
        StandardMerkleTree.load(tampered)
    with pytest.raises(ValueError, match="unknown format"):
        StandardMerkleTree.load({**dump, "format": "simple-v1"})
    with pytest.raises(ValueError, match="at least one"):
        StandardMerkleTree.of([], ENCODING)


addresses = st.integers(min_value=0, max_value=2**160 - 1).map(lambda n: f"0x{n:040x}")
amounts = st.integers(min_value=1, max_value=2**256 - 1)


@settings(deadline=None, max_examples=50)
@given(holders=st.lists(st.tuples(addresses, amounts), min_size=1, max_size=200))
def test_every_proof_verifies_and_a_tampered_one_does_not(holders):
    """Random holders (accounts may repeat): leaves in ascending account order, as the
    yield periods lay them out; every proof verifies, here and with `verify`; another
    amount or a changed proof does not."""
    values = [[i, a, amount] for i, (a, amount) in enumerate(sorted(holders))]
    tree = StandardMerkleTree.of(values, ENCODING)
    for i, (index, account, amount) in enumerate(values):
        proof = tree.proof(i)
        assert proof_root(index, account, amount, proof) == tree.root
        assert verify(tree.root, ENCODING, [index, account, amount], proof)
        assert not verify(tree.root, ENCODING, [index, account, amount - 1], proof)
        if proof:
            bent = ["0x" + bytes(32 - len(b"x")).hex() + "78", *proof[1:]]
            assert not verify(tree.root, ENCODING, [index, account, amount], bent)
