"""A real model's tokenizer read from a vocabulary-only GGUF, for tiny models that tokenize
and mark their turns, thinking and tool calls as the released files do."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specchat.models.gguf_reader import read_metadata

if TYPE_CHECKING:
    import gguf

#: Keys of the vocabulary file that are not the tokenizer's: the tiny model writes its own
#: template (the publisher's, or none) and its own end of turn.
_LEFT_OUT = ("tokenizer.chat_template", "tokenizer.ggml.eos_token_id")


@dataclass(frozen=True)
class RealTokenizer:
    """Every `tokenizer.*` key of a vocabulary file, with its GGUF types.

    Attributes:
        source: the vocabulary file it was read from.
        tokens: the vocabulary, by id.
        values: key → (value, GGUF type, element type for arrays or None) for every
            tokenizer key but the chat template and the end-of-sequence id.
    """

    source: Path
    tokens: tuple[str, ...]
    values: dict[str, tuple[Any, int, int | None]] = field(repr=False)

    @classmethod
    def read(cls, path: Path) -> RealTokenizer:
        """The tokenizer in `path`; GGUFError for a malformed file, ValueError for a file
        with no tokenizer."""
        meta = read_metadata(path)
        values: dict[str, tuple[Any, int, int | None]] = {}
        for key, value in meta.values.items():
            if key.startswith("tokenizer.") and key not in _LEFT_OUT:
                element = meta.array_types.get(key)
                values[key] = (list(value) if element else value, meta.types[key], element)
        if "tokenizer.ggml.tokens" not in values:
            raise ValueError(f"{path} holds no tokenizer")
        return cls(path, tuple(values["tokenizer.ggml.tokens"][0]), values)

    @property
    def n_vocab(self) -> int:
        return len(self.tokens)

    def id_of(self, text: str) -> int:
        """The id of the token spelled `text`; KeyError names it when there is none."""
        try:
            return self.tokens.index(text)
        except ValueError:
            raise KeyError(f"{self.source.name} has no token {text!r}") from None

    def with_tokens(self, added: tuple[tuple[int, str, int], ...]) -> RealTokenizer:
        """This tokenizer with `added` (id, text, token type) written over those ids."""
        tokens = list(self.tokens)
        types = list(self.values["tokenizer.ggml.token_type"][0])
        for token_id, text, kind in added:
            tokens[token_id], types[token_id] = text, kind
        values = dict(self.values)
        values["tokenizer.ggml.tokens"] = (tokens, *values["tokenizer.ggml.tokens"][1:])
        values["tokenizer.ggml.token_type"] = (types, *values["tokenizer.ggml.token_type"][1:])
        return RealTokenizer(self.source, tuple(tokens), values)

    def write(self, writer: gguf.GGUFWriter, *, eos_id: int) -> None:
        """Write this tokenizer into `writer`, ending sequences at `eos_id`."""
        import gguf  # imported here: only tests and the tools write tiny models

        for key, (value, main, element) in self.values.items():
            sub = None if element is None else gguf.GGUFValueType(element)
            writer.add_key_value(key, value, gguf.GGUFValueType(main), sub)
        writer.add_key_value("tokenizer.ggml.eos_token_id", eos_id, gguf.GGUFValueType.UINT32)


@dataclass(frozen=True)
class RealChatFiles:
    """Where a family's real tokenizer and chat template lie in llama.cpp's source tree.

    Attributes:
        vocab: the vocabulary-only GGUF under `models/`.
        template: the publisher's template under `models/templates/`.
        end_of_turn: the token an answer ends with.
        added: (id, text, token type) of tokens the released files hold where the
            vocabulary-only file has padding.
    """

    vocab: str
    template: str
    end_of_turn: str
    added: tuple[tuple[int, str, int], ...] = ()


#: GGUF token types (llama.cpp's llama_token_type): control tokens never show as text;
#: user-defined ones are matched whole in any text and show as written.
CONTROL, USER_DEFINED = 3, 4

#: The Qwen family's added tokens past <|im_end|> (Qwen3's tokenizer_config.json
#: added_tokens_decoder, kept by Qwen3.5): llama.cpp's Qwen3.5 vocabulary file pads these
#: ids, where the released models mark tool calls and thinking.
_QWEN_ADDED = (
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)
QWEN35_CHAT = RealChatFiles(
    "ggml-vocab-qwen35.gguf",
    "Qwen3.5-4B.jinja",
    "<|im_end|>",
    added=tuple(
        (151646 + offset, text, CONTROL if text.startswith("<|") else USER_DEFINED)
        for offset, text in enumerate(_QWEN_ADDED)
    ),
)
GEMMA4_CHAT = RealChatFiles("ggml-vocab-gemma-4.gguf", "google-gemma-4-31B-it.jinja", "<turn|>")


@dataclass(frozen=True)
class RealChat:
    """A family's tokenizer, chat template and end of turn, as a tiny model carries them.

    Attributes:
        tokenizer: the real tokenizer.
        template: the publisher's chat template.
        eos_id: the id of the token that ends an answer.
    """

    tokenizer: RealTokenizer
    template: str
    eos_id: int

    @classmethod
    def load(cls, llama_source: Path, files: RealChatFiles) -> RealChat:
        """The family `files` names, from a llama.cpp source tree."""
        models = llama_source / "models"
        tokenizer = RealTokenizer.read(models / files.vocab).with_tokens(files.added)
        template = (models / "templates" / files.template).read_text(encoding="utf-8")
        return cls(tokenizer, template, tokenizer.id_of(files.end_of_turn))
