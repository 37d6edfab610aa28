"""A short cut of the chaos suite (``make chaos`` runs the full one: benchmarks/chaos.py); the
storm here, too, runs two gateways on one PostgreSQL journal.

Real gateway processes, real agents on DBOS over SQLite and on Temporal's dev server; the
verdict on decisions is read from the agents' own records (devtools/chaos/storm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.chaos.freeze import run_freezes, run_postgres_restart
from devtools.chaos.fuzz import run_fuzz
from devtools.chaos.silent import run_silent
from devtools.chaos.storm import run_storm


async def test_fuzzed_frames_get_clear_errors_and_never_crash_or_close_other_clients(
        tmp_path: Path) -> None:
    report = await run_fuzz(tmp_path, frames=5_000, client_identities=4, agent_connections=2,
                            probes=1)
    assert report.frames == 5_000
    assert report.crashes == 0
    assert report.unanswered_pings == 0 and report.pings >= 10
    assert report.unclear_errors == 0, report.answers
    assert not report.closed, report.closed  # no fuzzing connection was closed by the gateway
    # the two frames that end their own connection, by the websockets layer: past 16 MiB
    # (1009) and invalid UTF-8 in a text frame (1007, RFC 6455)
    assert report.expected_closes == {"17MiB:1009": 1, "utf8-in-text:1007": 1}
    assert report.bystander_pings > 0 and report.bystander_unanswered == 0
    assert not report.bystander_closed
    assert report.answers["malformed"] > 0 and report.answers["invalid"] > 0
    assert report.rss_after_kb - report.rss_warm_kb < 32 * 1024, report.as_dict()


async def test_connections_that_never_say_hello_do_not_keep_legit_clients_out(
        tmp_path: Path) -> None:
    report = await run_silent(tmp_path, squatters=100, legit=5, hold_s=1.0)
    assert sum(report.squatters.values()) == 100
    assert report.legit_failures == 0 and len(report.under_load_ms) == 5
    assert report.crashes == 0
    assert max(report.under_load_ms) < 5_000, report.as_dict()


@pytest.mark.timeout(900)
async def test_gateway_sigkilled_during_a_decision_storm_loses_and_doubles_nothing(
        tmp_path: Path) -> None:
    report = await run_storm(tmp_path, kills=3, journal="postgresql", outstanding=3, deciders=2,
                             min_up_s=0.5, drain_s=90, max_storm_s=300)
    result = report.as_dict()
    assert report.kills == 3, result
    assert report.decisions > 0 and set(report.decisions_by_backend) == {"dbos", "temporal"}, \
        result
    # per decision: every one a client saw applied reached its agent once, as that decision,
    # and nothing reached an agent that no client saw applied
    assert report.lost == 0 and report.doubled == 0, result
    assert report.wrong_kind == 0 and report.delivered_without_applied == 0, result
    assert report.delivered == report.decisions, result
    assert report.gave_up == 0 and report.unsettled == 0, result
    # a decision sent to the gateway that does not poll the context (the peer holds its
    # lease) is executed there too: its adapter is started all the same
    assert "failed" not in report.outcomes, result


@pytest.mark.timeout(600)
async def test_frozen_backend_and_frozen_gateway_are_shown_recover_and_lose_nothing(
        tmp_path: Path) -> None:
    report = await run_freezes(tmp_path, backend_freeze_s=5.0, gateway_freeze_s=2.0)
    result = report.as_dict()
    assert report.unreachable_seen_after_s is not None, result  # clients were told
    assert report.reachable_again_after_s is not None, result  # and saw it recover
    assert report.agents_back_after_s is not None, result  # the agents pushed again
    assert report.backend_freeze_lost == report.backend_freeze_doubled == 0, result
    assert report.gateway_freeze_lost == report.gateway_freeze_doubled == 0, result
    # the decisions were sent while each was frozen, not after the thaw
    assert report.decision_during_freeze and report.decision_during_gateway_freeze, result


@pytest.mark.timeout(300)
async def test_journal_postgres_restarted_while_deciding_loses_and_doubles_nothing(
        tmp_path: Path) -> None:
    report = await run_postgres_restart(tmp_path, down_s=1.5)
    result = report.as_dict()
    assert report.gateway_survived, result
    assert "journal is unavailable" in report.decision_while_down, result  # not the raw error
    assert report.decided_after_restart == "applied", result
    assert report.postgres_restart_lost == report.postgres_restart_doubled == 0, result
