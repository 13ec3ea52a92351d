"""Stateful NumPy-in / NumPy-out wrapper around `slpc`."""
from __future__ import annotations

from typing import Optional

import numpy as np
import jax

from .. import geometry
from .._checks import check_points
from .._core import run_stream
from .learner import State, slpc


_MAX_BUCKET = 4096


class SLPC:
    """Stateful NumPy-in / NumPy-out wrapper around `slpc`.

    Example:
      >>> model = SLPC(seed=0)
      >>> model.partial_fit(points)        # first call needs >= t0 points
      >>> model.learn_one(x)               # returns the prequential loss
      >>> model.vertices                   # (K+1, d) current polygonal line
      >>> model.project(points)            # projections and arc lengths

    Args:
      seed: int seed of the internal key.
      **kwargs: passed to `slpc` (capacities and numeric parameters).
    """

    def __init__(self, seed: int = 0, **kwargs):
        self.learner = slpc(**kwargs)
        self._t0 = kwargs.get("t0", 20)
        self._key = jax.random.key(seed)
        self.state: Optional[State] = None
        self._n_rounds = 0
        self._run = jax.jit(lambda k, xs, s, m, off: run_stream(self.learner, k, xs, s, mask=m, step_offset=off))
        self._pending: list = []

    @property
    def is_initialised(self) -> bool:
        return self.state is not None

    def partial_fit(self, X) -> np.ndarray:
        """Learn a batch of points in order; returns their prequential losses.

        Before initialisation the points are buffered until t0 are available;
        they then form the initial segment (losses of initial points are NaN:
        there was no curve to score them).
        """
        X = np.asarray(check_points(X, "X", dim=None if self.state is None else self.dim))
        if self.state is None:
            self._pending.append(X)
            buf = np.concatenate(self._pending)
            if buf.shape[0] < self._t0:
                return np.full(X.shape[0], np.nan)
            self._pending = []
            init_pts, rest = buf[: self._t0], buf[self._t0:]
            self.state = self.learner.init(self._key, init_pts)
            n_new_init = X.shape[0] - rest.shape[0]
            losses = self.partial_fit(rest) if rest.shape[0] else np.zeros(0)
            return np.concatenate([np.full(n_new_init, np.nan), losses])
        out = []
        for i in range(0, X.shape[0], _MAX_BUCKET):
            block = X[i:i + _MAX_BUCKET]
            n = block.shape[0]
            # Pad to a power of two so that batches of any length reuse a few compiled scans.
            size = 1 << (n - 1).bit_length()
            pad = np.zeros((size - n, block.shape[1]), block.dtype)
            mask = np.arange(size) < n
            self.state, losses = self._run(self._key, np.concatenate([block, pad]), self.state, mask,
                                           self._n_rounds)
            self._n_rounds += n  # masked padding consumes no round keys
            out.append(np.asarray(losses)[:n])
        return np.concatenate(out) if out else np.zeros(0)

    fit = partial_fit

    def learn_one(self, x) -> float:
        """Learn one point; returns its prequential loss (NaN before init)."""
        x = np.asarray(x, float)
        if x.ndim != 1:
            raise ValueError(f"learn_one takes one point of shape (d,); got {x.shape}")
        return float(self.partial_fit(x[None])[0])

    def _need_state(self):
        if self.state is None:
            raise RuntimeError(f"the curve is not initialised yet: it needs t0={self._t0} points")

    @property
    def dim(self) -> int:
        self._need_state()
        return int(self.state.vertex_idx.shape[1])

    @property
    def vertices(self) -> np.ndarray:
        """(K+1, d) vertices of the current polygonal line."""
        self._need_state()
        return np.asarray(self.state.vertices[: int(self.state.n_vertices)])

    @property
    def n_segments(self) -> int:
        self._need_state()
        return int(self.state.n_vertices) - 1

    def predict(self, X) -> np.ndarray:
        """Projections of X (n, d) onto the curve, shape (n, d)."""
        return self.project(X)["point"]

    def project(self, X) -> dict:
        """Projection of X (n, d): dict of NumPy arrays sqdist, segment, t,
        point (n, d) and arclength."""
        self._need_state()
        X = check_points(X, "X", dim=self.dim)
        out = geometry.polyline_projection(X, self.state.vertices, self.state.n_vertices)
        return {k: np.asarray(v) for k, v in out.items()}

    def score(self, X) -> float:
        """R² = 1 − Σ Δ(f, x)/Σ ‖x − x̄‖² of X under the current curve."""
        X = np.asarray(check_points(X, "X", dim=self.dim))
        res = self.project(X)["sqdist"].sum()
        return float(1.0 - res / ((X - X.mean(0)) ** 2).sum())
