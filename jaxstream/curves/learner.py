"""Sequential learning of principal curves (slpc): the online learner.

Li & Guedj, "Sequential Learning of Principal Curves: Summarizing Data Streams
on the Fly", Entropy 2021. A polygonal line with vertices on a lattice
follows the stream by follow-the-perturbed-leader (FTPL): each round the line
minimising ``cumulative loss + price(f) − perturbation`` is chosen among a
neighbourhood of the current line (Algorithm 3).

A round (`_round`) is a pipeline of stages over one `Observation`:

    observe → noise level → window → candidates → score → choose → global moves → commit → history

* **observe**: x_t enters the scratch row of the history and its distances
  to every segment the cache's scratch column (`cache`); each column's three
  smallest distances give every point's loss and nearest segment.
* **noise level**: σ̂², the residual variance the history holds (`history`);
  complexity is priced in units of it (`objective`), and one point's loss in
  the objective is capped at ``outlier_scale·max(d − 1, 1)·σ̂²``; the data's
  current spread (the unit of the length price), R, L and each row's weight
  (forgetting, with an automatic memory) follow the stream (`tracking`).
* **window, candidates, score** (`candidates`): the lines that change a
  window of at most ``window`` vertices around x_t, all scored exactly on
  every stored point, densely.
* **choose, global moves** (`global_moves`): the local winner competes with
  single-vertex deletions, end reversals, swaps (2-opt) and relocations
  (or-opt) anywhere on the line.
* **commit**: the winner's new segments' rows are written into the cache
  (`cache.apply_move`); **history**: x_t is offered to the reservoir, and the
  automatic memory learns whether the stream drifts (`tracking.follow_drift`).

Everything works in standardised units: `init` takes the mean c of the
initial points and their RMS distance s to it, the learner works on
u = (x − c)/s and reports losses in the user's units (s²·Δ), so the
objective for a·Q·x + b is the one for x mapped the same way, with a²× the
losses (the vertices' lattice is axis-aligned: exact for scales by powers of
two, up to rounding under shifts; under rotations an equally good line).
The round is dense and branch-free: no compaction, no data-dependent loop.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._caches import cached
from .. import _ops, _rng, geometry
from .._checks import check_bytes_fit, check_capacity, check_fits, check_point, check_points, is_concrete
from .._core import StreamLearner, cached_learner
from . import cache, global_moves, history, tracking
from .candidates import (Candidates, Window, choose_window, make_candidates, n_candidates, score_candidates,
                         winner_rows)
from .objective import Params, default_params, loss_cap, price
from .types import INITS, PENALTIES, Config, Draws, Info, Observation, Proposal, State
from ._initial import _initial_state, round_bytes
from ._prediction import _check_end_lead, _head_sq_dist, _moves, drift_offset, head_path, loss, predict  # noqa: F401

Array = jax.Array

__all__ = ["init", "update", "propose", "loss", "predict", "head_path", "slpc"]


# ----------------------------------------------------------------------------
# init


def init(key, x_init: Array, params: Params, config: Config = Config()) -> State:
    """Initial line from the first points.

    The first-principal-component segment through the initial points
    (between the two extreme projections, snapped to the lattice); with
    ``config.init == "fit"`` it is then improved by ``config.init_rounds``
    rounds of the local search on the initial points themselves (the same
    penalised objective, minimised offline). All initial points enter the
    history.

    Args:
      key: PRNG key (used by the offline fit).
      x_init: (n0, d) initial points, 2 <= n0 <= history_size.
      params: `Params` (zeros for auto R and L).
      config: static `Config`.

    Returns:
      `State`.

    Raises:
      ValueError: (concrete inputs) if the initial points are all equal, or
        if the initial segment is longer than a user-given L.
    """
    n0 = x_init.shape[0]
    if n0 > config.history_size:
        raise ValueError(f"history_size={config.history_size} cannot hold the {n0} initial points")
    x_init = x_init.astype(params.delta.dtype)
    # rows that are all equal can leave a spread of rounding (4e-8 in float32) in `scale`
    same = is_concrete(x_init) and bool(np.all(np.asarray(x_init) == np.asarray(x_init)[:1]))
    check_bytes_fit(round_bytes(x_init, params, config),
                    f"slpc's round (max_segments={config.max_segments}, history_size={config.history_size}, "
                    f"d={x_init.shape[-1]}: its state in and out and its temporaries)", "lower history_size")
    state, scale, len0 = _initial_state(x_init, params, config)
    state = state._replace(params=params)  # the caller's leaves (Python numbers stay as they are)
    if same or (is_concrete(scale) and not float(scale) > 0):
        raise ValueError("the initial points are all equal: slpc needs some spread to fix its units")
    if is_concrete(params.L) and is_concrete(len0) and 0 < float(params.L) < float(len0):
        raise ValueError(f"the initial segment has length {float(len0):.4g} (standardised units) > L={float(params.L):.4g}: "
                         f"no line is feasible; raise L or leave it automatic (L=0)")
    if config.init == "fit" and config.init_rounds > 0:
        state = _fit_initial(key, state, n0, config)
    return state


@functools.partial(jax.jit, static_argnums=(2, 3))
def _fit_initial(key, state, n0: int, config: Config):
    # No length price while fitting the first few points: it exists to stop
    # folds that cover a noise band, which t0 points cannot show, and with it
    # the initial line stays too short to follow the data.
    prm = state.params

    def body(i, s):
        k = jax.random.fold_in(key, i)
        return _round(k, s, s.hist_x[i % n0], config, store=False)[0]

    state = lax.fori_loop(0, config.init_rounds, body,
                          state._replace(params=prm._replace(length_scale=0.0 * prm.length_scale)))
    return state._replace(params=prm)


# ----------------------------------------------------------------------------
# One round


def _draw(key, n_segs: int, C: int, G: int, epsilon, dt) -> Draws:
    """All of a round's randomness from one counter-mode draw (G: global moves of each kind)."""
    S = global_moves.n_swaps(G)
    R = global_moves.n_relocations(G)
    n = 5 + n_segs + S + C + 3 * G + S  # the relocations' draws come after the others'
    u = _rng.uniforms(_rng.key_words(key), (n + 1 + 5 * R,), dt)
    e = -jnp.log(u[5 + n_segs + S:n])
    rel = u[n + 1:]
    return Draws(u[0], u[1] < epsilon, -jnp.log(-jnp.log(u[5:5 + n_segs])), e[:C], e[C:C + G],
                 e[C + G:C + 3 * G].reshape(2, G), u[2:5], u[5 + n_segs:5 + n_segs + S], e[C + 3 * G:],
                 u[n], rel[:2 * R].reshape(2, R), -jnp.log(rel[2 * R:]).reshape(3, R))


