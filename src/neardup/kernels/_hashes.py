"""Hash functions of the compiled kernels: XXH64 (unkeyed), SipHash-2-4 (keyed, for
untrusted input), the MurmurHash3 finalizer and the key chains of LSH bands.

All arithmetic is on ``uint64`` and wraps modulo 2**64 by design: every constant
and shift amount is an explicit ``np.uint64`` because numba promotes mixed
signed/unsigned integer arithmetic to float64, which would silently lose bits.
The kernels validate nothing; the public modules wrap them with typed, validated
entry points.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels._kernel import kernel

U64 = np.uint64


U32MAX = np.uint64(0xFFFFFFFF)


# XXH64's primes; P1, P2 and P4 also mix the chains of band keys (here and in _vkernels).
P1 = np.uint64(11400714785074694791)


P2 = np.uint64(14029467366897019727)


P3 = np.uint64(1609587929392839161)


P4 = np.uint64(9650029242287828579)


P5 = np.uint64(2870177450012600261)


ALGO_XXH64 = 0


ALGO_SIPHASH24 = 1


@kernel
def _rotl(x, r):
    return (x << U64(r)) | (x >> U64(64 - r))


@kernel
def _read_le(buf, p, nbytes):
    """The little-endian unsigned integer in ``buf[p:p + nbytes]`` (at most 8 bytes)."""
    v = U64(0)
    for i in range(nbytes):
        v |= U64(buf[p + i]) << U64(8 * i)
    return v


@kernel
def _xxround(acc, inp):
    acc = acc + inp * P2
    acc = _rotl(acc, 31)
    return acc * P1


@kernel
def _xxmerge(acc, val):
    val = _xxround(U64(0), val)
    acc = acc ^ val
    return acc * P1 + P4


@kernel
def xxh64(buf, start, length, seed):
    """XXH64 of ``buf[start:start+length]`` (bit-identical to the reference)."""
    p = start
    end = start + length
    seed = U64(seed)
    if length >= 32:
        v1 = seed + P1 + P2
        v2 = seed + P2
        v3 = seed
        v4 = seed - P1
        while p + 32 <= end:
            v1 = _xxround(v1, _read_le(buf, p, 8))
            v2 = _xxround(v2, _read_le(buf, p + 8, 8))
            v3 = _xxround(v3, _read_le(buf, p + 16, 8))
            v4 = _xxround(v4, _read_le(buf, p + 24, 8))
            p += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _xxmerge(h, v1)
        h = _xxmerge(h, v2)
        h = _xxmerge(h, v3)
        h = _xxmerge(h, v4)
    else:
        h = seed + P5
    h = h + U64(length)
    while p + 8 <= end:
        k1 = _xxround(U64(0), _read_le(buf, p, 8))
        h = h ^ k1
        h = _rotl(h, 27) * P1 + P4
        p += 8
    if p + 4 <= end:
        h = h ^ (_read_le(buf, p, 4) * P1)
        h = _rotl(h, 23) * P2 + P3
        p += 4
    while p < end:
        h = h ^ (U64(buf[p]) * P5)
        h = _rotl(h, 11) * P1
        p += 1
    h = h ^ (h >> U64(33))
    h = h * P2
    h = h ^ (h >> U64(29))
    h = h * P3
    h = h ^ (h >> U64(32))
    return h


@kernel
def _sipround(v0, v1, v2, v3):
    """One SipRound of the four state words."""
    v0 += v1
    v1 = _rotl(v1, 13)
    v1 ^= v0
    v0 = _rotl(v0, 32)
    v2 += v3
    v3 = _rotl(v3, 16)
    v3 ^= v2
    v0 += v3
    v3 = _rotl(v3, 21)
    v3 ^= v0
    v2 += v1
    v1 = _rotl(v1, 17)
    v1 ^= v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


@kernel
def siphash24(buf, start, length, k0, k1):
    """SipHash-2-4 (Aumasson & Bernstein) of ``buf[start:start+length]``: a keyed PRF."""
    k0 = U64(k0)
    k1 = U64(k1)
    v0 = k0 ^ U64(0x736F6D6570736575)
    v1 = k1 ^ U64(0x646F72616E646F6D)
    v2 = k0 ^ U64(0x6C7967656E657261)
    v3 = k1 ^ U64(0x7465646279746573)
    end = start + length
    p = start
    nrounds_total = length // 8 + 1
    for blk in range(nrounds_total):
        if blk < length // 8:
            m = _read_le(buf, p, 8)
            p += 8
        else:
            m = U64(length & 0xFF) << U64(56)
            i = 0
            while p + i < end:
                m |= U64(buf[p + i]) << U64(8 * i)
                i += 1
        v3 ^= m
        for _ in range(2):
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m
    v2 ^= U64(0xFF)
    for _ in range(4):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


@kernel
def hash_span(buf, start, length, algo, seed, k0, k1):
    if algo == ALGO_SIPHASH24:
        return siphash24(buf, start, length, k0, k1)
    return xxh64(buf, start, length, seed)


@kernel
def fmix64(h):
    """MurmurHash3's 64-bit finalizer: a bijective avalanche mix."""
    h = h ^ (h >> U64(33))
    h = h * U64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> U64(33))
    h = h * U64(0xC4CEB9FE1A85EC53)
    h = h ^ (h >> U64(33))
    return h


@kernel
def band_start(seed, bnd):
    """The first link of band ``bnd``'s key chain (``seed`` a uint64)."""
    return fmix64(seed ^ (U64(bnd + 1) * P1))


@kernel
def band_step(h, v):
    """Key chain ``h`` after one more uint64 value ``v``."""
    return fmix64((h ^ v) * P2 + P4)


@kernel
def combine_tokens(th, start, span):
    """Hash of the word n-gram whose token hashes are ``th[start:start+span]``.

    ``acc = fmix64((acc ^ t) * P1 + P4)`` per token from ``acc = P5 ^ span``: each
    step is a bijection of ``acc`` for a fixed token, so n-grams that differ only in
    their last token never collide, and distinct n-grams collide with probability
    about 2**-64 when the token hashes are unpredictable (the keyed scheme).
    """
    acc = P5 ^ U64(span)
    for t in range(start, start + span):
        acc = fmix64((acc ^ th[t]) * P1 + P4)
    return acc
