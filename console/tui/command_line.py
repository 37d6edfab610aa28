"""The ``:`` command language (k9s-style): parse a line into a command and its arguments.

Pure: the app executes what this returns. Unknown commands and missing arguments come back
as an ``error`` string for the command bar to show.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CommandSpec:
    name: str
    usage: str
    help: str
    aliases: tuple[str, ...] = ()
    mutates: bool = False


SPECS: tuple[CommandSpec, ...] = (
    CommandSpec("runs", ":runs [FILTER]", "the fleet (optionally filtered)", ("fleet", "r")),
    CommandSpec("inbox", ":inbox", "pending interrupts, oldest first", ("i",)),
    CommandSpec("audit", ":audit", "recent commands: who, what, why, outcome", ("a",)),
    CommandSpec("obligations", ":obligations", "what the policy obliged: overdue, open, closed",
                ("o", "obl")),
    CommandSpec("alerts", ":alerts", "conditions that need a person: open, acknowledged",
                ("al",)),
    CommandSpec("jobs", ":jobs", "bulk jobs the gateway drives: progress, failures, cancel",
                ("j",)),
    CommandSpec("run", ":run RUN", "details of one run", ("show", "detail")),
    CommandSpec("pause", ":pause [RUN...]", "pause runs (selected if none given)", (), True),
    CommandSpec("resume", ":resume [RUN...]", "resume runs", (), True),
    CommandSpec("cancel", ":cancel [RUN...]", "cancel runs (graceful)", (), True),
    CommandSpec("terminate", ":terminate [RUN...]", "terminate runs (no cleanup)", ("kill",),
                True),
    CommandSpec("retry", ":retry [RUN]", "retry a failed run from its failed step", (), True),
    CommandSpec("release", ":release [RUN] RESOURCE", "force a resource free (a suspected "
                "leak): the run's own release is not seen", (), True),
    CommandSpec("approve", ":approve [INTERRUPT]", "approve as proposed", (), True),
    CommandSpec("edit", ":edit [INTERRUPT]", "approve with edited arguments", (), True),
    CommandSpec("reject", ":reject [INTERRUPT]", "reject with feedback", (), True),
    CommandSpec("respond", ":respond [INTERRUPT]", "answer in the tool's place", (), True),
    CommandSpec("filter", ":filter TEXT", "filter the current list (like /)", ("f",)),
    CommandSpec("sort", ":sort KEY [desc]", "sort the fleet: attention age id backend "
                "progress updated cost", ()),
    CommandSpec("ctx", ":ctx NAME", "switch to another context from the config file",
                ("context",)),
    CommandSpec("help", ":help", "keys of this screen", ("h", "?")),
    CommandSpec("quit", ":quit", "leave irq", ("q", "q!")),
)

BY_NAME: dict[str, CommandSpec] = {}
for _spec in SPECS:
    BY_NAME[_spec.name] = _spec
    for _alias in _spec.aliases:
        BY_NAME[_alias] = _spec

NEEDS_ARG = {"run", "ctx", "release"}


@dataclass(frozen=True)
class ParsedCommand:
    name: str = ""
    args: tuple[str, ...] = field(default_factory=tuple)
    error: str | None = None

    @property
    def rest(self) -> str:
        return " ".join(self.args)


def parse_command(line: str) -> ParsedCommand:
    words = line.strip().lstrip(":").split()
    if not words:
        return ParsedCommand(error="empty command (try :help)")
    spec = BY_NAME.get(words[0].lower())
    if spec is None:
        names = ", ".join(s.name for s in SPECS)
        return ParsedCommand(error=f"unknown command :{words[0]} (commands: {names})")
    args = tuple(words[1:])
    if spec.name in NEEDS_ARG and not args:
        return ParsedCommand(spec.name, args, f"usage: {spec.usage}")
    return ParsedCommand(spec.name, args)


def completions() -> list[str]:
    """Every command name and alias, for the command bar's suggester."""
    return sorted({s.name for s in SPECS})
