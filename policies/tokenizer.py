"""Word-level tokenizer for language instructions, built from a dataset's instructions and
saved inside the policy's checkpoint config (a list of words): nothing is downloaded.

Text is lower-cased and split into words (runs of letters/digits) and single punctuation
marks. Ids: 0 is padding, 1 is an unknown word, the vocabulary follows in its stored order.
Encoding pads (or truncates) to ``max_length`` tokens and returns a mask of real tokens.

Shape letters: B batch, L ``max_length``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

PAD_ID = 0
UNK_ID = 1
SPECIALS = ("<pad>", "<unk>")
LANGUAGE_KEY = "language"  # observation entry: the instruction (str at the env, ids in policies)
_WORD = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")


def split_words(text: str) -> list[str]:
    """Lower-cased words and punctuation marks of ``text``, in order."""
    return _WORD.findall(text.lower())


class WordTokenizer:
    """Maps instructions to fixed-length id arrays.

    Args:
        vocab: the words (no duplicates, no special tokens); word ``vocab[i]`` gets id ``i + 2``.
        max_length: L, tokens per encoded instruction (longer ones are truncated).
    """

    def __init__(self, vocab: Sequence[str], max_length: int = 16) -> None:
        if max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {max_length}")
        words = list(vocab)
        if len(set(words)) != len(words):
            raise ValueError("vocab has duplicate words")
        bad = [w for w in words if w in SPECIALS or split_words(w) != [w]]
        if bad:
            raise ValueError(f"vocab entries must be single lower-case words, got {bad[:5]}")
        self.vocab = words
        self.max_length = int(max_length)
        self._ids = {w: i + len(SPECIALS) for i, w in enumerate(words)}

    @classmethod
    def from_texts(cls, texts: Iterable[str], max_length: int = 16) -> WordTokenizer:
        """Vocabulary of every word in ``texts``, sorted (deterministic whatever the order)."""
        words = sorted({w for t in texts for w in split_words(str(t))})
        return cls(words, max_length)

    @property
    def vocab_size(self) -> int:
        """Number of ids, specials included."""
        return len(self.vocab) + len(SPECIALS)

    def encode(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """``(ids (L,) int64, mask (L,) bool)``; unknown words map to ``UNK_ID``."""
        ids = [self._ids.get(w, UNK_ID) for w in split_words(text)][: self.max_length]
        out = np.full(self.max_length, PAD_ID, dtype=np.int64)
        out[: len(ids)] = ids
        return out, out != PAD_ID

    def encode_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(ids (B, L) int64, mask (B, L) bool)``."""
        if isinstance(texts, str):
            raise TypeError("encode_batch takes a sequence of strings, got one string")
        pairs = [self.encode(str(t)) for t in texts]
        if not pairs:
            empty = np.zeros((0, self.max_length), np.int64)
            return empty, empty.astype(bool)
        return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """Words of ``ids`` joined by spaces (padding dropped, unknown words as ``<unk>``)."""
        words = []
        for i in np.asarray(ids).reshape(-1).tolist():
            if i == PAD_ID:
                continue
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} outside [0, {self.vocab_size})")
            words.append(SPECIALS[i] if i < len(SPECIALS) else self.vocab[i - len(SPECIALS)])
        return " ".join(words)
