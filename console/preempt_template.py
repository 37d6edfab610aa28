"""The ``preempt_command`` of a context: a command-line template ``irq drill`` runs to preempt
one run's agent (e.g. ``kubectl delete pod -l run={native_id}``).

It is split with :mod:`shlex` and run without a shell; each word is filled in with
``str.format`` from the run's ``run_id``, ``native_id``, ``backend`` and ``context`` only, so a
value is always one argument and never shell syntax.
"""

from __future__ import annotations

import shlex
import string

FIELDS = ("run_id", "native_id", "backend", "context")


def check_preempt_template(template: str) -> list[str]:
    """The template's words; ValueError names what is wrong (empty, unbalanced quotes, an
    unknown ``{field}`` or a format spec)."""
    try:
        words = shlex.split(template)
    except ValueError as exc:
        raise ValueError(f"is not a command line: {exc}") from None
    if not words:
        raise ValueError("must name a command, not be empty")
    for word in words:
        try:
            parsed = list(string.Formatter().parse(word))
        except ValueError as exc:
            raise ValueError(f"has a bad placeholder in {word!r}: {exc}") from None
        for _, name, spec, conversion in parsed:
            if name is None:
                continue
            if name not in FIELDS:
                known = ", ".join("{" + f + "}" for f in FIELDS)
                raise ValueError(f"has an unknown placeholder {{{name}}} (known: {known})")
            if spec or conversion:
                raise ValueError(f"placeholder {{{name}}} takes no format spec or conversion")
    return words


def preempt_argv(template: str, *, run_id: str, native_id: str, backend: str,
                 context: str) -> list[str]:
    """The argv to run for one run (each word formatted on its own: a value stays one word)."""
    values = {"run_id": run_id, "native_id": native_id, "backend": backend, "context": context}
    return [word.format(**values) for word in check_preempt_template(template)]
