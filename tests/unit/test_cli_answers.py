"""A gateway answer of the wrong shape fails the command with FAILED and a line naming the
query (console/cli/answers.py), never a traceback; a right one comes back as it is."""

from __future__ import annotations

import pytest
import typer

from console.alert_model import Alert
from console.cli.answers import answer_dict, answer_list, answer_model, answer_models
from console.cli.exits import ExitCode


@pytest.mark.parametrize("read, data, about", [
    (lambda d: answer_dict(d, "to a retry plan query"), ["not", "a", "dict"],
     "to a retry plan query"),
    (lambda d: answer_list(d, "to a jobs query"), {"jobs": []}, "to a jobs query"),
    (lambda d: answer_models(Alert, d, "to an alerts query"), "<html>502</html>",
     "to an alerts query"),
    (lambda d: answer_models(Alert, d, "to an alerts query"), [{"id": 1}],
     "to an alerts query: "),
    (lambda d: answer_model(Alert, d, "about alert al-1"), None, "about alert al-1: "),
])
def test_nonsense_fails_with_the_query_named(read, data, about, capsys):
    with pytest.raises(typer.Exit) as exit_:
        read(data)
    assert exit_.value.exit_code == int(ExitCode.FAILED)
    err = capsys.readouterr().err
    assert err.startswith(f"irq: the gateway answered nonsense {about}")
    assert "Traceback" not in err


def test_a_right_answer_comes_back_as_it_is():
    assert answer_dict({"targets": []}, "x") == {"targets": []}
    assert answer_list([{"id": "j-1"}, "stray", 3], "x") == [{"id": "j-1"}]
    assert answer_models(Alert, [], "x") == []
