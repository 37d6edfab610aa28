"""Every registered adapter matches the ``Backend`` protocol by signature, not just by name.

``runtime_checkable`` only checks that the names exist: an adapter whose ``resume`` lacks
the ``lost`` keyword passed ``isinstance(x, Backend)`` and failed with a TypeError when the
gateway resumed a lost run. This compares, for each adapter the registry can open, every
protocol method (async or not; parameter names, kinds, defaults, annotations; return type)
and the ``from_url`` entry point against ``BackendFactory``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backend_adapters import base
from backend_adapters.base import Backend, BackendFactory, MemoryPauseLedger
from backend_adapters.registry import KINDS, adapter_factory, open_backend, parse_backend_url

#: a URL each adapter can be constructed from without a server (construction never connects)
SAMPLE_URLS = {
    "dbos": "dbos+sqlite:///{tmp}/conformance.db",
    "temporal": "temporal+http://127.0.0.1:9/default",
    # the forms registry.py documents, for the adapters being written (adjust if they differ)
    "langgraph": "langgraph+http://127.0.0.1:9",
    "restate": "restate+http://127.0.0.1:9?ingress=http://127.0.0.1:9",
}

#: adapters that exist in this checkout (the registry also names kinds still to be written)
def _present(module: str) -> bool:
    package = module.rsplit(".", 1)[0]
    return importlib.util.find_spec(package) is not None and (
        importlib.util.find_spec(module) is not None
    )


PRESENT = [kind for kind in KINDS if _present(KINDS[kind])]


def protocol_methods(proto: type) -> dict[str, Callable[..., Any]]:
    return {
        name: member
        for name, member in vars(proto).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def protocol_attributes(proto: type) -> dict[str, Any]:
    return typing.get_type_hints(proto)


def signature_problems(
    name: str, expected: Callable[..., Any], actual: Callable[..., Any]
) -> list[str]:
    """How ``actual`` fails to be usable wherever ``expected`` is called (empty: it is)."""
    problems: list[str] = []
    if inspect.iscoroutinefunction(expected) != inspect.iscoroutinefunction(actual):
        want = "async" if inspect.iscoroutinefunction(expected) else "not async"
        problems.append(f"{name}: must be {want}")
    want_sig, got_sig = _without_self(expected), _without_self(actual)
    want_hints = typing.get_type_hints(expected)
    got_hints = typing.get_type_hints(actual)
    got_params = dict(got_sig.parameters)
    for pname, want in want_sig.parameters.items():
        got = got_params.pop(pname, None)
        if got is None:
            problems.append(f"{name}: missing parameter {pname!r} ({want.kind.description})")
            continue
        if got.kind != want.kind:
            problems.append(
                f"{name}: parameter {pname!r} is {got.kind.description}, "
                f"the protocol has {want.kind.description}"
            )
        if got.default != want.default:
            problems.append(
                f"{name}: parameter {pname!r} defaults to {got.default!r}, "
                f"the protocol to {want.default!r}"
            )
        if pname in want_hints and got_hints.get(pname) != want_hints[pname]:
            problems.append(
                f"{name}: parameter {pname!r} is {got_hints.get(pname)!r}, "
                f"the protocol says {want_hints[pname]!r}"
            )
    for pname, extra in got_params.items():  # extras must not be needed by protocol callers
        if extra.default is inspect.Parameter.empty and extra.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            problems.append(f"{name}: extra required parameter {pname!r}")
    order = [p for p in got_sig.parameters if p in want_sig.parameters]
    if order != list(want_sig.parameters):
        problems.append(f"{name}: parameters in order {order}, the protocol's: "
                        f"{list(want_sig.parameters)}")
    want_ret, got_ret = want_hints.get("return"), got_hints.get("return")
    if want_ret is not None and not _returns_compatible(got_ret, want_ret):
        problems.append(f"{name}: returns {got_ret!r}, the protocol {want_ret!r}")
    return problems


def _without_self(fn: Callable[..., Any]) -> inspect.Signature:
    sig = inspect.signature(fn)
    return sig.replace(parameters=[p for n, p in sig.parameters.items() if n != "self"])


def _returns_compatible(got: Any, want: Any) -> bool:
    if got == want:
        return True
    if want is Backend:  # the adapter class; its conformance is what this file checks
        return inspect.isclass(got)
    return inspect.isclass(got) and inspect.isclass(want) and issubclass(got, want)


def conformance_problems(cls: type, instance: object) -> list[str]:
    problems: list[str] = []
    for name, expected in protocol_methods(Backend).items():
        actual = getattr(cls, name, None)
        if actual is None or not callable(actual):
            problems.append(f"{name}: missing")
            continue
        problems.extend(signature_problems(name, expected, actual))
    for name, hint in protocol_attributes(Backend).items():
        if not hasattr(instance, name):
            problems.append(f"attribute {name}: missing")
        elif not isinstance(getattr(instance, name), hint):
            problems.append(f"attribute {name}: {getattr(instance, name)!r} is not a {hint}")
    return problems


def test_every_adapter_the_registry_names_and_ships_is_checked() -> None:
    assert {"dbos", "temporal"} <= set(PRESENT)
    assert set(PRESENT) <= set(SAMPLE_URLS), "add a sample URL for the new adapter"


@pytest.mark.parametrize("kind", PRESENT)
def test_adapter_matches_the_backend_protocol_by_signature(kind: str, tmp_path: Path) -> None:
    factory = adapter_factory(kind)
    # the entry point: from_url(parsed: BackendURL, ledger: PauseLedger) -> <adapter class>
    problems = signature_problems("from_url", BackendFactory.__call__, factory)
    backend = factory(parse_backend_url(SAMPLE_URLS[kind].format(tmp=tmp_path)),
                      MemoryPauseLedger())
    cls = type(backend)
    declared = typing.get_type_hints(factory)["return"]
    assert declared in (Backend, cls), f"{kind}: from_url declares {declared!r}, returns {cls!r}"
    problems += conformance_problems(cls, backend)
    assert problems == [], f"{kind} adapter {cls.__qualname__} breaks the Backend protocol"
    assert isinstance(open_backend(SAMPLE_URLS[kind].format(tmp=tmp_path), MemoryPauseLedger()),
                      Backend)


@pytest.mark.parametrize("kind", PRESENT)
def test_adapter_module_hands_its_entry_point_to_the_type_checker(kind: str) -> None:
    """``FACTORY: BackendFactory = from_url`` makes mypy (in ``make test``) hold the adapter
    class to ``Backend`` statically, method by method, before any test runs."""
    module = importlib.import_module(KINDS[kind])
    assert getattr(module, "FACTORY", None) is module.from_url, (
        f"{KINDS[kind]}: add `FACTORY: BackendFactory = from_url` (backend_adapters.base)"
    )
    assert typing.get_type_hints(module).get("FACTORY") is BackendFactory


class _ResumeWithoutLost:
    """The Temporal adapter's resume before it took ``lost`` (the bug this test pins)."""

    async def resume(self, native_id: str, *, reason: str, identity: str) -> base.ActionOutcome:
        raise NotImplementedError


class _SyncPause:
    def pause(self, native_id: str, *, reason: str, identity: str) -> base.ActionOutcome:
        raise NotImplementedError


class _PositionalReason:
    async def cancel(self, native_id: str, reason: str, identity: str) -> base.ActionOutcome:
        raise NotImplementedError


@pytest.mark.parametrize(
    ("impl", "method", "needle"),
    [
        (_ResumeWithoutLost, "resume", "missing parameter 'lost'"),
        (_SyncPause, "pause", "must be async"),
        (_PositionalReason, "cancel", "'reason' is positional or keyword"),
    ],
)
def test_the_check_catches_a_wrong_signature(impl: type, method: str, needle: str) -> None:
    problems = signature_problems(method, vars(Backend)[method], getattr(impl, method))
    assert any(needle in p for p in problems), problems
