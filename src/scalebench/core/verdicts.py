"""What scalebench can say, declared once as data: every layer reads its words, order and flags here.

- VERDICTS: what one night says about a figure and the change that came with it (the judge's
  moves in analysis.lifecycle say one of these), with its meaning, its place in the report's
  order (worst first), the label the report's *Fixed and ended* list gives it, and whether the
  figure is a confirmed regression tonight (it alerts), whether the regression is over, and
  whether the next night or tonight's A/B still decides.
- COMPARISONS: what an equivalence test of two sets of cells says (accuracy against the
  baseline, a study's repeats), worst first.
- REASONS: why an alert group is owed a message tonight, and how the webhook's payload names it.

The keys are the words stored in history and shown in the report: never renamed, only added.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    key: str
    meaning: str
    severity: int | None = None  # the report's order of tonight's verdicts on a figure, 0 worst; None: no verdict on a change
    fix_label: str | None = None  # how *Fixed and ended* labels it, where it is listed there
    alerts: bool = False   # the figure is (still) a confirmed regression tonight
    ends: bool = False     # the regression is over: the figure is back at the level before it
    pending: bool = False  # not yet confirmed: the next night (or tonight's A/B) decides


# a change's verdict (the report's "Changes tonight")
REGRESSION, IMPROVEMENT, NO_EFFECT, INCONCLUSIVE = "regression (confirmed)", "improvement", "no effect", "inconclusive"
# a change that came while a confirmed regression lasted, judged against the level before it
FIXED, PARTLY_FIXED, NO_BETTER = "regression fixed", "partly fixed", "still regressed"
ENDED, BACK = "regression ended by itself", "back, to be confirmed"  # a regressed figure back, with no change
# what a night says that is no verdict on a change
BUILDING, RESTARTED, FLAGGED = "building baseline", "baseline restarted", "flagged"

_TABLE = (
    Verdict(REGRESSION, "a confirmed regression (and every night it lasts); also a change that made a lasting "
                        "regression worse by the magnitude gate, blamed on that change", severity=0, alerts=True),
    Verdict(NO_BETTER, "a change that came while the regression lasted is no better than the regressed image; the "
                       "regression and its suspect stand", severity=1, fix_label="STILL REGRESSED", alerts=True),
    Verdict(PARTLY_FIXED, "a change moved the figure at least the magnitude gate towards the level before the "
                          "regression; it is still regressed", severity=2, fix_label="PARTLY FIXED", alerts=True),
    Verdict(INCONCLUSIVE, "a change under test, flagged or improved, not yet confirmed", severity=3, pending=True),
    Verdict(BACK, "a regressed figure back within the gates of the level before it, to be confirmed", severity=4,
            pending=True),
    Verdict(FIXED, "a change that came while the regression lasted brought the figure back", severity=5,
            fix_label="FIXED", ends=True),
    Verdict(ENDED, "back for confirm_end nights with no change since the regression: ended by itself", severity=6,
            fix_label="ENDED BY ITSELF", ends=True),
    Verdict(IMPROVEMENT, "a change confirmed better: its level starts a new baseline", severity=7),
    Verdict(NO_EFFECT, "a change within the gates of the baseline before it", severity=8),
    Verdict(BUILDING, "fewer than min_history nights in the baseline: the night joins it; a change that came tonight "
                      "is judged by its same-night A/B alone"),
    Verdict(RESTARTED, "the environment changed (driver, GPU model, topology): a new baseline starts (an image or "
                       "config change never restarts one)"),
    Verdict(FLAGGED, "past both gates, not yet confirmed; held out of the baseline", pending=True),
)
VERDICTS: dict[str, Verdict] = {v.key: v for v in _TABLE}
SEVERITY = tuple(v.key for v in sorted((v for v in _TABLE if v.severity is not None), key=lambda v: v.severity or 0))
NOT_A_VERDICT = tuple(v.key for v in _TABLE if v.severity is None)
FIX_LABELS = {v.key: v.fix_label for v in _TABLE if v.fix_label}

# an equivalence test's outcome (analysis.stats), worst first; "equivalent" needs its margin met
WORSE, COMPARISON_INCONCLUSIVE, BETTER, UNINFORMATIVE, EQUIVALENT = (
    "worse", "inconclusive", "better", "uninformative", "equivalent")
COMPARISONS = (WORSE, COMPARISON_INCONCLUSIVE, BETTER, UNINFORMATIVE, EQUIVALENT)


@dataclass(frozen=True)
class Reason:
    key: str
    meaning: str
    payload_kind: str = "regression"  # the webhook payload's "kind"
    with_tonight: bool = False         # tonight's confirmed figures of the group ride along (and its bisect hint)


NEW, GREW, STATE, GROUP_FIXED, PARTLY, REMINDER = "new", "grew", "state", "fixed", "partly", "reminder"
REASONS: dict[str, Reason] = {r.key: r for r in (
    Reason(NEW, "the group has had no message yet", with_tonight=True),
    Reason(GREW, "the group gained a benchmark since its last message", with_tonight=True),
    Reason(STATE, "a person moved the group to another state"),
    Reason(GROUP_FIXED, "the group is fixed (every figure back, or said so)", payload_kind="fixed"),
    Reason(PARTLY, "a figure of the group came back tonight and others did not"),
    Reason(REMINDER, "the group stayed new for remind_after_days since its last message"),
)}
