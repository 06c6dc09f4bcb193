"""Files the user hands passhat (task files, results files): each way reading or
validating one can fail becomes one line that names the file and says what is wrong,
never a traceback.

The caller chooses the exception class, so each kind of file keeps the error its own
callers already catch (TaskFileError, ResultsFileError).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# What a directory given instead of a file is told, unless the caller knows better.
IS_A_DIRECTORY = "is a directory, not a file"


def read_bytes(
    path: str | Path,
    where: str,
    *,
    error: type[Exception] = ValueError,
    on_directory: str = IS_A_DIRECTORY,
) -> bytes:
    """The file's bytes; `error` with one line for a file that cannot be read. `where`
    names the file in that line (e.g. "task file tasks.json")."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise error(f"{where} does not exist") from None
    except IsADirectoryError:
        raise error(f"{where} {on_directory}") from None
    except OSError as err:
        raise error(f"cannot read {where}: {err.strerror or err}") from None


def read_text(
    path: str | Path,
    where: str,
    *,
    error: type[Exception] = ValueError,
    on_directory: str = IS_A_DIRECTORY,
) -> str:
    """The file as UTF-8 text; `error` with one line as read_bytes, or when it is not
    UTF-8."""
    data = read_bytes(path, where, error=error, on_directory=on_directory)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{where} is not UTF-8 text ({err.reason} at byte {err.start})") from None


def first_problem(err: Any, whole: str = "(the file)") -> str:
    """The first of pydantic's complaints as "field: message", with a count of the rest
    (one fixed problem at a time is easier to act on than a wall of union branches).
    `whole` names the field of a complaint about the whole value. Any other error is
    its message on one line."""
    errors = getattr(err, "errors", None)
    if not callable(errors):
        return " ".join(str(err).split())[:300]
    problems = _literal_unions_merged(errors(include_url=False))
    first = problems[0]
    field = ".".join(str(part) for part in first["loc"]) or whole
    message = f"{field}: {first['msg']}"
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more problem(s))"
    return message


def _literal_unions_merged(problems: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A union of literals (tau2 1.0.x's `ToolRequestor = UserRole | AssistantRole`)
    fails once per branch, each at `field.literal['x']` saying only its own value: merged
    into one complaint on the field that names every allowed value, as one Literal's
    complaint does (26.3's `Literal["user", "assistant"]`)."""
    def branch_of(problem: dict[str, Any]) -> tuple | None:
        loc = problem["loc"]
        if problem["type"] == "literal_error" and loc and str(loc[-1]).startswith("literal["):
            return tuple(loc[:-1])
        return None

    field = branch_of(problems[0])
    if field is None:
        return problems
    branches = [p for p in problems if branch_of(p) == field]
    expected = [str(p.get("ctx", {}).get("expected", "")) for p in branches]
    allowed = expected[0] if len(expected) == 1 else f"{', '.join(expected[:-1])} or {expected[-1]}"
    merged = {**problems[0], "loc": field, "msg": f"Input should be {allowed}"}
    return [merged] + [p for p in problems if branch_of(p) != field]
