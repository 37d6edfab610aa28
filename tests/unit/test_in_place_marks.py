"""``irq retry --wait`` holds back only a run retried in place that still shows its state
from before; a fork is the retry's effect whatever state it is in. (A retry re-driven after
its gateway's crash had forked and completed before the command that asked for its outcome:
the completed fork, seen before that command, was waited on until the timeout.)"""

from __future__ import annotations

from console.cli.wait import in_place_marks
from console.model import Action, CommandResult

BEFORE = {"dbos:local/p-1": ("failed", None, "503"), "dbos:local/fork-1": ("completed", None, ""),
          "temporal:d/wf": ("failed", None, "boom")}


def _result(target: str, new_run_id: str | None = None, *, outcome: str = "applied",
            replayed: bool = False) -> CommandResult:
    return CommandResult(id="k", action=Action.RETRY, target=target, outcome=outcome,
                         new_run_id=new_run_id, replayed=replayed)


def test_a_fork_is_never_held_back_a_reset_in_place_is() -> None:
    results = [_result("dbos:local/p-1", "dbos:local/fork-1"), _result("temporal:d/wf")]
    assert in_place_marks(results, BEFORE) == {"temporal:d/wf": ("failed", None, "boom")}


def test_a_replayed_or_refused_retry_holds_nothing_back() -> None:
    results = [_result("temporal:d/wf", replayed=True),
               _result("dbos:local/p-1", outcome="failed")]
    assert in_place_marks(results, BEFORE) == {}
