"""Redaction covers the common credential shapes whatever their random part (generated), leaves ordinary text alone
(every question, fixture and expectation of the built-in cases), and a label shaped like a credential is refused."""

from __future__ import annotations

import base64
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runners.cli import main
from runners.domain.evalset import load_cases
from runners.domain.redaction import _shapes, redact

_ALNUM = string.ascii_letters + string.digits
_B64URL = _ALNUM + "-_"


def _text(alphabet: str, lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=lo, max_size=hi)


def _jwt() -> st.SearchStrategy[str]:
    part = _text(_B64URL, 10, 60)
    return st.builds(lambda a, b, c: f"eyJ{a}.eyJ{b}.{c}", part, part, part)


def _aws_key_id() -> st.SearchStrategy[str]:
    prefix = st.sampled_from(["AKIA", "ASIA"])
    return st.builds(lambda p, r: p + r, prefix, _text(string.ascii_uppercase + string.digits, 16, 16))


def _aws_secret() -> st.SearchStrategy[str]:
    body = _text(_ALNUM + "/+", 37, 37)
    return st.builds(lambda b, name: f"{name}={b}Aa1", body, st.sampled_from(["aws_secret_access_key", "SecretKey"]))


def _github() -> st.SearchStrategy[str]:
    classic = st.builds(lambda k, r: f"gh{k}_{r}", st.sampled_from("pousr"), _text(_ALNUM, 36, 40))
    fine_grained = st.builds(lambda r: f"github_pat_{r}", _text(_ALNUM + "_", 40, 82))
    return classic | fine_grained


def _slack() -> st.SearchStrategy[str]:
    return st.builds(lambda k, r: f"xox{k}-{r}", st.sampled_from("bpar"), _text(_ALNUM + "-", 10, 50))


def _basic() -> st.SearchStrategy[str]:
    user, password = _text(_ALNUM, 1, 12), _text(_ALNUM + "!#$%", 4, 20)
    return st.builds(lambda u, p: "Basic " + base64.b64encode(f"{u}:{p}".encode()).decode(), user, password)


_SHAPES = {"jwt": _jwt(), "aws key id": _aws_key_id(), "aws secret": _aws_secret(), "github": _github(),
           "slack": _slack(), "basic": _basic()}  # fmt: skip


def _secret_part(name: str, credential: str) -> str:
    """The part of a credential that must never be stored (a key's name or the word Basic may stay)."""
    if name == "basic":
        return credential.removeprefix("Basic ")
    if name == "aws secret":
        return credential.split("=", 1)[1]
    return credential


@pytest.mark.parametrize("name", sorted(_SHAPES))
@settings(max_examples=40, deadline=None)
@given(data=st.data(), before=st.sampled_from(["", "token: ", "see ", '{"auth": "', "Authorization: "]),
       after=st.sampled_from(["", " ok", '"}', "\n", ", then"]))  # fmt: skip
def test_a_generated_credential_is_redacted_wherever_it_stands(
    name: str, data: st.DataObject, before: str, after: str
) -> None:
    credential = data.draw(_SHAPES[name])
    out = redact(before + credential + after)
    assert _secret_part(name, credential) not in out, out
    assert "[REDACTED]" in out


_PIECES = ["sk-", "Bearer ", "://", "@", "eyJ", "AKIA", "ghp_", "github_pat_", "xoxb-", "Basic ", "secret", "key",
           "token", "=", "/", "+", " ", ".", "\n", '"']  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | _text(_ALNUM, 1, 45) | st.one_of(*_SHAPES.values()), max_size=12))
def test_the_quick_gates_never_skip_a_shape_the_patterns_would_redact(parts: list[str]) -> None:
    """`redact` runs the shape patterns only on text holding a trigger or a possible AWS secret key (most text
    holds neither): the gates must never change the outcome of running every pattern on every text."""
    text = "".join(parts)
    assert redact(text) == _shapes(text)


def test_ordinary_text_is_left_alone() -> None:
    texts = ["basic troubleshooting of the gateway", "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 is the commit",
             "the secret key rotation runbook", "ghost checkout at 14:00", "Basic plan tenants", "xoxo"]  # fmt: skip
    for case in load_cases():
        texts += [case.question, case.model_dump_json()]
    changed = [t[:80] for t in texts if redact(t) != t]
    assert changed == []


@pytest.mark.parametrize(
    "label",
    [
        "sk-abcdefghijklmnop0123",
        "AKIAQ3EGRSTUVWXYZ234",
        "ghp_Zx81Ke7LmQ0pW4rT9vB2nC6dF3gH5jA1sY0u",
        "Basic b25jYWxsOmh1bnRlcjI=",
    ],
)
def test_a_label_shaped_like_a_credential_is_refused(
    label: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.duckdb"
    assert main(["run", "--case", "empty_logs_gateway_timeout_t1", "--db", str(db), "--label", label]) == 2
    err = capsys.readouterr().err
    assert "looks like a credential" in err and len(err.strip().splitlines()) == 1
    assert label not in err and not db.exists()
