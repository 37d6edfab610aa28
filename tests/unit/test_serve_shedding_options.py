"""``irq serve --shed-after/--shed-hold`` reach the gateway's settings; unset, its defaults."""

from __future__ import annotations

from typer.testing import CliRunner

from console.cli.admin import _shedding
from console.cli.app import app
from console.gateway.settings import GatewaySettings


def test_given_values_override_the_defaults_and_unset_ones_keep_them() -> None:
    defaults = GatewaySettings()
    assert _shedding(None, None) == {}
    kept = GatewaySettings(**_shedding(None, 2.0))
    assert (kept.shed_after_s, kept.shed_hold_s) == (defaults.shed_after_s, 2.0)
    never = GatewaySettings(**_shedding(0.0, None))  # 0: never shed
    assert (never.shed_after_s, never.shed_hold_s) == (0.0, defaults.shed_hold_s)


def test_serve_refuses_a_negative_hold() -> None:
    out = CliRunner().invoke(app, ["serve", "--shed-hold", "-1"])
    assert out.exit_code == 2 and "--shed-hold" in out.output
