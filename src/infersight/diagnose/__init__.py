"""infersight.diagnose: from measurements to a verdict, its evidence and a fix.

``diagnose(result)`` applies the rules of docs/design.md section 5 per time window;
``embed_diagnosis(result)`` stores its verdicts in the RunResult;
``FleetDiagnoser`` / ``diagnose_fleet`` apply the same rules per replica and per
window to series read from a metrics store, with a fleet summary and the load-imbalance
verdict; ``infersight.diagnose.physics`` holds the model shapes, peak table, roofline floors
and the capacity planner of section 6.
"""

from infersight.core.verdicts import VERDICT_IDS, Evidence, Verdict, VerdictWindow
from infersight.diagnose.analyze import diagnose
from infersight.diagnose.embed import embed_diagnosis
from infersight.diagnose.fleet import FleetDiagnoser, diagnose_fleet

__all__ = [
    "VERDICT_IDS",
    "Evidence",
    "FleetDiagnoser",
    "Verdict",
    "VerdictWindow",
    "diagnose",
    "diagnose_fleet",
    "embed_diagnosis",
]
