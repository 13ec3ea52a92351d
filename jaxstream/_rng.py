"""Counter-mode random numbers from an unrolled Threefry-2x32 (shared by slpc and PACBO).

`jax.random` lowers Threefry on CPU as a rolled loop that does not fuse with
the elementwise work around it, and its normals go through erf⁻¹: a PACBO chain's 4,000 normals
per block of slots cost about 190 µs a stream there, more than scoring the
block. Written out, the hash is one fused
elementwise kernel; normals come from Box–Muller (two per hash). Every draw
is a pure function of (key, counter), so any block of a chain's proposals can
be drawn again later without being stored. Uniforms have 24 random bits and
lie in (0, 1] (1 only in float32, with probability 2⁻²⁴; see `to_uniform`), in the
requested dtype.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

Array = jax.Array
_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))

__all__ = ["threefry2x32", "key_words", "derive", "to_uniform", "uniform_pairs", "uniforms", "normals"]


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32, 20 rounds (Salmon et al. 2011; the hash of `jax.random`), unrolled."""
    ks = (k0, k1, k0 ^ k1 ^ jnp.uint32(0x1BD11BDA))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in _ROT[i % 2]:
            x0 = x0 + x1
            x1 = (x1 << jnp.uint32(r)) | (x1 >> jnp.uint32(32 - r))
            x1 = x0 ^ x1
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + jnp.uint32(i + 1)
    return x0, x1


def key_words(key) -> tuple[Array, Array]:
    """Two uint32 words from a PRNG key (typed, of any implementation, or raw uint32)."""
    kd = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    kd = kd.reshape(-1).astype(jnp.uint32)
    k0, k1 = kd[0], kd[1]
    for i in range(2, kd.shape[0]):
        k0, k1 = (k1, k0 ^ kd[i]) if i % 2 else (k0 ^ kd[i], k1)
    return k0, k1


def derive(words, j) -> tuple[Array, Array]:
    """The words of an independent stream j (the hash of counter j under `words`)."""
    j = jnp.asarray(j, jnp.uint32)
    return threefry2x32(words[0], words[1], j, jnp.uint32(0x9E3779B9))


def to_uniform(bits, dtype) -> Array:
    """Uniforms from uint32 hash words: the top 24 bits, centred in their cell,
    ``((b >> 8) + 0.5)·2⁻²⁴`` (exact in float64; in float32 rounded to
    nearest, so the top cell gives 1.0, with probability 2⁻²⁴; never 0)."""
    return ((bits >> 8).astype(dtype) + 0.5) * (2.0 ** -24)


def uniform_pairs(words, counters, dtype) -> tuple[Array, Array]:
    """The two uniforms of each counter (uint32 array) under `words`: two arrays shaped like `counters`."""
    c = jnp.asarray(counters, jnp.uint32)
    b0, b1 = threefry2x32(words[0], words[1], c, jnp.zeros_like(c))
    return to_uniform(b0, dtype), to_uniform(b1, dtype)


def _pairs(words, start, n_pairs: int, dtype):
    """Two arrays of n_pairs uniforms in (0, 1) from counters start … start + n_pairs − 1."""
    return uniform_pairs(words, jnp.asarray(start, jnp.uint32) + jnp.arange(n_pairs, dtype=jnp.uint32), dtype)


def uniforms(words, shape, dtype, start=0) -> Array:
    """Uniforms in (0, 1) of `shape`: flat element f comes from counter start + f // 2."""
    n = math.prod(shape)
    u0, u1 = _pairs(words, start, (n + 1) // 2, dtype)
    return jnp.stack([u0, u1], axis=1).reshape(-1)[:n].reshape(shape)


def normals(words, shape, dtype, start=0) -> Array:
    """Standard normals of `shape` (Box–Muller): flat element f comes from counter start + f // 2."""
    n = math.prod(shape)
    u0, u1 = _pairs(words, start, (n + 1) // 2, dtype)
    r = jnp.sqrt(-2.0 * jnp.log(u0))
    th = (2.0 * math.pi) * u1
    return jnp.stack([r * jnp.cos(th), r * jnp.sin(th)], axis=1).reshape(-1)[:n].reshape(shape)
