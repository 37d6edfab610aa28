"""Values many indexed runs hold alike, kept once: the memory of 100,000 runs is mostly
per-run copies of the same few things (benchmarks/gateway_memory.py measures it).

- the empty lists and dicts of a run's fields (resources, interrupts, warnings, action
  notes, details): one of each for every run that has none;
- the encoded rest of runs' contracts (run_contracts.py): the part without the fields that
  name a run (id, native id, start) is the same bytes for every run of a kind.

What is shared here is never changed in place: the run store replaces a run's containers,
it does not mutate them (a run's ``warnings`` are already one list per set of warnings).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.run_record import RunRecord

#: bound on each table here: past it the table starts afresh (what is shared stays shared)
MAX_SHARED = 4096

EMPTY_LIST: list[Any] = []  # never appended to: see the module's docstring
EMPTY_DICT: dict[Any, Any] = {}

#: a run's fields whose empty value is shared (EMPTY_LIST or EMPTY_DICT)
_EMPTY_SHARED = ("resources", "interrupts", "warnings", "action_notes", "details")

_bytes: dict[bytes, bytes] = {}


def shared_bytes(data: bytes) -> bytes:
    """One bytes object for equal encodings (the rest of many runs' contracts)."""
    shared = _bytes.get(data)
    if shared is None:
        if len(_bytes) >= MAX_SHARED:
            _bytes.clear()
        shared = _bytes[data] = data
    return shared


def share_empties(run: RunRecord) -> None:
    """Replace a new version's empty containers by the shared empty ones."""
    for key in _EMPTY_SHARED:
        value = getattr(run, key)
        if not value and value is not None and value is not EMPTY_LIST \
                and value is not EMPTY_DICT:
            setattr(run, key, EMPTY_DICT if type(value) is dict else EMPTY_LIST)


def shared_empty(value: list[Any]) -> list[Any]:
    """``value``, or the shared empty list when it is empty."""
    return value if value else EMPTY_LIST
