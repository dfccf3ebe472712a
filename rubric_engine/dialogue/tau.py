"""tau-bench adapters: tau2 results files and tau-bench (v1) trajectory arrays (docs/inputs.md).

* tau2 ``{tasks, simulations}``: one row per simulation, ``rowId = {domain}-{task_id}``
  (``-t{trial}`` when a task ran more than once). The assertions and actions a simulation was
  graded on (its own ``reward_info``) become case-level ``expectedBehavior`` and the
  ``referenceOutput`` (an action the user must perform keeps ``requestor: user``); assistant
  texts wrapped as ``{"message": …}`` are unwrapped. A simulation graded on nothing of its own
  takes its task's criteria only when the file's task ids can be trusted (no other simulation
  contradicts its entry); otherwise it gets none and ``metadata.criteriaMissing`` says why.
  Tool calls the user makes (telecom: ``requestor: user``) stay on the user's turn.
* tau-bench v1 ``[{task_id, trial, reward, info, traj}]``: ``rowId = {domain}-{task_id}-t{trial}``
  (the domain from the file name: ``airline``/``retail``, else ``tau``); the expected tool
  calls and outputs of ``info.task`` become the ``referenceOutput`` and two rule checks
  (docs/rule-checks.md, :func:`taubench_checks`); the tool calls become ``trace.toolInvocations``,
  a call whose result starts with ``Error`` marked ``success: false`` (tau-bench's
  ``Env.step`` turns a tool's exception into ``"Error: …"``, and the database is unchanged).

Pure: they map decoded JSON to row objects for
:func:`~rubric_engine.dialogue.shapes.row_from_object`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from rubric_engine.formats import jsonl


def _unwrap_tau2_content(content: Any) -> Any:
    """tau2 assistant texts are sometimes ``{"message": "..."}``; the user read the message."""
    if isinstance(content, str) and content.lstrip().startswith("{"):
        try:
            parsed = jsonl.loads(content)
        except json.JSONDecodeError:
            return content
        if (
            isinstance(parsed, dict)
            and set(parsed) == {"message"}
            and isinstance(parsed["message"], str)
        ):
            return parsed["message"]
    return content


def tau2_rows(data: dict[str, Any]) -> Iterator[tuple[str, Any, str]]:
    """Yield ``(where, row object, default id)`` for each simulation of a tau2 results file."""
    info = data.get("info") or {}
    domain = ((info.get("environment_info") or {}).get("domain_name")) or "tau2"
    tasks = {str(t.get("id")): t for t in data.get("tasks") or [] if isinstance(t, dict)}
    sims = [s for s in data.get("simulations") or [] if isinstance(s, dict)]
    trials: dict[str, int] = {}
    for sim in sims:
        tid = str(sim.get("task_id"))
        trials[tid] = trials.get(tid, 0) + 1
    misaligned = _task_ids_misaligned(sims, tasks)
    for i, sim in enumerate(sims):
        tid = str(sim.get("task_id"))
        row_id = f"{domain}-{tid}" + (f"-t{sim.get('trial', 0)}" if trials[tid] > 1 else "")
        task = tasks.get(tid, {})
        reward_info = sim.get("reward_info") or {}
        criteria, criteria_source = _tau2_criteria(task, reward_info)
        flags: dict[str, Any] = {}
        if criteria_source == "tasks" and misaligned:
            # the file's task ids point at other tasks: the entry found is not this one's
            criteria, criteria_source = _NO_CRITERIA, "none"
            flags["criteriaMissing"] = (
                "this simulation carries no graded criteria of its own, and the file's task "
                f"ids do not match what the other simulations were graded on, so task {tid}'s "
                "criteria may be another task's: none are used"
            )
        messages = []
        for m in sim.get("messages") or []:
            if isinstance(m, dict) and m.get("role") == "assistant":
                m = {**m, "content": _unwrap_tau2_content(m.get("content"))}
            messages.append(m)
        yield (
            f"simulations[{i}]",
            {
                "rowId": row_id,
                "messages": messages,
                "expectedBehavior": criteria["nl_assertions"],
                "referenceOutput": {
                    "expectedActions": criteria["actions"],
                    "communicateInfo": criteria["communicate_info"],
                }
                if criteria_source != "none"
                else None,
                "metadata": {
                    "source": "tau2-bench",
                    "domain": domain,
                    "taskId": tid,
                    "trial": sim.get("trial"),
                    "simulationId": sim.get("id"),
                    "reward": reward_info.get("reward"),
                    "terminationReason": sim.get("termination_reason"),
                    "criteriaSource": criteria_source,
                    "taskListDisagrees": criteria_source == "reward_info"
                    and criteria != _tau2_task_criteria(task),
                    **flags,
                },
            },
            row_id,
        )


_NO_CRITERIA: dict[str, list[Any]] = {"nl_assertions": [], "actions": [], "communicate_info": []}


def _action(raw: Any) -> dict[str, Any]:
    """An expected action as shown to the judge: ``{name, arguments}``, plus ``requestor``
    when someone other than the agent must perform it (tau2 telecom: the user toggles
    airplane mode on their phone). tau2's default performer is the agent (``assistant``);
    leaving it implicit keeps the rendering of agent-only tasks as it was."""
    action = raw if isinstance(raw, dict) else {}
    shown = {"name": action.get("name"), "arguments": action.get("arguments")}
    requestor = action.get("requestor")
    if requestor not in (None, "assistant"):
        shown["requestor"] = requestor
    return shown


def _tau2_task_criteria(task: dict[str, Any]) -> dict[str, list[Any]]:
    criteria = task.get("evaluation_criteria") or {}
    return {
        "nl_assertions": list(criteria.get("nl_assertions") or []),
        "actions": [_action(a) for a in criteria.get("actions") or []],
        "communicate_info": list(criteria.get("communicate_info") or []),
    }


def _has_own_criteria(reward_info: dict[str, Any]) -> bool:
    return any(reward_info.get(k) for k in ("nl_assertions", "action_checks", "communicate_checks"))


def _task_ids_misaligned(sims: list[dict[str, Any]], tasks: dict[str, dict[str, Any]]) -> bool:
    """Whether any simulation was graded on other criteria than its ``task_id``'s entry:
    then a ``task_id`` is not a reliable way to find a simulation's task in this file."""
    for sim in sims:
        reward_info = sim.get("reward_info") or {}
        if _has_own_criteria(reward_info):
            task = tasks.get(str(sim.get("task_id")), {})
            if _tau2_criteria(task, reward_info)[0] != _tau2_task_criteria(task):
                return True
    return False


