"""Tokenisation for text runs: BERT's basic tokens, a hashing tokenizer (no vocabulary file),
WordPiece over a local vocab.txt, and transformers' fast tokenizer where it is installed.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fitbench.datasets.files import PathLike, existing_path, numpy_module, read_file, short_error
from fitbench.errors import FitbenchError

if TYPE_CHECKING:
    import numpy as np

# BERT's BasicTokenizer (Devlin et al. 2019, google-research/bert tokenization.py): drop control
# characters, isolate CJK ideographs, lowercase and strip accents, split on whitespace, and make
# every punctuation character (ASCII symbols included) a token of its own.
_ASCII_PUNCT = r"!-/:-@\[-`{-~"
_ASCII_TOKEN = re.compile(rf"[^\s{_ASCII_PUNCT}]+|[{_ASCII_PUNCT}]")
_ASCII_CONTROLS = dict.fromkeys([*range(0, 9), 11, 12, *range(14, 32), 127])
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
#: words longer than this become [UNK], as in BERT's WordPiece
MAX_WORD_CHARS = 100


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def basic_tokens(text: str, lowercase: bool = True) -> list[str]:
    """Split text into words and single punctuation characters the way BERT does before WordPiece.

    ASCII text (nearly all of IMDb) takes a single regular expression; other text goes
    character by character through BERT's Unicode rules.
    """
    if text.isascii():
        text = text.translate(_ASCII_CONTROLS)
        return _ASCII_TOKEN.findall(text.lower() if lowercase else text)
    text = _clean_unicode(text)
    if lowercase:
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
    tokens: list[str] = []
    for word in text.split():
        tokens.extend(_split_punctuation(word))
    return tokens


def _clean_unicode(text: str) -> str:
    """BERT's clean-up: controls and NUL/U+FFFD dropped, whitespace a blank, CJK characters
    surrounded by blanks (each is a word)."""
    chars: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        if ch in " \t\n\r":
            chars.append(" ")
            continue
        category = unicodedata.category(ch)
        if category == "Zs":
            chars.append(" ")
        elif category[0] == "C":
            continue
        elif any(low <= cp <= high for low, high in _CJK_RANGES):
            chars.extend((" ", ch, " "))
        else:
            chars.append(ch)
    return "".join(chars)


def _split_punctuation(word: str) -> list[str]:
    """A word split before and after each punctuation character, which stands alone."""
    tokens: list[str] = []
    start = 0
    for i, ch in enumerate(word):
        if _is_punctuation(ch):
            if start < i:
                tokens.append(word[start:i])
            tokens.append(ch)
            start = i + 1
    if start < len(word):
        tokens.append(word[start:])
    return tokens


class Tokenizer(Protocol):
    """What text_batches needs from a tokenizer: a vocabulary size and fixed-length encoding."""

    vocab_size: int
    description: str

    def encode(self, texts: Sequence[str], seq_len: int) -> dict[str, np.ndarray]: ...


def _check_seq_len(seq_len: int) -> None:
    if type(seq_len) is not int or seq_len < 2:
        raise FitbenchError(
            f"seq-len must be at least 2 to hold [CLS] and [SEP], got {seq_len!r}",
            message_zh=f"seq-len 至少为 2,才能放下 [CLS] 和 [SEP],实际为 {seq_len!r}",
        )


_WORD_CACHE_LIMIT = 1 << 20


class _BertStyleTokenizer(ABC):
    """Shared encoding: [CLS] ids [SEP], truncated and padded to a fixed length."""

    vocab_size: int
    description: str
    cls_id: int
    sep_id: int
    pad_id: int
    unk_id: int
    lowercase: bool

    def __init__(self) -> None:
        self._cache: dict[str, tuple[int, ...]] = {}

    @abstractmethod
    def word_ids(self, word: str) -> tuple[int, ...]:
        """Ids of one basic token (a hashed id, or WordPiece pieces)."""

    def ids(self, text: str, limit: int | None = None) -> list[int]:
        """Token ids of one text, without [CLS]/[SEP]; at most `limit` of them."""
        cache = self._cache
        out: list[int] = []
        # every word yields at least one id, so words past the limit cannot matter
        for word in basic_tokens(text, self.lowercase)[:limit]:
            got = cache.get(word)
            if got is None:
                got = self.word_ids(word)
                if len(cache) < _WORD_CACHE_LIMIT:
                    cache[word] = got
            out.extend(got)
        return out[:limit]

    def encode(self, texts: Sequence[str], seq_len: int) -> dict[str, np.ndarray]:
        """input_ids, attention_mask, token_type_ids: int64 arrays of len(texts) x seq_len."""
        _check_seq_len(seq_len)
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, not one string")
        np = numpy_module()
        input_ids = np.full((len(texts), seq_len), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(texts), seq_len), dtype=np.int64)
        for row, text in enumerate(texts):
            body = self.ids(text, seq_len - 2)
            end = len(body) + 1
            input_ids[row, 0] = self.cls_id
            input_ids[row, 1:end] = body
            input_ids[row, end] = self.sep_id
            mask[row, : end + 1] = 1
        return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}


class HashingTokenizer(_BertStyleTokenizer):
    """BERT-style tokenisation with no vocabulary file: each word's id is a stable hash.

    Why this is legitimate for a speed and memory benchmark: the model's cost depends on the
    shapes it is fed (batch x sequence length) and on how much of each sequence is padding,
    never on which ids fill it. Splitting reviews into words and punctuation the way BERT
    does gives realistic sequence lengths (WordPiece splits rare words further, so real
    sequences run slightly longer; at 512 most IMDb reviews are truncated either way).
    Accuracy is not measured with it; for real ids, pass a local vocab.txt to load_tokenizer.

    Ids come from zlib.crc32 of the UTF-8 word, folded into [first_free_id, vocab_size):
    identical in every process and on every machine, unlike Python's salted hash().
    Words longer than MAX_WORD_CHARS map to unk_id, as in BERT.
    """

    def __init__(
        self,
        vocab_size: int,
        cls_id: int = 101,
        sep_id: int = 102,
        pad_id: int = 0,
        unk_id: int = 100,
        *,
        lowercase: bool = True,
    ) -> None:
        super().__init__()
        specials = {"cls_id": cls_id, "sep_id": sep_id, "pad_id": pad_id, "unk_id": unk_id}
        for name, value in {"vocab_size": vocab_size, **specials}.items():
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        self.first_free_id = max(specials.values()) + 1
        if vocab_size <= self.first_free_id:
            raise FitbenchError(
                f"vocab size {vocab_size} leaves no room for words after the special "
                f"ids (up to {self.first_free_id - 1})",
                "use a larger vocab size",
                message_zh=(
                    f"词表大小 {vocab_size} 在特殊 id(最大到 {self.first_free_id - 1})之后已没有留给词的位置"
                ),
                hint_zh="请使用更大的词表",
            )
        self.vocab_size, self.cls_id, self.sep_id, self.pad_id, self.unk_id = (
            vocab_size,
            cls_id,
            sep_id,
            pad_id,
            unk_id,
        )
        self.lowercase = lowercase
        self._ids: dict[str, int] = {}
        self.description = f"hashing tokenizer (vocab {vocab_size:,})"

    def word_id(self, word: str) -> int:
        """The id of one basic token (a word or a punctuation character)."""
        if len(word) > MAX_WORD_CHARS:
            return self.unk_id
        span = self.vocab_size - self.first_free_id
        return self.first_free_id + zlib.crc32(word.encode("utf-8", "surrogatepass")) % span

    def word_ids(self, word: str) -> tuple[int, ...]:
        return (self.word_id(word),)

    def ids(self, text: str, limit: int | None = None) -> list[int]:
        cache = self._ids
        words = basic_tokens(text, self.lowercase)[:limit]
        missing = [word for word in words if word not in cache]
        if missing and len(cache) < _WORD_CACHE_LIMIT:
            cache.update((word, self.word_id(word)) for word in missing)
        elif missing:
            return [self.word_id(word) for word in words]
        return [cache[word] for word in words]


class WordPieceTokenizer(_BertStyleTokenizer):
    """BERT's WordPiece over a local vocab.txt, in pure Python (used when transformers is absent).

    Greedy longest-match-first over each basic token, continuation pieces prefixed with '##',
    and a word with no match becomes [UNK] (google-research/bert tokenization.py).
    """

    def __init__(self, vocab: Mapping[str, int], *, lowercase: bool = True, source: str = "") -> None:
        super().__init__()
        self.vocab = dict(vocab)
        missing = [tok for tok in ("[CLS]", "[SEP]", "[PAD]", "[UNK]") if tok not in self.vocab]
        if missing:
            raise FitbenchError(
                f"vocabulary {source or ''} lacks {', '.join(missing)}",
                "pass the vocab.txt of a BERT-style checkpoint",
                message_zh=f"词表 {source or ''} 缺少 {', '.join(missing)}",
                hint_zh="请传入 BERT 式检查点的 vocab.txt",
            )
        self.cls_id, self.sep_id = self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.pad_id, self.unk_id = self.vocab["[PAD]"], self.vocab["[UNK]"]
        self.vocab_size = max(self.vocab.values()) + 1
        self.lowercase = lowercase
        self.description = f"WordPiece vocabulary {source} ({self.vocab_size:,} tokens)"

    @classmethod
    def from_vocab_file(cls, vocab_file: PathLike, *, lowercase: bool = True) -> WordPieceTokenizer:
        raw = read_file(
            Path(vocab_file),
            what="vocabulary",
            hint="pass a BERT vocab.txt",
            max_bytes=64 << 20,
            what_zh="词表",
            hint_zh="请传入 BERT 的 vocab.txt",
        )
        lines = raw.decode("utf-8", errors="replace").splitlines()
        vocab: dict[str, int] = {}
        for index, token in enumerate(lines):
            vocab.setdefault(token.rstrip("\r\n"), index)
        return cls(vocab, lowercase=lowercase, source=str(vocab_file))

    def word_ids(self, word: str) -> tuple[int, ...]:
        if len(word) > MAX_WORD_CHARS:
            return (self.unk_id,)
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return (self.unk_id,)
            pieces.append(found)
            start = end
        return tuple(pieces)


class _TransformersTokenizer:
    """transformers' fast BERT tokenizer behind the Tokenizer protocol."""

    def __init__(self, tokenizer: Any, source: str) -> None:
        self._tokenizer = tokenizer
        self.vocab_size = len(tokenizer)
        self.description = f"WordPiece vocabulary {source} ({self.vocab_size:,} tokens, transformers)"

    def encode(self, texts: Sequence[str], seq_len: int) -> dict[str, np.ndarray]:
        _check_seq_len(seq_len)
        np = numpy_module()
        out = self._tokenizer(
            list(texts),
            max_length=seq_len,
            padding="max_length",
            truncation=True,
            return_tensors="np",
            return_attention_mask=True,
            return_token_type_ids=True,
        )
        return {
            key: np.asarray(out[key], dtype=np.int64)
            for key in ("input_ids", "attention_mask", "token_type_ids")
        }


