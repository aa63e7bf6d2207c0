"""Which chat template a model speaks: its own, or its family's when the file names none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class TemplateFamily:
    """A well-known chat format, as llama.cpp's built-in templates write it.

    Attributes:
        key: short id ("gemma").
        label: what people call it ("Gemma").
        source: the Jinja template.
        markers: the format's special tokens: never shown as answer text.
        end_of_turn: the texts that end an assistant turn (the answer stops there).
        vocabulary: tokens whose presence in a vocabulary identifies the family.
        architectures: general.architecture values that speak it (prefixes).
    """

    key: str
    label: str
    source: str
    markers: tuple[str, ...]
    end_of_turn: tuple[str, ...]
    vocabulary: tuple[str, ...]
    architectures: tuple[str, ...] = ()


_CHATML = TemplateFamily(
    "chatml",
    "ChatML",
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}",
    markers=("<|im_start|>", "<|im_end|>"),
    end_of_turn=("<|im_end|>",),
    vocabulary=("<|im_start|>", "<|im_end|>"),
    architectures=("qwen", "internlm", "yi", "smollm"),
)

# Gemma has no system role: a system message opens the first user turn, as Gemma's own
# template and llama.cpp's built-in one do.
_GEMMA = TemplateFamily(
    "gemma",
    "Gemma",
    "{{- bos_token -}}"
    "{%- set ns = namespace(system='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{%- set ns.system = message['content'] + '\n\n' -%}"
    "{%- else -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{- '<start_of_turn>' + role + '\n' + ns.system + message['content'] + '<end_of_turn>\n' -}}"
    "{%- set ns.system = '' -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}",
    markers=("<start_of_turn>", "<end_of_turn>"),
    end_of_turn=("<end_of_turn>",),
    vocabulary=("<start_of_turn>", "<end_of_turn>"),
    architectures=("gemma",),
)

_LLAMA3 = TemplateFamily(
    "llama3",
    "Llama 3",
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    " + message['content'] | trim + '<|eot_id|>' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}"
    "{%- endif -%}",
    markers=("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
    end_of_turn=("<|eot_id|>",),
    vocabulary=("<|start_header_id|>", "<|eot_id|>"),
)

_PHI3 = TemplateFamily(
    "phi3",
    "Phi-3",
    "{%- for message in messages -%}"
    "{{- '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}",
    markers=("<|system|>", "<|user|>", "<|assistant|>", "<|end|>"),
    end_of_turn=("<|end|>",),
    vocabulary=("<|user|>", "<|assistant|>", "<|end|>"),
    architectures=("phi3",),
)

# Mistral's [INST] format has no system role either: it opens the first user turn.
_MISTRAL = TemplateFamily(
    "mistral",
    "Mistral [INST]",
    "{{- bos_token -}}"
    "{%- set ns = namespace(system='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{%- set ns.system = message['content'] + '\n\n' -%}"
    "{%- elif message['role'] == 'user' -%}"
    "{{- '[INST] ' + ns.system + message['content'] + ' [/INST]' -}}"
    "{%- set ns.system = '' -%}"
    "{%- else -%}{{- message['content'] + eos_token -}}"
    "{%- endif -%}"
    "{%- endfor -%}",
    markers=("[INST]", "[/INST]"),
    end_of_turn=(),
    vocabulary=("[INST]", "[/INST]"),
    architectures=("mistral",),
)

#: Checked in this order: the first whose special tokens are all in the vocabulary wins.
FAMILIES: tuple[TemplateFamily, ...] = (_GEMMA, _LLAMA3, _PHI3, _CHATML, _MISTRAL)
#: What a model gets when nothing identifies its family.
DEFAULT_FAMILY = _CHATML


@dataclass(frozen=True)
class TemplateChoice:
    """The template a model is prompted with, and how sure SpecChat is of it.

    Attributes:
        source: the Jinja source (the model's own, or its family's).
        family: the recognised family, or None for an unrecognised template of the model's own.
        guessed: the model names no template: SpecChat chose one.
        note: one line for people: which template and why.
        markers: special-token texts never shown as answer text.
        end_of_turn: texts that end the answer, besides the vocabulary's end-of-generation.
    """

    source: str
    family: TemplateFamily | None
    guessed: bool
    note: str
    markers: tuple[str, ...]
    end_of_turn: tuple[str, ...]

    @property
    def label(self) -> str:
        """The template's name for people."""
        return self.family.label if self.family is not None else "the model's own"


def family_of_source(source: str) -> TemplateFamily | None:
    """The family a template's text writes (by its turn markers), if it is a known one."""
    for family in FAMILIES:
        if all(marker in source for marker in family.vocabulary):
            return family
    return None


def family_of_model(
    architecture: str, has_token: Callable[[str], bool]
) -> tuple[TemplateFamily | None, str]:
    """The family a template-less model belongs to, and what gave it away ("" if nothing)."""
    for family in FAMILIES:
        if all(has_token(text) for text in family.vocabulary):
            return family, f"its vocabulary has {' and '.join(family.vocabulary)}"
    arch = architecture.lower()
    for family in FAMILIES:
        if any(arch.startswith(prefix) for prefix in family.architectures):
            return family, f"its architecture is {architecture}"
    return None, ""


def choose_template(
    own: str | None, *, architecture: str, has_token: Callable[[str], bool]
) -> TemplateChoice:
    """The model's own template when it has one, else its family's (a guess, said so).

    Args:
        own: the file's tokenizer.chat_template, or None.
        architecture: the file's general.architecture.
        has_token: whether a text is one token of the model's vocabulary (a special token).
    """
    if own and own.strip():
        family = family_of_source(own)
        return TemplateChoice(
            own,
            family,
            guessed=False,
            note=f"Chat template: {family.label if family else 'the model’s own'} (from the file)",
            markers=family.markers if family else (),
            end_of_turn=family.end_of_turn if family else (),
        )
    family, evidence = family_of_model(architecture, has_token)
    if family is None:
        return TemplateChoice(
            DEFAULT_FAMILY.source,
            DEFAULT_FAMILY,
            guessed=True,
            note=(
                f"Chat template: {DEFAULT_FAMILY.label}, a guess. The file names no template "
                "and its family is not recognised: answers may run on or be garbled"
            ),
            markers=DEFAULT_FAMILY.markers,
            end_of_turn=DEFAULT_FAMILY.end_of_turn,
        )
    return TemplateChoice(
        family.source,
        family,
        guessed=True,
        note=f"Chat template: {family.label}, guessed (the file names none; {evidence})",
        markers=family.markers,
        end_of_turn=family.end_of_turn,
    )