def _tau2_criteria(
    task: dict[str, Any], reward_info: dict[str, Any]
) -> tuple[dict[str, list[Any]], str]:
    """The criteria a simulation was actually graded against.

    Some published tau2 result files label simulations with the wrong ``task_id`` (24 of the 25
    airline dev simulations disagree with their ``tasks`` entry), while each simulation's own
    ``reward_info`` lists the assertions and actions it was graded on. Prefer those.
    """
    if not _has_own_criteria(reward_info):
        return _tau2_task_criteria(task), "tasks"
    return {
        "nl_assertions": [
            a.get("nl_assertion")
            for a in reward_info.get("nl_assertions") or []
            if isinstance(a, dict) and a.get("nl_assertion")
        ],
        "actions": [
            _action(c.get("action"))
            for c in reward_info.get("action_checks") or []
            if isinstance(c, dict)
        ],
        "communicate_info": [
            c.get("info")
            for c in reward_info.get("communicate_checks") or []
            if isinstance(c, dict) and c.get("info")
        ],
    }, "reward_info"


#: tau-bench v1 tools that change the database, by domain (``tau_bench/envs/<domain>/tools``);
#: the reward compares the final database with the one the expected actions produce, so only
#: these calls decide it.
WRITE_TOOLS: dict[str, tuple[str, ...]] = {
    "airline": (
        "book_reservation",
        "cancel_reservation",
        "send_certificate",
        "update_reservation_baggages",
        "update_reservation_flights",
        "update_reservation_passengers",
    ),
    "retail": (
        "cancel_pending_order",
        "exchange_delivered_order_items",
        "modify_pending_order_address",
        "modify_pending_order_items",
        "modify_pending_order_payment",
        "modify_user_address",
        "modify_user_email",
        "return_delivered_order_items",
    ),
}


