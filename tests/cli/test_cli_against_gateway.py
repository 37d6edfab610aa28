"""The CLI against a real gateway (``irq serve`` in a subprocess, no backends): exit codes,
output formats and the JSON contract field names (docs/json-contract.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from cli_harness import AUDIT_FIELDS, RESULT_FIELDS, ROOT, ServedGateway, irq


def test_runs_lists_nothing_in_every_format(served_gateway: ServedGateway):
    env = served_gateway.env(served_gateway.viewer)
    as_json = irq("runs", "-o", "json", env=env)
    assert as_json.code == 0
    assert json.loads(as_json.stdout) == []
    as_jsonl = irq("runs", "-o", "jsonl", env=env)
    assert as_jsonl.code == 0 and as_jsonl.stdout == ""
    as_text = irq("runs", env=env)
    assert as_text.code == 0
    assert as_text.stdout == ""  # nothing to list: the note goes to stderr
    assert "no runs" in as_text.stderr


def test_inbox_json_is_an_empty_array_when_nothing_waits(served_gateway: ServedGateway):
    result = irq("inbox", "-o", "json", env=served_gateway.env(served_gateway.viewer))
    assert result.code == 0
    assert json.loads(result.stdout) == []


def test_missing_or_wrong_token_exits_5(served_gateway: ServedGateway):
    missing = irq("runs", env=served_gateway.env())
    assert missing.code == 5
    assert "token" in missing.stderr
    wrong = irq("runs", env=served_gateway.env("irq_not-a-token"))
    assert wrong.code == 5


def test_show_of_an_unknown_run_exits_3(served_gateway: ServedGateway):
    env = served_gateway.env(served_gateway.viewer)
    full = irq("show", "dbos:local/no-such-run", env=env)
    assert full.code == 3
    assert "no such run" in full.stderr
    short = irq("show", "no-such-run", env=env)
    assert short.code == 3
    assert "no run matches 'no-such-run'" in short.stderr


def test_deciding_an_unknown_interrupt_exits_3(served_gateway: ServedGateway):
    env = served_gateway.env(served_gateway.operator)
    result = irq("approve", "dbos:local/wf-1#wf-1/1", "--yes", "-o", "json", env=env)
    assert result.code == 3
    (item,) = json.loads(result.stdout)
    assert RESULT_FIELDS <= item.keys()
    assert item["target"] == "dbos:local/wf-1#wf-1/1"
    assert item["action"] in ("approve", "decide")
    short = irq("approve", "wf-1/1", "--yes", env=env)
    assert short.code == 3
    assert "no interrupt matches" in short.stderr


def test_viewer_cannot_pause_exit_5_and_the_refusal_is_audited(served_gateway: ServedGateway):
    env = served_gateway.env(served_gateway.viewer)
    result = irq(
        "pause",
        "dbos:local/wf-9",
        "--yes",
        "--reason",
        "need the GPU",
        "--key",
        "k-viewer-1",
        "-o",
        "json",
        env=env,
    )
    assert result.code == 5
    (item,) = json.loads(result.stdout)
    assert RESULT_FIELDS <= item.keys()
    assert item["outcome"] == "forbidden"
    assert item["id"] == "k-viewer-1"

    audit = irq("audit", "--target", "dbos:local/wf-9", "-o", "json", env=env)
    assert audit.code == 0
    entries = json.loads(audit.stdout)
    assert entries, "the refused command must be audited"
    entry = entries[0]
    assert AUDIT_FIELDS <= entry.keys()
    assert entry["identity"] == "viewer-test"
    assert entry["role"] == "viewer"
    assert entry["action"] == "pause"
    assert entry["reason"] == "need the GPU"
    assert entry["outcome"] == "forbidden"

    jsonl = irq("audit", "-o", "jsonl", env=env)
    lines = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert len(lines) == len(json.loads(irq("audit", "-o", "json", env=env).stdout))


def test_dry_run_of_an_unknown_run_exits_3_and_changes_nothing(served_gateway: ServedGateway):
    env = served_gateway.env(served_gateway.viewer)  # a viewer may look at plans
    result = irq("cancel", "dbos:local/wf-1", "--dry-run", "-o", "json", env=env)
    assert result.code == 3
    assert result.stdout == ""
    assert "no such run: dbos:local/wf-1" in result.stderr
    audit = irq("audit", "-o", "json", env=env)
    assert json.loads(audit.stdout) == []


def test_a_token_created_while_the_gateway_runs_works_at_once(served_gateway: ServedGateway):
    created = irq("token", "create", "--role", "viewer", "--name", "late-comer")
    assert created.code == 0
    result = irq("runs", env=served_gateway.env(created.stdout.strip()))
    assert result.code == 0


def test_watch_streams_events_as_json_lines_and_stops_cleanly(served_gateway: ServedGateway):
    env = {**os.environ, **served_gateway.env(served_gateway.operator)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "console.cli.app", "watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["kind"] == "snapshot"
        assert "seq" in first
        # any command is audited, and the audit entry is an event
        viewer = irq(
            "pause", "dbos:local/wf-7", "--yes", env=served_gateway.env(served_gateway.viewer)
        )
        assert viewer.code == 5
        deadline = time.monotonic() + 20
        event = None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            candidate = json.loads(line)
            if candidate.get("kind") == "audit":
                event = candidate
                break
        assert event is not None, "no audit event arrived"
        assert event["seq"] > first["seq"]
        assert event["data"]["target"] == "dbos:local/wf-7"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(15)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0
