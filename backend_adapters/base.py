"""The one protocol every backend adapter implements.

An adapter observes runs, heartbeats, interrupts and journal steps of one backend context, and
acts on them: pause, resume, cancel, terminate, decide. It never imports Textual, typer, or the
gateway. Errors are typed so the gateway can turn them into exit codes and error frames.

Designed for all four backends measured in ``docs/backends``:

- DBOS: no native pause (cancel + resume, recorded as a pause in a :class:`PauseLedger`),
  no native heartbeats (agents push them to the gateway), interrupts via ``set_event``.
- Temporal: per-activity pause, native heartbeats (pending activities), interrupts via a
  search attribute + query + update.
- LangGraph: no native pause (cancel ``action=interrupt`` is the nearest), interrupts are
  native (``interrupt()``), no heartbeats.
- Restate: native pause/resume/cancel/kill per invocation, interrupts via awakeables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from console.alert_model import Condition
from console.model import (
    Action,
    BackendHealth,
    Decision,
    DecisionKind,
    Heartbeat,
    Interrupt,
    JournalStep,
    Run,
    RunState,
)
from console.run_facts import RetryOutcome, RetryPlan

# ---------------------------------------------------------------------------------- errors


class BackendError(Exception):
    """Base of every error an adapter raises on purpose. ``code`` is stable."""

    code = "backend_error"

    def __init__(self, message: str, *, target: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.target = target


class NotFound(BackendError):
    """The run or interrupt does not exist on the backend."""

    code = "not_found"


class Conflict(BackendError):
    """The action does not fit the current state (already decided, already terminal, ...)."""

    code = "conflict"


class Unsupported(BackendError):
    """The backend has no such action (see ``capabilities()``)."""

    code = "unsupported"


class Unreachable(BackendError):
    """The backend is down, slow past its deadline, or answered something unparseable."""

    code = "unreachable"


class InvalidInput(BackendError):
    """Arguments rejected before or by the backend (e.g. edited args fail the schema)."""

    code = "invalid"


# -------------------------------------------------------------------------- backend URLs


class BackendURLError(ValueError):
    """A backend URL that names no adapter or that its adapter cannot use."""


@dataclass(frozen=True)
class BackendURL:
    """A parsed ``KIND+SCHEME://...`` backend URL (``backend_adapters.registry`` parses it)."""

    kind: str  # dbos | temporal | langgraph | restate
    target: str  # the URL without the "kind+" prefix and without irq's own parameters
    context: str = "local"
    poll_s: float | None = None
    params: dict[str, str] = field(default_factory=dict)
    raw: str = ""

    @property
    def display(self) -> str:
        """The URL without credentials, for screens and logs."""
        parts = urlsplit(self.target)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        return f"{self.kind}+{parts.scheme}://{netloc}{parts.path}"


# ---------------------------------------------------------------------------- capabilities


@dataclass(frozen=True)
class ActionCapability:
    """Whether an action exists on a backend and what it means there, in operator words."""

    supported: bool
    meaning: str
    operations: tuple[str, ...] = ()  # backend calls the action makes, shown in plans
    native: bool = True  # False when emulated (e.g. DBOS pause = cancel + console record)
    #: the calls the action makes instead of ``operations`` for a run in that state (e.g.
    #: Temporal's resume of a ``lost`` run resets the activity instead of unpausing it)
    operations_when: Mapping[RunState, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({}), hash=False
    )

    def operations_for(self, state: RunState) -> tuple[str, ...]:
        """The backend calls this action makes on a run in ``state`` (for its plan)."""
        return self.operations_when.get(state, self.operations)


@dataclass(frozen=True)
class Capabilities:
    backend: str
    actions: dict[Action, ActionCapability]
    decisions: tuple[DecisionKind, ...] = tuple(DecisionKind)
    native_heartbeats: bool = False  # False: agents push heartbeats to the gateway
    notes: tuple[str, ...] = ()

    def supports(self, action: Action) -> bool:
        cap = self.actions.get(action)
        return bool(cap and cap.supported)

    def contract(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "actions": {
                a.value: {
                    "supported": c.supported,
                    "meaning": c.meaning,
                    "operations": list(c.operations),
                    "native": c.native,
                    "operations_when": {
                        state.value: list(ops) for state, ops in c.operations_when.items()
                    },
                }
                for a, c in self.actions.items()
            },
            "decisions": [d.value for d in self.decisions],
            "native_heartbeats": self.native_heartbeats,
            "notes": list(self.notes),
        }


# ------------------------------------------------------------------------------ observation


