"""evalrun._util.token_lines: the fast reader of token-id lines decodes exactly what json.loads
decodes, and hands every line it is unsure of to json.loads."""

from __future__ import annotations

import json
import re
import shutil
import sysconfig

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evalrun._util import token_lines
from evalrun._util.token_lines import decode_lines, parse_bodies, split_line

INT64 = np.iinfo(np.int64)
needs_compiled = pytest.mark.skipif(token_lines._compiled is None,
                                    reason="the compiled reader was not built with this install")


@pytest.fixture(params=[pytest.param("compiled", marks=needs_compiled), "numpy"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with the compiled reader of the bracket texts (where built) and with the
    numpy one, what installs without a C compiler run."""
    if request.param == "numpy":
        monkeypatch.setattr(token_lines, "_compiled", None)
    return request.param


def reference(line: str) -> tuple[object, object] | type:
    """What ``json.loads`` makes of a line: (object, its token_ids), or the error type."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        return json.JSONDecodeError
    return obj, obj.get("token_ids") if isinstance(obj, dict) else None


def same(decoded: object, expected: object) -> bool:
    if expected is json.JSONDecodeError:
        return isinstance(decoded, json.JSONDecodeError)
    assert isinstance(decoded, tuple)
    obj, ids = decoded
    exp_obj, exp_ids = expected  # type: ignore[misc]
    if isinstance(ids, np.ndarray):  # the fast path: ids equal, everything else equal too
        assert ids.dtype == np.int64
        ok = isinstance(exp_ids, list) and ids.tolist() == exp_ids and all(
            type(v) is int for v in exp_ids)
        return ok and obj == {**exp_obj, "token_ids": []}
    return obj == exp_obj and ids == exp_ids


# separators and fragments that the fast path must see through or refuse
SPACE = st.sampled_from(["", " ", "  ", "\t", "\n", "\r", " \t "])
IDS = st.one_of(st.integers(0, 40_000), st.integers(INT64.min, INT64.max),
                st.integers(-(2**70), 2**70))
FIELD = st.one_of(
    IDS.map(str),
    st.sampled_from(["007", "-0", "0", "-", "--1", "1-2", "1 2", "1.5", "1e3", "true",
                     "null", "\"3\"", "[4]", "", "9223372036854775807",
                     "-9223372036854775808", "00", "-01", "+1", "0x10"]))


@st.composite
def lines(draw: st.DrawFn) -> str:
    fields = draw(st.lists(FIELD, max_size=12))
    body = ",".join(draw(SPACE) + f + draw(SPACE) for f in fields)
    if draw(st.booleans()):
        body = body + draw(st.sampled_from([",", " ,", ""]))
    item_id = draw(st.one_of(st.integers(), st.text(max_size=8), st.none(),
                             st.just('x\\"token_ids\\": [9]'), st.just("token_ids")))
    parts = [f'"token_ids"{draw(SPACE)}:{draw(SPACE)}[{body}]']
    if draw(st.booleans()):
        parts.append(f'"id": {json.dumps(item_id)}')
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(['"token_ids": []', '"token_ids": [1, 2]',
                                           '"note": "]"', '"n": [1, [2]]', '"t": "\\u00e9"'])))
    draw(st.randoms()).shuffle(parts)
    line = "{" + ", ".join(parts) + "}"
    if draw(st.integers(0, 9)) == 0:
        line = line[: draw(st.integers(0, len(line)))]  # truncated: bad JSON
    return line


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(lines(), min_size=1, max_size=6))
# found by hypothesis: the empty last field read as a number made up for the digit that the
# leading zero of "00" added, so the digit count matched
@example(['{"token_ids":[0,0,0,0,0,0,0,0,0,0,00, ]}'])
@example(['{"token_ids":[1,,2]}', '{"token_ids":[,1]}', '{"token_ids":[1 ,]}'])
def test_decode_lines_agrees_with_json_loads(reader: str, batch: list[str]) -> None:
    decoded = decode_lines(batch)
    assert len(decoded) == len(batch)
    for line, got in zip(batch, decoded):
        assert same(got, reference(line)), line


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.integers(0, 10**6), max_size=30), min_size=1, max_size=8))
def test_common_lines_take_the_fast_path(reader: str, rows: list[list[int]]) -> None:
    batch = [json.dumps({"id": i, "token_ids": row}) for i, row in enumerate(rows)]
    decoded = decode_lines(batch)
    for i, (got, row) in enumerate(zip(decoded, rows)):
        obj, ids = got  # type: ignore[misc]
        assert isinstance(ids, np.ndarray) and ids.tolist() == row
        assert obj == {"id": i, "token_ids": []}


def test_one_doubtful_line_does_not_send_its_chunk_to_json(reader: str) -> None:
    batch = ['{"token_ids": [1, 2]}', '{"token_ids": [007]}', '{"token_ids": [3]}']
    decoded = decode_lines(batch)
    assert decoded[0][1].tolist() == [1, 2]  # type: ignore[index,union-attr]
    assert isinstance(decoded[1], json.JSONDecodeError)  # json.loads refuses the leading zero
    assert decoded[2][1].tolist() == [3]  # type: ignore[index,union-attr]


