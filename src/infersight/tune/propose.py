"""The model's search over the slot limit (docs/design.md section 8), in index space.

Before each trial the model of the server is fitted again on every trial so far (each
at its own slot limit) and predicts the objective at every value of the ladder. The
next trial is the most informative one:

1. the model's predicted best: the highest predicted objective (a setting predicted to
   meet the SLO before any that is not), or the cheapest within 5% of it (the knee of
   section 5: the model is not asked to resolve less), when it has not been measured;
2. else, among the untried settings that could change tune's choice, the one the model
   knows least about: whose prediction the last refit moved most, then the farthest
   from any measured setting. The choice (``tune.search.choose``) is the cheapest
   measured setting within 5% (``floor``) of the best measured one, so a setting could
   change it when, allowing for the model's error on its latest prediction (that
   trial's measurement against what the model said before it ran), it is predicted
   above the best measured by more than 5% (or the noise floor, when wider), or
   cheaper than the choice and within 5% of the best. A model whose latest SLO call was
   wrong (it predicted a miss where the trial met the SLO, or the other way round), and
   that predicts no untried setting to meet the SLO, rules nothing out by a predicted
   miss or a predicted zero: no error factor lifts a zero.

The search stops when neither exists: the predicted best has been measured and no
untried setting could change the choice. A setting above one
that ran out of memory is never proposed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Guess", "Outcome", "Proposal", "best_guess", "model_search", "propose"]


@dataclass(frozen=True, slots=True)
class Guess:
    """The model's objective at one setting (goodput under the SLO, else throughput)."""

    value: float | None
    #: Whether the predicted level meets the SLO (None without one).
    slo_met: bool | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a measured setting scored (``value`` None: the trial failed)."""

    value: float | None
    slo_met: bool | None = None
    #: The trial failed for memory: every larger setting would too.
    oom: bool = False


@dataclass(frozen=True, slots=True)
class Proposal:
    """The next setting to measure (None: stop), and why, in words."""

    index: int | None
    why: str


def _key(value: float | None, met: bool | None, slo: bool) -> tuple[bool, float]:
    """Orders settings: meeting the SLO first, then the objective."""
    return (bool(met) if slo else True, value or 0.0)


def best_guess(
    guesses: Sequence[Guess | None],
    allowed: Sequence[int],
    *,
    slo: bool,
    floor: float,
    prefer_low: bool = True,
) -> int | None:
    """The predicted best among ``allowed``: the cheapest setting within ``floor`` of the
    highest prediction (and as the highest on the SLO)."""
    cands = [i for i in allowed if (g := guesses[i]) is not None and g.value is not None]
    if not cands:
        return None

    def key(i: int) -> tuple[bool, float]:
        g = guesses[i]
        assert g is not None
        return _key(g.value, g.slo_met, slo)

    top = max(cands, key=key)
    met, best = key(top)
    close = [i for i in cands if key(i)[0] == met and key(i)[1] >= (1.0 - floor) * best]
    return min(close) if prefer_low else max(close)


def _beats(
    g: Guess,
    ref: Outcome,
    *,
    cheaper: bool,
    slo: bool,
    delta: float,
    floor: float,
    error: float,
    slo_wrong: bool = False,
) -> bool:
    mine, theirs = _key(g.value, g.slo_met, slo), _key(ref.value, ref.slo_met, slo)
    if slo_wrong and (not mine[0] or mine[1] <= 0.0):
        # A predicted SLO miss (or nothing at all) from a model whose latest SLO call was
        # wrong is no bound: no error factor lifts a zero.
        return True
    if mine[0] != theirs[0]:
        return mine[0]
    could = mine[1] * (1.0 + error)
    return could > theirs[1] * (1.0 + max(delta, floor)) or (
        cheaper and could >= theirs[1] * (1.0 - floor) and theirs[1] > 0
    )


def _moved(now: Guess | None, before: Guess | None) -> float:
    """How far the last refit moved a prediction (infinite: it had none)."""
    if now is None or before is None or now.value is None or before.value is None:
        return math.inf
    flip = 1.0 if bool(now.slo_met) != bool(before.slo_met) else 0.0
    return flip + abs(now.value - before.value) / max(abs(before.value), 1e-9)


def propose(
    values: Sequence[int],
    measured: Mapping[int, Outcome],
    guesses: Sequence[Guess | None],
    previous: Sequence[Guess | None] | None = None,
    *,
    slo: bool,
    delta: float,
    floor: float,
    prefer_low: bool = True,
    error: float = 0.0,
    slo_wrong: bool = False,
) -> Proposal:
    """The next trial by the rule of the module's docstring: ``delta`` is the noise
    floor, ``floor`` how close to the best counts as as good (5% in tune, as in the
    choice), ``error``
    the model's relative error on its latest prediction."""
    oom = min((i for i, o in measured.items() if o.oom), default=len(values))
    allowed = [i for i in range(len(values)) if i < oom]
    best = best_guess(guesses, allowed, slo=slo, floor=floor, prefer_low=prefer_low)
    if best is None:
        return Proposal(None, "the model predicts no setting")
    if best not in measured:
        return Proposal(best, "the model's predicted best")
    done = [i for i, o in measured.items() if o.value is not None]
    ref = max(
        (measured[i] for i in done),
        key=lambda o: _key(o.value, o.slo_met, slo),
        default=Outcome(None),
    )
    # The measured choice, as tune will make it: the cheapest within the knee's tolerance
    # of the best measured.
    best_key = _key(ref.value, ref.slo_met, slo)
    near = [
        i
        for i in done
        if (k := _key(measured[i].value, measured[i].slo_met, slo))[0] == best_key[0]
        and k[1] >= (1.0 - floor) * best_key[1]
    ]
    choice = (min(near) if prefer_low else max(near)) if near else None
    untried = [i for i in allowed if i not in measured]
    # Blind: the model's latest SLO call was wrong and it predicts no untried setting to
    # meet the SLO; only then do its predicted misses rule nothing out.
    blind = slo_wrong and not any((g := guesses[i]) is not None and g.slo_met for i in untried)
    ahead = [
        i
        for i in untried
        if (g := guesses[i]) is not None
        and g.value is not None
        and _beats(
            g,
            ref,
            cheaper=choice is not None and (i < choice) == prefer_low,
            slo=slo,
            delta=delta,
            floor=floor,
            error=error,
            slo_wrong=blind,
        )
    ]
    if not ahead:
        return Proposal(
            None,
            f"the predicted best ({values[best]}) was measured and no untried "
            f"setting could change the choice: none is predicted to beat the best "
            f"measured by more than {max(delta, floor):.1%}, or to come within "
            f"{floor:.0%} of it for less (allowing for the model's latest error "
            f"of {error:.0%})",
        )
    tried = [values[i] for i in measured]

    def far(i: int) -> float:
        return min(abs(math.log(values[i] / t)) for t in tried) if tried else math.inf

    before = previous or [None] * len(values)
    pick = max(ahead, key=lambda i: (_moved(guesses[i], before[i]), far(i)))
    return Proposal(
        pick,
        "could change the choice (beat the best measured, or match it for "
        "less) within the model's latest error; the model knows least about it",
    )


