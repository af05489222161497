"""Local datasets for real training runs: CIFAR-10, IMDb, and synthetic data of the same shapes.

fitbench never downloads at run time. A dataset is read from the files its authors publish
(CIFAR-10's "python version" pickles, IMDb's ``aclImdb/`` text files, or the tar.gz holding
either), and synthetic data of the same shapes and dtypes is the default: speed and memory do
not depend on pixel values or on which words a review holds, only on shapes and lengths.

Everything here is framework-free and sits below the backends, which feed their models from it;
numpy is imported inside functions so that importing this package stays cheap (numpy is present
wherever a framework backend runs).

files.py        bounded reads, tar members streamed, one clear error per bad file
safe_pickle.py  restricted unpickling (CIFAR-10's batches, nothing callable)
images.py       CIFAR-10, synthetic images, nearest-neighbour resize, normalisation, image_batches
tokenizers.py   BERT's basic tokens, hashing / WordPiece / transformers tokenizers
text.py         IMDb, synthetic sequences, text_batches
cycling.py      BatchCycler: endless reshuffled batches from in-memory arrays
"""

from __future__ import annotations

from fitbench.datasets.cycling import BatchCycler
from fitbench.datasets.images import (
    CIFAR_HINT,
    CIFAR_MEAN,
    CIFAR_STD,
    ImageData,
    image_batches,
    normalise_images,
    parse_cifar_batch,
    read_cifar10,
    resize_nearest,
    synthetic_images,
)
from fitbench.datasets.safe_pickle import safe_unpickle
from fitbench.datasets.text import IMDB_HINT, TextData, read_imdb, synthetic_tokens, text_batches
from fitbench.datasets.tokenizers import (
    HashingTokenizer,
    Tokenizer,
    WordPieceTokenizer,
    basic_tokens,
    load_tokenizer,
)

__all__ = [
    "CIFAR_HINT",
    "CIFAR_MEAN",
    "CIFAR_STD",
    "IMDB_HINT",
    "BatchCycler",
    "HashingTokenizer",
    "ImageData",
    "TextData",
    "Tokenizer",
    "WordPieceTokenizer",
    "basic_tokens",
    "image_batches",
    "load_tokenizer",
    "normalise_images",
    "parse_cifar_batch",
    "read_cifar10",
    "read_imdb",
    "resize_nearest",
    "safe_unpickle",
    "synthetic_images",
    "synthetic_tokens",
    "text_batches",
]
