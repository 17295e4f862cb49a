"""Word tokenizer: deterministic vocabulary, round trip, padding/truncation with a mask, unknown
words, and validation."""

import numpy as np
import pytest

from policies.tokenizer import PAD_ID, UNK_ID, WordTokenizer, split_words

TEXTS = ["Lift the red cube.", "lift the green cube", "insert the peg"]


def test_vocabulary_is_sorted_and_order_independent():
    a = WordTokenizer.from_texts(TEXTS)
    b = WordTokenizer.from_texts(reversed(TEXTS))
    assert a.vocab == b.vocab == sorted(a.vocab)
    assert a.vocab == [".", "cube", "green", "insert", "lift", "peg", "red", "the"]
    assert a.vocab_size == len(a.vocab) + 2


def test_round_trip_and_padding_mask():
    tok = WordTokenizer.from_texts(TEXTS, max_length=8)
    ids, mask = tok.encode("Lift the RED cube.")
    assert ids.dtype == np.int64 and ids.shape == (8,) and mask.dtype == bool
    np.testing.assert_array_equal(mask, [True] * 5 + [False] * 3)
    np.testing.assert_array_equal(ids[5:], PAD_ID)
    assert tok.decode(ids) == "lift the red cube ."
    assert (ids[mask] >= 2).all()


def test_unknown_words_map_to_unk_and_long_text_truncates():
    tok = WordTokenizer.from_texts(TEXTS, max_length=4)
    ids, mask = tok.encode("lift the blue sphere now")
    np.testing.assert_array_equal(ids[2:], [UNK_ID, UNK_ID])
    assert mask.all()
    assert tok.decode(ids) == "lift the <unk> <unk>"


def test_batch_encoding_matches_single():
    tok = WordTokenizer.from_texts(TEXTS)
    ids, mask = tok.encode_batch(TEXTS)
    assert ids.shape == mask.shape == (3, 16)
    for i, t in enumerate(TEXTS):
        np.testing.assert_array_equal(ids[i], tok.encode(t)[0])
    assert tok.encode_batch([])[0].shape == (0, 16)
    with pytest.raises(TypeError):
        tok.encode_batch("lift the red cube")


def test_rebuilt_from_its_vocab_encodes_identically():
    tok = WordTokenizer.from_texts(TEXTS, max_length=6)
    again = WordTokenizer(list(tok.vocab), tok.max_length)
    for t in TEXTS:
        np.testing.assert_array_equal(again.encode(t)[0], tok.encode(t)[0])


def test_invalid_vocab_and_ids_are_refused():
    with pytest.raises(ValueError, match="duplicate"):
        WordTokenizer(["a", "a"])
    with pytest.raises(ValueError, match="single lower-case"):
        WordTokenizer(["Red"])
    with pytest.raises(ValueError, match="single lower-case"):
        WordTokenizer(["<pad>"])
    with pytest.raises(ValueError, match="max_length"):
        WordTokenizer(["a"], max_length=0)
    with pytest.raises(ValueError, match="outside"):
        WordTokenizer(["a"]).decode([5])


def test_split_words():
    assert split_words("Pick up the cube, then stop!") == [
        "pick",
        "up",
        "the",
        "cube",
        ",",
        "then",
        "stop",
        "!",
    ]
