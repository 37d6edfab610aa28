"""How ``irq --help`` reads: flags carry no type label (typer prints ``<bool>``), values are
named by what they hold (TEXT, INTEGER, PATH, ``[text|json|jsonl]``), arguments by their
name, and usage lines look like ``irq approve [OPTIONS] INTERRUPT`` / ``irq pause [OPTIONS]
RUN...`` (typer prints ``{INTERRUPT}`` and ``{RUN...}...``).

Commands and groups get the layout through typer's public ``cls=``: every ``typer.Typer``
of irq passes ``cls=IrqGroup`` and every ``.command(...)`` passes ``cls=IrqCommand``
(tests/cli/test_help_and_flags.py checks both, and the help text).

Parameters have no such door. typer (0.29) builds every option and argument itself, always
as ``TyperOption``/``TyperArgument`` (``typer.main._get_param``); ``typer.Option`` and
``typer.Argument`` take no class. So ``IrqCommand.get_params`` hands out the same objects as
``PlainOption``/``PlainArgument`` (subclasses that only change how they are displayed) by
setting their ``__class__`` -- here and nowhere else. The public alternative would be a
``metavar=`` on each of ~70 options (and on every option added later), and it would still
leave typer's ``<str>`` type column of arguments and its ``{INTERRUPT}`` usage braces, which
only the parameter class decides. If typer ever grows a parameter ``cls=``, use it here.
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
    how they are displayed; why not a public hook: the module docstring)."""
    for param in params:
        if type(param) is TyperOption:
            param.__class__ = PlainOption
        elif type(param) is TyperArgument:
            param.__class__ = PlainArgument
    return params


class IrqCommand(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_params(super().get_params(ctx))


class IrqGroup(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_params(super().get_params(ctx))


__all__ = ["IrqCommand", "IrqGroup", "PlainArgument", "PlainOption"]
