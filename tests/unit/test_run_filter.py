"""The shared filter grammar (console.run_filter): the keys the CLI's --filter added to the
TUI's / (age>, age<, name:, resource:, tool:, has:<resource kind>) and inbox items."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from console.model import Interrupt, Resource, Run, RunState
from console.run_filter import FilterQuery, parse_duration, run_age_s

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def run(
    native: str,
    *,
    name: str = "",
    backend: str = "dbos",
    context: str = "local",
    state: RunState = RunState.RUNNING,
    beat_age_s: float | None = 5.0,
    updated_age_s: float = 1.0,
    resources: list[Resource] | None = None,
) -> Run:
    return Run(
        id=Run.make_id(backend, context, native),
        backend=backend,
        context=context,
        native_id=native,
        name=name,
        state=state,
        heartbeat_at=NOW - timedelta(seconds=beat_age_s) if beat_age_s is not None else None,
        updated_at=NOW - timedelta(seconds=updated_age_s),
        resources=resources or [],
    )


def matches(expr: str, r: Run) -> bool:
    return FilterQuery.parse(expr).matches(r, r.state, now=NOW)


GPU = Resource(id="gpu-0", kind="gpu", on_pause="keep")
LOCK = Resource(id="db-lock", kind="lock", on_pause="release")
RELEASED_GPU = Resource(id="gpu-1", kind="gpu", state="released")


def test_durations():
    assert parse_duration("90") == 90
    assert parse_duration("30s") == 30
    assert parse_duration("10m") == 600
    assert parse_duration("2h") == 7200
    assert parse_duration("1d") == 86400
    assert parse_duration("ten") is None


def test_age_is_the_heartbeat_age_or_the_time_since_the_last_update():
    beating = run("a", beat_age_s=700, updated_age_s=1)
    silent = run("b", beat_age_s=None, updated_age_s=30)
    assert run_age_s(beating, NOW) == 700
    assert run_age_s(silent, NOW) == 30
    assert matches("age>10m", beating) and not matches("age>10m", silent)
    assert matches("age<1m", silent) and not matches("age<1m", beating)
    assert matches("age>20", silent) and not matches("age>40s", silent)
    assert matches("-age>10m", silent) and not matches("-age>10m", beating)


def test_name_is_a_substring_or_a_glob():
    r = run("a", name="deploy-prod")
    assert matches("name:deploy", r)
    assert matches("name:deploy-*", r)
    assert matches("name:DEPLOY-P?OD", r)
    assert not matches("name:*-staging", r)
    assert not matches("name:research", r)
    assert matches("name:research,deploy", r)  # any value of the list


def test_resource_matches_kind_or_id_and_has_matches_held_resources_only():
    r = run("a", resources=[GPU, LOCK])
    done = run("b", resources=[RELEASED_GPU])
    assert matches("resource:gpu", r) and matches("resource:db-*", r)
    assert not matches("resource:tpu", r)
    assert matches("resource:gpu", done)  # resource: names what the run declares
    assert matches("has:gpu", r) and not matches("has:gpu", done)  # has: what it holds
    assert matches("has:lock", r) and matches("has:resource", r)
    assert not matches("has:resource", done)
    assert matches("-has:gpu", done)


def test_existing_keys_still_work_together():
    r = run("wf-1", name="trainer", backend="temporal", context="prod", resources=[GPU])
    assert matches("backend:temporal ctx:prod has:gpu state:active trainer", r)
    assert not matches("backend:dbos has:gpu", r)
    assert not matches("state:terminal", r)
    assert matches("-state:completed", r)
    assert not matches("tool:deploy", r)  # a run has no tool


def test_unknown_keys_are_text():
    r = run("wf-1", name="trainer")
    assert not matches("colour:blue", r)
    assert matches("wf-1", r)


def interrupt(r: Run, native: str, *, action: str, title: str, age_s: float) -> Interrupt:
    return Interrupt(
        id=Interrupt.make_id(r.id, native),
        run_id=r.id,
        native_id=native,
        title=title,
        action=action,
        created_at=NOW - timedelta(seconds=age_s),
    )


def test_inbox_items_filter_on_tool_age_text_and_their_run():
    r = run("wf-1", name="deployer", backend="dbos", context="east", resources=[GPU])
    deploy = interrupt(r, "1", action="deploy_service", title="Deploy to prod?", age_s=900)
    refund = interrupt(r, "2", action="refund", title="Refund 40 EUR", age_s=10)

    def m(expr: str, i: Interrupt, run_of: Run | None = r) -> bool:
        return FilterQuery.parse(expr).matches_interrupt(i, run_of, now=NOW)

    assert m("tool:deploy*", deploy) and not m("tool:deploy*", refund)
    assert m("tool:refund", refund)
    assert m("age>10m", deploy) and not m("age>10m", refund)
    assert m("prod", deploy) and not m("prod", refund)  # text: the title
    assert m("deployer", refund)  # text: the run's name
    assert m("backend:dbos ctx:east", refund) and not m("ctx:west", refund)
    assert m("has:gpu state:running name:deploy", refund)
    assert not m("has:gpu", refund, None)  # an unknown run matches no run term
    assert m("backend:dbos tool:refund", refund, None)  # but the id still tells the backend


def test_created_is_the_time_since_the_run_started_and_unknown_starts_match_neither():
    old = run("old").model_copy(update={"started_at": NOW - timedelta(hours=3)})
    new = run("new").model_copy(update={"started_at": NOW - timedelta(minutes=5)})
    unknown = run("unknown")
    assert matches("created>2h", old) and not matches("created>2h", new)
    assert matches("created<10m", new) and not matches("created<10m", old)
    assert not matches("created>2h", unknown) and not matches("created<10m", unknown)
    assert matches("-created>2h", new)


def test_version_and_error_are_substrings_and_failed_and_given_up_states_select():
    from console.run_facts import RunError

    failed = run("f", state=RunState.FAILED).model_copy(update={
        "app_version": "build-2.3.1",
        "error": RunError(type="TimeoutError", message="step ship timed out after 30s")})
    given_up = run("g", state=RunState.GIVEN_UP).model_copy(update={
        "error": RunError(type="MaxRecoveryAttemptsExceeded", message="gave up")})
    plain = run("p")
    assert matches("version:2.3", failed) and not matches("version:2.3", plain)
    assert matches("error:timeout", failed) and matches("error:timed,nomatch", failed)
    assert matches("error:maxrecovery", given_up) and not matches("error:timeout", plain)
    assert matches("state:failed", failed) and not matches("state:failed", given_up)
    assert matches("state:given_up", given_up) and not matches("state:given_up", failed)
    assert FilterQuery.parse("state:failed,given_up").states() == {RunState.FAILED,
                                                                  RunState.GIVEN_UP}


def test_has_leak_is_the_leak_rule_of_irq_leaks() -> None:
    """``has:leak`` matches what ``irq leaks`` lists: a release report that never came, or a
    resource still held by a run that ended -- not a held resource of a live run."""
    gpu = Resource(id="gpu-1", kind="gpu")
    unreported = run("paused", state=RunState.PAUSED,
                     resources=[gpu.model_copy(update={"state": "suspected_leak"})])
    ended = run("done", state=RunState.COMPLETED, resources=[gpu])
    freed = run("freed", state=RunState.COMPLETED,
                resources=[gpu.model_copy(update={"state": "released"})])
    live = run("live", resources=[gpu])
    assert matches("has:leak", unreported) and matches("has:leak", ended)
    assert not matches("has:leak", freed) and not matches("has:leak", live)
