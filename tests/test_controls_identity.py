"""User ids are identities (DESIGN §3 "Controls, second round"): the four-eyes rule
compares them after NFKC, case folding and trimming; a new key refuses invisible
characters and mixed scripts. Over real HTTP (the approvals), from Python and the CLI."""

from __future__ import annotations

import unicodedata

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from treasury._infra.identity import identity, same_user, user_id_problem
from treasury.errors import ValidationError

from . import test_controls_policy
from .helpers import onramp
from .test_cli import _no_outside_settings, cwd, run, run_json  # noqa: F401 (fixtures)
from .test_controls_policy import Env

env = test_controls_policy.env  # the fixture: a served treasury, Alice, Bob, a clock

#: Spellings of "alice" that a screen shows as alice: the same identity at approval.
SAME_PERSON = [
    "Alice",
    "ALICE",
    " alice",
    "alice  ",
    "\u00a0alice\u3000",  # no-break and ideographic spaces
    "\uff41\uff4c\uff49\uff43\uff45",  # full-width
    "\uff21\uff2c\uff29\uff23\uff25",
]
#: Spellings refused when a key is made: invisible characters and look-alike scripts.
INVISIBLE_OR_MIXED = [
    "al\u200bice",  # zero-width space
    "\ufeffalice",  # byte-order mark
    "al\u00adice",  # soft hyphen
    "alice\u200d",  # zero-width joiner
    "\u202ealice",  # right-to-left override
    "\u0430lice",  # Cyrillic a
    "alic\u0435",  # Cyrillic ie
    "al\u0456ce",  # Cyrillic i
    "alice\x00",
    "ali\U000e0001ce",  # a tag character
    "alice\U0010fffe",  # unassigned
]


def test_the_creators_other_spellings_cannot_approve_its_transfer(env: Env) -> None:
    env.policy(approvalThreshold="5")
    org_id = env.t.for_api_key(env.alice.headers["x-api-key"]).id
    waiting = env.create(onramp(env.bank, env.wallet, "10")).json()
    assert waiting["approvalStatus"] == "awaiting"
    for spelling in SAME_PERSON:
        key = env.t.admin.create_api_key(org_id, user_id=spelling, scopes=["approve"])
        with httpx.Client(base_url=env.url, headers={"x-api-key": key.secret}) as twin:
            for decision in ("approve", "reject"):
                answer = twin.post(f"/v1/transfers/{waiting['id']}/{decision}")
                assert answer.status_code == 403, (spelling, answer.text)
    # decomposed accents: "josé" in NFD is José
    assert same_user("Jose\u0301", "josé")
    assert env.bob.post(f"/v1/transfers/{waiting['id']}/approve").status_code == 200


@pytest.mark.parametrize("spelling", INVISIBLE_OR_MIXED)
def test_a_key_refuses_invisible_characters_and_mixed_scripts(env: Env, spelling: str) -> None:
    org_id = env.t.for_api_key(env.alice.headers["x-api-key"]).id
    with pytest.raises(ValidationError) as refused:
        env.t.admin.create_api_key(org_id, user_id=spelling)
    assert refused.value.status == 400
    assert [f["field"] for f in refused.value.details["fields"]] == ["user_id"]


def test_ordinary_ids_in_one_script_are_taken() -> None:
    for fine in (
        "user_1",
        "alice@example.com",
        "José",
        "Дмитрий",
        "山田太郎",
        "やまだ",
        "\uff42\uff4f\uff42",
    ):
        assert user_id_problem(fine) is None, fine


@pytest.mark.usefixtures("cwd")
def test_treasury_keys_create_refuses_them_too() -> None:
    org_id = run_json("orgs", "create", "Acme")["id"]
    result = run("keys", "create", org_id, "--user-id", "\u0430lice", code=1)
    assert "user_id" in result.stderr
    result = run("keys", "create", org_id, "--user-id", "al\u200bice", code=1)
    assert "user_id" in result.stderr
    assert run_json("keys", "create", org_id, "--user-id", "alice")["userId"] == "alice"


_NAMES = st.text(
    # Latin letters and digits (the micro sign is Greek once NFKC-normalised)
    alphabet=st.characters(
        categories=("Ll", "Lu", "Nd"), max_codepoint=0xFF, exclude_characters="\u00b5"
    ),
    min_size=1,
)


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


@given(
    name=_NAMES,
    case=st.sampled_from([str.upper, str.lower, str.swapcase, str.title, lambda s: s]),
    form=st.sampled_from(["NFC", "NFD", "NFKC", "NFKD"]),
    left=st.sampled_from(["", " ", "\t", "\u00a0", "\u3000"]),
    right=st.sampled_from(["", " ", "\n", "\u2003"]),
    wide=st.booleans(),
)
def test_any_spelling_by_case_form_width_and_spaces_is_the_same_identity(
    name: str, case: object, form: str, left: str, right: str, wide: bool
) -> None:
    assert callable(case)
    variant = unicodedata.normalize(form, case(name))  # type: ignore[arg-type]
    variant = left + (_full_width(variant) if wide else variant) + right
    assert identity(variant) == identity(name)
    assert same_user(variant, name)


@given(name=_NAMES)
def test_an_identity_is_stable_and_a_fixed_point(name: str) -> None:
    once = identity(name)
    assert identity(once) == once
    assert user_id_problem(name) is None  # Latin letters and digits: one script
