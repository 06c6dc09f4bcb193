"""A plugin domain for the tests, written to tau2's contract as a user would write one:
an internet provider's support desk. The agent has read and write tools over the
provider's database; the user has tools of their own over a database of their home
(their router), and the environment overrides `sync_tools` so that what the agent
changes shows on the user's side (a plan change, a line reset), as tau2's telecom does.

The policy, databases and tasks are files beside this module, so a test can copy the
folder and edit one of them between runs.
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
NAME = "home_internet"


class Account(BaseModel):
    account_id: str
    name: str
    plan: str
    line: str = "up"  # "up", "down", or "reset" (up again once the router restarts)


class ProviderDB(DB):
    accounts: dict[str, Account]
    plans: dict[str, int]  # plan -> speed in Mbps


class Router(BaseModel):
    account_id: str
    restarted: bool = False


class HomeDB(DB):
    router: Router


class ProviderTools(ToolKitBase):
    db: ProviderDB

    @is_tool(ToolType.READ)
    def get_account(self, account_id: str) -> Account:
        """Look up a customer's account.

        Args:
            account_id: The account id, such as a100.
        """
        if account_id not in self.db.accounts:
            raise ValueError(f"Account {account_id} not found")
        return self.db.accounts[account_id]

    @is_tool(ToolType.WRITE)
    def change_plan(self, account_id: str, plan: str) -> Account:
        """Move an account to another plan.

        Args:
            account_id: The account id.
            plan: The plan's name: basic, fast or fiber.
        """
        account = self.get_account(account_id)
        if plan not in self.db.plans:
            raise ValueError(f"No plan {plan}")
        account.plan = plan
        return account

    @is_tool(ToolType.WRITE)
    def reset_line(self, account_id: str) -> str:
        """Reset the account's line; the customer must restart their router afterwards.

        Args:
            account_id: The account id.
        """
        self.get_account(account_id).line = "reset"
        return "Line reset; ask the customer to restart their router"


class HomeTools(ToolKitBase):
    db: HomeDB
    # What the router gets from the line: set by the environment's sync_tools from the
    # provider's side, not part of the home's database (tau2 compares databases after
    # the gold actions without syncing again, so derived state is kept out of them).
    speed_mbps: int = 0

    @is_tool(ToolType.READ)
    def check_speed(self) -> str:
        """Run a speed test on your home connection."""
        return f"{self.speed_mbps} Mbps" if self.speed_mbps else "No connection"

    def set_router(self, account_id: str) -> None:
        """A task's initial state: the router of another account, not restarted since
        its line went down. Not a tool."""
        self.db.router = Router(account_id=account_id, restarted=False)

    @is_tool(ToolType.WRITE)
    def restart_router(self) -> str:
        """Switch your router off and on again."""
        self.db.router.restarted = True
        return "The router restarted"


class HomeInternetEnvironment(Environment):
    def sync_tools(self) -> None:
        """The user's router shows the provider's side: connected when the line is up
        (or was reset and the router restarted since), at the speed of the account's
        plan."""
        router = self.user_tools.db.router
        account = self.tools.db.accounts.get(router.account_id)
        up = account is not None and router.restarted and (
            account.line == "up" or account.line == "reset")
        self.user_tools.speed_mbps = self.tools.db.plans[account.plan] if up else 0


def get_environment(db: Optional[ProviderDB] = None, user_db: Optional[HomeDB] = None,
                    solo_mode: bool = False) -> Environment:
    return HomeInternetEnvironment(
        domain_name=NAME,
        policy=(HERE / "policy.md").read_text(),
        tools=ProviderTools(db or ProviderDB.load(str(HERE / "db.json"))),
        user_tools=HomeTools(user_db or HomeDB.load(str(HERE / "user_db.json"))),
    )


def get_tasks(task_split_name: Optional[str] = None) -> list[Task]:
    return [Task.model_validate(t) for t in json.loads((HERE / "tasks.json").read_text())]


if NAME not in registry.get_domains():
    registry.register_domain(get_environment, NAME)
    registry.register_tasks(get_tasks, NAME)
