"""slpc's static configuration and its pytrees: `Config`, `State`, `Info`, `Proposal`."""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from .objective import Params

Array = jax.Array

# Layouts (5: the ring of
# recent points, R and L left automatic in the params; 4: seg_slot, the
# rows of hist_D stay put; 3: Params has outlier_scale; 2: hist_D
# segment-major (V − 1, H + 1); 1, unrecorded: (H + 1, V − 1)).
#: Version of the `State` layout, recorded with the configuration so that a
#: checkpoint saved under another layout is refused on load.
STATE_LAYOUT = 5

INITS = ("fit", "pca")
PENALTIES = ("noise", "theory")


class Config(NamedTuple):
    """Static configuration of slpc (capacities and variant choices; hashable).

    Attributes:
      max_segments: p, the largest number of segments (vertex capacity p + 1).
      history_size: H, capacity of the buffer of past points.
      window: most vertices a local move replaces.
      t0: smallest number of initial points.
      explore_steps: lattice steps of a vertex move in exploration rounds.
      init: ``"fit"`` or ``"pca"`` (see `jaxstream.slpc`).
      init_rounds: rounds of the offline fit at ``init="fit"``.
      penalty: ``"noise"`` or ``"theory"``.
      global_moves: G, deletions and end reversals scored per round, with G/2 swaps
        and G/4 relocations (None: all).
      end_lead: on streams arriving in order, the prequential loss counts the
        line with its head path, reaching this many fitted steps past where
        the trace is now (`jaxstream.curves.learner.head_path`; 0: never).
      drift_offset: on streams in random order with a finite memory, the
        prequential loss counts the line moved by the source's estimated
        offset (`jaxstream.curves.tracking.drift_offset`; False: never).
    """

    max_segments: int = 50
    history_size: int = 512
    window: int = 2
    t0: int = 20
    explore_steps: int = 3
    init: str = "fit"
    init_rounds: int = 100
    penalty: str = "noise"
    global_moves: Optional[int] = 8
    end_lead: float = 8.0
    drift_offset: bool = True

    name = "slpc"
    state_layout = STATE_LAYOUT


class State(NamedTuple):
    """slpc state; capacities V = max_segments + 1 and H = history_size.

    Attributes:
      vertex_idx: (V, d) int32 integer lattice coordinates of the vertices in
        standardised units (``vertex_idx·δ``); rows >= n_vertices are padding.
      n_vertices: number of active vertices (K(f̂) + 1).
      hist_x: (H + 1, d) stored past points, standardised; row H is the
        scratch row of the current round's point.
      hist_D: (V − 1, H + 1) squared distances of each history row to the
        segments of the current line (standardised units), one row per
        segment, in the order ``seg_slot`` gives; rows of no active segment
        are inf. A change of the line writes its new segments' rows into
        free rows and permutes ``seg_slot``: no other row moves.
      seg_slot: (V − 1,) int32, a permutation: segment k's row of hist_D
        (k < K); the entries from K on list the free rows.
      hist_r: (H + 1,) each row's squared distance to the segment joining
        its two nearest earlier points when it arrived, or on a stream
        arriving in order its residual across the trend of its neighbours in
        time: a curve-free noise proxy (see
        `jaxstream.curves.history.curve_free_residual`, `noise_level`).
      hist_t: (H + 1,) int32 each row's arrival index (its age weighs it down
        with a finite ``memory``).
      hist_e: (H + 1,) each row's prequential squared residual (its distance
        to the line before the line learned it; for the initial points their
        ``hist_r``/1.5), the noise estimate of `noise_level`.
      recent: (NN_ROWS, d) the last NN_ROWS points, standardised (a ring
        buffer: point n is in row n mod NN_ROWS), where `hist_r`'s two
        nearest neighbours are looked for.
      sorted_r: (H,) the stored rows' ``hist_r`` in increasing order (inf
        beyond ``n_stored``), kept sorted by one removal and one insertion
        per round, so the medians cost O(H) and no sort.
      sorted_e: (H,) the same for ``hist_e``.
      n_stored: number of valid rows 0 … H−1.
      n_seen: number of points learned so far (initial points included).
      memory: τ_t, the forgetting time scale in use (inf: none; see
        `Params.memory`).
      drift: the recent rate at which x_t, tested against the points older
        than the memory, lay farther from them than from the recent points
        (an exponential moving average; what the automatic memory follows,
        `jaxstream.curves.tracking.follow_drift`).
      centre: (d,) mean of the initial points.
      scale: RMS distance of the initial points to their mean.
      params: resolved `Params`.
    """

    vertex_idx: Array
    n_vertices: Array
    hist_x: Array
    hist_D: Array
    seg_slot: Array
    hist_r: Array
    hist_t: Array
    hist_e: Array
    recent: Array
    sorted_r: Array
    sorted_e: Array
    n_stored: Array
    n_seen: Array
    memory: Array
    drift: Array
    centre: Array
    scale: Array
    params: Params

    @property
    def std_vertices(self) -> Array:
        """(V, d) vertices in standardised units (padding rows included)."""
        return self.vertex_idx.astype(self.params.delta.dtype) * self.params.delta[..., None, None]

    @property
    def vertices(self) -> Array:
        """(V, d) vertices in the data's units (padding rows included)."""
        return self.centre[..., None, :] + self.scale[..., None, None] * self.std_vertices

    @property
    def segment_distances(self) -> Array:
        """(V − 1, H + 1) hist_D with its rows in segment order (segment k in row k)."""
        return jnp.take_along_axis(self.hist_D, self.seg_slot[..., None], -2)


