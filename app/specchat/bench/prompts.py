"""The benchmark's prompt set: JSON Lines of {id, user or turns, system, category, history,
attachments, prediction}."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specchat.engine.attachments import Attachment, with_attachments

#: The prompt set that ships inside the package.
SHIPPED_PROMPTS = Path(__file__).with_name("prompts.jsonl")
#: Thirty everyday single-turn prompts beside the shipped set (new code, edits of given code,
#: extraction, explanations, prose): for checking a policy on text it was not shaped on.
EVERYDAY_PROMPTS = Path(__file__).with_name("everyday-prompts.jsonl")
#: An edit of an attached file of about 100 lines, and the same request with the file pasted
#: into the message: drafting from an attachment against drafting from this chat.
ATTACHMENT_PROMPTS = Path(__file__).with_name("attachment-prompts.jsonl")
#: The shipped whole-file edits sent with a prediction (Predicted Outputs, as an editor sends
#: the file through `specchat serve`): the original file, none, and an unrelated text.
PREDICTION_PROMPTS = Path(__file__).with_name("prediction-prompts.jsonl")
#: Chats whose first request reads a file of about 2,000 tokens and whose next repeats it
#: with a short question (`specchat bench --via-api`: the follow-up's first token).
FOLLOW_UP_PROMPTS = Path(__file__).with_name("follow-up-prompts.jsonl")
#: Prompts written once and only measured on: no default or rule is tuned on them, so they
#: show what the tuning on the shipped and everyday sets carries to text it never saw.
HELD_OUT_PROMPTS = Path(__file__).with_name("held-out-prompts.jsonl")
#: Prompt sets `--prompts` knows by name.
PROMPT_SETS = {
    "shipped": SHIPPED_PROMPTS,
    "everyday": EVERYDAY_PROMPTS,
    "attachments": ATTACHMENT_PROMPTS,
    "predictions": PREDICTION_PROMPTS,
    "follow-up": FOLLOW_UP_PROMPTS,
    "held-out": HELD_OUT_PROMPTS,
}

#: Category of a prompt whose line names none.
DEFAULT_CATEGORY = "general"

_KNOWN_KEYS = {
    "id",
    "user",
    "turns",
    "system",
    "category",
    "history",
    "attachments",
    "prediction",
}

#: A turn that asks for the previous answer again (the window's Regenerate), written
#: {"regenerate": true} in a prompt file.
REGENERATE = None

_ROLES = ("system", "user", "assistant", "tool")


class PromptFileError(ValueError):
    """A prompt file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class BenchPrompt:
    """One benchmark prompt.

    A session (several turns) runs its turns in order in one conversation, each answered
    after the answers to the turns before it.

    Attributes:
        id: unique name, used in the report.
        user: the (first) user message.
        system: an optional system message.
        category: group for the report's per-category summary ("code-editing", ...).
        turns: a session's user messages in order (REGENERATE: answer the previous one
            again); empty for a single prompt.
        history: earlier conversations, as if stored, that drafting may draw on.
        attachments: files attached to the first user message.
        prediction: the text the (first) answer is expected to mostly repeat, sent as an
            API request's Predicted Output; None for none.
    """

    id: str
    user: str
    system: str | None = None
    category: str = DEFAULT_CATEGORY
    turns: tuple[str | None, ...] = ()
    history: tuple[tuple[dict[str, str], ...], ...] = ()
    attachments: tuple[Attachment, ...] = ()
    prediction: str | None = None

    @property
    def turn_count(self) -> int:
        return max(1, len(self.turns))

    def messages(self, answers: Sequence[str] = ()) -> list[dict[str, str]]:
        """The conversation for the turn after `answers` (the answers to the turns before)."""
        chat = [{"role": "system", "content": self.system}] if self.system else []
        turns = self.turns or (self.user,)
        if len(answers) >= len(turns):
            raise ValueError(f"{self.id} has {len(turns)} turn(s)")
        for index, turn in enumerate(turns[: len(answers) + 1]):
            if turn is REGENERATE:
                chat.pop()  # the answer being regenerated
            else:
                files = self.attachments if index == 0 else ()
                chat.append({"role": "user", "content": with_attachments(turn, files)})
            if index < len(answers):
                chat.append({"role": "assistant", "content": answers[index]})
        return chat


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
        if "user" in item and "turns" in item:
            raise PromptFileError(f"{where}: give either 'user' or 'turns', not both")
        turns = _turns(item.get("turns"), where) if "turns" in item else ()
        if turns:
            item["user"] = turns[0]
        for key in ("id", "user"):
            value = item.get(key)
            if not isinstance(value, str) or not value.strip():
                raise PromptFileError(f"{where}: {key!r} must be a non-empty string")
        for key in ("system", "category", "prediction"):
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
                turns=turns,
                history=_history(item.get("history", []), where),
                attachments=_attachments(item.get("attachments", []), where),
                prediction=item.get("prediction") or None,
            )
        )
    if not prompts:
        raise PromptFileError(f"{source}: no prompts in the file")
    return tuple(prompts)


def _turns(value: object, where: str) -> tuple[str | None, ...]:
    if not isinstance(value, list) or not value:
        raise PromptFileError(f"{where}: 'turns' must be a non-empty list")
    turns: list[str | None] = []
    for number, turn in enumerate(value):
        if turn == {"regenerate": True} and number > 0:
            turns.append(REGENERATE)
        elif isinstance(turn, str) and turn.strip():
            turns.append(turn)
        else:
            raise PromptFileError(
                f"{where}: turn {number} must be a non-empty string"
                + (' or {"regenerate": true}' if number else "")
            )
    return tuple(turns)


def _history(value: object, where: str) -> tuple[tuple[dict[str, str], ...], ...]:
    problem = f"{where}: 'history' must be a list of conversations, each a list of messages"
    if not isinstance(value, list):
        raise PromptFileError(problem)
    conversations = []
    for conversation in value:
        if not isinstance(conversation, list) or not conversation:
            raise PromptFileError(problem)
        messages = []
        for message in conversation:
            if (
                not isinstance(message, dict)
                or set(message) != {"role", "content"}
                or message["role"] not in _ROLES
                or not isinstance(message["content"], str)
            ):
                raise PromptFileError(
                    f'{where}: a history message must be {{"role": one of '
                    f'{", ".join(_ROLES)}, "content": text}}'
                )
            messages.append({"role": message["role"], "content": message["content"]})
        conversations.append(tuple(messages))
    return tuple(conversations)


def _attachments(value: object, where: str) -> tuple[Attachment, ...]:
    problem = f'{where}: \'attachments\' must be a list of {{"name": text, "text": text}}'
    if not isinstance(value, list):
        raise PromptFileError(problem)
    found = []
    for item in value:
        if (
            not isinstance(item, dict)
            or set(item) != {"name", "text"}
            or not isinstance(item["name"], str)
            or not item["name"].strip()
            or not isinstance(item["text"], str)
        ):
            raise PromptFileError(problem)
        size = len(item["text"].encode("utf-8"))
        found.append(Attachment(item["name"].strip(), item["text"], "utf-8", size))
    return tuple(found)


def prompt_file(spec: str) -> Path:
    """A prompt set's name ("shipped", "everyday") or a file's path, as a path."""
    return PROMPT_SETS.get(spec, Path(spec))


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
