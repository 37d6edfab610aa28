"""Keys before redraws (issue 25, part 4): a flush or tick that fires while a key is being
answered waits; what it would have drawn goes out with the next flush, none of it lost."""

from __future__ import annotations

from datetime import timedelta

from console.model import RunState
from console.tui.app import IrqApp
from console.tui.key_priority import KeyFirst
from tests.tui.test_terminal_bytes import T0, ScriptedSource, agent, fleet_shown


def test_a_key_holds_flushes_until_settled_or_its_hold_or_the_stale_bound() -> None:
    now = [100.0]
    gate = KeyFirst(hold_s=0.25, max_stale_s=0.5, clock=lambda: now[0])
    assert gate.may_flush()
    gate.key_arrived()
    now[0] += 0.1
    assert gate.holding and not gate.may_flush()
    gate.settled()  # the screen refreshed after the key's action
    assert not gate.holding and gate.may_flush()

    gate.key_arrived()  # a key that runs no action: held for hold_s only
    now[0] += 0.2
    assert not gate.may_flush()
    now[0] += 0.06
    assert gate.may_flush()

    # keys arriving back to back cannot keep the data from the screen past max_stale_s
    refused = 0
    for _ in range(10):
        gate.key_arrived()
        now[0] += 0.1
        refused += not gate.may_flush()
    assert 0 < refused < 10 and gate.deferred >= refused

    gate.nothing_waiting()  # an empty flush: the data was current, the stale clock restarts
    gate.key_arrived()
    now[0] += 0.1
    assert not gate.may_flush()


async def test_a_flush_during_a_key_waits_and_the_next_one_draws_everything() -> None:
    clock = [T0]
    source = ScriptedSource([agent(i, beat_age=1.0 + i / 10) for i in range(40)])
    app = IrqApp(source, context="t", clock=lambda: clock[0], flush_interval=3600,
                 tick_interval=3600, ping_interval=0,  # the test fires flushes and ticks
                 key_first=KeyFirst(hold_s=3600, max_stale_s=3600))  # only a refresh frees
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await fleet_shown(app, pilot)
        await pilot.pause(0.1)

        clock[0] = T0 + timedelta(seconds=2)
        source.send(agent(7, beat_age=0.0, state=RunState.PAUSED, now=clock[0]))
        await pilot.pause(0.05)  # the batch reached the app; no flush has drawn it
        redraws = app.redraws
        seen_in_action: list[tuple[int, bool]] = []
        sort_by = screen.sort_by

        def sort_during_flush(key: str, reverse: bool | None = None) -> None:
            app._apply_pending()  # the flush timer fires while the key is being answered
            app._tick()  # and so does the tick
            seen_in_action.append((app.redraws, app.key_first.holding))
            sort_by(key, reverse)

        screen.sort_by = sort_during_flush  # type: ignore[method-assign]
        await pilot.press("s")
        await pilot.pause(0.05)
        assert seen_in_action == [(redraws, True)]  # held: nothing applied mid-key
        assert app.index.row("dbos:bench/agent-007") is not None
        assert app.index.row("dbos:bench/agent-007").state is RunState.RUNNING  # type: ignore[union-attr]

        # the screen refreshed after the key's action: that settled it (the hold is an hour)
        assert not app.key_first.holding
        assert app.index.sort.value == "age"
        app._apply_pending()  # the next flush draws the held batch and the owed tick
        assert app.redraws == redraws + 1
        assert app.index.row("dbos:bench/agent-007").state is RunState.PAUSED  # type: ignore[union-attr]
        assert not app._tick_owed
