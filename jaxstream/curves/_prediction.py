"""slpc's prediction: the loss of the next point and the projection onto the line.

The line counts with its head path on a stream arriving in order
(`head_path`), moved by the source's estimated offset on a stream in random
order with a finite memory (`drift_offset`), otherwise as it is. Re-exported
by `jaxstream.curves.learner`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .. import _ops, geometry
from . import cache, history, tracking
from .types import Config, State

Array = jax.Array


_END_LEAD = Config._field_defaults["end_lead"]


def _in_order(state: State) -> Array:
    """() bool: the last points arrived in order along a trace (`history.arrival_order`)."""
    return history.arrival_order(state.recent, state.n_seen) >= history.ORDERED


def _check_end_lead(end_lead) -> float:
    """``end_lead`` as a float, refused unless it is a finite number >= 0."""
    end_lead = float(end_lead)
    if not (end_lead >= 0 and end_lead < float("inf")):
        raise ValueError(f"end_lead must be a finite number >= 0; got {end_lead}")
    return end_lead


def _head_std(recent: Array, n_seen: Array, verts: Array, nv: Array, end_lead: float) -> tuple[Array, Array]:
    """The head path in standardised units: ``(segments (2, 2, d), ok (2,))`` (see `head_path`)."""
    here, step = history.trace_head(recent, n_seen)
    d0 = _ops.coord_sum((verts[0] - here) ** 2)
    d1 = _ops.coord_sum((verts[nv - 1] - here) ** 2)
    first = d0 <= d1
    end = jnp.where(first, verts[0], verts[nv - 1])
    inner = jnp.where(first, verts[1], verts[nv - 2])
    beyond = _ops.coord_sum((here - end) * (end - inner)) > 0
    segments = jnp.stack([jnp.stack([end, here]), jnp.stack([here, here + end_lead * step])])
    return segments, jnp.stack([beyond, jnp.asarray(True)])


def _head_sq_dist(u: Array, recent: Array, n_seen: Array, verts: Array, nv: Array, end_lead: float) -> Array:
    """() u's squared distance to the head path (standardised units; inf where it has none)."""
    seg, ok = _head_std(recent, n_seen, verts, nv, end_lead)
    d2, _ = geometry.segment_sq_dist(u, seg[:, 0], seg[:, 1])
    return jnp.min(jnp.where(ok, d2, jnp.inf))


def head_path(state: State, end_lead: float = _END_LEAD) -> tuple[Array, Array, Array]:
    """What the next point's loss counts besides the line when the stream arrives in order.

    On a trace arriving in order the line's end lags the trace: a new vertex
    must pay its price first, and the newest points are noisy. The
    prediction therefore also reaches to where the trace is now: ``here``, a
    straight-line fit in time to the last `history.HEAD_WINDOW` points at the
    newest one, continued by ``end_lead`` of its fitted steps per point; and
    where ``here`` lies beyond the line's nearer end (past it along its end
    segment), the join from that end to ``here``.

    Args:
      state: the learner's state.
      end_lead: how many fitted steps of the trace the path reaches past its
        newest point (``Config.end_lead``, a finite number >= 0).

    Returns:
      ``(segments (2, 2, d) in data units, ok (2,) bool, in_order () bool)``:
      the join [line end, here] and the lead [here, here + end_lead·step];
      ``ok`` says which of them the loss counts (the join only beyond the
      end); the loss uses them only with ``in_order`` true.

    Raises:
      ValueError: ``end_lead`` negative, NaN or infinite.
    """
    seg, ok = _head_std(state.recent, state.n_seen, state.std_vertices, state.n_vertices,
                        _check_end_lead(end_lead))
    return state.centre + state.scale * seg, ok, _in_order(state)


def _moves(state: State, order=None) -> Array:
    """() bool: the prequential loss counts the line moved by `drift_offset` (a finite memory, random order).

    ``order``: the round's `history.arrival_order` when the caller has it (computed otherwise).
    """
    if order is None:
        order = history.arrival_order(state.recent, state.n_seen)
    return jnp.isfinite(tracking.memory(state)) & (order < history.ORDERED)


def drift_offset(state: State) -> Array:
    """(d,) in data units: how far the source has moved from the line at the next point's round.

    On a stream in random order with a finite memory (a drifting source, or a
    user's ``memory``) the line stands about τ rounds behind the stream; the
    prequential loss (``info.loss``, `loss`) measures the next point against
    the line moved by this offset (`jaxstream.curves.tracking.drift_offset`).
    Zeros with an unlimited memory and on a stream arriving in order (there
    the head path counts instead). ``state.vertices + drift_offset(state)``
    is where the line predicts the source to be now.
    """
    return state.scale * _offset(state, _moves(state))


def _offset(state: State, moves) -> Array:
    """(d,) standardised `tracking.drift_offset` where ``moves``, else zeros.

    The stored rows' projections come from the state's cache (their nearest
    segments in hist_D), as `update` reads them, not from a new projection of
    every row (O(H·V·d)): `loss` then costs about what `update`'s own
    prediction does. A cond skips the fit while ``moves`` is False (one
    stream; under `vmap` both sides run).
    """
    H = state.hist_x.shape[0] - 1

    def fit():
        seg = cache.nearest_segment(state.hist_D[:, :H], cache.inverse_slots(state.seg_slot))[1]
        rows = state.hist_x[:H]
        return tracking.drift_offset(state, (seg, cache.position(rows, state.std_vertices, seg)))

    return lax.cond(moves, fit, lambda: jnp.zeros(state.hist_x.shape[-1], state.hist_x.dtype))


def loss(state: State, x: Array, end_lead: float = _END_LEAD, drift_offset: bool = True) -> Array:
    """Δ(f̂, x): squared distance from x (d,) to the current line (data units).

    On a stream arriving in order (`history.arrival_order`) the line counts
    with its head path (`head_path`: the join from its end to where the trace
    is now, and ``end_lead`` fitted steps past it); on a stream in random
    order with a finite memory, and ``drift_offset``, the line moved by the
    source's estimated offset (`drift_offset`); otherwise, and with
    ``end_lead=0`` on traces, the line itself.

    Raises:
      ValueError: ``end_lead`` negative, NaN or infinite (a static number).
    """
    end_lead = _check_end_lead(end_lead)
    u = (x - state.centre) / state.scale
    plain = geometry.polyline_sq_dist(u[None], state.std_vertices, state.n_vertices)[0]
    if drift_offset:
        moves = _moves(state)
        moved = geometry.polyline_sq_dist((u - _offset(state, moves))[None], state.std_vertices,
                                          state.n_vertices)[0]
        plain = jnp.where(moves, moved, plain)
    if end_lead == 0:
        return state.scale ** 2 * plain
    head = _head_sq_dist(u, state.recent, state.n_seen, state.std_vertices, state.n_vertices, end_lead)
    return state.scale ** 2 * jnp.where(_in_order(state), jnp.minimum(plain, head), plain)


def predict(state: State, x: Array) -> Array:
    """Projection of points (..., d) onto the current line itself, shape (..., d).

    The line, not its head path: on a stream arriving in order `loss`
    can be smaller than the squared distance to this projection.
    """
    flat = (x.reshape(-1, x.shape[-1]) - state.centre) / state.scale
    pt = geometry.polyline_projection(flat, state.std_vertices, state.n_vertices)["point"]
    return (state.centre + state.scale * pt).reshape(x.shape)
