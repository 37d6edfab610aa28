"""What a forced release did (``irq release RUN RESOURCE --force``): how the resource was
released, what the release said, and whether the run's next observation confirmed it.

``CommandResult.release`` carries one; ``-o json`` prints :meth:`ReleaseOutcome.contract`
under ``release`` (docs/json-contract.md). Pure pydantic, like console/model.py.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

#: ``command``: the config's ``[resources.KIND] release_command``; ``agent``: the release
#: callback the agent registered (``on_release``), asked through the agent channel
ReleaseWay = Literal["command", "agent"]

#: lines of the release command's output kept in the result and the audit
OUTPUT_LINES = 20


class ReleaseOutcome(BaseModel):
    resource: str
    kind: str
    way: ReleaseWay
    #: the run's next observation (an agent beat, or the adapter's next read of the run)
    #: reports the resource released or no longer lists it
    verified: bool = False
    program: list[str] = Field(default_factory=list)  # command: the argv that was run
    exit_code: int | None = None  # command: None when it could not start or timed out
    output: list[str] = Field(default_factory=list)  # command: its last lines (stdout+stderr)
    agent_detail: str = ""  # agent: what its release callback answered

    def contract(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "kind": self.kind,
            "way": self.way,
            "verified": self.verified,
            "program": list(self.program),
            "exit_code": self.exit_code,
            "output": list(self.output),
            "agent_detail": self.agent_detail,
        }
