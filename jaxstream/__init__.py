"""jaxstream: online learning of data-stream summaries in JAX."""
from ._core import (ChunkedResult, StreamLearner, init_streams, read_csv_blocks, read_npy_blocks,
                    run_stream, run_stream_chunked, run_streams)
from . import checkpoint, datasets, geometry
from . import curves, principal_curves
from .principal_curves import SLPC, slpc
from . import clustering
from .clustering import PACBO
from .clustering.pacbo import pacbo
from . import embedding
from .embedding import LandmarkMDS, landmark_mds, networks
import sys as _sys
# old module paths of the embedding family (before jaxstream/embedding/): keep `import jaxstream.networks`
# and `jaxstream.landmarks` working
_sys.modules[__name__ + ".networks"] = networks
_sys.modules[__name__ + ".landmarks"] = landmarks = embedding
del _sys

__version__ = "0.1.0"

__all__ = [
    "StreamLearner", "ChunkedResult", "run_stream", "run_streams", "init_streams",
    "run_stream_chunked", "read_npy_blocks", "read_csv_blocks", "checkpoint", "datasets", "geometry",
    "curves", "principal_curves", "slpc", "SLPC",
    "clustering", "pacbo", "PACBO",
    "landmarks", "embedding", "networks", "landmark_mds", "LandmarkMDS",
]
