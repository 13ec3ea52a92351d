"""`PACBO`: a stateful NumPy-in / NumPy-out wrapper around the functional PACBO learner."""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

import numpy as np
import jax
import jax.numpy as jnp

from .._checks import check_capacity, check_points
from .._core import run_stream
from . import pacbo as _P

__all__ = ["PACBO"]


_MIN_BATCH = 8  # smallest padded batch: learn_one and small batches share one compiled program


def _static_learner(config_items: tuple):
    """The learner the shared runner of a static configuration uses (its config equals config_items)."""
    config = dict(config_items)
    static = {k: v for k, v in config.items() if k not in ("learner", "max_clusters", "history_size", "n_steps")}
    return _P.pacbo(config["max_clusters"], config["history_size"], config["n_steps"], **static)


@lru_cache(maxsize=None)
def _runner(config_items: tuple):
    """One jitted masked `run_stream` per static configuration, shared by all wrappers."""
    learner = _static_learner(config_items)
    return jax.jit(lambda key, xs, state, mask, offset: run_stream(
        learner, key, xs, state, mask=mask, trace="info", step_offset=offset))


class PACBO:
    """Stateful PACBO online clustering (keeps the key and the state).

    ``learn_one(x)`` / ``learn_many(X)`` (alias ``partial_fit``) learn points
    in order; round t uses ``fold_in(key, t)`` with the global t, so learning
    point by point gives the same result as one batch. Batches are padded
    (and masked) to the next power of two, and to at least 8 rows (a masked
    row is skipped by a `lax.cond`, nearly free), so varying batch sizes
    compile only a few times (``learn_one`` and batches up to 8 share one
    program); wrappers with the same static configuration share compiled
    code.

    Radius: with ``radius=None`` (default) the learner learns the prior ball
    from the stream (centre: the first point; radius: the largest distance
    from it so far) and never raises on a later, larger point. With
    ``radius=R`` a point farther than R from the origin raises ValueError and
    nothing of its batch is learned.

    Args:
      radius: R or None (see above).
      seed: int seed of the PRNG key.
      max_clusters, history_size, n_steps, n_chains, kmeans_iters,
        history_policy, df, **params (estimate, lambda_scale, …): as in `jaxstream.pacbo`.

    Attributes:
      state_: the learner's `State` (None before the first point).
      n_seen_: points learned.
      cumulative_loss_: sum of prequential losses (float64).
      last_info_: `Info` (NumPy) of the last batch, one row per point.
    """

    def __init__(self, radius: Optional[float] = None, *, max_clusters: int = 50,
                 history_size: int = 256, n_steps: int = 500, n_chains: int = 1, kmeans_iters: int = 5,
                 history_policy: str = "reservoir", df: int = 3, seed: int = 0, **params):
        self.learner = _P.pacbo(max_clusters, history_size, n_steps, n_chains=n_chains, radius=radius,
                                kmeans_iters=kmeans_iters, history_policy=history_policy, df=df,
                                **params)
        self.radius = radius
        self._init_key, self._key = jax.random.split(jax.random.PRNGKey(seed))
        self._run = _runner(tuple(sorted(self.learner.config.items())))
        self.state_: Optional[_P.State] = None
        self.n_seen_ = 0
        self.cumulative_loss_ = 0.0
        self.last_info_: Optional[_P.Info] = None

    @property
    def dim(self) -> Optional[int]:
        return None if self.state_ is None else int(self.state_.centers.shape[1])

    def learn_many(self, X) -> "PACBO":
        """Learn the rows of X (n, d), n ≥ 1, in order. Returns self."""
        X = np.asarray(X)
        if X.ndim == 2 and X.shape[0] == 0:
            raise ValueError("X is empty (0 rows): nothing to learn")
        X = np.asarray(check_points(X, "X", dim=self.dim, min_rows=1))
        if self.radius is not None:
            _P.check_radius(X, self.radius, "X")
        if self.state_ is None:
            self.state_ = self.learner.init(self._init_key, X[:0].astype(X.dtype))
        n = X.shape[0]
        size = max(_MIN_BATCH, 1 << (n - 1).bit_length())
        Xp = np.concatenate([X, np.zeros((size - n, X.shape[1]), X.dtype)])
        mask = np.arange(size) < n
        self.state_, info = self._run(self._key, Xp, self.state_, mask, self.n_seen_)
        info = jax.tree_util.tree_map(lambda a: np.asarray(a)[:n], info)
        self.n_seen_ += n
        self.cumulative_loss_ += float(info.loss.astype(np.float64).sum())
        self.last_info_ = info
        return self

    partial_fit = learn_many

    def learn_one(self, x) -> "PACBO":
        """Learn one point x (d,). Returns self."""
        x = np.asarray(x)
        if x.ndim != 1:
            raise ValueError(f"x must have shape (d,); got {x.shape} (use learn_many for batches)")
        return self.learn_many(x[None, :])

    def _need_state(self) -> _P.State:
        if self.state_ is None:
            raise RuntimeError("PACBO has not learned any point yet")
        return self.state_

    def _per_point(self, fn, X) -> np.ndarray:
        state = self._need_state()
        X = np.asarray(X)
        one = X.ndim == 1
        X2 = np.asarray(check_points(X[None] if one else X, "X", dim=self.dim))
        out = np.asarray(fn(state, X2))
        return out[0] if one else out

    def predict(self, X) -> np.ndarray:
        """Stable cluster labels (see `labels_`) of X (n, d), or of one point (d,)."""
        return self._per_point(_P.predict, X)

    def predict_proba(self, X, temperature=None) -> np.ndarray:
        """Soft assignments (n, k̂) over the clusters in `labels_` order (see `soft_assign`)."""
        k = self.n_clusters
        out = self._per_point(lambda s, x: _P.soft_assign(s, x, temperature), X)
        return out[..., :k]

    def loss(self, X) -> np.ndarray:
        """Squared distance of X (n, d) (or of one point) to the nearest centre."""
        return self._per_point(_P.loss, X)

    @property
    def n_clusters(self) -> int:
        """Current k̂."""
        return int(self._need_state().n_clusters)

    @property
    def centers(self) -> np.ndarray:
        """(k̂, d) current centres (row i has label ``labels_[i]``)."""
        s = self._need_state()
        return np.asarray(s.centers[: int(s.n_clusters)])

    @property
    def labels_(self) -> np.ndarray:
        """(k̂,) stable integer labels of the centres: a cluster keeps its label across rounds."""
        s = self._need_state()
        return np.asarray(s.ids[: int(s.n_clusters)])

    @property
    def cluster_sizes_(self) -> np.ndarray:
        """(k̂,) estimated number of points seen in each cluster."""
        s = self._need_state()
        return np.asarray(_P.cluster_sizes(s, self.learner.config["history_policy"]))[: int(s.n_clusters)]

    @property
    def posterior_k_(self) -> np.ndarray:
        """(p,) P(k = 1..p) estimated by the last round's chains."""
        return np.asarray(self._need_state().k_probs)
