"""Greenleaf Pharmacy's refill desk: a small domain written to tau2's contract.

Importing this module registers the domain "pharmacy" with tau2's registry, so
`passhat ... --plugin pharmacy --domain pharmacy` runs it (put examples/ on PYTHONPATH).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from pydantic import BaseModel
from tau2.data_model.tasks import Task
from tau2.environment.db import DB
from tau2.environment.environment import Environment
from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool
from tau2.registry import registry

HERE = Path(__file__).parent
NAME = "pharmacy"


class Patient(BaseModel):
    patient_id: str
    name: str
    dob: str
    prescriptions: list[str]


class Prescription(BaseModel):
    rx_id: str
    patient_id: str
    drug: str
    refills_left: int
    expires: str
    controlled: bool
    copay: float


class Refill(BaseModel):
    refill_id: str
    rx_id: str
    store_id: str
    status: str = "pending"


class PharmacyDB(DB):
    patients: dict[str, Patient]
    prescriptions: dict[str, Prescription]
    stores: dict[str, str]
    refills: dict[str, Refill]


class PharmacyTools(ToolKitBase):
    """The refill desk's tools. A tool that raises is answered with an error tool
    message, as tau2 does."""

    db: PharmacyDB

    @is_tool(ToolType.READ)
    def find_patient(self, patient_id: str, dob: str) -> Patient:
        """Find a patient by id, checking the date of birth.

        Args:
            patient_id: The patient's id, such as p100.
            dob: The date of birth, YYYY-MM-DD.
        """
        patient = self.db.patients.get(patient_id)
        if patient is None or patient.dob != dob:
            raise ValueError("No patient with this id and date of birth")
        return patient

    @is_tool(ToolType.READ)
    def get_prescription(self, rx_id: str) -> Prescription:
        """Get a prescription's details.

        Args:
            rx_id: The prescription id, such as rx1.
        """
        if rx_id not in self.db.prescriptions:
            raise ValueError(f"Prescription {rx_id} not found")
        return self.db.prescriptions[rx_id]

    @is_tool(ToolType.READ)
    def list_stores(self) -> dict[str, str]:
        """The pharmacy's stores, by store id."""
        return self.db.stores

    @is_tool(ToolType.WRITE)
    def request_refill(self, rx_id: str, store_id: str) -> Refill:
        """Request a refill of a prescription for pickup at a store.

        Args:
            rx_id: The prescription id.
            store_id: The pickup store id, such as s1.
        """
        rx = self.get_prescription(rx_id)
        if rx.controlled:
            raise ValueError("Controlled substances cannot be refilled here")
        if rx.refills_left < 1:
            raise ValueError("No refills left")
        if store_id not in self.db.stores:
            raise ValueError(f"Store {store_id} not found")
        rx.refills_left -= 1
        refill = Refill(refill_id=f"rf{len(self.db.refills) + 1}", rx_id=rx_id, store_id=store_id)
        self.db.refills[refill.refill_id] = refill
        return refill

    @is_tool(ToolType.WRITE)
    def change_pickup_store(self, refill_id: str, store_id: str) -> Refill:
        """Move a pending refill to another store.

        Args:
            refill_id: The refill id, such as rf1.
            store_id: The new store id.
        """
        refill = self.db.refills.get(refill_id)
        if refill is None:
            raise ValueError(f"Refill {refill_id} not found")
        if store_id not in self.db.stores:
            raise ValueError(f"Store {store_id} not found")
        refill.store_id = store_id
        return refill

    @is_tool(ToolType.GENERIC)
    def transfer_to_pharmacist(self, summary: str) -> str:
        """Transfer the patient to a pharmacist.

        Args:
            summary: What the patient needs.
        """
        return "Transfer successful"


def get_environment(db: Optional[PharmacyDB] = None, solo_mode: bool = False) -> Environment:
    db = db or PharmacyDB.load(str(HERE / "db.json"))
    return Environment(domain_name=NAME, policy=(HERE / "policy.md").read_text(),
                       tools=PharmacyTools(db))


def get_tasks(task_split_name: Optional[str] = None) -> list[Task]:
    return [Task.model_validate(t) for t in json.loads((HERE / "tasks.json").read_text())]


if NAME not in registry.get_domains():  # imported once per process, but be safe
    registry.register_domain(get_environment, NAME)
    registry.register_tasks(get_tasks, NAME)
