"""jaxstream: online learning of data-stream summaries in JAX.

The public API, re-exported explicitly from the modules that define it:

- the learner shape and stream drivers: `StreamLearner`, `run_stream`,
  `run_streams`, `init_streams`, `run_stream_chunked` (+ `ChunkedResult`,
  `read_npy_blocks`, `read_csv_blocks`), `config_record`;
- the learners (factories returning a `StreamLearner`): `slpc`, `pacbo`,
  `landmark_mds`, and their NumPy wrappers `SLPC`, `PACBO`, `LandmarkMDS`
  (all of them `StreamModel` subclasses);
- the families' sub-packages `curves`, `clustering`, `embedding`, and the
  modules `checkpoint`, `datasets`, `differentiable`, `geometry`.
"""
from ._core import StreamLearner, config_record, run_stream
from ._sharding import init_streams, run_streams
from ._chunked import ChunkedResult, StreamMismatch, read_csv_blocks, read_npy_blocks, run_stream_chunked
from ._wrapper import NotFittedError, StreamModel
from ._loops import static_trip_counts
from ._caches import cache_info, cache_size, clear_caches, set_cache_size
from . import checkpoint, datasets, differentiable, geometry
from . import clustering, curves, embedding
from .curves import SLPC, slpc
from .clustering import PACBO
from .clustering.pacbo import pacbo
from .embedding import LandmarkMDS, landmark_mds

__version__ = "0.4.6"

__all__ = [
    "StreamLearner", "StreamModel", "NotFittedError", "config_record", "run_stream", "run_streams", "init_streams",
    "run_stream_chunked", "ChunkedResult", "StreamMismatch", "read_npy_blocks", "read_csv_blocks",
    "static_trip_counts", "clear_caches", "cache_size", "set_cache_size", "cache_info",
    "slpc", "SLPC", "pacbo", "PACBO", "landmark_mds", "LandmarkMDS",
    "curves", "clustering", "embedding", "checkpoint", "datasets", "differentiable", "geometry",
]
