"""Trace replay and conversations for ``bench --trace`` and ``bench --sessions``.

- ``formats``, ``read``, ``check``, ``rules``: the trace formats, reading a trace as a
  stream, the checking pass over the trace and the rules of the ``--trace`` and
  ``--sessions`` options, run once before anything is sent;
- ``text``, ``feed``: prompt text rebuilt so shared prefixes are shared again, and the
  streamed schedule of one level;
- ``sessions``, ``think``: synthetic conversations and the pause between turns;
- ``dispatch``: sending a streamed schedule, conversation turns after their answers;
- ``survey``: the sharing and lengths of what a level will send, measured before it;
- ``prepare``: a replay's or a conversation run's levels planned, surveyed and run;
- ``aggregate``: one such level's aggregate (fidelity, prefix sharing, TTFT per turn).

The runner imports ``prepare`` and ``aggregate`` itself (they sit above the rest: prepare
imports the workload, the target and the level types); they are not re-exported here.
"""

from infersight.bench.replay.check import TraceSummary, check_trace
from infersight.bench.replay.dispatch import dispatch_conversations, dispatch_feed
from infersight.bench.replay.feed import TraceFeed
from infersight.bench.replay.rules import check_replay
from infersight.bench.replay.sessions import SessionFeed
from infersight.bench.replay.think import ThinkTime

__all__ = [
    "SessionFeed",
    "ThinkTime",
    "TraceFeed",
    "TraceSummary",
    "check_replay",
    "check_trace",
    "dispatch_conversations",
    "dispatch_feed",
]
