"""The hand-rolled aggregate3 codec agrees with eth-abi, and refuses what is not the
canonical answer: a malformed answer is a 502, never a wrong balance."""

from __future__ import annotations

import pytest
from eth_abi.abi import decode, encode
from eth_abi.exceptions import DecodingError
from eth_utils.address import to_checksum_address
from hypothesis import given, settings
from hypothesis import strategies as st

from treasury import Treasury, UpstreamError
from treasury.backends.chain.devnet import DevnetChain
from treasury.balances import operations as balances_operations
from treasury.evm.abi import AGGREGATE3, address_word
from treasury.evm.multicall import (
    MalformedAnswer,
    multicall_payload,
    multicall_results,
    uint256,
)

from .conftest import MASTER_KEY, make_tenant
from .helpers import address

RESULTS = "(bool,bytes)[]"

addresses = st.binary(min_size=20, max_size=20).map(lambda raw: "0x" + raw.hex())
any_case_addresses = addresses | addresses.map(to_checksum_address)
# Return data of every shape: empty, one word (a balance), strings, odd lengths.
payloads = st.binary(max_size=200) | st.binary(min_size=32, max_size=32)
results = st.lists(st.tuples(st.booleans(), payloads), max_size=12)


def eth_abi_results(data: bytes) -> list[tuple[bool, bytes]]:
    (decoded,) = decode([RESULTS], data)
    return [(bool(ok), bytes(payload)) for ok, payload in decoded]


@given(st.lists(st.tuples(any_case_addresses, payloads), max_size=12))
def test_the_payload_is_what_eth_abi_encodes(calls):
    expected = AGGREGATE3.encode([(target, True, data) for target, data in calls])
    assert multicall_payload(calls) == expected


@given(any_case_addresses)
def test_an_address_word_is_what_eth_abi_encodes(value):
    assert address_word(value) == encode(["address"], [value])


@pytest.mark.parametrize(
    "value",
    ["0x" + "ab" * 19, "0x" + "ab" * 21, "ab" * 20 + "0x", "0x" + "zz" * 20, "0x" + "aB" * 20],
)
def test_a_target_that_is_not_an_address_is_refused(value):
    with pytest.raises(ValueError, match="not an address"):
        multicall_payload([(value, b"")])


@given(results)
def test_answers_decode_as_eth_abi_decodes_them(answer):
    data = encode([RESULTS], [answer])
    assert multicall_results(data) == eth_abi_results(data) == answer


@given(st.binary(max_size=80))
def test_a_uint256_is_read_as_eth_abi_reads_it(data):
    try:
        expected = int(decode(["uint256"], data)[0])
    except DecodingError:
        assert uint256(data) is None
    else:
        assert uint256(data) == expected


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A canonical answer with one thing changed: cut, lengthened, a byte or a word set."""
    data = encode([RESULTS], [draw(results)])
    how = draw(st.sampled_from(["cut", "append", "byte", "word"]))
    if how == "cut":
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "append":
        return data + draw(st.binary(min_size=1, max_size=64))
    at = draw(st.integers(0, len(data) - 1))
    if how == "byte":
        value = draw(st.integers(0, 255).filter(lambda b: b != data[at]))
        return data[:at] + bytes([value]) + data[at + 1 :]
    at -= at % 32
    word = draw(st.integers(0, 2**256 - 1)).to_bytes(32, "big")
    return data[:at] + word + data[at + 32 :]


@settings(max_examples=500)
@given(damaged())
def test_a_damaged_answer_is_refused_or_read_as_eth_abi_reads_it(data):
    """Never a result eth-abi would read otherwise: refused, or the same pairs."""
    try:
        ours = multicall_results(data)
    except MalformedAnswer:
        return
    assert ours == eth_abi_results(data)


def _word(value: int) -> bytes:
    return value.to_bytes(32, "big")


BALANCE = _word(1234)
GOOD = encode([RESULTS], [[(True, BALANCE), (False, b"")]])


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty (no contract)"),
        pytest.param(GOOD[:-32], id="cut"),
        pytest.param(GOOD[:-1], id="cut mid-word"),
        pytest.param(GOOD + bytes(32), id="trailing word"),
        pytest.param(_word(0x40) + GOOD[32:], id="array elsewhere"),
        pytest.param(GOOD[:32] + _word(3) + GOOD[64:], id="more results than sent"),
        pytest.param(GOOD[:32] + _word(2**255) + GOOD[64:], id="huge count"),
        pytest.param(GOOD[:64] + _word(0x60) + GOOD[96:], id="element offset moved"),
        pytest.param(GOOD[:128] + _word(2) + GOOD[160:], id="success is 2"),
        pytest.param(GOOD[:160] + _word(0x60) + GOOD[192:], id="returnData offset moved"),
        pytest.param(GOOD[:192] + _word(33) + GOOD[224:], id="returnData longer than sent"),
        pytest.param(GOOD[:192] + _word(2**200) + GOOD[224:], id="returnData length huge"),
        pytest.param(
            encode([RESULTS], [[(True, b"\x01" * 5)]])[:-1] + b"\x01", id="padding not zero"
        ),
    ],
)
def test_malformed_answers_are_refused(data):
    with pytest.raises(MalformedAnswer):
        multicall_results(data)


def test_the_well_formed_example_reads():
    assert multicall_results(GOOD) == [(True, BALANCE), (False, b"")]


class TamperingDevnet(DevnetChain):
    """The real devnet, its multicall answers passed through `tamper` when one is set."""

    tamper = None

    def call(self, to: str, data: bytes) -> bytes:
        answer = super().call(to, data)
        if self.tamper is not None and to == self.addresses["multicall"]:
            return self.tamper(answer)
        return answer


def _first_success_set_to_7(answer: bytes) -> bytes:
    at = 64 + 32 * int.from_bytes(answer[32:64], "big")  # after the length and the offsets
    return answer[:at] + _word(7) + answer[at + 32 :]


def _last_result_dropped(answer: bytes) -> bytes:
    """Re-encoded without its last result: well formed, one result short."""
    return encode([RESULTS], [eth_abi_results(answer)[:-1]])


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda a: a[:-32], id="cut"),
        pytest.param(lambda a: a + bytes(32), id="trailing word"),
        pytest.param(_first_success_set_to_7, id="success is 7"),
        pytest.param(_last_result_dropped, id="one result short"),
    ],
)
def test_a_malformed_answer_on_a_chain_is_502_not_a_balance(new_storage_url, tamper):
    chain = TamperingDevnet()
    holder = address().lower()
    chain.faucet(holder, "USDC", "3")
    t = Treasury.open(new_storage_url("x.db"), master_key=MASTER_KEY, chains={31337: chain})
    org = make_tenant(t).org
    listed = {item.symbol: item.raw for item in org.balances.get(31337, holder).data}
    assert listed["USDC"] == "3000000"
    chain.tamper = tamper
    with pytest.raises(UpstreamError, match="multicall"):
        org.balances.get(31337, holder)
    chain.tamper = None
    assert {i.symbol: i.raw for i in org.balances.get(31337, holder).data} == listed
    t.close()


def test_a_wallets_call_data_is_built_once(new_storage_url):
    t = Treasury.open(new_storage_url("c.db"), master_key=MASTER_KEY)
    org = make_tenant(t).org
    holder = address().lower()
    org.balances.get(31337, holder)  # the first read also asks for the metadata
    before = balances_operations._payload.cache_info()
    second = org.balances.get(31337, holder)
    third = org.balances.get(31337, holder)
    after = balances_operations._payload.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 1)
    assert second == third
    assert after.maxsize == balances_operations.PAYLOADS_KEPT
    t.close()
