"""infersight.diagnose: from measurements to a verdict, its evidence and a fix.

``diagnose(result)`` applies the rules of shared/design.md section 5 per time window;
``embed_diagnosis(result)`` stores its verdicts in the RunResult;
``infersight.diagnose.physics`` holds the model shapes, peak table, roofline floors
and the capacity planner of section 6.
"""

from infersight.diagnose.analyze import diagnose
from infersight.diagnose.embed import embed_diagnosis
from infersight.diagnose.verdict import VERDICT_IDS, Evidence, Verdict, VerdictWindow

__all__ = ["VERDICT_IDS", "Evidence", "Verdict", "VerdictWindow", "diagnose", "embed_diagnosis"]
