from console.model import Run
from console.tui.run_columns import run_label
from console.tui.state_display import ASCII, UNICODE


def _run(native_id: str, name: str) -> Run:
    return Run(id=f"x:local/{native_id}", backend="x", context="local", native_id=native_id,
               name=name)


def test_an_opaque_native_id_is_led_by_the_run_name():
    thread = _run("01a2307e-543c-704d-a6f2-7f806d5faa05", "expenses")
    assert run_label(thread, UNICODE) == "expenses · 01a2307e-543c-704d-a6f2-7f806d5faa05"
    invocation = _run("inv_19Znt6xeX2oa2E4qZU7p", "DemoRefunds/refund")
    assert run_label(invocation, ASCII) == "DemoRefunds/refund | inv_19Znt6xeX2oa2E4qZU7p"


def test_an_id_that_names_its_run_is_shown_alone():
    assert run_label(_run("db-janitor-03-0001", "db-janitor/events_2023_q1"),
                     UNICODE) == "db-janitor-03-0001"
    assert run_label(_run("wf-7", ""), UNICODE) == "wf-7"
