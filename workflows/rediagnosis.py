"""RediagnosisWorkflow: `passhat diagnose RUN`, one activity that diagnoses again the
run's failed trials whose diagnosis is missing or older (activities/rediagnosis.py).
It heartbeats as it goes; a worker killed mid-way is noticed by the heartbeat timeout
and the retry skips the trials already done."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from passhat.activities.rediagnosis import Rediagnosis, RediagnosisActivities


def workflow_id(run_id: str) -> str:
    return f"{run_id}~diagnose"


@workflow.defn
class RediagnosisWorkflow:
    @workflow.run
    async def run(self, run_id: str) -> Rediagnosis:
        return await workflow.execute_activity_method(
            RediagnosisActivities.rediagnose_run, run_id,
            start_to_close_timeout=timedelta(hours=2),
            heartbeat_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=5),
            summary=f"diagnose {run_id}",
        )
