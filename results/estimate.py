"""A mean over tasks with its bootstrap interval, as reports carry it (the report's
groups, its comparisons and the persona robustness all use it)."""

from __future__ import annotations

from pydantic import BaseModel

from passhat.metrics import Interval


class Estimate(BaseModel):
    """A mean over tasks with its bootstrap confidence interval over tasks."""

    value: float
    low: float
    high: float

    @classmethod
    def of(cls, interval: Interval) -> Estimate:
        return cls(value=interval.value, low=interval.low, high=interval.high)