def model_search(
    values: Sequence[int],
    measured: Callable[[], Mapping[int, Outcome]],
    predict: Callable[[], Sequence[Guess | None] | None],
    measure: Callable[[int, Guess | None, str], None],
    *,
    slo: bool,
    delta: float,
    floor: float,
    prefer_low: bool = True,
) -> str | None:
    """Measure settings the model's way until the rule stops; the reason it stopped, or
    None when the model could not be fitted (the caller searches without it).

    ``predict`` fits the model on every trial so far and predicts every value;
    ``measure`` runs a trial (and may raise StopSearch)."""
    previous: Sequence[Guess | None] | None = None
    error, slo_wrong = 0.0, False
    while True:
        guesses = predict()
        if guesses is None:
            return None
        p = propose(
            values,
            measured(),
            guesses,
            previous,
            slo=slo,
            delta=delta,
            floor=floor,
            prefer_low=prefer_low,
            error=error,
            slo_wrong=slo_wrong,
        )
        if p.index is None:
            return p.why
        g = guesses[p.index]
        measure(p.index, g, p.why)
        got = measured().get(p.index)
        if g is not None and g.value is not None and got is not None and got.value:
            error = abs(g.value - got.value) / got.value
        if slo and g is not None and got is not None and got.value is not None:
            slo_wrong = bool(g.slo_met) != bool(got.slo_met)
        previous = guesses
