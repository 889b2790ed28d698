"""Stage 4 for vectors — random-hyperplane (SimHash) and p-stable signatures.

Not every duplicate is a set of shingles.  Each geometry here has its own
signature family, collision law and exact verifier, and none is mixed with MinHash
(a :class:`VectorConfig` has its own fingerprint, and its scheme names the family):

=============  =====================================  ==================================
metric         signature (one hash)                   collision probability of a pair
=============  =====================================  ==================================
``cosine``     sign(r·x), r ~ N(0, I) (a hyperplane)  1 − θ/π, θ = arccos(cos(x, y))
``l2``         floor((a·x + u) / w), a ~ N(0, I)      decreasing in ‖x − y‖₂ (Datar et al.)
``l1``         same with a ~ Cauchy                   decreasing in ‖x − y‖₁
``weighted_``  ICWS sample (feature, level) of a      J_w = Σ min(x, y) / Σ max(x, y)
``jaccard``    weighted bag (Ioffe 2010)              (exactly; weighted bags only)
=============  =====================================  ==================================

Guarantees and non-guarantees:

* **Scale is ignored by cosine.** sign(r·x) = sign(r·cx) for every c > 0, so
  (1, 1) and (100, 100) always collide and verify at cosine 1.0.  Use ``l2`` when
  magnitude matters.  A zero vector has no angle and is refused
  (:class:`~neardup.ZeroVector`).
* Collision laws are probabilities over the random hyperplanes/projections, which
  are a pure function of (scheme, seed, dimension): the same seed gives the same
  signatures on every machine.  Banding turns them into candidate probabilities
  ``1 − (1 − p**rows)**bands`` (:func:`neardup.candidate_probability`, shared with
  MinHash), and the default layout reaches ``recall_target`` at the threshold.
* Candidates are evidence only: every candidate is re-scored exactly (cosine, l2 or
  l1 over the original values, in float64) before it is called a duplicate.

This module holds the hashers; the collision laws and layouts are in
:mod:`neardup.vectors.vlayout` and :class:`VectorConfig` in
:mod:`neardup.vectors.vconfig`, both re-exported here.

Example:
    >>> import numpy as np
    >>> h = HyperplaneHasher(dim=4, bits=128, seed=7)
    >>> a, b = h.signatures(np.array([[1, 1, 1, 1], [100, 100, 100, 100]], float))
    >>> hamming_distance(a, b)          # scale is ignored
    0
    >>> round(cosine_from_hamming(32, 128), 4)   # 32 of 128 bits differ: theta = pi/4
    0.7071
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from neardup.core._errors import InvalidConfig, ZeroVector, shown
from neardup.core._fingerprint import fingerprint
from neardup.core.checks import check_same
from neardup.core.hexsig import signature_bytes
from neardup.kernels import _vkernels as V
from neardup.vectors.vconfig import MAX_BITS, VectorConfig, check_pos_int
from neardup.vectors.vlayout import (
    cosine_from_hamming,
    hyperplane_collision,
    pick_width,
    pstable_collision,
    vector_layout,
)

__all__ = [
    "HyperplaneHasher",
    "ICWSHasher",
    "PStableHasher",
    "VectorConfig",
    "VectorSignatures",
    "angular_distance",
    "cosine_from_hamming",
    "hamming_distance",
    "hyperplane_collision",
    "normalize_vector",
    "pick_width",
    "pstable_collision",
    "vector_layout",
]


def _rng(scheme: str, seed: int, dim: int) -> np.random.Generator:
    """A generator that is a pure function of (scheme, seed, dim) — never shared."""
    digest = hashlib.blake2b(
        f"{scheme}\x00{seed}\x00{dim}".encode(), digest_size=16, person=b"neardup-vecrng"
    ).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest, "little")))


def _kernel_seed(seed: int, person: bytes) -> np.uint64:
    """The 64-bit seed a kernel draws from: ``seed`` hashed under ``person`` (one
    person per scheme, so that schemes sharing a user seed draw unrelated values)."""
    digest = hashlib.blake2b(f"{seed}".encode(), digest_size=8, person=person).digest()
    return np.uint64(int.from_bytes(digest, "little"))


def normalize_vector(v: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``v / ‖v‖₂`` in float64.  A zero (or non-finite) vector raises :class:`ZeroVector`.

    >>> normalize_vector([3.0, 4.0])
    array([0.6, 0.8])
    """
    try:
        x = np.asarray(v, dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        raise InvalidConfig(
            "vector", shown(v), "is not an array of numbers", "pass one vector of floats"
        ) from None
    if x.ndim != 1 or x.size == 0:
        raise InvalidConfig("vector", x.shape, "must be a non-empty 1-D array", "pass one vector")
    if not np.all(np.isfinite(x)):
        raise ZeroVector(None, "has a NaN or infinite component")
    n = float(np.linalg.norm(x))
    if n == 0.0:
        raise ZeroVector(None)
    return x / n


def _words(name: str, v: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    try:
        x = np.asarray(v)
        if x.dtype.kind not in "uib" or (x.dtype.kind == "i" and x.size and int(x.min()) < 0):
            raise ValueError
        return x.astype(np.uint64)
    except (ValueError, TypeError, OverflowError):
        raise InvalidConfig(
            name,
            shown(v),
            "is not a packed signature (non-negative integer words, a hex string or bytes)",
            "pass VectorSignatures.data rows, or the text VectorSignatures.hex() gave",
        ) from None


def _text_sig(v: object) -> bool:
    return isinstance(v, str | bytes | bytearray | memoryview)


def hamming_distance(a: npt.ArrayLike | str | bytes, b: npt.ArrayLike | str | bytes) -> Any:
    """Differing bits of packed signatures: an int for two 1-D signatures, an array
    of ints for two (n, words) arrays row by row.

    A signature is ``uint64`` words (a row of :attr:`VectorSignatures.data`), a hex
    string (:meth:`VectorSignatures.hex`) or bytes; the two must be of one length.
    Anything else raises :class:`~neardup.InvalidConfig`.

    >>> hamming_distance("9f3a", "9f2b")
    2
    """
    if _text_sig(a) or _text_sig(b):
        x8 = _sig_bytes("a", a)
        y8 = _sig_bytes("b", b)
        check_same(
            "signatures",
            x8.shape[0],
            y8.shape[0],
            "lengths in bytes differ",
            "compare signatures of one scheme (same bits)",
        )
        return int(np.bitwise_count(np.bitwise_xor(x8, y8)).sum())
    x = _words("a", a)
    y = _words("b", b)
    check_same("signatures", x.shape, y.shape, "shapes differ", "compare signatures of one scheme")
    z = np.bitwise_count(np.bitwise_xor(x, y)).astype(np.int64)
    if z.ndim <= 1:
        return int(z.sum())
    return z.sum(axis=-1)


def _sig_bytes(name: str, v: object) -> npt.NDArray[np.uint8]:
    if _text_sig(v):
        raw = signature_bytes(name, v)  # type: ignore[arg-type]
    else:
        w = _words(name, v)  # type: ignore[arg-type]
        if w.ndim != 1:
            raise InvalidConfig(
                name, w.shape, "must be one signature to compare with a hex string", "pass one row"
            )
        raw = w.astype("<u8").tobytes()
    return np.frombuffer(raw, dtype=np.uint8)


def angular_distance(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """The angle between two vectors over π, in [0, 1]: 0 same direction, 0.5
    orthogonal, 1 opposite (exact, float64).

    It is the probability that one random hyperplane separates them, so the
    fraction of differing SimHash bits, ``hamming_distance(a, b) / bits``, is an
    unbiased estimate of it (standard error sqrt(d(1−d)/bits)); the cosine
    estimate from those bits is :func:`cosine_from_hamming`.  Scale is ignored;
    a zero or non-finite vector raises :class:`~neardup.ZeroVector`, vectors of
    different lengths :class:`~neardup.InvalidConfig`.

    >>> angular_distance([1.0, 0.0], [0.0, 2.0])
    0.5
    """
    u = normalize_vector(x)
    v = normalize_vector(y)
    check_same(
        "vectors", u.shape[0], v.shape[0], "dimensions differ", "pass two vectors of one dimension"
    )
    c = min(1.0, max(-1.0, float(np.dot(u, v))))
    return math.acos(c) / math.pi


@dataclass(frozen=True, eq=False, slots=True)
class VectorSignatures:
    """Signatures of n vectors: packed bits (hyperplanes, (n, bits/64) ``uint64``) or
    integer codes (p-stable, (n, k) ``int64`` viewed as ``uint64``)."""

    data: npt.NDArray[np.uint64]
    kind: Literal["bits", "codes"]
    width: int
    fingerprint: str

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def __iter__(self) -> Any:
        return iter(self.data)

    def hex(self, i: int) -> str:
        """Signature ``i`` as hex: its words little-endian, 16 digits a word (what
        :meth:`from_hex` and :func:`hamming_distance` read).

        >>> s = HyperplaneHasher(dim=2, bits=64, seed=1).signatures([[1.0, 2.0]])
        >>> VectorSignatures.from_hex([s.hex(0)], like=s).data.tolist() == s.data.tolist()
        True
        """
        n = len(self)
        if isinstance(i, bool) or not isinstance(i, int | np.integer) or not -n <= i < n:
            raise InvalidConfig("i", i, f"out of range for {n} signatures", f"use 0 <= i < {n}")
        return str(self.data[i].astype("<u8").tobytes().hex())

    @classmethod
    def from_hex(cls, rows: Sequence[str | bytes], *, like: VectorSignatures) -> VectorSignatures:
        """Signatures given as hex strings (or bytes), one per row, of the scheme of
        ``like`` (its kind, width and fingerprint).

        Raises :class:`~neardup.InvalidConfig` on text that is not hex or rows that
        do not hold as many words as ``like``'s.
        """
        words = int(like.data.shape[1]) if like.data.ndim == 2 else 0
        out = np.empty((len(rows), words), dtype=np.uint64)
        for r, text in enumerate(rows):
            raw = signature_bytes("signature", text, item_bytes=8)
            if len(raw) != 8 * words:
                raise InvalidConfig(
                    "signature",
                    f"row {r}: {len(raw) // 8} words",
                    f"the scheme's signatures have {words} words",
                    "pass signatures of this scheme, as .hex() gave them",
                )
            out[r] = np.frombuffer(raw, dtype="<u8")
        return cls(out, like.kind, like.width, like.fingerprint)


def _as_matrix(X: npt.ArrayLike, dim: int | None) -> npt.NDArray[np.floating[Any]]:
    A = np.asarray(X)
    if A.ndim == 1:
        A = A[None, :]
    if A.ndim != 2:
        raise InvalidConfig("vectors", A.shape, "must be a 2-D array (n, dim)", "stack vectors")
    if A.dtype not in (np.float32, np.float64):
        A = A.astype(np.float64)
    if dim is not None and A.shape[1] != dim:
        raise InvalidConfig(
            "vectors", A.shape, f"dimension differs from the hasher's {dim}", "use one dimension"
        )
    return A


class HyperplaneHasher:
    """Random-hyperplane (SimHash) signatures: bit j of x is ``r_j·x > 0``.

    ``bits`` hyperplanes r_j ~ N(0, I_dim) drawn from a generator seeded by
    (scheme, seed, dim) only.  Bits agree with probability 1 − θ/π for vectors at
    angle θ; positive scale never changes a bit.  Signatures are packed 64 bits a
    word, little-endian bit order.
    """

    def __init__(self, *, dim: int, bits: int = 256, seed: int = 42) -> None:
        check_pos_int("dim", dim, 1, 1 << 20, "pass the vectors' dimension")
        check_pos_int("bits", bits, 64, MAX_BITS, "use a multiple of 64, e.g. 256")
        if bits % 64:
            raise InvalidConfig("bits", bits, "must be a multiple of 64", "use e.g. 256")
        self.dim = dim
        self.bits = bits
        self.seed = seed
        self.planes = (
            _rng("hyperplane-v1", seed, dim).standard_normal((bits, dim)).astype(np.float32)
        )
        self.fingerprint = fingerprint(
            {"scheme": "hyperplane-v1", "dim": dim, "bits": bits, "seed": seed}
        )

    def projections(self, X: npt.ArrayLike) -> npt.NDArray[np.float32]:
        A = _as_matrix(X, self.dim)
        return np.asarray(A.astype(np.float32, copy=False) @ self.planes.T, dtype=np.float32)

    def signatures(self, X: npt.ArrayLike, *, chunk: int = 32768) -> VectorSignatures:
        """Packed signatures of the rows of ``X`` (computed ``chunk`` rows at a time)."""
        A = _as_matrix(X, self.dim)
        n = A.shape[0]
        out = np.empty((n, self.bits // 64), dtype=np.uint64)
        for s in range(0, n, chunk):
            out[s : s + chunk] = _pack(self.projections(A[s : s + chunk]) > 0)
        return VectorSignatures(out, "bits", self.bits, self.fingerprint)

    def sparse_signatures(
        self,
        tokens: npt.NDArray[np.uint64],
        weights: npt.NDArray[np.float64],
        indptr: npt.NDArray[np.int64],
    ) -> VectorSignatures:
        """Signatures of weighted bags of features in CSR form (token hashes, weights).

        The hyperplane component of a feature is a standard normal drawn from
        (seed, feature hash, bit), so bags of any vocabulary get the same 1 − θ/π
        law as dense vectors.  Token hashes must come from a keyed hash when the
        features are untrusted (:func:`neardup.vectors.vpipeline.weighted_bags`)."""
        n = indptr.shape[0] - 1
        seed = _kernel_seed(self.seed, b"neardup-sparsehp")
        out = np.empty((n, self.bits // 64), dtype=np.uint64)
        step = 4096
        for s in range(0, n, step):
            e = min(n, s + step)
            proj = np.empty((e - s, self.bits), dtype=np.float64)
            sub = indptr[s : e + 1] - indptr[s]
            lo, hi = int(indptr[s]), int(indptr[e])
            V.sparse_projections(
                tokens[lo:hi], weights[lo:hi], sub, self.bits, seed, proj
            )
            out[s:e] = _pack(proj > 0)
        return VectorSignatures(out, "bits", self.bits, self.fingerprint + "-sparse")


def _pack(bits: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint64]:
    packed = np.packbits(bits, axis=1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u8").astype(np.uint64, copy=False)


class PStableHasher:
    """p-stable LSH for l2 (Gaussian) or l1 (Cauchy): h(x) = floor((a·x + u) / w).

    ``u ~ U[0, w)`` is the random shift.  Two points at distance c share one code
    with probability :func:`pstable_collision` (c, w), which decreases with c.
    """

    def __init__(self, *, dim: int, hashes: int, width: float, p: int = 2, seed: int = 42) -> None:
        check_pos_int("dim", dim, 1, 1 << 20, "pass the vectors' dimension")
        check_pos_int("hashes", hashes, 1, MAX_BITS, "use bands * rows")
        if p not in (1, 2):
            raise InvalidConfig("p", p, "only l1 and l2", "use p=1 or p=2")
        if not width > 0:
            raise InvalidConfig("width", width, "must be > 0", "use pick_width(radius)")
        scheme = f"pstable-l{p}-v1"
        rng = _rng(scheme, seed, dim)
        a = rng.standard_normal((hashes, dim)) if p == 2 else rng.standard_cauchy((hashes, dim))
        self.dim, self.hashes, self.width, self.p, self.seed = dim, hashes, float(width), p, seed
        self.proj = a.astype(np.float64)
        self.shift = rng.uniform(0.0, width, hashes)
        self.fingerprint = fingerprint(
            {"scheme": scheme, "dim": dim, "hashes": hashes, "width": float(width), "seed": seed}
        )

    def signatures(self, X: npt.ArrayLike, *, chunk: int = 32768) -> VectorSignatures:
        A = _as_matrix(X, self.dim)
        n = A.shape[0]
        out = np.empty((n, self.hashes), dtype=np.int64)
        for s in range(0, n, chunk):
            z = (A[s : s + chunk].astype(np.float64) @ self.proj.T + self.shift) / self.width
            out[s : s + chunk] = np.floor(z).astype(np.int64)
        return VectorSignatures(out.view(np.uint64), "codes", self.hashes, self.fingerprint)


class ICWSHasher:
    """Consistent weighted sampling (Ioffe's improved CWS) for weighted bags: ``hashes``
    codes per bag; two bags share a code with probability equal to their weighted
    Jaccard similarity Σ min / Σ max (weights must be >= 0; zero weights are absent).

    Feature hashes must come from a keyed hash when the features are untrusted
    (:func:`neardup.vectors.weighted_bags` with ``key``).

    >>> from neardup.vectors import weighted_bags
    >>> b = weighted_bags([{"a": 2.0, "b": 1.0}, {"a": 2.0, "b": 1.0}, {"c": 1.0}])
    >>> s = ICWSHasher(hashes=64, seed=1).signatures(b.tokens, b.weights, b.indptr).data
    >>> bool((s[0] == s[1]).all()), bool((s[0] == s[2]).any())
    (True, False)
    """

    def __init__(self, *, hashes: int, seed: int = 42) -> None:
        check_pos_int("hashes", hashes, 1, MAX_BITS, "use bands * rows")
        check_pos_int("seed", seed, 0, (1 << 64) - 1, "use an integer in [0, 2**64)")
        self.hashes = hashes
        self.seed = seed
        self.fingerprint = fingerprint({"scheme": "icws-v1", "hashes": hashes, "seed": seed})

    def signatures(
        self,
        tokens: npt.NDArray[np.uint64],
        weights: npt.NDArray[np.float64],
        indptr: npt.NDArray[np.int64],
    ) -> VectorSignatures:
        if weights.size and float(weights.min()) < 0:
            raise InvalidConfig(
                "weights", float(weights.min()), "weighted Jaccard needs weights >= 0",
                "use metric='cosine' for signed weights",
            )
        n = indptr.shape[0] - 1
        out = np.empty((n, self.hashes), dtype=np.uint64)
        seed = _kernel_seed(self.seed, b"neardup-icws")
        V.icws_codes(tokens, weights, indptr, self.hashes, seed, out)
        return VectorSignatures(out, "codes", self.hashes, self.fingerprint)