class Info(NamedTuple):
    """Per-round diagnostics of `update`.

    Attributes:
      loss: Δ(f̂_t, x_t), the loss of the line *before* learning x_t (data units;
        on a stream arriving in order, with its head path: ``Config.end_lead``).
      n_segments: K(f̂_{t+1}) after the update.
      explore: whether the round explored (I_t = 1).
      move: which kind of move won (`jaxstream.curves.MOVE_NAMES`).
      sigma2: σ̂², the per-coordinate residual variance the price used (data units).
    """

    loss: Array
    n_segments: Array
    explore: Array
    move: Array
    sigma2: Array


class Draws(NamedTuple):
    """All of a round's randomness (one uniform draw, see `jaxstream.curves.learner`)."""

    reservoir: Array  # uniform in [0, 1)
    explore: Array  # bool
    gumbel: Array  # (V−1,)
    z: Array  # (C,) Exp(1) for the local candidates
    z_del: Array  # (G,) Exp(1) for the global deletions
    z_rev: Array  # (2, G) Exp(1) for the end reversals
    offset: Array  # (3,) uniforms in [0, 1): where the deletions', reversals' and swaps' rotating runs start
    pair: Array  # (S,) uniforms: each swap's second segment (S = `global_moves.n_swaps(G)`)
    z_swap: Array  # (S,) Exp(1) for the swaps
    offset_rel: Array  # uniform in [0, 1): where the relocations' rotating run starts
    triple: Array  # (2, R) uniforms: each relocation's second and third segments (R = `global_moves.n_relocations(G)`)
    z_rel: Array  # (3, R) Exp(1) for the relocations' three variants


class Observation(NamedTuple):
    """What a round knows once x_t is observed (standardised units); every stage reads it.

    Attributes:
      u: (d,) x_t.
      vidx, verts: (V, d) the line's lattice coordinates and vertices; nv its vertex count.
      hx: (H + 1, d) the history with x_t in the scratch row H.
      hD: (V − 1, H + 1) the distance cache with x_t's column; x_col (V − 1,) that column.
      row_seg: (V − 1,) the segment held in each cache row.
      minima: each column's ``(m1, c1, m2, c2, m3)`` (`jaxstream.curves.cache.row_minima`).
      tpar: (H + 1,) each row's projection parameter on its nearest segment ``minima[1]``.
      valid, w: (H + 1,) the rows in the objective and their weights.
      n_tot: the number of points the objective stands for.
      sigma2: σ̂², the noise the price and the cap are measured in: the noise
        level plus, where the line is moved by a drift offset, the offset's
        square per coordinate (the source's spread over the memory);
        cap: the largest loss one point adds to the objective.
      noise2: the noise level alone (the drift test's scale).
      offset: (d,) `jaxstream.curves.tracking.drift_offset` where the line is
        moved by it (a finite memory, random order), else zeros.
      spread: the unit the length price is measured in: the RMS distance of the
        objective's points to their mean (the data's current scale, `tracking.extent`).
      params: the round's `Params`, with R and L resolved from the data seen so far.
      order: in [0, 1], how much the recent points arrived in order along a
        trace (`jaxstream.curves.history.arrival_order`).
    """

    u: Array
    vidx: Array
    verts: Array
    nv: Array
    hx: Array
    hD: Array
    x_col: Array
    row_seg: Array
    minima: tuple
    tpar: Array
    valid: Array
    w: Array
    n_tot: Array
    sigma2: Array
    cap: Array
    spread: Array
    params: Params
    order: Array
    noise2: Array
    offset: Array

    @property
    def seg(self) -> Array:
        """(H + 1,) each row's nearest segment."""
        return self.minima[1]

    @property
    def dmin(self) -> Array:
        """(H + 1,) each row's squared distance to the line."""
        return self.minima[0]


class Proposal(NamedTuple):
    """The local candidate set of one round (for inspection and tests), data units.

    Attributes:
      vertices: (C, V, d) full candidate lines; candidate 0 is f̂.
      n_vertices: (C,) vertex counts.
      delta_loss: (C,) change of the weighted cumulative loss (history rows
        weighted n/H once the history is full, x_t weight 1; each point's
        loss capped, see `jaxstream.curves.objective.loss_cap`) relative to f̂.
      price: (C,) the complexity price minus the perturbation.
      z: (C,) Exp(1) perturbations.
      objective: (C,) delta_loss + price.
      feasible: (C,) candidates that may be chosen.
      move: (C,) move kind.
      window: (2,) the replaced vertices are window[0] .. window[1] − 1.
      winner: index of the chosen local candidate.
    """

    vertices: Array
    n_vertices: Array
    delta_loss: Array
    price: Array
    z: Array
    objective: Array
    feasible: Array
    move: Array
    window: Array
    winner: Array
