"""taillab analysis: load results folders into pandas, draw the papers' figures, write reports.

    import taillab
    res = taillab.load("results/my-sweep")   # a run, experiment or sweep folder
    res.points                               # one row per load point, estimates and CIs (ns)
    res.runs                                 # one row per run, every summary metric and check
    res.intervals                            # per-second percentiles from the interval logs
    res.requests                             # per-request stamps, when the runs saved them

See :class:`taillab.results.Results` for every column.
"""

from .errors import HlogError, ResultsNotFound, SchemaError, TaillabError
from .hlog import Dist, read_hlog
from .results import Results, load

__version__ = "0.1.0"
__all__ = [
    "Dist",
    "HlogError",
    "Results",
    "ResultsNotFound",
    "SchemaError",
    "TaillabError",
    "load",
    "read_hlog",
]
