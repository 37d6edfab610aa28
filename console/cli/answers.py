"""The shape each gateway query promises, checked where the command reads the answer.

A gateway that answers otherwise (another version, a proxy's error page passed through)
fails the command with ``ExitCode.FAILED`` and a line that names the query — never a
traceback. ``about`` completes "the gateway answered nonsense …": ``"to an alerts query"``,
``"about job j-1"``, ``f"for run {run_id!r}"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from console.cli.exits import ExitCode, fail

if TYPE_CHECKING:
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")


def nonsense(about: str, detail: str = "") -> NoReturn:
    fail(ExitCode.FAILED, f"the gateway answered nonsense {about}"
         + (f": {detail}" if detail else ""))


def answer_dict(data: Any, about: str) -> dict[str, Any]:
    """``data``, an object."""
    if not isinstance(data, dict):
        nonsense(about)
    return data


def answer_list(data: Any, about: str) -> list[dict[str, Any]]:
    """The objects of ``data``, a list (anything else in it is left out)."""
    if not isinstance(data, list):
        nonsense(about)
    return [item for item in data if isinstance(item, dict)]


def answer_models(model: type[M], data: Any, about: str) -> list[M]:
    """``data``, a list of ``model``s."""
    from pydantic import ValidationError  # not at import: the CLI's start-up

    if not isinstance(data, list):
        nonsense(about)
    try:
        return [model.model_validate(item) for item in data]
    except ValidationError as exc:
        nonsense(about, str(exc))


def answer_model(model: type[M], data: Any, about: str) -> M:
    """``data``, a ``model``."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        nonsense(about, str(exc))
