"""`passhat diagnose RUN`: the diagnosis of a run's failed trials made again where it is
missing or older than this passhat's (a run scored by an earlier version, or imported
from tau2 results files), in a worker like the diagnosis made at scoring time."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import activity

from passhat.activities.results import diagnose_trial, recorded_verdicts
from passhat.outcomes import TRIAL_SCORED, is_success
from passhat.domains.diagnosis import DIAGNOSIS_VERSION
from passhat.infra.store import Store

HEARTBEAT_EVERY = 50  # trials


class Rediagnosis(BaseModel):
    run_id: str
    diagnosed: int = 0  # made now
    current: int = 0  # already of this version
    not_diagnosable: int = 0  # a domain that does not diagnose (a plugin's own Domain)


class RediagnosisActivities:
    def __init__(self, store: Store):
        self.store = store

    @activity.defn
    def rediagnose_run(self, run_id: str) -> Rediagnosis:
        """Diagnose every failed scored trial of the run whose diagnosis is missing or of
        an older version. Idempotent: a retry (a worker killed) skips what is done."""
        run = self.store.get_run(run_id)
        tau2_version = run.run_config().tau2_version if run is not None else None
        out = Rediagnosis(run_id=run_id)
        for n, row in enumerate(self.store.trials(run_id)):
            if n % HEARTBEAT_EVERY == 0:
                activity.heartbeat(n)
            if row.status != TRIAL_SCORED or row.reward is None or is_success(row.reward):
                continue
            if (row.diagnosis() or {}).get("version") == DIAGNOSIS_VERSION:
                out.current += 1
                continue
            verdicts = recorded_verdicts(self.store, row.trial_id, tau2_version)
            diagnosis = diagnose_trial(row.domain, row.task_id, self.store.steps(row.trial_id),
                                       row.reward_info(), row.termination_reason, verdicts)
            if diagnosis is None:
                out.not_diagnosable += 1
                continue
            self.store.set_trial_diagnosis(row.trial_id, diagnosis)
            out.diagnosed += 1
        return out
