"""Per resource kind settings of the config file: ``[resources.gpu]``.

``release_command`` is how ``irq release RUN RESOURCE --force`` frees a resource of that kind
when its agent cannot: an argv (an array, or a string split like a shell would split it but
never run by one), to which the gateway appends the run id and the resource id.
"""

from __future__ import annotations

import shlex

from pydantic import BaseModel, ConfigDict, field_validator


class ResourceKindFile(BaseModel):
    """One ``[resources.KIND]`` table."""

    model_config = ConfigDict(extra="forbid", strict=True)

    release_command: list[str] | str | None = None

    @field_validator("release_command")
    @classmethod
    def _argv(cls, value: list[str] | str | None) -> list[str] | str | None:
        if value is not None and not release_argv(value):
            raise ValueError("must name a program (an array of strings, or a string)")
        return value

    def argv(self) -> list[str]:
        """The release command as argv (empty: none configured)."""
        return release_argv(self.release_command) if self.release_command else []


def release_argv(value: list[str] | str) -> list[str]:
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value if v]


def release_commands(kinds: dict[str, ResourceKindFile]) -> dict[str, list[str]]:
    """Resource kind -> release argv, for the kinds that declare one."""
    return {kind: spec.argv() for kind, spec in kinds.items() if spec.argv()}
