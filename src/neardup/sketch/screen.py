"""Stage 8 — membership screen: a Bloom filter over exact content hashes.

``contains`` answers *definitely unseen* (False) or *possibly seen* (True).  There
are no false negatives: every added hash is reported as possibly seen.  False
positives happen at about ``fp_rate`` once ``capacity`` items are in; the rate
actually expected for the current count is :meth:`BloomFilter.expected_fp_rate`.

Keys are 64-bit hashes that are already uniformly distributed (the content hash of
a keyed or seeded scheme), so the filter derives its k probe positions by double
hashing (Kirsch & Mitzenmacher 2006) instead of re-hashing: a batch of n keys is
added or tested with a few numpy operations over an (n, k) index array.  We write
it here rather than depend on a Bloom library because those re-hash Python
objects, cannot take a vector of keys, and persist in formats we cannot checksum.

Example:
    >>> bf = BloomFilter(capacity=1000, fp_rate=0.01)
    >>> bf.add([1, 2, 3])
    >>> bool(bf.contains([2])[0]), bool(bf.contains([4])[0])
    (True, False)
"""

from __future__ import annotations

import hashlib
import json
import math
import struct

import numpy as np
import numpy.typing as npt

from neardup.core._errors import CorruptFile, InvalidConfig

__all__ = ["BloomFilter", "mix64"]

_MAGIC = b"NDBLOOM1"


def mix64(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """MurmurHash3's 64-bit finalizer (fmix64) of each value, in numpy: a bijective
    avalanche mix, so keys that are not uniform (positions, small ints) spread
    over all 64 bits.  The compiled kernels use the same mix (``_hashes.fmix64``).

    >>> mix64(np.array([0, 1], dtype=np.uint64)).tolist()
    [0, 12994781566227106604]
    """
    with np.errstate(over="ignore"):
        h = h ^ (h >> np.uint64(33))
        h = h * np.uint64(0xFF51AFD7ED558CCD)
        h = h ^ (h >> np.uint64(33))
        h = h * np.uint64(0xC4CEB9FE1A85EC53)
        return h ^ (h >> np.uint64(33))


class BloomFilter:
    """A Bloom filter sized from the expected count and the target false-positive rate."""

    def __init__(self, *, capacity: int, fp_rate: float = 0.001) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise InvalidConfig(
                "capacity", capacity, "must be a positive integer", "use e.g. 1000000"
            )
        if not 0.0 < fp_rate < 0.5:
            raise InvalidConfig("fp_rate", fp_rate, "must be in (0, 0.5)", "use e.g. 0.001")
        bits = math.ceil(-capacity * math.log(fp_rate) / math.log(2) ** 2)
        self.num_bits = max(64, ((bits + 63) // 64) * 64)
        self.num_hashes = max(1, min(30, round(self.num_bits / capacity * math.log(2))))
        self.capacity = capacity
        self.fp_rate = fp_rate
        self.count = 0
        self._words = np.zeros(self.num_bits // 64, dtype=np.uint64)

    def _positions(self, keys: npt.ArrayLike) -> npt.NDArray[np.uint64]:
        h1 = np.atleast_1d(np.asarray(keys, dtype=np.uint64))
        h2 = mix64(h1) | np.uint64(1)
        i = np.arange(self.num_hashes, dtype=np.uint64)
        with np.errstate(over="ignore"):
            g = h1[:, None] + i[None, :] * h2[:, None]
        return g % np.uint64(self.num_bits)

    def add(self, keys: npt.ArrayLike) -> None:
        """Add 64-bit keys (an int or an array)."""
        pos = self._positions(keys).ravel()
        np.bitwise_or.at(self._words, pos >> np.uint64(6), np.uint64(1) << (pos & np.uint64(63)))
        self.count += int(np.atleast_1d(np.asarray(keys)).shape[0])

    def contains(self, keys: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Per key: False means definitely never added; True means possibly added."""
        pos = self._positions(keys)
        bits = (self._words[pos >> np.uint64(6)] >> (pos & np.uint64(63))) & np.uint64(1)
        return np.asarray(bits.all(axis=1), dtype=np.bool_)

    def __contains__(self, key: int) -> bool:
        return bool(self.contains([key])[0])

    def expected_fp_rate(self, count: int | None = None) -> float:
        """(1 - e^(-k·n/m))^k for ``count`` items (default: the items added)."""
        n = self.count if count is None else count
        return (1.0 - math.exp(-self.num_hashes * n / self.num_bits)) ** self.num_hashes

    def to_bytes(self) -> bytes:
        meta = json.dumps(
            {
                "capacity": self.capacity,
                "fp_rate": self.fp_rate,
                "count": self.count,
                "num_bits": self.num_bits,
                "num_hashes": self.num_hashes,
            }
        ).encode()
        body = _MAGIC + struct.pack("<I", len(meta)) + meta + self._words.astype("<u8").tobytes()
        return body + hashlib.blake2b(body, digest_size=32).digest()

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "<bytes>") -> BloomFilter:
        if len(data) < len(_MAGIC) + 4 + 32 or not data.startswith(_MAGIC):
            raise CorruptFile(source, "not a neardup Bloom filter")
        body, digest = data[:-32], data[-32:]
        if hashlib.blake2b(body, digest_size=32).digest() != digest:
            raise CorruptFile(source, "Bloom filter checksum mismatch")
        (mlen,) = struct.unpack("<I", body[8:12])
        try:
            meta = json.loads(body[12 : 12 + mlen])
        except ValueError as exc:
            raise CorruptFile(source, f"bad Bloom filter header ({exc})") from exc
        bf = cls(capacity=int(meta["capacity"]), fp_rate=float(meta["fp_rate"]))
        words = np.frombuffer(body[12 + mlen :], dtype="<u8")
        if bf.num_bits != meta["num_bits"] or words.shape[0] * 64 != bf.num_bits:
            raise CorruptFile(source, "Bloom filter size disagrees with its header")
        bf._words = words.astype(np.uint64).copy()
        bf.count = int(meta["count"])
        return bf