@dataclass
class Observation:
    """One poll of a backend context: the runs it reports and their pending interrupts.

    ``runs`` holds every active run plus recently finished ones the adapter still reports;
    a run missing from ``runs`` that the gateway knew is kept as-is (it may simply have aged
    out of the adapter's window), unless listed in ``gone``.
    """

    runs: list[Run] = field(default_factory=list)
    interrupts: list[Interrupt] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # run ids that no longer exist
    complete: bool = True  # False when the adapter only refreshed part of its runs this poll
    #: backend-side alert conditions seen this poll (no_workers, retrying, given_up); the
    #: gateway's alert evaluator raises and clears alerts from them
    conditions: list[Condition] = field(default_factory=list)


@dataclass
class ActionOutcome:
    """What an action did on the backend, for the result and the audit entry."""

    detail: str
    operations: list[str] = field(default_factory=list)


class PauseLedger(Protocol):
    """Where the console records that it paused a run, for backends without a native pause.

    The gateway provides one backed by its journal; adapters read it when mapping states.
    """

    def is_paused(self, run_id: str) -> bool: ...

    def mark_paused(self, run_id: str, paused: bool) -> None: ...


class MemoryPauseLedger:
    """A process-local ledger (tests of pure logic, one-shot scripts)."""

    def __init__(self) -> None:
        self._paused: set[str] = set()

    def is_paused(self, run_id: str) -> bool:
        return run_id in self._paused

    def mark_paused(self, run_id: str, paused: bool) -> None:
        if paused:
            self._paused.add(run_id)
        else:
            self._paused.discard(run_id)


# --------------------------------------------------------------------------------- protocol


@runtime_checkable
class Backend(Protocol):
    """One backend context (e.g. ``dbos:local``). All methods are async-safe.

    Identifiers passed in are *native* ids (workflow id, thread id, invocation id) and, for
    interrupts, the :class:`Interrupt` the gateway knows, so adapters need no lookups.
    """

    name: str  # backend kind: "dbos", "temporal", "langgraph", "restate"
    context: str  # context name, the middle part of run ids
    url: str  # where it lives, without secrets
    poll_interval_s: float  # how often the gateway calls observe()

    async def start(self) -> None:
        """Open clients/connections. Raise Unreachable if the backend cannot be reached."""

    async def close(self) -> None: ...

    def capabilities(self) -> Capabilities: ...

    async def observe(self) -> Observation:
        """Poll runs and pending interrupts. Raise Unreachable when down or nonsensical."""

    async def get_run(self, native_id: str) -> Run:
        """One run, fresh from the backend. Raise NotFound."""

    async def journal(self, native_id: str) -> list[JournalStep]:
        """Journal steps, marking completed vs in flight. Raise NotFound."""

    async def heartbeats(self, native_id: str) -> list[Heartbeat]:
        """Native heartbeat samples the backend keeps (empty where it has none)."""

    def focus(self, native_ids: set[str]) -> None:
        """Hint: the operator is looking at these runs; refresh them first."""

    async def pause(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome: ...

    async def resume(
        self, native_id: str, *, reason: str, identity: str, lost: bool = False
    ) -> ActionOutcome:
        """Continue a paused run. ``lost=True``: the console judged the agent dead (heartbeat
        silence past its timeout) and the operator asks for a forced restart."""

    async def cancel(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome: ...

    async def terminate(self, native_id: str, *, reason: str, identity: str) -> ActionOutcome: ...

    async def decide(
        self, interrupt: Interrupt, decision: Decision, *, idempotency_key: str, identity: str
    ) -> ActionOutcome:
        """Deliver a decision exactly once: the same idempotency key must never deliver twice.
        Raise Conflict if the backend knows the interrupt is no longer pending."""

    async def retry_plan(self, native_id: str, *, from_step: str | None) -> RetryPlan:
        """What a retry from ``from_step`` (None: the last good step) would keep and re-run.
        Raise NotFound; Conflict when the run is still running (say what to do instead);
        InvalidInput for a step the run does not have or the backend cannot restart from."""

    async def retry(
        self,
        native_id: str,
        *,
        from_step: str | None,
        request_id: str,
        reason: str,
        identity: str,
    ) -> RetryOutcome:
        """Re-run a failed / given-up / cancelled / terminated run from ``from_step``, keeping
        the journaled results before it. ``request_id`` (the command's idempotency key) makes
        a repeated retry a no-op where the backend supports it (Temporal reset request id)."""


class BackendFactory(Protocol):
    """The entry point of an adapter: every adapter module defines ``from_url`` of this type.

    ``from_url(parsed, ledger)`` constructs (does not start) the adapter for one backend
    context; it raises :class:`BackendURLError` for a URL the adapter cannot use. The registry
    looks it up by name in the module listed for the URL's kind; an adapter module states
    the contract to the type checker with ``FACTORY: BackendFactory = from_url``.
    """

    def __call__(self, parsed: BackendURL, ledger: PauseLedger) -> Backend: ...


def health_of(backend: Backend) -> BackendHealth:
    return BackendHealth(backend=backend.name, context=backend.context, url=backend.url)