def _observe(state: State, u, config: Config, store: bool):
    """x_t into the history's scratch row and the cache's scratch column, each
    column's smallest distances, the rows' weights, σ̂² and the loss cap.

    Returns:
      ``(obs, rows, r_u, e_u, r_x)``: the `Observation`, the history's rows
      with x_t's residuals in the scratch row, those residuals (x_t's noise
      proxy and prequential one; a stored row's own with
      ``store=False``) and x_t's curve-free residual (the drift test's).
    """
    V, d = state.vertex_idx.shape
    H = config.history_size
    prm = state.params
    dt = prm.delta.dtype
    vidx, nv = state.vertex_idx, state.n_vertices
    verts = vidx.astype(dt) * prm.delta
    perm = state.seg_slot
    row_seg = cache.inverse_slots(perm)
    hx = state.hist_x.at[H].set(u)
    x_col = cache.segment_table(u[None], verts, nv, row_seg)[:, 0]
    hD = state.hist_D.at[:, H].set(x_col)
    rows = jnp.arange(H + 1)
    order = history.arrival_order(state.recent, state.n_seen)
    r_x = history.curve_free_residual(u, state.recent, state.n_seen, order >= history.ORDERED)
    # x_t's values are used as computed, not read back from the arrays they
    # are written to: then every write is in place (XLA copies an array
    # that is read after it is written).
    minima = cache.row_minima(hD, row_seg)
    dmin, seg = minima[0], minima[1]
    e_u = dmin[H] if store else state.hist_e[H]
    he = state.hist_e.at[H].set(e_u)
    tpar = cache.position(hx, verts, seg)
    # On a trace, a point that arrives where the line already is (not past one of its ends) is
    # measured against the line, as a point in random order is: its noise proxy is its
    # prequential residual, not its residual across the trend of its neighbours in time (which
    # sees one pass's jitter, not the scatter of the passes about the line).
    past_end = ((seg[H] == 0) & (tpar[H] <= 0.0)) | ((seg[H] == nv - 2) & (tpar[H] >= 1.0))
    r_noise = jnp.where((order >= history.ORDERED) & ~past_end, e_u * history.NN_INFLATION, r_x)
    r_u = r_noise if store else state.hist_r[H]
    hr = state.hist_r.at[H].set(r_u)
    valid = (rows < state.n_stored) | ((rows == H) & store)
    w = jnp.where(rows == H, float(store), jnp.where(rows < state.n_stored, tracking.row_weights(state), 0.0))
    valid, w = _ops.materialize((valid, w))
    arc = history.arc_weights(seg, tpar, valid, w, verts, nv)
    noise2 = history.noise_level(state.sorted_e, state.sorted_r, he, hr, arc, state.n_stored, e_u, r_u,
                                 jnp.asarray(store), d)
    # On a drifting source the remembered rows are the curve smeared over the memory: about the
    # offset's length across it. The line cannot resolve structure finer than that smear, so it is
    # priced as noise; priced at the noise alone, the line folded and doubled through the smear.
    # (A cond: a stream whose memory is unlimited skips the fit.)
    # (It reads the rows from hx, the array written above, not state.hist_x: a read of the buffer
    # before the write would make XLA copy the history.)
    offset = lax.cond(_moves(state, order),
                      lambda: tracking.drift_offset(state._replace(hist_x=hx), (seg[:H], tpar[:H]), w[:H]),
                      lambda: jnp.zeros((d,), dt))
    sigma2 = noise2 + _ops.coord_sum(offset * offset) / d
    sigma2, cap = _ops.materialize((sigma2, loss_cap(sigma2, d, prm, config.penalty)))
    spread, prm_t = tracking.extent(hx, valid, verts, nv, prm, config.max_segments)
    n_tot = jnp.where(jnp.isinf(tracking.memory(state)), (state.n_seen + int(store)).astype(dt), jnp.sum(w))
    obs = Observation(u, vidx, verts, nv, hx, hD, x_col, row_seg, minima, tpar, valid, w,
                      n_tot, sigma2, cap, spread, prm_t, order, noise2, offset)
    rows = history.Rows(hx, hr, state.hist_t, he, state.sorted_r, state.sorted_e)
    return obs, rows, r_u, e_u, r_x


