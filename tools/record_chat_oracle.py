"""Records tests/fixtures/chat_oracle: llama.cpp's own rendering and parsing of fixed chats.

chat-oracle (tools/llama_oracle/chat_oracle.cpp, built by tools/build_llama_tools.sh) runs
llama.cpp's common/chat.h over every template in the llama.cpp that llama-cpp-python
vendors (models/templates). From conversations.json, the inputs, it writes:

- render/<template stem>.json: each conversation's prompt (or llama.cpp's refusal), the
  chat format llama.cpp names and its generation prompt, once per enable_thinking value
  the template reads;
- parse/<template stem>.json, for each template llama.cpp derives a parser for: what a
  model would write for each parse case (test-chat.cpp's delta method: the chat rendered
  with the answer, less the chat rendered for generation, less the end of the turn),
  a malformed call, and what llama.cpp parses from it, whole and as a stream of prefixes.

    PYTHONPATH=app python tools/record_chat_oracle.py [--out DIR] [--binary PATH] [STEM ...]

The files (keys sorted; a top-level key a line, each list item on a line of its own):

    render/<stem>.json {"template": "<stem>.jinja", "source": str,
        "reads_enable_thinking": bool (cases for both values, else true alone),
        "cases": [{"conversation": name, "enable_thinking": bool,
                   "prompt": str, "format": str, "generation_prompt": str}
                  or {"conversation", "enable_thinking", "error": llama.cpp's refusal}]}
    parse/<stem>.json {"template": "<stem>.jinja",
        "cases": [{"case": name (a parse case, or "malformed_call": tool_call's output
                   with its last "}" dropped, or its last ">" where it has none),
                   "enable_thinking": bool, "format": str, "generation_prompt": str
                   (llama.cpp parses generation_prompt + output), "output": str,
                   "is_partial": false,
                   "message": {"content", "reasoning_content",
                               "tool_calls": [{"id", "name", "arguments"}]}
                   or "error": str,
                   "stream": [{"end": int, "diffs": [diff]} or {"end": int, "error": str}]}
                  or {"case", "enable_thinking", "render_error": str}]}

A stream step parses output[:end] (`end` in characters, after each token-like piece) with
is_partial true, the last (end = len(output)) with false; its diffs are
common_chat_msg_diff::compute_diffs against the last message that parsed, each with only
the keys it carries: "reasoning_content_delta", "content_delta", "tool_call_index" with
"tool_call_delta" {"id", "name", "arguments"} (each only where not empty); steps with no
diff are left out. Parse cases are rendered with enable_thinking true, "content" with
false as well where the template reads it.

tests/oracle/test_chat_oracle_fixtures.py records into a temporary folder and checks the
committed fixtures are what this writes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "chat_oracle"
BUILD_SCRIPT = ROOT / "tools" / "build_llama_tools.sh"
LLAMA_VERSION = os.environ.get("LLAMA_VERSION", "0.3.36")
TEMPLATES = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    / "specchat"
    / "sdist"
    / f"llama_cpp_python-{LLAMA_VERSION}"
    / "vendor"
    / "llama.cpp"
    / "models"
    / "templates"
)

#: Two answers that share no last character: what follows both is the end of the turn.
END_PROBES = ("Zq", "Xw")
#: Ends of turn stripped from a derived output when the probes' end does not close it (a
#: call's turn may end otherwise than a text's: Llama 3.1's <|eom_id|>).
END_MARKERS = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<end_of_turn>",
    "<turn|>",
    "<|END_OF_TURN_TOKEN|>",
    "<｜end▁of▁sentence｜>",
    "<|return|>",
    "<|call|>",
)
#: Token-like pieces a stream is cut into: a special marker whole, a word, a run of white
#: space, any other character alone.
PIECE = re.compile(r"<\|[^|\n]{1,40}\|>|<[^<>\s]{1,40}>|\[[A-Z_/]{2,30}\]|\w+|\s+|.", re.S)


def chat_oracle_binary() -> Path:
    """chat-oracle's path, built on first use (cached in the user cache)."""
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "chat-oracle"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable, "LLAMA_VERSION": LLAMA_VERSION},
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT.name} failed:\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def run_oracle(binary: Path, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """chat-oracle's answers to `requests`, in order."""
    done = subprocess.run(
        [str(binary)],
        input=json.dumps(list(requests)),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"chat-oracle exited with {done.returncode}:\n{done.stderr[-4000:]}")
    answers = json.loads(done.stdout)
    assert isinstance(answers, list) and len(answers) == len(requests)
    return answers


def common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def common_suffix(a: str, b: str) -> str:
    n = common_prefix(a[::-1], b[::-1])
    return a[len(a) - n :] if n else ""


def strip_end(output: str, end: str, markers: Sequence[str]) -> str:
    """`output` less the end of its turn: `end` (the probes' own) where it closes it, else
    every trailing end marker with the white space before it."""
    if end.strip() and output.endswith(end):
        return output[: -len(end)]
    # a call's turn may close otherwise before the same trailer (Command R+'s instructions)
    shared = common_suffix(output, end)
    if end.strip() and 2 * len(shared) >= len(end):
        output = output[: -len(shared)]
    while True:
        trimmed = output.rstrip()
        marker = next((m for m in markers if m and trimmed.endswith(m)), None)
        if marker is None:
            return output
        output = trimmed[: -len(marker)]


def answer_text(prompt: str, bare: str, full: str, generation_prompt: str) -> str:
    """What the model wrote after `prompt` for `full` to be the chat (test-chat.cpp's delta
    method): `full` past `prompt` where `prompt` leads it. Else the template writes the
    generation prompt otherwise than an answered turn's start: `full` past the chat without
    it (`bare`), then past whichever takes more of it: the longest end of the generation
    prompt it starts with (Command R+ writes its instructions before the turn's header), or
    what it shares with the generation prompt, to the last whole marker or line (QwQ opens
    <think> for generation, but not in an answered turn)."""
    if full.startswith(prompt):
        return full[len(prompt) :]
    rest = full[common_prefix(bare, full) :]
    ending = next(
        (
            k
            for k in range(len(generation_prompt), 0, -1)
            if rest.startswith(generation_prompt[-k:])
        ),
        0,
    )
    shared = rest[: common_prefix(rest, generation_prompt)]
    whole = max(shared.rfind(">"), shared.rfind("\n")) + 1
    return rest[max(ending, whole) :]


def close_thinking(output: str, answer: dict[str, Any], rendered: dict[str, Any]) -> str:
    """`output` as a thinking model writes it after a generation prompt that opens its
    thinking: the answer's reasoning and the end tag first, where the template dropped them
    from the answered turn (QwQ, DeepSeek R1 keep no thinking in history)."""
    start, ends = rendered["thinking_start_tag"], rendered["thinking_end_tags"]
    opened = start and rendered["generation_prompt"].rstrip().endswith(start)
    if not opened or not ends or any(end in output for end in ends):
        return output
    return f"{answer.get('reasoning_content') or ''}\n{ends[0]}\n\n{output}"


def malformed(output: str) -> str | None:
    """A call's output broken as a model breaks one: its last closing brace dropped (the
    arguments' JSON left open), or for a call without JSON its last closing tag's `>`."""
    for mark in ("}", ">"):
        cut = output.rfind(mark)
        if cut >= 0:
            return output[:cut] + output[cut + 1 :]
    return None


def piece_ends(output: str) -> list[int]:
    """Where the stream is cut, in characters: after each token-like piece."""
    return [m.end() for m in PIECE.finditer(output)]


class Recorder:
    """Builds each template's fixtures from chat-oracle's answers.

    Attributes:
        binary: chat-oracle.
        inputs: conversations.json: the chats, the parse cases, bos/eos and the date.
    """

    def __init__(self, binary: Path, inputs: dict[str, Any]) -> None:
        self.binary = binary
        self.inputs = inputs

    def request(
        self,
        source: str,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None,
        enable_thinking: bool,
        add_generation_prompt: bool = True,
        op: str = "render",
    ) -> dict[str, Any]:
        return {
            "op": op,
            "template": source,
            "bos_token": self.inputs["bos_token"],
            "eos_token": self.inputs["eos_token"],
            "now": self.inputs["now"],
            "messages": messages,
            "tools": tools,
            "enable_thinking": enable_thinking,
            "add_generation_prompt": add_generation_prompt,
        }

    def render_fixture(self, stem: str, source: str) -> dict[str, Any]:
        thinking = thinking_values(source)
        keys = [(c, t) for c in self.inputs["conversations"] for t in thinking]
        answers = run_oracle(
            self.binary,
            [
                self.request(source, c["messages"], tools=c["tools"], enable_thinking=t)
                for c, t in keys
            ],
        )
        cases = []
        for (conversation, think), answer in zip(keys, answers, strict=True):
            case: dict[str, Any] = {"conversation": conversation["name"], "enable_thinking": think}
            if "error" in answer:
                case["error"] = answer["error"]
            else:
                case.update(
                    prompt=answer["prompt"],
                    format=answer["format"],
                    generation_prompt=answer["generation_prompt"],
                )
            cases.append(case)
        return {
            "template": f"{stem}.jinja",
            "source": source,
            "reads_enable_thinking": len(thinking) > 1,
            "cases": cases,
        }

    def parse_fixture(self, stem: str, source: str) -> dict[str, Any] | None:
        """The parse cases of one template, or None where llama.cpp derives no parser."""
        keys = [(case, True) for case in self.inputs["parse_cases"]]
        if len(thinking_values(source)) > 1:
            keys += [(case, False) for case in self.inputs["parse_cases"][:1]]
        renders: list[dict[str, Any]] = []
        for case, think in keys:
            messages, tools = case["messages"], case["tools"]
            probes = [[*messages, {"role": "assistant", "content": p}] for p in END_PROBES]
            renders += [
                self.request(source, messages, tools=tools, enable_thinking=think),
                self.request(
                    source,
                    messages,
                    tools=tools,
                    enable_thinking=think,
                    add_generation_prompt=False,
                ),
                self.request(
                    source,
                    [*messages, case["answer"]],
                    tools=tools,
                    enable_thinking=think,
                    add_generation_prompt=False,
                ),
                *(
                    self.request(
                        source, p, tools=tools, enable_thinking=think, add_generation_prompt=False
                    )
                    for p in probes
                ),
            ]
        answers = run_oracle(self.binary, renders)
        cases: list[dict[str, Any]] = []
        parses: list[dict[str, Any]] = []
        for index, (case, think) in enumerate(keys):
            prompt, bare, full, *probed = answers[5 * index : 5 * index + 5]
            record: dict[str, Any] = {"case": case["name"], "enable_thinking": think}
            failed = next((a["error"] for a in (prompt, bare, full) if "error" in a), None)
            if failed is not None:
                cases.append({**record, "render_error": failed})
                continue
            if not prompt["parser"]:
                continue
            end = (
                ""
                if any("error" in p for p in probed)
                else common_suffix(*(p["prompt"] for p in probed))
            )
            markers = [self.inputs["eos_token"], *prompt["additional_stops"], *END_MARKERS]
            output = answer_text(
                prompt["prompt"], bare["prompt"], full["prompt"], prompt["generation_prompt"]
            )
            output = close_thinking(strip_end(output, end, markers), case["answer"], prompt)
            record.update(format=prompt["format"], generation_prompt=prompt["generation_prompt"])
            outputs = [(record, output)]
            if case["name"] == "tool_call" and (broken := malformed(output)) is not None:
                outputs.append(({**record, "case": "malformed_call"}, broken))
            for rec, text in outputs:
                cases.append({**rec, "output": text, "is_partial": False})
                parses.append(
                    {
                        **self.request(
                            source, case["messages"], tools=case["tools"], enable_thinking=think
                        ),
                        "op": "parse",
                        "output": text,
                        "is_partial": False,
                        "stream": byte_ends(text),
                    }
                )
        if not parses:
            return None
        parsed = iter(run_oracle(self.binary, parses))
        for case in cases:
            if "output" not in case:
                continue
            answer = next(parsed)
            chars = {
                b: c
                for c, b in zip(piece_ends(case["output"]), byte_ends(case["output"]), strict=True)
            }
            if "error" in answer:
                case["error"] = answer["error"]
            else:
                case["message"] = answer["message"]
            case["stream"] = [{**step, "end": chars[step["end"]]} for step in answer["stream"]]
        return {"template": f"{stem}.jinja", "cases": cases}


def byte_ends(output: str) -> list[int]:
    """piece_ends in UTF-8 bytes, as chat-oracle cuts."""
    return [len(output[:end].encode()) for end in piece_ends(output)]


def thinking_values(source: str) -> list[bool]:
    """The enable_thinking values worth rendering: both where the template reads it."""
    return [True, False] if "enable_thinking" in source else [True]


def dumps(value: dict[str, Any]) -> str:
    """`value` as JSON, its keys sorted: a top-level key a line, each item of a list on a
    line of its own (diffs name the case that moved, without an indent's bulk)."""

    def compact(item: Any) -> str:
        return json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    lines = []
    for key in sorted(value):
        item = value[key]
        if isinstance(item, list) and item:
            body = ",\n".join(compact(element) for element in item)
            lines.append(f"{compact(key)}:[\n{body}\n]")
        else:
            lines.append(f"{compact(key)}:{compact(item)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_json(path: Path, value: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(value), encoding="utf-8")


def record(out: Path, *, binary: Path, templates: Path, stems: Sequence[str] = ()) -> None:
    """Writes render/ and parse/ for every template (or those named) under `out`."""
    inputs = json.loads((FIXTURES / "conversations.json").read_text(encoding="utf-8"))
    recorder = Recorder(binary, inputs)
    paths = sorted(templates.glob("*.jinja"))
    if stems:
        paths = [p for p in paths if p.stem in stems]
    for path in paths:
        source = path.read_text(encoding="utf-8")
        write_json(out / "render" / f"{path.stem}.json", recorder.render_fixture(path.stem, source))
        parsed = recorder.parse_fixture(path.stem, source)
        if parsed is not None:
            write_json(out / "parse" / f"{path.stem}.json", parsed)
        print(f"{path.stem}: {'rendered and parsed' if parsed else 'rendered'}", file=sys.stderr)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stems", nargs="*", help="only these templates (file stems)")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="fixture folder")
    parser.add_argument("--binary", type=Path, help="chat-oracle (built when not given)")
    parser.add_argument("--templates", type=Path, default=TEMPLATES, help="*.jinja folder")
    args = parser.parse_args(argv)
    binary = args.binary or chat_oracle_binary()
    if not args.templates.is_dir():
        print(f"no templates at {args.templates} (run `make llama-tools`)", file=sys.stderr)
        return 1
    record(args.out, binary=binary, templates=args.templates, stems=args.stems)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
