"""The adaptive concurrency limiter: throughput-seeking, latency- and 429-aware.

It works in measurement windows. After each change of the limit it waits until the
requests sent under the new limit have come back (``max(min_samples, limit)`` of them
and ``min_interval`` seconds) and estimates throughput with Little's law (requests in
flight / mean latency of those requests). Then:

* **start**: double the limit while throughput rises by at least 20% of the ideal
  (linear) gain; when a doubling still helps a little (> ``min_gain``) keep it,
  otherwise step back;
* **hold / probe**: hold the level for a few windows, then probe one step (25%) up
  or down. An up-probe is kept if throughput rose by 20% of the ideal gain; a
  down-probe is kept if throughput held (within ``min_gain``), because the same
  work with fewer requests queued is better. A kept probe goes on at once in the
  same direction; a failed one returns, reverses the direction and doubles the
  hold, so probing gets rare once the level is right. The first window after a
  change is discarded (a queue is forming or draining);
* **latency / SLO**: if the p90 latency (or TTFT/TPOT) of a window breaks
  ``max_latency`` (or the SLO), cut the limit x0.75 and remember a ceiling;
* **congestion** (429, 503, 408/502/504, timeouts): multiplicative back-off
  (x ``backoff``) at most once per round trip (errors of requests sent before the
  last cut carry no news, but each one lowers the remembered ceiling by one: the
  server admitted one request fewer), pause new sends for the server's Retry-After,
  then climb back quickly to just under the ceiling (**recover**). The ceiling itself
  is re-tested only by probes, whose spacing doubles after each failure, so the
  limiter settles just below the server's limit with few errors.

Every change is logged as a :class:`~infersight.control.controller.Decision` with the
reason, for the progress display and the summary.
"""

from __future__ import annotations

import math

from infersight.control.controller import ConcurrencyController, Decision
from infersight.control.window import LimitWindow
from infersight.core.errors import ConfigError

__all__ = ["AdaptiveConcurrency"]


