"""The memo of decided green-list memberships (:mod:`evalrun.watermark.engine.membership_memo`)."""

from __future__ import annotations

import collections
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun.watermark.engine import membership_memo as memo_module
from evalrun.watermark.engine import seed_tables as seed_tables_module
from evalrun.watermark.engine.membership_memo import KEY_LIMIT, MembershipMemo, membership_memo


def _oracle(keys: np.ndarray) -> np.ndarray:
    """A fixed decision per key (what tracing would find), independent of the memo."""
    return ((keys * np.uint64(0x2545F4914F6CDD1D)) >> np.uint64(61)) < np.uint64(3)


class Asked:
    """``fresh`` that records the keys it is asked about."""

    def __init__(self) -> None:
        self.keys: list[int] = []

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        self.keys += keys.tolist()
        return _oracle(keys)


def _keys(values) -> np.ndarray:
    return np.unique(np.asarray(values, dtype=np.uint64))


def test_each_key_is_decided_once_while_held() -> None:
    memo, asked = MembershipMemo(10), Asked()
    first = _keys([5, 9, 2**40, 2**61 + 3])
    assert memo.decide(first, asked).tolist() == _oracle(first).tolist()
    second = _keys([1, 5, 2**40, 77])
    assert memo.decide(second, asked).tolist() == _oracle(second).tolist()
    assert asked.keys == first.tolist() + [1, 77]  # missing keys asked in their order
    assert len(memo) == 6


def test_a_key_pushed_out_is_decided_again() -> None:
    memo, asked = MembershipMemo(0), Asked()  # one slot: each key pushes the last one out
    for values in ([4], [4], [7], [4], [4, 7]):
        keys = _keys(values)
        assert memo.decide(keys, asked).tolist() == _oracle(keys).tolist()
    assert asked.keys == [4, 7, 4, 7] and len(memo) == 1


def test_no_slots_keeps_nothing() -> None:
    memo, asked = MembershipMemo(-1), Asked()
    for _ in range(2):
        memo.decide(_keys([1, 2]), asked)
    assert len(memo) == 0 and asked.keys == [1, 2, 1, 2]


def test_keys_at_the_limit_are_refused() -> None:
    with pytest.raises(ValueError, match="not below 2\\*\\*62"):
        MembershipMemo(4).decide(_keys([3, KEY_LIMIT]), Asked())


@settings(max_examples=80, deadline=None)
@given(calls=st.lists(st.lists(st.integers(0, 60), max_size=14), max_size=8),
       slots_log2=st.integers(-1, 5),
       high=st.sampled_from([0, 2**40, KEY_LIMIT - 61]))
def test_any_sequence_of_calls_gives_the_decisions(calls: list[list[int]], slots_log2: int,
                                                   high: int) -> None:
    """Whatever was kept or pushed out, every answer is the decision itself, each slot
    holds a key with its own flag, and nothing held is asked again."""
    memo = MembershipMemo(slots_log2)
    for values in calls:
        keys = _keys([high + v for v in values])
        asked = Asked()
        held_before = set() if memo._slots is None else set(
            (memo._slots[memo._slots != memo_module._EMPTY] >> np.uint64(1)).tolist())
        assert memo.decide(keys, asked).tolist() == _oracle(keys).tolist()
        assert not held_before & set(asked.keys)
        if memo._slots is not None:
            full = memo._slots[memo._slots != memo_module._EMPTY]
            assert ((full & np.uint64(1)).astype(bool) == _oracle(full >> np.uint64(1))).all()


def test_threads_sharing_a_memo_get_the_decisions() -> None:
    memo = MembershipMemo(10)  # 1,024 slots for 3,000 keys: threads push each other's out
    rng = np.random.default_rng(3)
    batches = [_keys(rng.integers(0, 3000, 800)) for _ in range(16)]
    wrong: list[int] = []

    def work(k: int) -> None:
        for j in range(k, k + 40):
            keys = batches[j % len(batches)]
            if not np.array_equal(memo.decide(keys, _oracle), _oracle(keys)):
                wrong.append(j)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
    full = memo._slots[memo._slots != memo_module._EMPTY]
    assert ((full & np.uint64(1)).astype(bool) == _oracle(full >> np.uint64(1))).all()


def test_memos_are_kept_per_vocabulary_and_bounded(monkeypatch) -> None:
    monkeypatch.setattr(memo_module, "_memos", collections.OrderedDict())
    monkeypatch.setattr(seed_tables_module, "_CACHE",
                        seed_tables_module.SeedTableCache(48 << 20))  # 3 MiB per memo
    a = membership_memo(32000, 8000)
    assert membership_memo(32000, 8000) is a and membership_memo(32000, 16000) is not a
    assert a.slots_log2 == 18  # 2 MiB of words: the largest power of two within 3 MiB
    for v in range(1000, 1000 + memo_module.MEMO_SPACES + 2):
        membership_memo(v, v // 4)
    assert len(memo_module._memos) == memo_module.MEMO_SPACES
    assert membership_memo(32000, 8000) is not a  # the oldest were let go
    monkeypatch.setattr(seed_tables_module, "_CACHE", seed_tables_module.SeedTableCache(1 << 40))
    assert membership_memo(7, 1).slots_log2 == memo_module.MAX_SLOTS_LOG2


def test_a_zero_seed_table_budget_turns_the_memo_off(monkeypatch) -> None:
    monkeypatch.setattr(memo_module, "_memos", collections.OrderedDict())
    monkeypatch.setenv(seed_tables_module.ENV_BUDGET, "0")
    monkeypatch.setattr(seed_tables_module, "_CACHE", None)
    memo = membership_memo(1000, 250)
    asked = Asked()
    memo.decide(_keys([3, 4]), asked)
    memo.decide(_keys([3, 4]), asked)
    assert len(memo) == 0 and asked.keys == [3, 4, 3, 4]


def test_no_keys() -> None:
    assert MembershipMemo(3).decide(_keys([]), Asked()).tolist() == []


def test_clear_memos_forgets_every_decision(monkeypatch) -> None:
    monkeypatch.setattr(memo_module, "_memos", collections.OrderedDict())
    memo = membership_memo(500, 125)
    memo.decide(_keys([1, 2]), Asked())
    memo_module.clear_memos()
    fresh = membership_memo(500, 125)
    asked = Asked()
    fresh.decide(_keys([1, 2]), asked)
    assert fresh is not memo and asked.keys == [1, 2]
