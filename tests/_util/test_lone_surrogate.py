"""evalrun._util.jsonl.lone_surrogate: where parsed JSON holds a string that is not text."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from evalrun._util.jsonl import lone_surrogate


def test_it_names_the_json_path_and_character() -> None:
    assert lone_surrogate(json.loads('{"a": [1, {"b": "x\\ud800"}]}')) == ("$.a[1].b", 1)
    assert lone_surrogate(json.loads('{"\\udc80": 1}')) == ("$ (a key)", 0)
    assert lone_surrogate(json.loads('{"a": "\\ud83d\\ude00 paired"}')) is None
    deep: object = "\ud800"
    for _ in range(5000):   # deeper than recursion would allow: walked without it
        deep = [deep]
    assert lone_surrogate(deep) == ("$" + "[0]" * 5000, 0)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                           lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20)


@given(json_values)
def test_it_agrees_with_utf8_encoding(value: object) -> None:
    encodable = True
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        encodable = False
    assert (lone_surrogate(value) is None) == encodable
