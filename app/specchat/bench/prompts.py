"""The benchmark's prompt set: JSON Lines of {id, user, optional system, optional category}."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

#: The prompt set that ships inside the package.
SHIPPED_PROMPTS = Path(__file__).with_name("prompts.jsonl")

#: Category of a prompt whose line names none.
DEFAULT_CATEGORY = "general"

_KNOWN_KEYS = {"id", "user", "system", "category"}


class PromptFileError(ValueError):
    """A prompt file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class BenchPrompt:
    """One benchmark prompt.

    Attributes:
        id: unique name, used in the report.
        user: the user message.
        system: an optional system message.
        category: group for the report's per-category summary ("code-editing", ...).
    """

    id: str
    user: str
    system: str | None = None
    category: str = DEFAULT_CATEGORY

    def messages(self) -> list[dict[str, str]]:
        chat = [{"role": "system", "content": self.system}] if self.system else []
        return [*chat, {"role": "user", "content": self.user}]


def parse_prompts(text: str, *, source: str = "prompts") -> tuple[BenchPrompt, ...]:
    """Parse JSON Lines; blank lines are skipped, anything else malformed is an error."""
    prompts: list[BenchPrompt] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise PromptFileError(f"{where}: not valid JSON ({error.msg})") from None
        if not isinstance(item, dict):
            raise PromptFileError(f"{where}: expected a JSON object, got {type(item).__name__}")
        unknown = sorted(set(item) - _KNOWN_KEYS)
        if unknown:
            raise PromptFileError(
                f"{where}: unknown key(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(_KNOWN_KEYS))}"
            )
        for key in ("id", "user"):
            value = item.get(key)
            if not isinstance(value, str) or not value.strip():
                raise PromptFileError(f"{where}: {key!r} must be a non-empty string")
        for key in ("system", "category"):
            if key in item and not isinstance(item[key], str):
                raise PromptFileError(f"{where}: {key!r} must be a string")
        prompt_id = item["id"].strip()
        if prompt_id in seen:
            raise PromptFileError(
                f"{where}: duplicate id {prompt_id!r} (first on line {seen[prompt_id]})"
            )
        seen[prompt_id] = number
        prompts.append(
            BenchPrompt(
                id=prompt_id,
                user=item["user"],
                system=item.get("system") or None,
                category=(item.get("category") or DEFAULT_CATEGORY).strip(),
            )
        )
    if not prompts:
        raise PromptFileError(f"{source}: no prompts in the file")
    return tuple(prompts)


def load_prompts(path: Path | None = None) -> tuple[BenchPrompt, ...]:
    """Read a prompt file (the shipped set when `path` is None)."""
    path = path or SHIPPED_PROMPTS
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PromptFileError(f"cannot read prompt file {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise PromptFileError(f"{path}: not UTF-8 text") from None
    return parse_prompts(text, source=str(path))