def _choose(c: Candidates, dl, draws: Draws, obs: Observation, prm: Params, config: Config):
    """The local winner: the feasible candidate of least change of loss plus price.

    Returns:
      ``(winner, objective (C,), price (C,), feasible (C,))``.
    """
    dt = obs.verts.dtype
    new_len = geometry.polyline_length(obs.verts, obs.nv) - c.local_len[0] + c.local_len
    new_ns = obs.nv - 1 - c.n_old + c.m
    pr = price(config.penalty, new_ns.astype(dt), new_len, draws.z, obs.sigma2, obs.n_tot, config.max_segments,
               obs.u.shape[0], prm, obs.spread)
    obj = dl + pr
    feasible = (c.ok & (c.m >= 0) & (new_ns >= 1) & (new_ns <= config.max_segments) & (new_len <= prm.L)
                & jnp.isfinite(obj))
    feasible = feasible.at[0].set(True)
    winner = jnp.argmin(jnp.where(feasible, obj, jnp.inf))
    return winner, obj, pr, feasible


def _round(key, state: State, u, config: Config, *, store: bool = True, inspect: bool = False):
    """One round on a standardised point u (d,). ``store=False``: offline
    refit on a point that is already in the history (weight 0, not stored)."""
    V = state.vertex_idx.shape[0]
    H, W = config.history_size, config.window
    prm = state.params
    dt = prm.delta.dtype
    C = n_candidates(W)
    draws = _ops.materialize(_draw(key, V - 1, C, global_moves.n_global(config.global_moves, V), prm.epsilon, dt))
    obs, rows, r_u, e_u, r_x = _observe(state, u, config, store)
    win = _ops.materialize(choose_window(draws, obs, W, config.explore_steps))
    c = _ops.materialize(make_candidates(win, obs, prm.delta, W))
    dl = score_candidates(c, win, obs)
    winner, obj, pr, feasible = _choose(c, dl, draws, obs, obs.params, config)
    n_seen = state.n_seen + int(store)
    slot = history.reservoir_slot(draws.reservoir, n_seen, state.n_stored, H, store, tracking.memory(state))
    memory, drift = tracking.follow_drift(state, obs, r_x) if store else (state.memory, state.drift)
    won = global_moves.Contest(obj[winner], cache.local_move(c, win, winner, obs.vidx, obs.nv),
                               winner_rows(c, winner, obs.hx), c.move[winner])
    if V >= 3:  # a line of one segment has no global move
        won = global_moves.compete(draws, obs, won, obs.params, config.max_segments, config.penalty)
    new_perm, newD = cache.apply_move(won.move, obs.nv, state.seg_slot, obs.hD, won.rows, slot.row, obs.x_col)
    vidx_new = won.move.vidx
    if won.order is not None:  # a swap's or a relocation's reordering (else the identity)
        # A cond: most rounds keep the order and skip the reordering's distances and scatter
        # (under vmap both sides run; benchmarks/README.md has the costs).
        new_perm, newD = lax.cond(
            jnp.any(won.order != jnp.arange(V)),
            lambda p_, d_: cache.apply_reorder(won.order, won.move.nv, p_, d_, obs.hx,
                                               vidx_new.astype(dt) * prm.delta, slot.row),
            lambda p_, d_: (p_, d_), new_perm, newD)
        vidx_new = vidx_new[won.order]
    rows = history.offer(rows, slot, u, r_u, e_u, state.n_seen)
    s2 = state.scale ** 2
    new_state = State(vidx_new, won.move.nv.astype(jnp.int32), rows.hist_x, newD, new_perm, rows.hist_r,
                      rows.hist_t, rows.hist_e, tracking.remember(state.recent, u, state.n_seen) if store else state.recent,
                      rows.sorted_r, rows.sorted_e,
                      slot.n_stored.astype(jnp.int32),
                      n_seen.astype(jnp.int32), memory, drift, state.centre, state.scale, prm)
    pred = obs.dmin[H]
    if config.drift_offset:  # the prediction only, like the head path below
        pred = jnp.where(_moves(state, obs.order),
                         geometry.polyline_sq_dist((u - obs.offset)[None], obs.verts, obs.nv)[0], pred)
    if config.end_lead > 0:  # the prediction only: the objective, σ̂² and the memory use the line itself
        head = _head_sq_dist(u, state.recent, state.n_seen, obs.verts, obs.nv, config.end_lead)
        pred = jnp.where(obs.order >= history.ORDERED, jnp.minimum(pred, head), pred)
    info = Info(s2 * pred, (won.move.nv - 1).astype(jnp.int32), win.explore, won.kind, s2 * obs.sigma2)
    if not inspect:
        return new_state, info
    return new_state, info, _proposal(state, c, win, winner, dl, pr, obj, feasible, draws, W)


