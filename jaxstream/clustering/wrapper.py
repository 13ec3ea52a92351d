"""`PACBO`: the NumPy-in / NumPy-out wrapper around `jaxstream.pacbo`."""
from __future__ import annotations

from typing import Optional

import numpy as np
import jax

from .._wrapper import StreamModel
from . import pacbo as _P

__all__ = ["PACBO"]

# numeric parameters passed on to `default_params` (radius has its own argument)
_NUMERIC = tuple(f for f in _P.Params._fields if f != "radius")


class PACBO(StreamModel):
    """PACBO online clustering, NumPy in / NumPy out.

    Every point is scored by the current partition (its prequential loss,
    the squared distance to the nearest centre), then learned. See
    `jaxstream.StreamModel` for the conventions (``fit``/``partial_fit``/
    ``learn_one`` return self; ``last_losses_``, ``cumulative_loss_``,
    ``last_info_``, ``state_``).

    Radius: with ``radius=None`` (default) the learner learns the prior ball
    from the stream and never raises on a later, larger point. With
    ``radius=R`` a point farther than R from the origin raises ValueError and
    nothing of its batch is learned.

    Example:
      >>> from jaxstream import PACBO, datasets
      >>> points = datasets.make_four_groups_stream(200, seed=0)   # (200, 2)
      >>> model = PACBO(max_clusters=10, history_size=64, n_steps=50, seed=0).partial_fit(points)
      >>> model.predict(points[:3]).shape      # stable labels (see cluster_labels_)
      (3,)
      >>> model.labels_.shape                  # the label of each row of the last fit
      (200,)
      >>> model.cluster_centers_.shape == (model.n_clusters_, 2)   # row i: cluster_labels_[i]
      True

    Args:
      radius: the prior ball's radius about the origin, or None to learn it
        from the stream.
      **kwargs: the other arguments of `jaxstream.pacbo`, its numeric
        parameters (`jaxstream.clustering.pacbo.default_params`; None keeps
        the default) and ``seed`` for the PRNG key.
    """

    _estimator_type = "clusterer"

    # Wide signature: scikit-learn's rule: every hyper-parameter is an explicit __init__ argument.
    def __init__(self, radius: Optional[float] = None, *, max_clusters: int = 50, history_size: int = 256,
                 n_steps: int = 500, n_chains: int = 1, kmeans_iters: int = 5, history_policy: str = "reservoir",
                 df: int = 3, estimate: Optional[str] = None, preset: Optional[str] = None,
                 lambda_scale: Optional[float] = None,
                 lambda_power: Optional[float] = None, lambda2_scale: Optional[float] = None,
                 prior_scale: Optional[float] = None, price_scale: Optional[float] = None,
                 log_n_weight: Optional[float] = None, noise_scale: Optional[float] = None,
                 noise_prior_points: Optional[float] = None,
                 proposal_scale: Optional[float] = None, scale_spread: Optional[float] = None,
                 adapt_rate: Optional[float] = None, stay_prob: Optional[float] = None,
                 lambda_cap: Optional[float] = None, drift_level: Optional[float] = None,
                 recent_size: Optional[int] = None, provisional_level: Optional[float] = None,
                 provisional_size: int = 8, split_guard: Optional[bool] = None, tracking: Optional[bool] = None,
                 seed: int = 0):
        self.radius = radius
        self.max_clusters = max_clusters
        self.history_size = history_size
        self.n_steps = n_steps
        self.n_chains = n_chains
        self.kmeans_iters = kmeans_iters
        self.history_policy = history_policy
        self.df = df
        self.estimate = estimate
        self.preset = preset
        self.lambda_scale = lambda_scale
        self.lambda_power = lambda_power
        self.lambda2_scale = lambda2_scale
        self.prior_scale = prior_scale
        self.price_scale = price_scale
        self.log_n_weight = log_n_weight
        self.noise_scale = noise_scale
        self.noise_prior_points = noise_prior_points
        self.proposal_scale = proposal_scale
        self.scale_spread = scale_spread
        self.adapt_rate = adapt_rate
        self.stay_prob = stay_prob
        self.lambda_cap = lambda_cap
        self.drift_level = drift_level
        self.recent_size = recent_size
        self.provisional_level = provisional_level
        self.provisional_size = provisional_size
        self.split_guard = split_guard
        self.tracking = tracking
        self.seed = seed

    def _build(self):
        numeric = {k: v for k, v in self.get_params().items() if k in _NUMERIC and v is not None}
        return _P.pacbo(self.max_clusters, self.history_size, self.n_steps, n_chains=self.n_chains,
                        radius=self.radius, kmeans_iters=self.kmeans_iters, history_policy=self.history_policy,
                        df=self.df, estimate=self.estimate, preset=self.preset, recent_size=self.recent_size,
                        provisional_size=self.provisional_size, split_guard=self.split_guard,
                        tracking=self.tracking, **numeric)

    def _key(self):
        # the wrapper's historical layout: one key for init, one for the rounds
        return jax.random.split(jax.random.PRNGKey(self._seed()))[1]

    def _init_state(self, key, X):
        init_key = jax.random.split(jax.random.PRNGKey(self._seed()))[0]
        return self.learner.init(init_key, X[:0]), 0

    def _check_rows(self, X):
        if self.radius is not None:
            _P.check_radius(X, self.radius, "X")

    # --- the learned partition ----------------------------------------------

    def predict(self, X) -> np.ndarray:
        """(n,) stable label (see `cluster_labels_`) of the nearest centre of each row of X (n, d)."""
        X = self._points(X)
        return np.asarray(_P.predict(self.state_, X))

    def predict_proba(self, X, temperature=None) -> np.ndarray:
        """(n, k̂) soft assignments over the clusters in `cluster_labels_` order (see `soft_assign`)."""
        X = self._points(X)
        return np.asarray(_P.soft_assign(self.state_, X, temperature))[:, : self.n_clusters_]

    def transform(self, X) -> np.ndarray:
        """(n, k̂) squared distance of each row of X (n, d) to each centre (in `cluster_labels_` order)."""
        X = self._points(X)
        c = self.cluster_centers_
        d2 = ((X[:, None, :].astype(np.float64) - c[None]) ** 2).sum(-1)
        return d2.astype(np.asarray(self.state_.centers).dtype)  # the learner's float type, like predict

    def loss(self, X) -> np.ndarray:
        """(n,) squared distance of each row of X to the nearest centre, provisional centres included
        (the prediction's loss, as in ``last_losses_``; `jaxstream.clustering.pacbo.loss`)."""
        X = self._points(X)
        return np.asarray(_P.loss(self.state_, X))

    def score(self, X, y=None) -> float:
        """−Σ `loss` over X's rows (scikit-learn's KMeans.score, provisional centres included)."""
        del y
        return -float(np.sum(self.loss(X), dtype=np.float64))

    @property
    def n_clusters_(self) -> int:
        """k̂, the current number of clusters."""
        return int(self._require().n_clusters)

    @property
    def cluster_centers_(self) -> np.ndarray:
        """(k̂, d) current centres (row i has label ``cluster_labels_[i]``)."""
        s = self._require()
        return np.asarray(s.centers[: int(s.n_clusters)])

    @property
    def cluster_labels_(self) -> np.ndarray:
        """(k̂,) stable integer labels of the centres (row i of `cluster_centers_` has label
        ``cluster_labels_[i]``): a cluster keeps its label across rounds, and `predict` returns them."""
        s = self._require()
        return np.asarray(s.ids[: int(s.n_clusters)])

    def _partial_fit(self, X) -> "PACBO":
        out = super()._partial_fit(X)
        # scikit-learn's labels_: one per row learned in this call, by the partition it ends with
        self.labels_ = self.predict(X)
        return out

    def fit_predict(self, X, y=None) -> np.ndarray:
        """`fit` on X (n, d), then the label of each row of X (scikit-learn's ``fit_predict``): ``labels_``."""
        return self.fit(X, y).labels_

    @property
    def cluster_sizes_(self) -> np.ndarray:
        """(k̂,) estimated number of points seen in each cluster."""
        s = self._require()
        return np.asarray(_P.cluster_sizes(s, self.history_policy))[: int(s.n_clusters)]

    @property
    def posterior_k_(self) -> np.ndarray:
        """(p,) P(k = 1..p) estimated by the last round's chains."""
        return np.asarray(self._require().k_probs)
