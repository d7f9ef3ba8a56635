"""levelfeed: a training rank's batches from the node's lf-server, as
zero-copy tensors (see python/README.md).

    import levelfeed
    loader = levelfeed.Loader()          # rank from RANK, default endpoint
    for batch in loader:                 # dict: tokens, lengths, sample_ids
        loss = model(batch["tokens"]) ...
"""
from ._version import __version__
from ._capi import LevelfeedError, LevelfeedTimeout, lib_path
from .loader import Batch, Loader
from .calibrate import CostFit, calibrate

__all__ = ["Batch", "CostFit", "Loader", "LevelfeedError", "LevelfeedTimeout", "__version__",
           "calibrate", "lib_path"]