# Wide signature: the round's intermediate arrays, read only by `propose`.
def _proposal(state: State, c: Candidates, win: Window, winner, dl, pr, obj, feasible, draws, W: int) -> Proposal:
    """The round's local candidates as full lines in data units."""
    V = state.vertex_idx.shape[0]
    dt = state.params.delta.dtype
    out = jnp.arange(V)
    a = win.a
    src = jnp.clip(jnp.where(out[None] < a, out[None], out[None] - c.m[:, None] + c.n_old), 0, V - 1)
    in_win = (out[None] >= a) & (out[None] < a + c.m[:, None])
    Uc = jnp.take_along_axis(c.U_i, jnp.clip(out[None] - a, 0, W)[..., None], 1)
    lines = jnp.where(in_win[..., None], Uc, state.vertex_idx[src]).astype(dt) * state.params.delta
    s2 = state.scale ** 2
    return Proposal(state.centre + state.scale * lines, state.n_vertices - c.n_old + c.m, s2 * dl, s2 * pr, draws.z,
                    s2 * obj, feasible, c.move, jnp.stack([win.a, win.b]), winner)


def update(key, state: State, x: Array, config: Config = Config()) -> tuple[State, Info]:
    """One round of Algorithm 3 (locally greedy FTPL).

    Args:
      key: PRNG key for this round.
      state: current `State`.
      x: (d,) new observation (finite), data units.
      config: static `Config`.

    Returns:
      ``(new_state, info)``; ``info.loss`` is Δ(f̂_t, x_t) before the update.
    """
    check_point(x, state.vertex_idx.shape[1])
    u = (x.astype(state.scale.dtype) - state.centre) / state.scale
    return _round(key, state, u, config)


