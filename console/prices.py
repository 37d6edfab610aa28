"""What a resource costs per hour, by resource kind: the ``[prices]`` table of the config
file and ``irq serve --price KIND=AMOUNT``.

::

    [prices]
    gpu = 2.50          # per hour, per unit (a resource declaring count=4 costs 4 x 2.50)
    sandbox = 0.10
    currency = "USD"    # the default

The gateway holds one table (flag > config file) and applies it to every plan's work at risk
(console/work_at_risk.py); it sends the table to its clients in the welcome frame, so the
fleet view sorts by cost held with the gateway's prices, not whatever a laptop's config says.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

DEFAULT_CURRENCY = "USD"

#: currencies written with a symbol before the amount; any other is "3.50 EUR"
_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}


class PriceTable(BaseModel):
    """Price per hour of one unit of each resource kind, and the currency."""

    model_config = ConfigDict(frozen=True)

    per_hour: dict[str, float] = {}
    currency: str = DEFAULT_CURRENCY

    @model_validator(mode="after")
    def _sane(self) -> PriceTable:
        for kind, price in self.per_hour.items():
            if not kind:
                raise ValueError("a price needs a resource kind")
            if not math.isfinite(price) or price < 0:
                raise ValueError(f"the price of {kind!r} must be a number >= 0, not {price!r}")
        return self

    def price_of(self, kind: str) -> float | None:
        """The price per hour of one unit of ``kind``; None when none is configured (a
        ``PricePerHour`` for console/leak_conditions.py too)."""
        return self.per_hour.get(kind)

    def __bool__(self) -> bool:
        return bool(self.per_hour)

    def money(self, amount: float) -> str:
        """``$3.50`` / ``3.50 CHF``."""
        symbol = _SYMBOLS.get(self.currency.upper())
        return f"{symbol}{amount:,.2f}" if symbol else f"{amount:,.2f} {self.currency}"

    def with_prices(self, prices: dict[str, float]) -> PriceTable:
        """This table with ``prices`` on top (``--price`` over the config file)."""
        return PriceTable(per_hour={**self.per_hour, **prices}, currency=self.currency)

    def contract(self) -> dict[str, Any]:
        """The welcome frame's ``prices`` (and JSON): ``{"currency", "per_hour": {kind: x}}``."""
        return {"currency": self.currency, "per_hour": dict(sorted(self.per_hour.items()))}

    @classmethod
    def from_contract(cls, data: Any) -> PriceTable:
        """From a welcome frame; an absent or malformed table is no prices (an older
        gateway sends none)."""
        if not isinstance(data, dict):
            return cls()
        try:
            return cls.model_validate(data)
        except ValueError:
            return cls()


def price_table_of(section: dict[str, Any]) -> PriceTable:
    """The ``[prices]`` table of the config file: kind = number, and ``currency``; a
    ValueError names the key that is wrong (the config's error says ``prices KEY ...``)."""
    currency = section.get("currency", DEFAULT_CURRENCY)
    if not isinstance(currency, str) or not currency.strip():
        raise ValueError(f"currency must be a string such as \"USD\", not {currency!r}")
    per_hour: dict[str, float] = {}
    for kind, value in section.items():
        if kind == "currency":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{kind} must be a number (per hour), not {value!r}")
        per_hour[kind] = float(value)
    return PriceTable(per_hour=per_hour, currency=currency.strip())


def parse_price_flag(text: str) -> tuple[str, float]:
    """``gpu=2.50`` -> ("gpu", 2.5); ValueError with the reason."""
    kind, sep, amount = text.partition("=")
    kind = kind.strip()
    if not sep or not kind:
        raise ValueError(f"expected KIND=PRICE_PER_HOUR (e.g. gpu=2.50), not {text!r}")
    try:
        value = float(amount)
    except ValueError:
        raise ValueError(f"{kind}: {amount.strip()!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{kind}: the price must be a number >= 0")
    return kind, value
