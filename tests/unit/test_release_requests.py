"""The wire and agent-side rules of a forced release: a release command names one run and a
resource; the agent's answer parses; the agent's helper answers ``unknown_run`` /
``no_callback`` without calling anything, and after its callback returns reports the
resource released in the next beat and in every later one."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from backend_adapters.release_callbacks import ReleaseCallbacks, ReleaseRequest, on_release
from backend_adapters.release_requests import ReleaseRequests
from console.gateway.protocol import FrameError, parse_agent_frame, parse_client_frame
from console.gateway.release_frames import ReleaseResult, release_request_frame


def test_a_release_command_needs_one_run_and_a_resource():
    base = {"type": "command", "id": "k", "action": "release", "targets": ["dbos:local/wf"]}
    assert parse_client_frame(json.dumps({**base, "resource": "gpu-0"})).resource == "gpu-0"
    for bad in (base, {**base, "resource": "gpu-0", "targets": ["dbos:local/a", "dbos:local/b"]}):
        with pytest.raises(FrameError) as err:
            parse_client_frame(json.dumps(bad))
        assert err.value.code == "invalid"


def test_the_agents_answer_parses_and_an_unknown_outcome_is_invalid():
    msg = parse_agent_frame(json.dumps({"type": "release_result", "id": "rel-1",
                                        "outcome": "released", "detail": "ok"}))
    assert isinstance(msg, ReleaseResult) and msg.outcome == "released"
    with pytest.raises(FrameError):
        parse_agent_frame(json.dumps({"type": "release_result", "id": "r", "outcome": "maybe"}))


class Agent:
    def __init__(self) -> None:
        self.callbacks = ReleaseCallbacks()
        self.pushed: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []
        self.answered = threading.Event()
        self.requests = ReleaseRequests(self.callbacks, self.push, self.answer)

    def push(self, frame: dict[str, Any]) -> None:
        self.pushed.append(self.requests.reported(("dbos", None, "wf-1"), dict(frame)))

    def answer(self, frame: dict[str, Any]) -> None:
        self.answers.append(frame)
        self.answered.set()

    def ask(self, native_id: str = "wf-1") -> dict[str, Any]:
        self.answered.clear()
        self.requests.request(release_request_frame("rel-1", f"dbos:local/{native_id}",
                                                    "gpu-0", "gpu", "drain"))
        assert self.answered.wait(5)
        return self.answers[-1]


BEAT = {"type": "heartbeat", "backend": "dbos", "context": None, "native_id": "wf-1", "seq": 5,
        "phase": "completed", "resources": [{"id": "gpu-0", "kind": "gpu", "state": "held"}]}


def test_the_helper_answers_without_calling_anything_for_unknown_runs_and_kinds():
    agent = Agent()
    assert agent.ask()["outcome"] == "unknown_run"  # it never reported wf-1
    agent.push(BEAT)
    assert agent.ask()["outcome"] == "no_callback"
    assert len(agent.pushed) == 1


def test_after_the_callback_every_beat_reports_the_resource_released():
    agent = Agent()
    freed: list[ReleaseRequest] = []
    on_release("gpu", freed.append, registry=agent.callbacks)
    agent.push(BEAT)
    answer = agent.ask()
    assert answer == {"type": "release_result", "id": "rel-1", "outcome": "released",
                      "detail": "gpu-0 released by the agent's callback"}
    assert [(r.native_id, r.resource, r.reason) for r in freed] == [("wf-1", "gpu-0", "drain")]
    nxt = agent.pushed[-1]
    assert nxt["seq"] > BEAT["seq"] and nxt["resources"][0]["state"] == "released"
    agent.push({**BEAT, "seq": nxt["seq"] + 1})  # the helper's own later beat says held
    assert agent.pushed[-1]["resources"][0]["state"] == "released"


def test_a_callback_that_raises_is_answered_failed_and_changes_nothing():
    agent = Agent()

    def broken(_: ReleaseRequest) -> None:
        raise RuntimeError("pool offline")

    agent.callbacks.register("gpu-0", broken)
    agent.push(BEAT)
    answer = agent.ask()
    assert answer["outcome"] == "failed" and "pool offline" in answer["detail"]
    assert len(agent.pushed) == 1
