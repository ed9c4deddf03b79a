"""infersight.tune: try the fix and measure it (docs/design.md section 8).

    session = TuneSession(TuneOptions(baseline={"slots": 4}, knobs={"slots": (1, 64)}),
                          run_trial)             # run_trial(setting, name) -> TrialRun
    result = session.run()                       # a TuneResult: every trial, the choice
    render_tune(result, console)

The session decides; it never starts a server or a benchmark. ``run_trial`` (wired by
``infersight.entrypoints.tune``) opens the target at a setting, runs bench and the
diagnosis, and returns the RunResult. The baseline runs twice (the A/A pair gives the
noise floor), its diagnosis chooses the knob (``knobs``); over slots the model of the
server, refitted on every trial, proposes the next (``propose``, ``model``), other knobs
are bisected (``search``); the choice must hold in a run of its own (``confirm``) and is
compared with the baseline.
"""

from infersight.flags.tune import TuneConfig
from infersight.tune.console import render_tune
from infersight.tune.knobs import KNOBS, SearchSpace, ladder, search_space
from infersight.tune.parallel import NextTrial, ParallelTuneSession, RunTrials, TrialDone
from infersight.tune.progress import TuneProgress
from infersight.tune.session import TuneSession
from infersight.tune.trial import TrialRun, TrialSpec, TuneOptions, TuneWatcher

__all__ = [
    "KNOBS",
    "NextTrial",
    "ParallelTuneSession",
    "RunTrials",
    "SearchSpace",
    "TrialDone",
    "TrialRun",
    "TrialSpec",
    "TuneConfig",
    "TuneOptions",
    "TuneProgress",
    "TuneSession",
    "TuneWatcher",
    "ladder",
    "render_tune",
    "search_space",
]
