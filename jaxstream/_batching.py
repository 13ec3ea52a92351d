"""Rarely taken, expensive branches that stay cheap under `vmap`.

A learner's round often has a branch that one stream takes on a few rounds
only (the landmark learner's replacement, run when an uncovered point
arrives with a full landmark set). Written as ``lax.cond`` it is fine for
one stream, but under `vmap` the cond becomes a select that runs both sides
for every stream at every round; written as a loop that runs at most once,
a batch runs it for every stream at each round where *some* stream needs it
(on most rounds of a large batch). `rare` is a ``cond`` for one stream and,
under `vmap`, a custom batching rule that runs the branch only for the
streams that take it, in compacted chunks.

`rare` is generic: ``fn(small, big)`` where `small` is what the branch
changes or needs by value (it travels in a loop carry) and `big` what it
only reads (e.g. a state holding an (N, N) distance cache, a loop-invariant
operand that XLA neither copies nor selects).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from ._loops import static_trip_counts_enabled

__all__ = ["rare", "rare_loop", "compact_chunk", "COMPACT_MAX_BYTES"]

# Under vmap, `rare` gathers the streams that take the branch into chunks and runs `fn` on those only,
# unless the per-stream inputs it would copy exceed this many bytes (an (N, N) distance cache), where it
# runs `fn` on every stream whenever some stream needs it.
COMPACT_MAX_BYTES = 4 << 20


def rare_loop(pred, fn: Callable, default, small, big):
    """``fn(small, big)`` if `pred` else `default`, as a while loop that runs at most once.

    Only `small` (and the small result) travels in the loop carry. `big` is
    read-only inside the loop: a loop-invariant operand, which XLA neither
    copies nor selects. It passes through an optimization barrier together
    with the predicate (the one carry element the body changes), so that XLA
    cannot hoist the branch out of the loop (which would run it
    unconditionally; under vmap it did when only the unchanged `small` went
    through).

    Args:
      pred: scalar bool.
      fn: ``(small, big) -> result`` with the structure, shapes and dtypes of
        `default`; it must read what it needs from its arguments, not from a
        closure over traced values.
      default: the result when `pred` is False.
      small: pytree passed by value.
      big: pytree read in place.

    Returns:
      ``fn(small, big)`` or `default`.
    """
    if static_trip_counts_enabled():  # reverse-differentiable form (`jaxstream._loops`)
        return lax.cond(pred, fn, lambda sm, bg: default, small, big)

    def body(c):
        _, sm, bg = lax.optimization_barrier((c[0], c[2], big))
        return jnp.zeros_like(c[0]), fn(sm, bg), c[2]

    return lax.while_loop(lambda c: c[0], body, (pred, default, small))[1]


def compact_chunk(batch: int) -> int:
    """Streams per chunk of a compacted rare branch under `vmap`: B/16 (at least 1).

    About three chunks when 18 % of the streams take the branch (the rate of
    the landmark learner's replacement on an S-curve).
    """
    return max(1, batch // 16)


def _select_rows(pred, new, old):
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, old)


def _per_stream_bytes(trees, batched) -> int:
    return sum(int(np.prod(np.shape(x)[1:], dtype=np.int64)) * jnp.dtype(x.dtype).itemsize
               for x, b in zip(jax.tree_util.tree_leaves(trees), jax.tree_util.tree_leaves(batched)) if b)


def _compacted(fn, pred, default, small, big, s_b, g_b, axis_size: int):
    """The batched branch for the streams where `pred` (B,) holds, in chunks of `compact_chunk(B)`.

    Stream indices that take the branch are sorted to the front; a while loop
    runs `fn` (vmapped) on one chunk of them per iteration and stops after the
    last; results are scattered back to their streams. The last chunk is
    clamped to the batch's end (its rows already done are not written again).
    """
    c = compact_chunk(axis_size)
    order = jnp.argsort(~pred, stable=True).astype(jnp.int32)  # streams that take the branch first
    n_true = jnp.sum(pred, dtype=jnp.int32)

    def body(carry):
        i, res = carry
        start = jnp.minimum(i * c, axis_size - c)
        ids = lax.dynamic_slice(order, (start,), (c,))  # distinct streams
        pos = start + jnp.arange(c, dtype=jnp.int32)
        take = (pos >= i * c) & (pos < n_true)
        take_rows = lambda tree, b: jax.tree_util.tree_map(lambda x, bb: x[ids] if bb else x, tree, b)
        sm, bg = lax.optimization_barrier((take_rows(small, s_b), take_rows(big, g_b)))
        out = fn(sm, bg)
        res = jax.tree_util.tree_map(
            lambda r, o: r.at[ids].set(jnp.where(take.reshape((c,) + (1,) * (o.ndim - 1)), o, r[ids])), res, out)
        return i + 1, res

    return lax.while_loop(lambda carry: carry[0] * c < n_true, body, (jnp.zeros((), jnp.int32), default))[1]


def rare(pred, fn: Callable, default, small, big) -> Any:
    """``fn(small, big)`` if `pred` else `default`, for a rarely taken, expensive branch.

    One stream: a while loop that runs at most once (`rare_loop`), i.e.
    ``lax.cond`` without copying `big`. Under `vmap`, ``lax.cond`` would
    become a select that runs both branches for every stream at every step,
    and the loop alone would run `fn` for every stream at each step where
    some stream needs it (on most steps of a large batch). Instead the
    batching rule compacts: the indices of the streams that take the branch
    are sorted to the front and `fn` runs, vmapped, on chunks of
    `compact_chunk(B)` of them in a loop that stops after the last one, so
    the work follows the number of streams that need the branch. Where the
    batched per-stream inputs exceed `COMPACT_MAX_BYTES` (gathering them
    would copy more than the branch saves) it falls back to the loop over the
    whole batch, selecting each stream's result. With an unbatched `pred`
    the loop runs the vmapped `fn` once or not at all. Results are the same
    as one stream's, stream by stream.

    Args:
      pred: scalar bool (batched under `vmap`: one per stream).
      fn: ``(small, big) -> result`` shaped like `default` (see `rare_loop`).
      default: the result where `pred` is False.
      small: pytree passed by value (gathered per chunk under `vmap`).
      big: pytree read in place (gathered per chunk under `vmap`).

    Returns:
      ``fn(small, big)`` where `pred`, `default` elsewhere.
    """
    if static_trip_counts_enabled():  # a plain cond (a select under vmap): reverse-differentiable
        return rare_loop(pred, fn, default, small, big)
    @jax.custom_batching.custom_vmap
    def rare_(pred, default, small, big):
        return rare_loop(pred, fn, default, small, big)

    @rare_.def_vmap
    def rule(axis_size, in_batched, pred, default, small, big):
        p_b, d_b, s_b, g_b = in_batched
        bcast = lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))
        default = jax.tree_util.tree_map(bcast, default, d_b)
        ax = lambda b: 0 if b else None
        vfn = jax.vmap(fn, in_axes=(jax.tree_util.tree_map(ax, s_b), jax.tree_util.tree_map(ax, g_b)))
        if not p_b:  # the same predicate for every stream
            out = rare_loop(pred, lambda sm, bg: vfn(sm, bg), default, small, big)
        elif (_per_stream_bytes((small, big), (s_b, g_b)) > COMPACT_MAX_BYTES
              or compact_chunk(axis_size) == axis_size):
            out = rare_loop(jnp.any(pred), lambda sm, bg: _select_rows(pred, vfn(sm, bg), default),
                            default, small, big)
        else:
            out = _compacted(vfn, pred, default, small, big, s_b, g_b, axis_size)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    return rare_(pred, default, small, big)
