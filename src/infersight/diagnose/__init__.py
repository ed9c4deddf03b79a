"""infersight.diagnose: from measurements to a verdict, its evidence and a fix.

``diagnose_run(result)`` builds the run's capacity curve (docs/design.md section 2),
applies the rules of section 5 per time window and gives the run's one recommendation;
``diagnose(result)`` returns its verdicts; ``embed_diagnosis(result)`` stores all three
in the RunResult;
``FleetDiagnoser`` applies the same rules per replica and per
window to series read from a metrics store, with a fleet summary and the load-imbalance
verdict; ``infersight.diagnose.physics`` holds the model shapes, peak table, roofline floors
and the capacity planner of section 6.
"""

from infersight.core.verdicts import VERDICT_IDS, Evidence, Verdict, VerdictWindow
from infersight.diagnose.analyze import Diagnosis, diagnose, diagnose_run
from infersight.diagnose.embed import embed_diagnosis
from infersight.diagnose.fleet import FleetDiagnoser

__all__ = [
    "VERDICT_IDS",
    "Diagnosis",
    "Evidence",
    "FleetDiagnoser",
    "Verdict",
    "VerdictWindow",
    "diagnose",
    "diagnose_run",
    "embed_diagnosis",
]