def propose(key, state: State, x: Array, config: Config = Config()) -> tuple[State, Info, Proposal]:
    """`update` that also returns the round's local candidate set."""
    check_point(x, state.vertex_idx.shape[1])
    u = (x.astype(state.scale.dtype) - state.centre) / state.scale
    return _round(key, state, u, config, inspect=True)


# ----------------------------------------------------------------------------
# The factory


@cached()
def _update_kernel(config: Config):
    """``update(key, state, x)`` of a configuration, built once, so that equal
    configurations share compiled programs."""
    def update_(key, state, x):
        return update(key, state, x, config)
    return update_


def _build(config: Config, defaults: Params) -> StreamLearner:
    def init_(key, x_init, params=None):
        x_init = check_points(x_init, "x_init")
        if x_init.shape[0] < config.t0:
            raise ValueError(f"slpc needs at least t0={config.t0} initial points; got {x_init.shape[0]}")
        return init(key, x_init, defaults if params is None else params, config)

    return StreamLearner(init_, _update_kernel(config), predict,
                         functools.partial(loss, end_lead=config.end_lead, drift_offset=config.drift_offset),
                         defaults, config)


# Wide signature: the factory's static options, each documented; numeric ones go to **param_kwargs.
def slpc(max_segments: int = 50, history_size: int = 512, *, window: int = 2, t0: int = 20,
         explore_steps: int = 3, init: str = "fit", init_rounds: int = 100, penalty: str = "noise",
         global_moves: int | None = 8, end_lead: float = 8.0, drift_offset: bool = True,
         **param_kwargs) -> StreamLearner:
    """Sequential principal curve learner (Algorithm 3 of Li & Guedj).

    Two calls with equal arguments return the same learner (its compiled
    programs are reused).

    Args:
      max_segments: p, the largest number of segments (vertex capacity p + 1).
      history_size: capacity H of the buffer of past points. Up to H points
        the cumulative loss is exact; beyond, the buffer is a uniform
        reservoir sample standing for x_1 … x_{t−1} (x_t always counts with
        weight 1). Memory and time per round are O(H·p), whatever the
        stream's length.
      window: most vertices replaced per round (the run (ii) of the paper is
        cut to this length).
      t0: smallest number of initial points; `init` raises with fewer.
      explore_steps: lattice steps of a vertex move in exploration rounds.
      init: ``"fit"`` (default): the first-principal-component segment, then
        ``init_rounds`` rounds of the local search on the initial points;
        ``"pca"``: the paper's first-principal-component segment only.
      init_rounds: rounds of the offline fit.
      penalty: ``"noise"`` (default, equivariant: segments priced in units of
        the residual variance, see `jaxstream.curves.objective`) or
        ``"theory"`` (the paper's h(f)/η_t, in standardised units).
      global_moves: G, how many single-vertex deletions, and how many end
        reversals at each end, compete with the local winner each round
        (with G/2 swaps and G/4 relocations, `jaxstream.curves.global_moves`):
        a run of G consecutive ones starting at a uniform place, so each is
        scored every ~K/G rounds on a line of K segments. None scores all
        of them every round (the round's cost then grows with
        ``max_segments``).
      end_lead: on a stream arriving in order (a trace: each point near
        the previous one, `jaxstream.curves.history.arrival_order`), the
        prequential loss (``info.loss`` and `loss`) is the distance to the
        line and its head path (`head_path`): where the trace is now (a
        straight-line fit in time to its last 16 points, at the newest),
        ``end_lead`` of its fitted steps past that, and the join from the
        line's nearer end when the trace has passed it. The line's end lags
        a trace: a vertex must first pay its price, and the newest points are
        the noisiest place to put one. Only that loss changes: the line, its
        objective, its noise estimate, `predict` and the wrapper's
        ``project``/``score`` use the line itself. 0: the line itself always
        (the paper's Δ); streams in random order are never affected.
      drift_offset: on a stream in random order with a finite memory (the
        automatic one after its drift test fired, or a user's ``memory``),
        the prequential loss is the distance to the line moved by the
        source's estimated offset (`drift_offset`): the line fits rows
        weighted over about τ rounds, so on a drifting source it lags the
        stream, and the rows' residuals across the line, fitted on their
        ages, say by how much. Only that loss changes (as with
        ``end_lead``); False: the line itself.
      **param_kwargs: numeric parameters for `default_params` (delta, R, L,
        h_scale, length_scale, eta_scale, z_scale, epsilon, outlier_scale:
        the cap on one point's loss in the objective, in noise variances;
        inf for the plain squared loss; no effect with ``penalty="theory"``;
        memory: the forgetting time scale τ, NaN for automatic (default),
        inf for never; see `jaxstream.curves.tracking`). Valid ranges
        (checked here and by ``init(..., params)`` when the values are
        concrete; ``jaxstream._checks.PARAM_RANGES["slpc"]``): delta ≥ 1e-6
        (vertex coordinates are int32 multiples of it); R, L, length_scale,
        z_scale ≥ 0; h_scale, eta_scale > 0; all finite; epsilon in [0, 1];
        outlier_scale > 0 (inf allowed); memory NaN or ≥ 1 (inf allowed).

    Returns:
      A `StreamLearner` with ``init(key, x_init, params=None)``,
      ``update(key, state, x)``, ``predict(state, x)`` (projection onto the
      line), ``loss(state, x)`` and ``config`` (a `Config`).

    Raises:
      TypeError: a capacity that is not an int, or a drift_offset that is not a bool.
      ValueError: a capacity, choice or numeric parameter out of range
        (naming it and its range), ``history_size < t0``, or capacities whose
        distance cache alone exceeds the device's memory.
    """
    max_segments = check_capacity(max_segments, "max_segments")
    history_size = check_capacity(history_size, "history_size", 2)
    window = check_capacity(window, "window")
    t0 = check_capacity(t0, "t0", 2)
    explore_steps = check_capacity(explore_steps, "explore_steps")
    init_rounds = check_capacity(init_rounds, "init_rounds", 0)
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}; got {init!r}")
    if penalty not in PENALTIES:
        raise ValueError(f"penalty must be one of {PENALTIES}; got {penalty!r}")
    if t0 > history_size:
        raise ValueError(f"history_size={history_size} must be at least t0={t0}")
    if global_moves is not None:
        global_moves = check_capacity(global_moves, "global_moves")
    end_lead = _check_end_lead(end_lead)
    check_fits(max_segments * (history_size + 1),
               f"slpc's cache of distances (max_segments={max_segments} × history_size={history_size} values)",
               "lower history_size or max_segments")
    if not isinstance(drift_offset, (bool, np.bool_)):
        raise TypeError(f"drift_offset must be True or False; got {drift_offset!r}")
    config = Config(max_segments, history_size, window, t0, explore_steps, init, init_rounds, penalty, global_moves,
                    end_lead, bool(drift_offset))
    return cached_learner(_build, config, default_params, param_kwargs)
