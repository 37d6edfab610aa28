"""Where the console's data comes from: a live gateway, or a recorded snapshot.

``LiveSource`` is the product: a :class:`console.client.LiveSession` (reconnect + resume)
plus commands and queries on its current connection. ``RecordedSource`` serves a snapshot
recorded from a gateway (the same JSON the gateway sends) so screens can be rendered
deterministically for snapshot tests; it sends nothing anywhere and refuses mutations.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from console.client import (
    ConnectionStatus,
    FleetView,
    GatewayClient,
    GatewayError,
    GatewayUnreachable,
    LiveSession,
    call_back,
)
from console.model import (
    Action,
    ActionPlan,
    AuditEntry,
    CommandResult,
    Decision,
    Outcome,
    utcnow,
)
from console.semantics import plan as compute_plan

UpdateCallback = Callable[[FleetView, list[dict[str, Any]]], Awaitable[None] | None]
StatusCallback = Callable[[ConnectionStatus], Awaitable[None] | None]


class FleetSource(Protocol):
    view: FleetView
    url: str

    @property
    def role(self) -> str: ...

    @property
    def identity(self) -> str: ...

    async def run(self, on_update: UpdateCallback, on_status: StatusCallback) -> None: ...

    def stop(self) -> None: ...

    async def command(
        self,
        action: Action | str,
        targets: list[str],
        *,
        reason: str = "",
        dry_run: bool = False,
        decision: Decision | None = None,
    ) -> list[CommandResult]: ...

    async def named_command(self, action: str, targets: list[str], *, reason: str = "",
                            extra: dict[str, Any] | None = None) -> list[CommandResult]:
        """A command that is not a run action (``obligation_fulfil``, ``obligation_waive``,
        ``alert_ack``, ``alert_silence`` with ``extra={"for_s": ...}``)."""
        ...

    async def job_command(self, action: str, targets: list[str], *,
                          reason: str = "") -> list[CommandResult]:
        """``job_cancel`` (targets: the job id), as ``irq jobs cancel`` sends it."""
        ...

    async def query(self, what: str, **params: Any) -> Any: ...

    async def ping(self) -> float | None: ...


class LiveSource:
    """A gateway connection that stays up (reconnect with backoff, resume from seq)."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.token = token
        self.view = FleetView()
        self._session: LiveSession | None = None
        self._role = ""
        self._identity = ""

    @property
    def role(self) -> str:
        client = self._session.client if self._session else None
        if client is not None and client.role:
            self._role = client.role
        return self._role

    @property
    def identity(self) -> str:
        client = self._session.client if self._session else None
        if client is not None and client.identity:
            self._identity = client.identity
        return self._identity

    async def run(self, on_update: UpdateCallback, on_status: StatusCallback) -> None:
        # compact beats: at 20,000 beats/s a run's whole contract per beat was ~16 MB/s to
        # each console (over SSH to a bastion), a beat event is a sixth of that
        self._session = LiveSession(
            self.url, self.token, client="irq-tui", on_update=on_update, on_status=on_status,
            compact_beats=True,
        )
        self.view = self._session.view
        await self._session.run()

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()

    def _client(self) -> GatewayClient:
        client = self._session.client if self._session else None
        if client is None:
            raise GatewayUnreachable("not connected to the gateway (reconnecting)")
        return client

    async def command(
        self,
        action: Action | str,
        targets: list[str],
        *,
        reason: str = "",
        dry_run: bool = False,
        decision: Decision | None = None,
    ) -> list[CommandResult]:
        return await self._client().command(
            action, targets, reason=reason, dry_run=dry_run, decision=decision
        )

    async def named_command(self, action: str, targets: list[str], *, reason: str = "",
                            extra: dict[str, Any] | None = None) -> list[CommandResult]:
        return await self._client().named_command(action, targets, reason=reason, extra=extra)

    async def job_command(self, action: str, targets: list[str], *,
                          reason: str = "") -> list[CommandResult]:
        return await self._client().job_command(action, targets, reason=reason)

    async def query(self, what: str, **params: Any) -> Any:
        return await self._client().query(what, **params)

    async def ping(self) -> float | None:
        client = self._session.client if self._session else None
        if client is None:
            return None
        try:
            return float(await client.ping())
        except GatewayError:
            return None


class RecordedSource:
    """A snapshot recorded from a gateway; read-only, for deterministic rendering.

    The file holds ``{"snapshot": <snapshot frame>, "runs": {run_id: <run query answer>},
    "audit": [<audit entries>], "role": "operator", "identity": "..."}``.
    """

    def __init__(self, data: dict[str, Any], *, url: str = "recorded") -> None:
        self.url = url
        self.data = data
        self.view = FleetView()
        self.view.load_snapshot(data.get("snapshot") or {})
        self.view.audit = [AuditEntry.model_validate(a) for a in data.get("audit", [])]
        self._role = str(data.get("role") or "operator")
        self._identity = str(data.get("identity") or "recorded")

    @property
    def recorded_at(self) -> datetime:
        """When the data was recorded: the clock to render it with."""
        raw = self.data.get("recorded_at")
        return datetime.fromisoformat(raw) if raw else utcnow()

    @classmethod
    def from_file(cls, path: Path) -> RecordedSource:
        return cls(json.loads(path.read_text()), url=f"recorded:{path.name}")

    @property
    def role(self) -> str:
        return self._role

    @property
    def identity(self) -> str:
        return self._identity

    async def run(self, on_update: UpdateCallback, on_status: StatusCallback) -> None:
        await call_back(on_status, ConnectionStatus("recorded", self.url))
        await call_back(on_update, self.view, [{"kind": "snapshot", "seq": self.view.seq}])

    def stop(self) -> None:
        pass

    async def command(
        self,
        action: Action | str,
        targets: list[str],
        *,
        reason: str = "",
        dry_run: bool = False,
        decision: Decision | None = None,
    ) -> list[CommandResult]:
        act = Action(action)
        recorded = (self.data.get("dry_runs") or {}).get(act.value) or {}
        if dry_run and len(targets) == 1 and targets[0] in recorded:
            return [CommandResult.model_validate(r) for r in recorded[targets[0]]]
        plan: ActionPlan | None = None
        runs = [self.view.runs[t] for t in targets if t in self.view.runs]
        if act is not Action.DECIDE and runs:
            plan = compute_plan(act, runs)
        outcome: Outcome = "planned" if dry_run else "forbidden"
        detail = "dry run" if dry_run else "recorded data: nothing was sent"
        return [
            CommandResult(id="recorded", action=act.value, target=t, outcome=outcome,
                          detail=detail, plan=plan)
            for t in targets
        ]

    async def named_command(self, action: str, targets: list[str], *, reason: str = "",
                            extra: dict[str, Any] | None = None) -> list[CommandResult]:
        return [CommandResult(id="recorded", action=action, target=t, outcome="forbidden",
                              detail="recorded data: nothing was sent") for t in targets]

    async def job_command(self, action: str, targets: list[str], *,
                          reason: str = "") -> list[CommandResult]:
        return await self.named_command(action, targets, reason=reason)

    async def query(self, what: str, **params: Any) -> Any:
        if what == "run":
            run_id = params.get("run_id", "")
            answer = (self.data.get("runs") or {}).get(run_id)
            if answer is None and run_id in self.view.runs:
                answer = self.view.runs[run_id].contract()
            if answer is None:
                raise GatewayError(f"no such run: {run_id}", "not_found")
            return answer
        if what == "audit":
            return [a.contract() for a in self.view.audit]
        raise GatewayError(f"recorded data has no {what!r}", "unsupported")

    async def ping(self) -> float | None:
        return None
