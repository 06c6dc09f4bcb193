"""A plugin for the tests: a domain written to passhat's own Domain protocol
(passhat.domains.base) for a tool backend that is not tau2, registered with
passhat.domains.register_domain. A refund desk: the agent's tools are lookup_order and
process_refund over a small order book; the user has no tools.

The state of a conversation is the order book after every tool call the history
answered without an error, so any worker can rebuild it from the recorded steps. A
conversation scores 1.0 when its final order book is the one the task's gold actions
leave, and the agent said what the task says it must communicate.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from passhat.messages import GoldAction, Message, Score, TaskInfo, ToolCall
from passhat.domains import register_domain
from passhat.domains.base import UnknownTaskError

NAME = "refund_desk"
ORDERS = {
    "A100": {"item": "kettle", "amount": 40.0, "status": "delivered"},
    "A200": {"item": "toaster", "amount": 25.0, "status": "delivered"},
    "A300": {"item": "blender", "amount": 60.0, "status": "shipped"},
}
POLICY = ("You are the refund desk. Look an order up before acting on it. Refund a "
          "delivered order when the customer asks; an order that is not delivered yet cannot "
          "be refunded: tell the customer it is not delivered.")
TASKS = {
    "refund_kettle": TaskInfo(
        id="refund_kettle",
        user_scenario="Your kettle (order A100) arrived broken. Ask for a refund.",
        reason_for_call="My kettle from order A100 arrived broken; please refund it.",
        gold_actions=[GoldAction(name="lookup_order", arguments={"order_id": "A100"}),
                      GoldAction(name="process_refund", arguments={"order_id": "A100", "reason": "broken"})],
    ),
    "blender_not_delivered": TaskInfo(
        id="blender_not_delivered",
        user_scenario="You changed your mind about the blender (order A300). Ask for a refund.",
        reason_for_call="Please refund order A300, the blender; I changed my mind.",
        gold_actions=[GoldAction(name="lookup_order", arguments={"order_id": "A300"})],
        communicate_info=["not delivered"],
    ),
}
TOOLS = [
    {"type": "function", "function": {
        "name": "lookup_order", "description": "An order's item, amount and status.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                       "required": ["order_id"]}}},
    {"type": "function", "function": {
        "name": "process_refund", "description": "Refund a delivered order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"},
                                                        "reason": {"type": "string"}},
                       "required": ["order_id", "reason"]}}},
]


class RefundDesk:
    name = NAME

    def task_ids(self) -> list[str]:
        return list(TASKS)

    def task(self, task_id: str) -> TaskInfo:
        if task_id not in TASKS:
            raise UnknownTaskError(task_id)
        return TASKS[task_id]

    def agent_tools(self) -> list[dict[str, Any]]:
        return TOOLS

    def user_tools(self) -> None:
        return None

    def policy(self) -> str:
        return POLICY

    def agent_system_prompt(self) -> str:
        return f"<policy>\n{POLICY}\n</policy>"

    def user_system_prompt(self, task_id: str) -> str:
        return f"You are a customer of the shop. {self.task(task_id).user_scenario}"

    def tool_kinds(self) -> dict[str, str]:
        return {"lookup_order": "read", "process_refund": "write"}

    def database_json(self) -> str:
        return json.dumps(ORDERS, sort_keys=True)

    def execute(self, task_id: str, history: list[Message], calls: list[ToolCall],
                session: str | None = None) -> list[Message]:
        self.task(task_id)
        orders = _replay(history)
        answers = []
        for call in calls:
            content, error = _run(orders, call)
            answers.append(Message(role="tool", content=content, tool_call_id=call.id,
                                   requestor=call.requestor, error=error))
        return answers

    def score(self, task_id: str, messages: list[Message], termination_reason: str,
              nl_checks: list[dict[str, Any]] | None = None) -> Score:
        task = self.task(task_id)
        if termination_reason not in ("user_stop", "agent_stop"):
            return Score(reward=0.0, info={"note": f"ended as {termination_reason}"})
        expected = copy.deepcopy(ORDERS)
        for i, action in enumerate(task.gold_actions):
            _run(expected, ToolCall(id=f"expected-{i}", name=action.name, arguments=action.arguments))
        said = " ".join(m.content or "" for m in messages if m.role == "assistant").lower()
        db = float(_replay(messages) == expected)
        communicated = float(all(info.lower() in said for info in task.communicate_info))
        return Score(reward=db * communicated, breakdown={"DB": db, "COMMUNICATE": communicated})


def _replay(history: list[Message]) -> dict[str, dict[str, Any]]:
    """The order book after every call of `history` that was answered without an error."""
    orders = copy.deepcopy(ORDERS)
    calls = {c.id: c for m in history for c in m.tool_calls or []}
    for m in history:
        if m.role == "tool" and not m.error and m.tool_call_id in calls:
            _run(orders, calls[m.tool_call_id])
    return orders


def _run(orders: dict[str, dict[str, Any]], call: ToolCall) -> tuple[str, bool]:
    """(the answer, whether it is an error) of one call, changing `orders` as it says."""
    if call.invalid_arguments is not None:
        return f"Error: the arguments are not a JSON object: {call.invalid_arguments[:100]}", True
    order = orders.get(str(call.arguments.get("order_id")))
    if call.name not in ("lookup_order", "process_refund"):
        return f"Error: no tool named {call.name}", True
    if order is None:
        return f"Error: no order {call.arguments.get('order_id')!r}", True
    if call.name == "process_refund":
        if order["status"] != "delivered":
            return f"Error: the order is {order['status']}, not delivered: it cannot be refunded", True
        order.update(status="refunded", refund_reason=str(call.arguments.get("reason", "")))
    return json.dumps(order, sort_keys=True), False


register_domain(NAME, RefundDesk)