class AdaptiveConcurrency(ConcurrencyController):
    """Finds the concurrency that maximises throughput within the latency limits."""

    def __init__(
        self,
        *,
        now: float,
        initial: int = 2,
        minimum: int = 1,
        maximum: int = 256,
        max_latency: float | None = None,
        ttft_slo: float | None = None,
        tpot_slo: float | None = None,
        backoff: float = 0.5,
        min_interval: float = 0.5,
        min_samples: int = 4,
        min_gain: float = 0.03,
        base_hold: int = 4,
        max_hold: int = 64,
        max_pause: float = 120.0,
    ) -> None:
        if not 1 <= minimum <= maximum:
            raise ConfigError("need 1 <= min concurrency <= max concurrency")
        if not 0 < backoff < 1:
            raise ConfigError("backoff must be between 0 and 1")
        start = min(max(initial, minimum), maximum)
        super().__init__(limit=start, t0=now, max_pause=max_pause)
        self.minimum, self.maximum = minimum, maximum
        self.max_latency, self.ttft_slo, self.tpot_slo = max_latency, ttft_slo, tpot_slo
        self.backoff, self.min_interval, self.min_samples = backoff, min_interval, min_samples
        self.min_gain, self.base_hold, self.max_hold = min_gain, base_hold, max_hold
        self.state = "start"
        self.measured: dict[int, float] = {}
        self.best_level = start
        self.ceiling: int | None = None
        self.hold_len = base_hold
        self.hold_left = 0
        self.probe_from = start
        self.recover_target = start
        self.probe_dir = 1
        self.warm = True  # the very first window mixes in the ramp from zero
        self.rechecked = False
        self.last_cut = -math.inf
        self.cut_epoch = -math.inf
        self.history.append((now, start))
        self.decisions.append(
            Decision(0.0, start, start, "start low, then raise while throughput rises")
        )
        self.win = LimitWindow.opened(now)

    # -- measurement window ------------------------------------------------------
    def _begin(self, now: float) -> None:
        self.win = LimitWindow.opened(now)

    def _tick(self, now: float) -> None:
        self.win.tick(now, self.inflight)

    def _answered(
        self, now: float, started: float, latency: float, ttft: float | None, tpot: float | None
    ) -> None:
        if started < self.win.epoch:
            return  # sent under an earlier limit: says nothing about this one
        self.win.add(latency, ttft, tpot)
        done = self.win.result(now, self.limit, self.min_samples, self.min_interval)
        if done is not None:
            self._decide(now, *done)

    def _congested(self, now: float, started: float, kind: str, retry_after: float | None) -> None:
        if started < self.last_cut:
            # Sent before the last cut: no reason to cut again, but every extra error
            # of the same burst means the server admitted one request fewer.
            if started >= self.cut_epoch and self.ceiling is not None:
                self.ceiling = max(self.minimum + 1, self.ceiling - 1)
                self.recover_target = max(self.limit, min(self.recover_target, self.ceiling - 1))
                if self.state == "recover" and self.recover_target <= self.limit:
                    self.state, self.hold_left = "hold", self.hold_len
            return
        self.last_cut, self.cut_epoch = now, self.win.epoch
        self.ceiling = self.limit if self.ceiling is None else min(self.ceiling, self.limit)
        if self.state == "probe" or self.state == "hold":
            self.hold_len = min(self.hold_len * 2, self.max_hold)
            self.probe_dir = -1  # up failed; the next probe looks below
        self.warm = True
        new = max(self.minimum, math.floor(self.limit * self.backoff))
        self.recover_target = max(new, self.ceiling - 1, self.minimum)
        self.best_level = min(self.best_level, self.recover_target)
        self.state = "recover" if self.recover_target > new else "hold"
        self.hold_left = self.hold_len
        wait = f"; pausing sends {retry_after:g} s (Retry-After)" if retry_after else ""
        self._log(now, new, f"{kind} at {self.limit} in flight: back off x{self.backoff:g}{wait}")
        self._begin(now)

    # -- decisions ---------------------------------------------------------------
    def _cap(self) -> int:
        return self.maximum if self.ceiling is None else max(self.minimum, self.ceiling - 1)

    def _gain_needed(self, a: int, b: int) -> float:
        # 20% of the ideal (linear) gain: CPU engines scale far from linearly (a
        # doubling may give +25%) yet every step of it is worth taking. A doubling
        # past the knee can read high while a queue forms; down-probes trim that.
        return max(self.min_gain, 0.2 * (b / a - 1))

    def _step(self, level: int) -> int:
        return max(1, math.ceil(level * 0.25))

    def _set(self, now: float, new: int, reason: str) -> None:
        new = min(max(new, self.minimum), self.maximum)
        if new != self.limit:
            self._log(now, new, reason)
            self.warm = True
            self.rechecked = False
            self.measured.pop(new, None)  # judge the new level on fresh windows only
        self._begin(now)

    def _decide(self, now: float, tput: float, busy: float) -> None:
        lvl = self.limit
        breach = self.win.breach(self.max_latency, self.ttft_slo, self.tpot_slo)
        if breach is not None:
            new = max(self.minimum, math.floor(lvl * 0.75))
            self.ceiling = lvl if self.ceiling is None else min(self.ceiling, lvl)
            self.best_level = min(self.best_level, new)
            self._hold(now, new, f"{breach}: lower x0.75")
            return
        if self.state == "recover":
            new = min(lvl * 2, self.recover_target)
            if new >= self.recover_target:
                self._hold(now, new, f"recover to {new}, just under the last congestion")
            else:
                self._set(now, new, f"recover towards {self.recover_target}")
            return
        if busy < 0.85 * lvl:
            self._begin(now)  # not enough rows to fill the limit: nothing to learn
            return
        if self.warm:
            # The first window after a change mixes two regimes (a queue forming or
            # draining); hold and probe decisions use the next, settled one.
            self.warm = False
            self._begin(now)
            return
        old = self.measured.get(lvl)
        self.measured[lvl] = tput = tput if old is None else 0.5 * (old + tput)
        if self.state == "start":
            self._slow_start(now, lvl, tput)
        elif self.state == "probe":
            self._judge_probe(now, lvl, tput)
        else:
            self._hold_tick(now, lvl)

    def _hold(self, now: float, new: int, reason: str) -> None:
        self.state, self.hold_left = "hold", self.hold_len
        self._set(now, new, reason)

    def _slow_start(self, now: float, lvl: int, tput: float) -> None:
        prev_lvl = self.probe_from
        prev = self.measured.get(prev_lvl) if prev_lvl != lvl else None
        if prev is None or tput >= prev * (1 + self._gain_needed(prev_lvl, lvl)):
            self.best_level, self.probe_from = lvl, lvl
            new = min(lvl * 2, self._cap())
            if new <= lvl:
                self._hold(now, lvl, "")
                return
            why = "first measurement" if prev is None else _pct(prev, tput, prev_lvl)
            self._set(now, new, f"slow start: {tput:.2f} rows/s at {lvl} ({why}): double")
            self.warm = False  # slow start judges the first window (big steps)
        elif not self.rechecked:
            self._recheck(now)
        elif tput >= prev * (1 + self.min_gain):
            # Better, but not by enough to keep doubling: stay; probes refine it.
            self.best_level, self.probe_dir = lvl, 1  # it still paid: look above first
            self._log(
                now,
                lvl,
                f"slow start ends at {lvl} ({_pct(prev, tput, prev_lvl)}): hold, then probe",
            )
            self._hold(now, lvl, "")
            # That window was biased upwards (a queue was forming); hold measures it again.
            self.measured.pop(lvl, None)
            self.warm = True
        else:
            self.best_level, self.probe_dir = prev_lvl, 1
            self._hold(
                now,
                prev_lvl,
                f"throughput flat at {lvl} ({_pct(prev, tput, prev_lvl)}): back to {prev_lvl}",
            )

    def _judge_probe(self, now: float, lvl: int, tput: float) -> None:
        base_lvl = self.probe_from
        base = self.measured.get(base_lvl, 0.0)
        if lvl > base_lvl:
            ok = tput >= base * (1 + self._gain_needed(base_lvl, lvl))
            if ok and self.ceiling is not None and lvl >= self.ceiling:
                self.ceiling = None  # the server takes more than before
        else:
            # Going down pays if throughput holds: same work, fewer requests queued.
            ok = tput >= base * (1 - self.min_gain)
        change = _pct(base, tput, base_lvl)
        if not ok and not self.rechecked:
            self._recheck(now)
            return
        if ok:
            # Keep going the same way at once: a climb is not slowed down by holds.
            self.best_level, self.hold_len = lvl, self.base_hold
            if not self._probe(now, lvl, f"probe {lvl} kept ({change})"):
                self._log(now, lvl, f"probe {lvl} kept ({change}); at a bound: hold")
                self._hold(now, lvl, "")
        elif lvl > base_lvl and tput > base * (1 + self.min_gain):
            # Better, but not clearly: noise or a small real gain. Return, and try the
            # same way again after a short hold rather than give up on it.
            self.hold_len = self.base_hold
            self._hold(
                now, base_lvl, f"probe {lvl} unclear ({change}): back to {base_lvl}, retry later"
            )
        else:
            self.hold_len = min(self.hold_len * 2, self.max_hold)
            self.probe_dir = -self.probe_dir
            self._hold(
                now,
                base_lvl,
                f"probe {lvl} worse ({change}): back to {base_lvl}, hold {self.hold_len}",
            )

    def _recheck(self, now: float) -> None:
        # One noisy window must not undo a step: measure this level once more (the
        # two windows are averaged) before acting on a disappointing result.
        self.rechecked = True
        self._begin(now)

    def _probe(self, now: float, lvl: int, why: str) -> bool:
        """Step one probe from ``lvl`` in ``probe_dir``; False if that way is closed."""
        if self.probe_dir > 0:
            new = min(lvl + self._step(lvl), self.maximum)
            if self.ceiling is not None:
                new = min(new, self.ceiling)  # re-test the congestion point, rarely
        else:
            new = max(lvl - self._step(lvl), self.minimum)
        if new == lvl:
            return False
        self.state, self.probe_from = "probe", lvl
        self._set(now, new, f"{why}: probe {'up' if new > lvl else 'down'} to {new}")
        return True

    def _hold_tick(self, now: float, lvl: int) -> None:
        self.hold_left -= 1
        if self.hold_left > 0:
            self._begin(now)
            return
        why = f"held {lvl} for {self.hold_len} windows"
        if not self._probe(now, lvl, why):
            self.probe_dir = -self.probe_dir
            if not self._probe(now, lvl, why):
                self.hold_left = self.hold_len
                self._begin(now)


def _pct(base: float, now: float, base_lvl: int) -> str:
    if base <= 0:
        return f"vs 0 at {base_lvl}"
    return f"{(now / base - 1) * 100:+.0f}% vs {base_lvl}"
