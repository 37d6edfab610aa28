"""Values many indexed runs hold alike, kept once: the memory of 100,000 runs is mostly
per-run copies of the same few things (benchmarks/gateway_memory.py measures it).

- a run's set of explicitly set fields (pydantic keeps one ``set`` per model: 728 bytes for
  the six fields an adapter typically sets, more than the rest of the run's values);
- the empty lists and dicts of a run's fields (resources, interrupts, warnings, action
  notes, details): one of each for every run that has none;
- the encoded rest of runs' contracts (run_contracts.py): the part without the fields that
  name a run (id, native id, start) is the same bytes for every run of a kind.

What is shared here is never changed in place: the run store replaces a run's containers,
it does not mutate them (a run's ``warnings`` are already one list per set of warnings), and
the hub never sets a field of an indexed run through pydantic (that would add to the shared
set of set fields; harmless, as the hub never dumps with ``exclude_unset``).
"""

from __future__ import annotations

from typing import Any

#: bound on each table here: past it the table starts afresh (what is shared stays shared)
MAX_SHARED = 4096

EMPTY_LIST: list[Any] = []  # never appended to: see the module's docstring
EMPTY_DICT: dict[Any, Any] = {}

#: a run's fields whose empty value is shared (EMPTY_LIST or EMPTY_DICT)
_EMPTY_SHARED = ("resources", "interrupts", "warnings", "action_notes", "details")

_fields_sets: dict[frozenset[str], set[str]] = {}
_shared_sets: dict[int, set[str]] = {}  # id -> the shared sets (no frozenset to look one up)
_bytes: dict[bytes, bytes] = {}


def shared_fields_set(fields: set[str]) -> set[str]:
    """One set object for every run with the same explicitly set fields."""
    if _shared_sets.get(id(fields)) is fields:
        return fields
    key = frozenset(fields)
    shared = _fields_sets.get(key)
    if shared is None:
        if len(_fields_sets) >= MAX_SHARED:
            _fields_sets.clear()
            _shared_sets.clear()
        shared = _fields_sets[key] = set(key)
        _shared_sets[id(shared)] = shared
    return shared


def shared_bytes(data: bytes) -> bytes:
    """One bytes object for equal encodings (the rest of many runs' contracts)."""
    shared = _bytes.get(data)
    if shared is None:
        if len(_bytes) >= MAX_SHARED:
            _bytes.clear()
        shared = _bytes[data] = data
    return shared


def share_empties(fields: dict[str, Any]) -> None:
    """Replace a run's empty containers (in ``fields``, its ``__dict__`` being built) by
    the shared empty ones."""
    for key in _EMPTY_SHARED:
        value = fields.get(key)
        if not value and value is not None and value is not EMPTY_LIST \
                and value is not EMPTY_DICT:
            fields[key] = EMPTY_DICT if type(value) is dict else EMPTY_LIST


def shared_empty(value: list[Any]) -> list[Any]:
    """``value``, or the shared empty list when it is empty."""
    return value if value else EMPTY_LIST
