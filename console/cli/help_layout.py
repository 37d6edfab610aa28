"""How ``irq --help`` reads: flags carry no type label (typer prints ``<bool>``), values are
named by what they hold (TEXT, INTEGER, PATH, ``[text|json|jsonl]``), arguments by their
name, and usage lines look like ``irq approve [OPTIONS] INTERRUPT`` / ``irq pause [OPTIONS]
RUN...`` (typer prints ``{INTERRUPT}`` and ``{RUN...}...``).

``IrqGroup`` is the root command's class; it gives every subcommand (and sub-group) the same
layout, so command modules keep declaring plain ``typer.Option``/``typer.Argument``.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

#: typer's type labels -> the words operators know from other CLIs
TYPE_WORDS: dict[str, str] = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "NUMBER",
    "Path": "PATH",
    "list[str]": "TEXT",
    "list[int]": "INTEGER",
}


class PlainOption(TyperOption):
    def display_type_rich(self, ctx: Any) -> str | None:
        if self.is_flag or self.count:
            return None
        label = super().display_type_rich(ctx)
        if label is None or self.metavar is not None:
            return label
        if label.startswith("<") and label.endswith(">"):
            inner = label[1:-1]
            if inner in TYPE_WORDS:
                return TYPE_WORDS[inner]
            if "|" in inner:
                return f"[{inner.removeprefix('list[').removesuffix(']')}]"
            return inner.upper()
        return label


class PlainArgument(TyperArgument):
    def display_type_rich(self, ctx: Any) -> str | None:
        return None  # the name column already says what it is (RUN, INTERRUPT)

    def usage_name(self) -> str:
        name = self.metavar or (self.name or "ARG").upper()
        if self.nargs != 1 and not name.endswith("..."):
            name += "..."
        return name if self.required else f"[{name}]"

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        return [self.usage_name()]


def _plain_params(params: list[Any]) -> list[Any]:
    """Give typer's parameters the plain layout (same objects, a subclass that only changes
    how they are displayed)."""
    for param in params:
        if type(param) is TyperOption:
            param.__class__ = PlainOption
        elif type(param) is TyperArgument:
            param.__class__ = PlainArgument
    return params


def _plain_command(command: Any) -> Any:
    if type(command) is TyperCommand:
        command.__class__ = IrqCommand
    elif type(command) is TyperGroup:
        command.__class__ = IrqGroup
    return command


class IrqCommand(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_params(super().get_params(ctx))


class IrqGroup(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_params(super().get_params(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return _plain_command(super().get_command(ctx, cmd_name))


__all__ = ["IrqCommand", "IrqGroup", "PlainArgument", "PlainOption"]