def taubench_checks(domain: str, task: dict[str, Any]) -> list[dict[str, Any]]:
    """A task's expected actions and outputs as rule checks (rules-only tau-bench grading).

    * ``expectedActions`` — ``tool_sequence``, mode ``unordered``, over the domain's write
      tools (:data:`WRITE_TOOLS`), successful calls only, arguments by inclusion: the agent's
      successful writes are exactly the expected writes, in any order. tau-bench rewards the
      final database state, which read calls, failed calls and the order of independent
      writes do not change. For an unknown domain: every expected action must appear
      (mode ``subset``), other calls allowed.
    * ``expectedOutputs`` — ``must_contain`` over every assistant turn, when the task lists
      ``outputs`` (tau-bench looks for each output in the agent's replies).
    """
    writes = WRITE_TOOLS.get(domain)
    actions = [a for a in task.get("actions") or [] if isinstance(a, dict) and a.get("name")]
    checks: list[dict[str, Any]] = []
    if writes is not None:
        checks.append(
            {
                "type": "tool_sequence",
                "name": "expectedActions",
                "mode": "unordered",
                "onlyTools": list(writes),
                "successfulOnly": True,
                "calls": [
                    {"tool": a["name"], "arguments": a.get("kwargs") or {}}
                    for a in actions
                    if a["name"] in writes
                ],
            }
        )
    elif actions:
        checks.append(
            {
                "type": "tool_sequence",
                "name": "expectedActions",
                "mode": "subset",
                "calls": [{"tool": a["name"], "arguments": a.get("kwargs") or {}} for a in actions],
            }
        )
    outputs = [str(o) for o in task.get("outputs") or [] if str(o).strip()]
    if outputs:
        checks.append(
            {
                "type": "must_contain",
                "name": "expectedOutputs",
                "keywords": outputs,
                "scope": "assistant",
            }
        )
    return checks


def _invocations(traj: list[Any]) -> list[dict[str, Any]]:
    results = {
        m.get("tool_call_id"): m.get("content")
        for m in traj
        if isinstance(m, dict) and m.get("role") == "tool"
    }
    found = []
    for message in traj:
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                with contextlib.suppress(json.JSONDecodeError):
                    arguments = jsonl.loads(arguments)
            result = results.get(call.get("id"))
            found.append(
                {
                    "toolName": function.get("name"),
                    "arguments": arguments,
                    "success": None
                    if result is None
                    else not str(result).lstrip().startswith("Error"),
                }
            )
    return found


def is_taubench_trajectory(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("traj"), list) and "task_id" in obj


def taubench_domain(file_stem: str) -> str:
    stem = file_stem.lower()
    return next((d for d in ("airline", "retail") if d in stem), "tau")


def taubench_row(obj: dict[str, Any], domain: str) -> dict[str, Any]:
    """A tau-bench v1 trajectory element as a row object."""
    task = (obj.get("info") or {}).get("task") or {}
    return {
        "rowId": f"{domain}-{obj.get('task_id')}-t{obj.get('trial', 0)}",
        "traj": obj["traj"],
        "trace": {"toolInvocations": _invocations(obj["traj"])},
        "expected": taubench_checks(domain, task),
        "referenceOutput": {
            "expectedActions": [
                {"name": a.get("name"), "arguments": a.get("kwargs")}
                for a in task.get("actions") or []
                if isinstance(a, dict)
            ],
            "expectedOutputs": task.get("outputs") or [],
        },
        "metadata": {
            "source": "tau-bench",
            "domain": domain,
            "taskId": obj.get("task_id"),
            "trial": obj.get("trial"),
            "reward": obj.get("reward"),
            "userId": task.get("user_id"),
        },
    }
