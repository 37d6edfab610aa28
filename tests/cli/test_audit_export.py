"""``irq audit`` export against a real gateway: -o csv (header and rows of the contract fields),
-o jsonl, and the --since/--until/--actor/--action filters the gateway's query applies."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta

from cli_harness import ServedGateway, irq

CSV_HEADER = ["at", "identity", "role", "action", "target", "reason", "outcome"]


def _audited(gw: ServedGateway) -> list[dict[str, str]]:
    """Two refused commands of two identities (a viewer's pause, an operator's cancel of a run
    no backend serves): both audited."""
    viewer = irq("pause", "dbos:local/wf-a", "--yes", "--reason", "gpu, \"now\"",
                 env=gw.env(gw.viewer))
    assert viewer.code == 5, viewer.stderr
    operator = irq("cancel", "dbos:local/wf-b", "--yes", "--reason", "stale",
                   env=gw.env(gw.operator))
    assert operator.code != 0
    entries = json.loads(irq("audit", "-o", "json", env=gw.env(gw.viewer)).stdout)
    assert {e["identity"] for e in entries} >= {"viewer-test", "ops-test"}, entries
    return list(entries)


def test_csv_has_the_contract_header_and_one_row_per_entry(served_gateway: ServedGateway):
    entries = _audited(served_gateway)
    out = irq("audit", "-o", "csv", env=served_gateway.env(served_gateway.viewer))
    assert out.code == 0, out.stderr
    rows = list(csv.reader(io.StringIO(out.stdout)))
    assert rows[0] == CSV_HEADER
    assert len(rows) == len(entries) + 1
    by_target = {row[4]: dict(zip(CSV_HEADER, row, strict=True)) for row in rows[1:]}
    refused = by_target["dbos:local/wf-a"]
    assert refused["identity"] == "viewer-test" and refused["role"] == "viewer"
    assert refused["action"] == "pause" and refused["outcome"] == "forbidden"
    assert refused["reason"] == 'gpu, "now"'  # quoted by the CSV writer, read back whole
    jsonl = irq("audit", "-o", "jsonl", env=served_gateway.env(served_gateway.viewer))
    assert [json.loads(line) for line in jsonl.stdout.splitlines()] == entries


def test_since_until_actor_and_action_filters(served_gateway: ServedGateway):
    entries = _audited(served_gateway)
    env = served_gateway.env(served_gateway.viewer)

    def targets(*args: str) -> set[str]:
        out = irq("audit", "-o", "json", *args, env=env)
        assert out.code == 0, out.stderr
        return {e["target"] for e in json.loads(out.stdout)}

    both = {"dbos:local/wf-a", "dbos:local/wf-b"}
    assert targets("--since", "1h") >= both
    assert targets("--until", "1h") == set()  # everything happened in the last hour
    assert targets("--actor", "viewer-test") == {"dbos:local/wf-a"}
    assert targets("--actor", "nobody") == set()
    assert "dbos:local/wf-b" in targets("--action", "cancel")
    assert "dbos:local/wf-a" not in targets("--action", "cancel")
    assert targets("--action", "pause,cancel", "--actor", "ops-test") == {"dbos:local/wf-b"}
    newest = max(datetime.fromisoformat(e["at"]) for e in entries)
    later = (newest + timedelta(seconds=1)).isoformat()
    assert targets("--since", later) == set()
    assert targets("--until", later) >= both
    earlier = (newest - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert targets("--since", earlier, "--until", later) >= both


def test_bad_time_and_window_exit_2(served_gateway: ServedGateway):
    env = served_gateway.env(served_gateway.viewer)
    bad = irq("audit", "--since", "yesterday-ish", env=env)
    assert bad.code == 2 and "--since" in bad.stderr and "duration" in bad.stderr
    backwards = irq("audit", "--since", "1h", "--until", "2h", env=env)
    assert backwards.code == 2 and "before --until" in backwards.stderr