@pytest.mark.parametrize("body,expected", [
    (b"1, 2,3", [1, 2, 3]), (b" -0 ,\t10\n", [0, 10]), (b"", []),
    (b"9223372036854775806", [9223372036854775806]),
])
def test_parse_bodies_reads(reader: str, body: bytes, expected: list[int]) -> None:
    got = parse_bodies([body])
    assert got is not None and got[0].tolist() == expected


@pytest.mark.parametrize("body", [
    b"01", b"1, 00", b"-", b"1,-", b"1-2", b"1 2", b"1,,2", b"1,", b",1", b"1.5", b"+1",
    b"- 1", b"1\x0b", b"1,\xc3\xa9", b"99999999999999999999", b"9223372036854775808",
    b"-9223372036854775809", b"18446744073709551616",
])
def test_parse_bodies_refuses_what_it_cannot_vouch_for(reader: str, body: bytes) -> None:
    assert parse_bodies([body]) is None


@pytest.mark.parametrize("body", [b"9223372036854775807", b"-9223372036854775808"])
def test_int64_limits(reader: str, body: bytes) -> None:
    """numpy clamps an overflow to an int64 limit, so its reader cannot vouch for one; the
    compiled reader checks the range exactly and reads them."""
    got = parse_bodies([body])
    if reader == "numpy":
        assert got is None
    else:
        assert got is not None and got[0].tolist() == [int(body)]


_JSON_INT = re.compile(rb"[ \t\n\r]*(-?(?:0|[1-9][0-9]*))[ \t\n\r]*")


def _read_by_the_grammar(text: bytes) -> list[int] | None:
    """RFC 8259's integers between commas, in int64, or None: what the compiled reader must
    answer, written independently of it."""
    if not text:
        return []
    out = []
    for field in text.split(b","):
        m = _JSON_INT.fullmatch(field)
        if m is None:
            return None
        value = int(m.group(1))
        if not INT64.min <= value <= INT64.max:
            return None
        out.append(value)
    return out


@needs_compiled
@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from([b"0", b"-0", b"7", b"-12", b"00", b"01", b"-", b"+1", b"1.0", b"1e2", b" ",
                     b"\t", b"\n", b"\r", b"\x0b", b"", b"9223372036854775807",
                     b"9223372036854775808", b"-9223372036854775808", b"-9223372036854775809",
                     b"99999999999999999999", b"\xff", b",", b", "]),
    st.integers(INT64.min, INT64.max).map(lambda v: str(v).encode())), max_size=8).map(
    lambda parts: b"".join(parts)), st.integers(0, 3))
@example(b"1,2,,3", 0)
@example(b" 1 , 2 ", 0)
def test_compiled_reader_follows_the_json_grammar(body: bytes, commas: int) -> None:
    """Any bytes: the compiled reader answers exactly the integers the grammar reads, or -1."""
    from evalrun.kernels import _token_ids

    text = body + b"," * commas + body if commas else body
    want = _read_by_the_grammar(text)
    out = np.zeros(max(1, text.count(b",") + 1), dtype=np.int64)
    n = _token_ids.read(text, out)
    if want is None:
        assert n == -1
    else:
        assert n == len(want) and out[:n].tolist() == want


@needs_compiled
def test_compiled_reader_checks_its_buffer() -> None:
    from evalrun.kernels import _token_ids

    out = np.zeros(2, dtype=np.int64)
    assert _token_ids.read(b"1, 2, 3", out) == -1  # more fields than room: in doubt
    assert _token_ids.read(b"4,-5", out) == 2 and out.tolist() == [4, -5]
    assert _token_ids.read(b"", out) == 0
    with pytest.raises(ValueError, match="int64 items"):
        _token_ids.read(b"1", np.zeros(3, dtype=np.uint8))
    with pytest.raises(TypeError):
        _token_ids.read(b"1", b"read-only buffer")


def test_split_line_refuses_escapes_and_duplicate_keys() -> None:
    assert split_line('{"token_ids": [1], "note": "a\\"b"}') is None
    assert split_line('{"token_ids": [1], "token_ids": [2]}') is None
    assert split_line('{"token\\u005fids": [], "s": "\\"token_ids\\": [7]"}') is None
    found = split_line('{"id": "a]", "token_ids": [5, 6]}')
    assert found is not None and found[1] == b"5, 6"


@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")) or
                    not sysconfig.get_paths().get("include"),
                    reason="no C compiler here: the install skips the optional reader")
def test_the_reader_is_built_where_a_compiler_is() -> None:
    """The extension is optional in setup.py, so a failed build would only show as slowness;
    where a compiler exists (CI), the install must have built it."""
    assert token_lines._compiled is not None
