from __future__ import annotations

from datetime import UTC, datetime, timedelta

from console.gateway.hub import Hub
from console.gateway.protocol import AgentHeartbeat
from console.model import Interrupt, Resource, Run, RunState, utcnow

RID = "dbos:local/wf"


def _run(**kw) -> Run:
    return Run(id=RID, backend="dbos", context="local", native_id="wf", **kw)


def _beat(**kw) -> AgentHeartbeat:
    base = dict(type="heartbeat", backend="dbos", native_id="wf", interval_s=1.0, timeout_s=5.0)
    base.update(kw)
    return AgentHeartbeat(**base)


def test_heartbeat_flood_is_coalesced_into_one_run_event():
    hub = Hub()
    hub.observe_runs([_run()])
    before = hub.seq
    for i in range(1000):
        hub.agent_heartbeat(RID, _beat(seq=i, progress=i / 1000))
    assert hub.seq == before
    hub.flush_heartbeats()
    runs = [e for e in hub.log if e["seq"] > before and e["kind"] == "run"]
    assert len(runs) == 1
    assert runs[0]["data"]["progress"] == 0.999
    assert len(hub.history[RID]) == 120


def test_a_beat_older_than_the_accepted_one_does_not_undo_a_pause_report():
    hub = Hub()
    hub.observe_runs([_run()])
    t = utcnow()
    hub.agent_heartbeat(RID, _beat(seq=11, at=t, phase="paused"))
    hub.agent_heartbeat(RID, _beat(seq=10, at=t - timedelta(milliseconds=5), phase="running"))
    assert hub.stale_beats == 1 and hub._beats[RID].phase == "paused"
    # a new execution whose counter starts again, with a later time, is heard
    hub.agent_heartbeat(RID, _beat(seq=1, at=t + timedelta(seconds=1), phase="running"))
    assert hub.stale_beats == 1 and hub._beats[RID].seq == 1


class ManualClock:
    """The hub's "now", moved by the test instead of by sleeping."""

    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def test_silence_turns_a_run_late_then_lost_without_any_event_from_the_agent():
    clock = ManualClock()
    hub = Hub(clock=clock)
    hub.observe_runs([_run()])
    hub.agent_heartbeat(RID, _beat(at=clock.now - timedelta(seconds=4.0)))
    hub.flush_heartbeats()
    assert hub.runs[RID].state is RunState.LATE  # late after 2 s, lost after 5 s
    seq = hub.seq
    clock.advance(0.9)  # 4.9 s of silence: still within the timeout
    hub.tick()
    assert hub.runs[RID].state is RunState.LATE and hub.seq == seq
    clock.advance(0.2)  # 5.1 s: the timeout (5 s) passes in silence
    hub.tick()
    assert hub.runs[RID].state is RunState.LOST
    assert [e["data"]["state"] for e in hub.log if e["seq"] > seq] == ["lost"]
    hub.agent_heartbeat(RID, _beat(at=clock.now))
    hub.flush_heartbeats()
    assert hub.runs[RID].state is RunState.RUNNING


def test_pending_interrupt_makes_the_run_waiting_and_withdrawal_clears_it():
    hub = Hub()
    hub.observe_runs([_run()])
    intr = Interrupt(id=f"{RID}#wf/1", run_id=RID, native_id="wf/1", title="Deploy?")
    hub.observe_interrupts("dbos:local", [intr], True, lambda _iid: None)
    assert hub.runs[RID].state is RunState.WAITING
    assert hub.runs[RID].interrupts == [intr.id]
    hub.observe_interrupts("dbos:local", [], True, lambda _iid: None)
    assert hub.interrupts[intr.id].status == "withdrawn"
    assert hub.runs[RID].interrupts == []


def test_an_interrupt_turns_decided_with_the_approvals_the_journal_holds_then():
    """The last approver's approval is written with the decision claim, maybe by a peer
    gateway: however the interrupt turns decided here (this gateway's poll, a peer's word), it
    is shown through the overlay at once, never first with the approvals of before."""
    from console.gateway.journal_store import DecisionClaim

    approvals: list[str] = ["alice"]
    hub = Hub(interrupt_overlay=lambda i: i.model_copy(
        update={"description": ",".join(approvals)}))
    hub.observe_runs([_run()])
    polled = Interrupt(id=f"{RID}#wf/1", run_id=RID, native_id="wf/1", title="Deploy?")
    told = Interrupt(id=f"{RID}#wf/2", run_id=RID, native_id="wf/2", title="Deploy?")
    hub.observe_interrupts("dbos:local", [polled, told], True, lambda _iid: None)
    assert hub.interrupts[polled.id].description == "alice"
    approvals.append("bob")  # through a peer, which this gateway has not heard of yet
    claims = {i.id: DecisionClaim(i.id, "k", "approve", "bob", utcnow(), "applied")
              for i in (polled, told)}
    before = hub.seq
    hub.mark_decided(told.id, claims[told.id])  # a peer's "decided"
    hub.observe_interrupts("dbos:local", [], True, claims.get)  # this gateway's poll
    shown = [e["data"] for e in hub.log if e["seq"] > before and e["kind"] == "interrupt"]
    assert [(d["id"], d["status"], d["description"]) for d in shown] == [
        (told.id, "decided", "alice,bob"), (polled.id, "decided", "alice,bob")]


