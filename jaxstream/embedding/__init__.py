"""Online landmark embeddings: online landmark replacement, landmark MDS, stress,
temporal networks, baselines, data loaders and a NumPy wrapper.

Modules, one concern each:

- `types`: the static `Config` and the pytrees `Params`, `State`, `Embedding`, `Info`.
- `replacement`: the landmark replacement rule (degree rule, ε growth, the
  ``min_support`` / ``density_shift`` options).
- `coords`: the landmark MDS of a state's landmarks, its alignment, the out-of-sample map.
- `learner`: `init`, `update` (the round as a pipeline), `predict`, `loss`,
  `embedding`, `landmarks`, the `landmark_mds` factory.
- `lmds`: landmark MDS of given landmarks; `stress`: normalised stress;
  `distances`: metrics.
- `networks`: tie-decay networks, spectral distance; `baselines`: initial /
  random / reservoir / farthest-point landmarks; `datasets`: synthetic
  streams and loaders for contact lists and price tables.
- `wrapper`: the NumPy `LandmarkMDS`.
"""
from . import baselines, coords, datasets, distances, learner, lmds, networks, replacement, stress, types
from .distances import Metric, index_stream, metric_kind, pairwise_distances
from .learner import (build_update, embedding, init, landmark_mds, landmark_weights, landmarks, loss, predict,
                      update)
from .lmds import LMDSModel, check_eigen, lmds_embed, lmds_fit, lmds_transform
from .stress import landmark_stress, normalized_stress
from .types import (CASE_ADDED, CASE_COVERED, CASE_REPLACED, Config, Embedding, Info, Params, State,
                    default_buffer_size, default_params)
from .wrapper import LandmarkMDS

__all__ = [
    "baselines", "coords", "datasets", "distances", "learner", "lmds", "networks", "replacement", "stress",
    "types", "Metric", "index_stream", "metric_kind", "pairwise_distances",
    "LMDSModel", "check_eigen", "lmds_embed", "lmds_fit", "lmds_transform",
    "CASE_ADDED", "CASE_COVERED", "CASE_REPLACED", "Config", "Embedding", "Info", "Params", "State",
    "build_update", "default_buffer_size", "default_params", "embedding", "init", "landmark_mds",
    "landmark_weights", "landmarks", "loss", "predict", "update", "landmark_stress", "normalized_stress",
    "LandmarkMDS",
]
