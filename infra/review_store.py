"""The results store's reviews (`passhat review`): each judge call as answered, and each
trial's review, written once (first write wins) so that a retried activity, a second
worker or a resumed review never replaces nor pays again for what was recorded.

Functions over a passhat.infra.store.Store, beside it rather than in it: the reviews are
a concept of their own, and the store's class holds the runs' and trials'."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func
from sqlmodel import select

from passhat.infra.store import Store
from passhat.infra.store_tables import ReviewCallRow, ReviewRow, utc_now


def review_id(trial_id: str, review_key: str) -> str:
    return f"{trial_id}~review-{review_key}"


def record_call(store: Store, *, review_key: str, rid: str, run_id: str, call: int, **values: Any) -> bool:
    """Keep the judge's answer to call `call` of review `rid`; False when it was kept
    already (the first answer stays)."""
    with store._session() as s:  # noqa: SLF001 - the store's own transaction helper
        result = s.exec(store._insert(ReviewCallRow).values(  # noqa: SLF001
            id=f"{rid}#{call}", review_id=rid, review_key=review_key, run_id=run_id, call=call,
            created_at=utc_now(), **values).on_conflict_do_nothing())
        return result.rowcount == 1


def recorded_call(store: Store, rid: str, call: int) -> ReviewCallRow | None:
    with store._session(read_only=True) as s:  # noqa: SLF001
        return s.get(ReviewCallRow, f"{rid}#{call}")


def record_review(store: Store, **values: Any) -> bool:
    """Keep a trial's review (ReviewRow's columns); False when it was kept already."""
    with store._session() as s:  # noqa: SLF001
        result = s.exec(store._insert(ReviewRow).values(created_at=utc_now(), **values)  # noqa: SLF001
                        .on_conflict_do_nothing())
        return result.rowcount == 1


def get_review(store: Store, rid: str) -> ReviewRow | None:
    with store._session(read_only=True) as s:  # noqa: SLF001
        return s.get(ReviewRow, rid)


def reviews(store: Store, run_id: str, review_key: str | None = None) -> list[ReviewRow]:
    """The run's reviews (by one judge when review_key is given), oldest first."""
    query = select(ReviewRow).where(ReviewRow.run_id == run_id)
    if review_key is not None:
        query = query.where(ReviewRow.review_key == review_key)
    with store._session(read_only=True) as s:  # noqa: SLF001
        return list(s.exec(query.order_by(ReviewRow.created_at, ReviewRow.id)))


def trial_reviews(store: Store, trial_id: str) -> list[ReviewRow]:
    """Every review of one trial, by every judge."""
    with store._session(read_only=True) as s:  # noqa: SLF001
        return list(s.exec(select(ReviewRow).where(ReviewRow.trial_id == trial_id).order_by(ReviewRow.created_at)))


def review_cost(store: Store, run_id: str, review_key: str) -> float:
    """What the judge's calls of one review of a run cost (USD), those of trials whose
    review is not finished included: a paid call counts once it is answered."""
    with store._session(read_only=True) as s:  # noqa: SLF001
        return float(s.exec(select(func.coalesce(func.sum(ReviewCallRow.cost), 0.0)).where(
            ReviewCallRow.run_id == run_id, ReviewCallRow.review_key == review_key)).one())


def call_count(store: Store, run_id: str, review_key: str) -> int:
    """Judge calls answered and kept for one review of a run."""
    with store._session(read_only=True) as s:  # noqa: SLF001
        return int(s.exec(select(func.count()).select_from(ReviewCallRow).where(
            ReviewCallRow.run_id == run_id, ReviewCallRow.review_key == review_key)).one())
