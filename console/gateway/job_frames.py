"""Wire frames of durable bulk jobs (PROTOCOL.md): ``job_create`` and ``job_cancel``.

``{"type": "command", "action": "job_create", "id": KEY, "targets": [...], "job_action":
"pause", "filter": "...", "rate_per_s": 20, "reason": "..."}`` records a job whose targets
are the ones the operator confirmed (a decision job adds ``decision`` and ``merge_args``, a
retry job may add ``from_step``);
the same ``id`` sent again names the same job. ``{"type": "command", "action": "job_cancel",
"id": KEY, "targets": [JOB_ID], "reason": "..."}`` stops one. Executed by job_commands.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from console.gateway.wire_errors import MAX_REASON_CHARS, FrameError
from console.model import Action

JOB_ACTIONS = ("job_create", "job_cancel")
#: targets of one job (the frame's size, 1 MiB, is the other bound)
MAX_JOB_TARGETS = 100_000
MAX_RATE_PER_S = 10_000.0


class JobCommand(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["command"]
    id: str = Field(min_length=1, max_length=128)
    action: Literal["job_create", "job_cancel"]
    targets: list[Annotated[str, Field(min_length=1, max_length=1024)]] = Field(
        min_length=1, max_length=MAX_JOB_TARGETS)
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    dry_run: bool = False
    job_action: Action | None = None  # job_create: what each target gets
    filter: str = Field(default="", max_length=4096)
    rate_per_s: float | None = Field(default=None, gt=0, le=MAX_RATE_PER_S)
    #: a decide job: the decision body (checked as protocol.DecisionBody by job_commands.py;
    #: not typed here so that protocol.py and this module do not import each other)
    decision: dict[str, Any] | None = None
    merge_args: bool = False
    #: a retry job: each target's first step to run again (None: its failed step)
    from_step: str | None = Field(default=None, max_length=256)


_adapter: TypeAdapter[JobCommand] = TypeAdapter(JobCommand)


def parse_job_command(data: dict[str, Any]) -> JobCommand:
    ref = data.get("id") if isinstance(data.get("id"), str) else None
    try:
        cmd = _adapter.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise FrameError("invalid", f"invalid {data.get('action')} frame: "
                         f"{where + ': ' if where else ''}{first['msg']}", ref) from None
    if cmd.action == "job_cancel" and len(cmd.targets) != 1:
        raise FrameError("invalid", "job_cancel takes one target: the job id", cmd.id)
    if cmd.action == "job_create":
        if cmd.job_action is None:
            raise FrameError("invalid", "job_create needs 'job_action'", cmd.id)
        if (cmd.job_action is Action.DECIDE) != (cmd.decision is not None):
            raise FrameError("invalid", "a decide job needs a 'decision'; no other job takes "
                             "one", cmd.id)
        if cmd.from_step is not None and cmd.job_action is not Action.RETRY:
            raise FrameError("invalid", "only a retry job takes 'from_step'", cmd.id)
        if len(set(cmd.targets)) != len(cmd.targets):
            raise FrameError("invalid", "a job's targets must be distinct", cmd.id)
    return cmd