def test_missing_release_report_is_flagged_as_suspected_leak():
    hub = Hub()
    lock = Resource(id="lock", kind="lock", on_pause="release")
    hub.observe_runs([_run()])
    hub.agent_heartbeat(RID, _beat(resources=[lock]))
    hub.observe_runs([_run(state=RunState.PAUSED)])
    hub.expect_release(RID, "pause", {"lock"}, within_s=-1)
    assert hub.runs[RID].state is RunState.PAUSING
    hub.tick()
    assert hub.runs[RID].state is RunState.PAUSED
    assert hub.runs[RID].resources[0].state == "suspected_leak"
    notices = [e for e in hub.log if e["kind"] == "notice"]
    assert "suspected leak" in notices[-1]["data"]["message"]


def test_release_report_confirms_the_pause():
    hub = Hub()
    gpu = Resource(id="gpu", kind="gpu", on_pause="keep")
    lock = Resource(id="lock", kind="lock", on_pause="release")
    hub.observe_runs([_run()])
    hub.agent_heartbeat(RID, _beat(resources=[gpu, lock]))
    hub.observe_runs([_run(state=RunState.PAUSED)])
    hub.expect_release(RID, "pause", {"lock"}, within_s=30)
    hub.agent_heartbeat(RID, _beat(phase="paused", resources=[
        gpu, lock.model_copy(update={"state": "released"})]))
    hub.flush_heartbeats()
    assert RID not in hub.release_checks
    assert hub.runs[RID].state is RunState.PAUSED
    notices = [e for e in hub.log if e["kind"] == "notice"]
    assert "confirmed" in notices[-1]["data"]["message"] and "kept gpu" in notices[-1]["data"]["message"]


def test_release_reported_before_the_gateway_expects_it_confirms_at_once():
    hub = Hub()
    gpu = Resource(id="gpu", kind="gpu", on_cancel="release")
    hub.observe_runs([_run()])
    hub.agent_heartbeat(RID, _beat(resources=[gpu]))
    # the agent saw the cancel and reported before the backend call returned to the gateway
    hub.agent_heartbeat(RID, _beat(seq=1, phase="cancelled", resources=[
        gpu.model_copy(update={"state": "released"})]))
    hub.observe_runs([_run(state=RunState.CANCELLED)])
    hub.expect_release(RID, "cancel", {"gpu"}, within_s=30)
    assert RID not in hub.release_checks
    assert hub.runs[RID].state is RunState.CANCELLED
    notices = [e for e in hub.log if e["kind"] == "notice"]
    assert "confirmed" in notices[-1]["data"]["message"]


def test_a_release_reported_before_the_command_was_sent_confirms_nothing():
    # pause, released, resumed; a second pause sent before the agent beat again must not be
    # confirmed by the first pause's "paused, released" report
    now = [datetime(2026, 12, 1, 12, 0, tzinfo=UTC)]
    hub = Hub(clock=lambda: now[0])
    lock = Resource(id="lock", kind="lock", on_pause="release")
    hub.observe_runs([_run()])
    hub.agent_heartbeat(RID, _beat(seq=1, phase="paused", resources=[
        lock.model_copy(update={"state": "released"})]))
    now[0] += timedelta(seconds=5)
    hub.expect_release(RID, "pause", {"lock"}, within_s=30, since=now[0])
    assert RID in hub.release_checks  # still waiting for a report made after the command
    now[0] += timedelta(seconds=1)
    hub.agent_heartbeat(RID, _beat(seq=2, phase="paused", resources=[
        lock.model_copy(update={"state": "released"})]))
    assert RID not in hub.release_checks


def test_events_since_replays_or_says_too_old():
    hub = Hub(event_log_size=5)
    for i in range(8):
        hub.publish("notice", {"i": i})
    assert [e["seq"] for e in hub.events_since(5)] == [6, 7, 8]
    assert hub.events_since(8) == []
    assert hub.events_since(1) is None


def test_finished_runs_leave_the_live_index_after_an_hour():
    hub = Hub()
    old = utcnow() - timedelta(hours=2)
    hub.observe_runs([_run(state=RunState.COMPLETED, updated_at=old),
                      Run(id="dbos:local/live", backend="dbos", context="local", native_id="live")])
    hub.tick()
    assert list(hub.runs) == ["dbos:local/live"]
    assert hub.log[-1]["kind"] == "run_removed" and hub.log[-1]["data"] == {"id": RID}