def load_tokenizer(vocab_size: int, tokenizer_path: PathLike | None = None) -> Tokenizer:
    """The tokenizer for a text run: hashing by default, a checkpoint's WordPiece when given.

    tokenizer_path: a folder holding a BERT vocab.txt (or the file itself). transformers'
    BertTokenizerFast reads it when transformers is installed (fast, and it honours the
    folder's tokenizer_config.json); otherwise WordPieceTokenizer does the same in Python.
    Without a path, HashingTokenizer uses BERT's special ids (0, 100, 101, 102) when the
    vocabulary has room for them, else 0..3.
    """
    if tokenizer_path is None:
        if vocab_size > 104:
            return HashingTokenizer(vocab_size)
        return HashingTokenizer(vocab_size, cls_id=2, sep_id=3, pad_id=0, unk_id=1)
    hint = "pass a folder holding a BERT-style vocab.txt, or none to use the hashing tokenizer"
    hint_zh = "请传入含有 BERT 式 vocab.txt 的文件夹,或不传以使用哈希分词器"
    p = existing_path(tokenizer_path, "tokenizer", hint, what_zh="分词器", hint_zh=hint_zh)
    folder = p.parent if p.is_file() else p
    vocab_file = folder / "vocab.txt"
    if not vocab_file.is_file():
        raise FitbenchError(
            f"no vocab.txt in {folder}", hint, message_zh=f"{folder} 中没有 vocab.txt", hint_zh=hint_zh
        )
    lowercase = _config_lowercase(folder)
    tokenizer: Tokenizer
    try:
        from transformers import BertTokenizerFast
    except ImportError:
        tokenizer = WordPieceTokenizer.from_vocab_file(vocab_file, lowercase=lowercase)
    else:
        try:
            hf = BertTokenizerFast.from_pretrained(str(folder), local_files_only=True)
        except Exception as exc:  # transformers raises OSError, ValueError or its own types here
            raise FitbenchError(
                f"transformers cannot read the tokenizer in {folder} ({short_error(exc)})",
                hint,
                message_zh=f"transformers 无法读取 {folder} 中的分词器({short_error(exc)})",
                hint_zh=hint_zh,
            ) from exc
        tokenizer = _TransformersTokenizer(hf, str(folder))
    if tokenizer.vocab_size > vocab_size:
        raise FitbenchError(
            f"the tokenizer in {folder} has {tokenizer.vocab_size:,} tokens but the model's "
            f"vocabulary only {vocab_size:,}",
            "use the tokenizer that belongs to the model",
            message_zh=(
                f"{folder} 中的分词器有 {tokenizer.vocab_size:,} 个 token,但模型的词表只有 {vocab_size:,} 个"
            ),
            hint_zh="请使用与模型配套的分词器",
        )
    return tokenizer


def _config_lowercase(folder: Path) -> bool:
    import json

    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    value = config.get("do_lower_case", True) if isinstance(config, dict) else True
    return value if isinstance(value, bool) else True
