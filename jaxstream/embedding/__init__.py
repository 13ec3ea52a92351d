"""Online landmark embeddings: online landmark replacement, landmark MDS, stress,
temporal networks, baselines, data loaders and a NumPy wrapper.

Modules: `online` (the learner `landmark_mds`), `lmds` (landmark MDS),
`stress` (normalised stress), `distances` (metrics), `networks` (tie-decay
networks, spectral distance), `baselines` (initial / random / reservoir /
farthest-point landmarks), `datasets` (synthetic streams and loaders for
contact lists and price tables), `wrapper` (`LandmarkMDS`).
"""
from . import baselines, datasets, distances, lmds, networks, online, stress
from .distances import Metric, index_stream, metric_kind, pairwise_distances
from .lmds import LMDSModel, check_eigen, lmds_embed, lmds_fit, lmds_transform
from .online import (CASE_ADDED, CASE_COVERED, CASE_REPLACED, Embedding, Info, Params, State, build_update,
                     default_params, embedding, init, landmark_mds, landmark_weights, landmarks, loss,
                     predict)
from .stress import landmark_stress, normalized_stress
from .wrapper import LandmarkMDS

__all__ = [
    "baselines", "datasets", "distances", "lmds", "networks", "online", "stress",
    "Metric", "index_stream", "metric_kind", "pairwise_distances",
    "LMDSModel", "check_eigen", "lmds_embed", "lmds_fit", "lmds_transform",
    "CASE_ADDED", "CASE_COVERED", "CASE_REPLACED", "Embedding", "Info", "Params", "State", "build_update",
    "default_params", "embedding", "init", "landmark_mds", "landmark_weights", "landmarks", "loss", "predict",
    "landmark_stress", "normalized_stress", "LandmarkMDS",
]
