"""How the published benchmark files hide their questions and answers from crawlers: base64 of the text
XOR-ed with a key made from the row's canary string. Two key schemes are in use:

- BrowseComp and BrowseComp-ZH (:func:`derive_key`): SHA-256 of the canary, repeated to the text's length;
- xbench-DeepSearch (:func:`canary_key`): the canary's own UTF-8 bytes, repeated.

Shared by the plugins that read such files (they never import one another)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable

KeyFn = Callable[[str, int], bytes]


def _repeat(block: bytes, length: int) -> bytes:
    return (block * (length // len(block) + 1))[:length] if block else b""


def derive_key(password: str, length: int) -> bytes:
    """SHA-256 digest of ``password`` repeated (and cut) to ``length`` bytes, as the public BrowseComp
    evaluation derives its XOR key from the canary."""
    return _repeat(hashlib.sha256(password.encode()).digest(), length)


def canary_key(password: str, length: int) -> bytes:
    """The UTF-8 bytes of ``password`` itself repeated to ``length`` bytes (xbench-DeepSearch's key)."""
    if not password:
        raise ValueError("empty canary")
    return _repeat(password.encode(), length)


def decrypt(ciphertext_b64: str, password: str, key: KeyFn = derive_key) -> str:
    """Base64-decode, then XOR with ``key(password, length)`` (default: :func:`derive_key`)."""
    data = base64.b64decode(ciphertext_b64, validate=False)
    k = key(password, len(data))
    return bytes(a ^ b for a, b in zip(data, k)).decode()


def encrypt(plaintext: str, password: str, key: KeyFn = derive_key) -> str:
    """Inverse of :func:`decrypt` (XOR is its own inverse); used to make test data."""
    data = plaintext.encode()
    k = key(password, len(data))
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, k))).decode()
