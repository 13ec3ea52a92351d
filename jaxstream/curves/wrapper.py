"""`SLPC`: the NumPy-in / NumPy-out wrapper around `jaxstream.slpc`."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .. import geometry
from .._wrapper import StreamModel
from .learner import slpc
from .objective import (DEFAULT_DELTA, DEFAULT_H_SCALE, DEFAULT_LENGTH_SCALE, DEFAULT_OUTLIER_SCALE)

__all__ = ["SLPC"]


class SLPC(StreamModel):
    """Sequential principal curve (slpc), NumPy in / NumPy out.

    The first ``t0`` points build the initial curve (their prequential
    losses are NaN: there was no curve to score them); every later point is
    scored by the current curve, then learned. See `jaxstream.StreamModel`
    for the conventions (``fit``/``partial_fit``/``learn_one`` return self;
    ``last_losses_``, ``cumulative_loss_``, ``state_``).

    Example:
      >>> import numpy as np
      >>> from jaxstream import SLPC, datasets
      >>> points = datasets.make_cubic_stream(300, seed=0)       # (300, 2)
      >>> model = SLPC(max_segments=10, history_size=64, seed=0).partial_fit(points)
      >>> int(np.isnan(model.last_losses_).sum())               # the first t0 = 20 points start the curve
      20
      >>> model.vertices_.shape == (model.n_segments_ + 1, 2)   # the current line, (K+1, d)
      True
      >>> model.learn_one(points[0]).last_losses_.shape         # one more point: its prequential loss
      (1,)
      >>> model.predict(points[:3]).shape                       # projections onto the line
      (3, 2)
      >>> model.transform(points[:3]).shape                     # arc-length positions
      (3, 1)
      >>> 0.9 < model.score(points) <= 1.0                      # R² of the points under the line
      True

    Args: the arguments of `jaxstream.slpc` (capacities, variants and
      numeric parameters), and ``seed`` for the PRNG key.

    ``project``, ``predict``, ``transform`` and ``score`` use the curve itself;
    on a stream arriving in order the prequential losses (``last_losses_``)
    count its head path too (``end_lead``), and on a drifting stream in
    random order the line moved by the source's offset (``drift_offset``;
    see `jaxstream.slpc`).
    """

    # Wide signature: scikit-learn's rule: every hyper-parameter is an explicit __init__ argument.
    def __init__(self, max_segments: int = 50, history_size: int = 512, *, window: int = 2, t0: int = 20,
                 explore_steps: int = 3, init: str = "fit", init_rounds: int = 100, penalty: str = "noise",
                 global_moves: Optional[int] = 8, end_lead: float = 8.0, drift_offset: bool = True,
                 delta: float = DEFAULT_DELTA, R: float = 0.0, L: float = 0.0,
                 h_scale: float = DEFAULT_H_SCALE, length_scale: float = DEFAULT_LENGTH_SCALE,
                 eta_scale: float = 1.0, z_scale: float = 1.0, epsilon: float = 0.05,
                 outlier_scale: float = DEFAULT_OUTLIER_SCALE, memory: float = float("nan"), seed: int = 0):
        self.max_segments = max_segments
        self.history_size = history_size
        self.window = window
        self.t0 = t0
        self.explore_steps = explore_steps
        self.init = init
        self.init_rounds = init_rounds
        self.penalty = penalty
        self.global_moves = global_moves
        self.end_lead = end_lead
        self.drift_offset = drift_offset
        self.delta = delta
        self.R = R
        self.L = L
        self.h_scale = h_scale
        self.length_scale = length_scale
        self.eta_scale = eta_scale
        self.z_scale = z_scale
        self.epsilon = epsilon
        self.outlier_scale = outlier_scale
        self.memory = memory
        self.seed = seed

    def _build(self):
        p = self.get_params()
        p.pop("seed")
        return slpc(p.pop("max_segments"), p.pop("history_size"), **p)

    def _init_state(self, key, X):
        if X.shape[0] < self.t0:
            return None, 0
        return self.learner.init(key, X[:self.t0]), self.t0

    # --- the learned curve --------------------------------------------------

    @property
    def vertices_(self) -> np.ndarray:
        """(K+1, d) vertices of the current polygonal line."""
        s = self._require()
        return np.asarray(s.vertices[: int(s.n_vertices)])

    @property
    def n_segments_(self) -> int:
        """K, the current number of segments."""
        return int(self._require().n_vertices) - 1

    def project(self, X) -> dict:
        """Projection of X (n, d) onto the curve: a dict of NumPy arrays ``sqdist`` (n,),
        ``segment`` (n,), ``t`` (n,), ``point`` (n, d) and ``arclength`` (n,)."""
        X = self._points(X)
        s = self.state_
        out = geometry.polyline_projection(X.astype(np.asarray(s.vertices).dtype), s.vertices, s.n_vertices)
        return {k: np.asarray(v) for k, v in out.items()}

    def predict(self, X) -> np.ndarray:
        """(n, d) projections of X (n, d) onto the curve."""
        return self.project(X)["point"]

    def transform(self, X) -> np.ndarray:
        """(n, 1) arc-length position of each row's projection, from the first vertex."""
        return self.project(X)["arclength"][:, None]

    def score(self, X, y=None) -> float:
        """R² = 1 − Σ Δ(f, x) / Σ ‖x − x̄‖² of X (n, d) under the current curve.

        Raises:
          ValueError: if X has fewer than 2 rows or all its rows are equal (R² undefined).
        """
        del y
        X = self._points(X)
        total = ((X.astype(np.float64) - X.astype(np.float64).mean(0)) ** 2).sum() if len(X) else 0.0
        if len(X) < 2 or not total > 0:
            raise ValueError(f"score needs at least 2 rows that are not all equal (R² divides by their spread); "
                             f"got {len(X)} row(s){' with no spread' if len(X) >= 2 else ''}")
        res = self.project(X)["sqdist"].astype(np.float64).sum()
        return float(1.0 - res / total)
