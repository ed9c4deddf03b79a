"""infersight.servermodel: one fitted model of the server under test (docs/design.md
section 9): admission (slots, KV), a FIFO queue and the engine's step time, fitted to
a run's records, run forward by simulation, and checked on the run itself."""

from infersight.servermodel.data import RunData, run_data
from infersight.servermodel.evaluate import predict_load
from infersight.servermodel.fit import fit_model
from infersight.servermodel.selfcheck import predict_level, self_check

__all__ = ["RunData", "fit_model", "predict_level", "predict_load", "run_data", "self_check"]
