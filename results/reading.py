"""Reading a results file, whichever format it is in: tau2's Results (a JSON object
with info, tasks and simulations) or tau-bench v1's result list."""

from __future__ import annotations

import json
from pathlib import Path

from passhat.domains.input_files import read_text
from passhat.results.records import ResultsFile, ResultsFileError
from passhat.results.tau2_reader import read_tau2
from passhat.results.tau_bench import read_tau_bench

# A directory given where results files were expected.
IS_A_DIRECTORY = "is a directory; give the results files in it"


def read_results_file(
    path: str | Path,
    *,
    domain: str | None = None,
    agent_model: str | None = None,
    user_model: str | None = None,
) -> ResultsFile:
    """A tau2 Results file or a tau-bench v1 result list, checked and converted.
    `domain`, `agent_model` and `user_model` are for tau-bench files, whose JSON does
    not name them. Raises ResultsFileError with one line for anything wrong."""
    where = str(Path(path))
    text = read_text(path, where, error=ResultsFileError, on_directory=IS_A_DIRECTORY)
    if not text.strip():
        raise ResultsFileError(f"{where} is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        if _is_json_lines(text):
            raise ResultsFileError(_json_lines_refused(where)) from None
        stripped = text.rstrip()
        if not stripped.lstrip().startswith(("{", "[")):  # both formats are an object or a list
            first = stripped.lstrip().splitlines()[0][:40]
            raise ResultsFileError(
                f"{where} is not JSON (it begins {first!r}): a tau2 results file is a JSON "
                "object and a tau-bench result file a JSON list"
            ) from None
        if err.pos >= len(stripped) or not stripped.endswith(("}", "]")):
            raise ResultsFileError(
                f"{where} is truncated: its JSON is cut off ({err.msg} at line {err.lineno}, "
                f"column {err.colno}, and the file ends at line {stripped.count(chr(10)) + 1})"
            ) from None
        raise ResultsFileError(
            f"{where} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}"
        ) from None
    if isinstance(data, dict) and {"info", "simulations"} <= data.keys():
        if domain is not None:
            raise ResultsFileError(
                f"{where} is a tau2 results file, which names its domain; --domain is for "
                "tau-bench files"
            )
        return read_tau2(where, data)
    if isinstance(data, list) and data and all(
        isinstance(item, dict) and {"task_id", "reward", "traj"} <= item.keys() for item in data
    ):
        return read_tau_bench(where, data, domain, agent_model, user_model)
    if isinstance(data, list) and not data:
        raise ResultsFileError(f"{where} is an empty list: no results to import")
    if isinstance(data, dict) and {"run_id", "trial_id", "messages"} <= data.keys():
        raise ResultsFileError(_json_lines_refused(where))  # a JSON-lines export of one trial
    raise ResultsFileError(
        f"{where} is neither a tau2 results file (a JSON object with info, tasks and "
        "simulations) nor a tau-bench result file (a JSON list of {task_id, reward, info, "
        "traj, trial})"
    )


def _json_lines_refused(where: str) -> str:
    return (
        f"{where} holds JSON lines (passhat's `export --format jsonl`), which keep trials "
        "but not the run's settings: only tau2 results files (`passhat export --format "
        "tau2`) and tau-bench result files can be imported"
    )


def _is_json_lines(text: str) -> bool:
    """Whether the text is one JSON object per line (and more than one line of them)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    try:
        return all(isinstance(json.loads(line), dict) for line in lines[:2])
    except json.JSONDecodeError:
        return False
