"""The bounded Jinja sandbox that renders chat templates (in the template host process)."""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError, TemplateError, TemplateSyntaxError, UndefinedError
from jinja2.ext import Extension
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedEnvironment,
    SandboxedFormatter,
    modifies_known_mutable,
)
from jinja2.utils import Namespace

from specchat.engine.templates.chat_message import ChatMessage, RawJson, as_mapping
from specchat.engine.templates.guards import (
    DIGITS,
    KINDS,
    PREFIX,
    Budget,
    ChatTemplateError,
    ChatTemplateProblem,
    GuardTransformer,
    RenderLimits,
    TemplateRaised,
    check_percent,
    current_budget,
    format_bound,
    guard_filter,
    is_forbidden,
    limit_error,
    loop_guard,
    method_bound,
    shorten,
    sized_guard,
    static_refusal,
    swap_budget,
    text_bound,
    unsafe_error,
    value_size,
)
from specchat.engine.templates.llama_compat import (
    LenientUndefined,
    StrftimeError,
    implicit_context,
    strftime,
    tool_for_template,
)
from specchat.engine.templates.llama_text import as_text, concat, printed
from specchat.engine.templates.own_lists import METHODS, OwnList, owned

#: Used when a model ships no chat template: ChatML, what most small instruct models speak.
FALLBACK_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)


class _BoundedFormatter(SandboxedFormatter):
    """str.format inside the sandbox, with field widths and precisions bounded."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        budget = current_budget()
        budget.tick()
        for digits in DIGITS.findall(format_spec):
            if len(digits) > 9:
                raise limit_error(f"asked for a formatted field {len(digits)} digits wide")
            budget.allow(int(digits), "a formatted field of")
        return super().format_field(value, format_spec)


class _GenerationTag(Extension):
    """`{% generation %}…{% endgeneration %}` of transformers' chat templates; renders its body."""

    tags = {"generation"}  # noqa: RUF012 - Jinja's Extension declares it a plain class set

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("render_block")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def render_block(self, caller: Callable[[], str]) -> str:
        return caller()


class _SizedNamespace(Namespace):
    """namespace() whose assignments are size-checked: `ns.s = ns.s ~ ns.s` doubles per step."""

    def __setitem__(self, name: str, value: Any) -> None:
        budget = current_budget()
        budget.tick()
        budget.produced(value)
        super().__setitem__(name, value)


def _raise_exception(message: object) -> None:
    raise TemplateRaised(str(message))


def _strftime_at(moment: datetime) -> Callable[[str], str]:
    """strftime_now for a template: `moment` in the format asked (a closure: a template
    reaches no attribute of it that leads elsewhere)."""

    def strftime_now(fmt: str) -> str:
        try:
            return strftime(moment, fmt)
        except StrftimeError as error:
            raise limit_error(str(error)) from None

    return strftime_now


def _strftime_now(fmt: str) -> str:
    return _strftime_at(datetime.now())(fmt)


def _as_is(value: Any) -> Any:
    return value


def _finalize(value: Any) -> Any:
    # Every {{ expression }} is written as llama.cpp's Jinja writes it (a mapping as nothing,
    # a list as its items run together); bounded before it is built as well as while.
    if not isinstance(value, str):
        budget = current_budget()
        budget.allow(text_bound(value, budget.limits.max_chars))
        return printed(value)
    return value


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # transformers' tojson: plain json.dumps, unlike Jinja's HTML-escaping built-in.
    if isinstance(value, RawJson):
        return str(value)
    if isinstance(value, Iterator):
        # map() and select() give generators, which llama.cpp's Jinja writes as lists
        # (llama-cpp-deepseek-r1 writes `tools | map(attribute='function') | tojson`)
        value = list(value)
    if (isinstance(indent, int) and indent > 16) or (isinstance(indent, str) and len(indent) > 16):
        raise limit_error("asked for a JSON indent wider than 16")
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class _ChatSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox, refusing loudly and bounded in time and size."""

    # Intercepted so `'a' * 10**10` and `10**10**10` are refused before Python builds them.
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, *, limits: RenderLimits) -> None:
        # transformers renders with trim_blocks/lstrip_blocks and loop controls; templates are
        # written against exactly that environment.
        super().__init__(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=["jinja2.ext.loopcontrols", _GenerationTag],
            autoescape=False,
            keep_trailing_newline=False,
            finalize=_finalize,
            undefined=LenientUndefined,
        )
        self.limits = limits
        self.globals.pop("lipsum", None)  # lipsum(n=10**9) would loop inside Python
        self.globals["range"] = self._range
        self.globals["namespace"] = _SizedNamespace
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = _strftime_now
        self.filters["tojson"] = _tojson
        # With autoescape off, `safe` would only make Markup, which escapes what is added
        # to it: functionary-v3.1's `"..."|safe + tool | tojson` wrote &#34; for quotes.
        # llama.cpp's Jinja, like transformers' intent, leaves the text as it is.
        self.filters["safe"] = _as_is
        # A mapping or list as llama.cpp's value_t::as_string writes it, not Python's repr.
        self.filters["string"] = as_text
        self.filters = {name: guard_filter(name, f) for name, f in self.filters.items()}
        self.filters["_specchat_loop"] = loop_guard
        self.filters["_specchat_sized"] = sized_guard
        self.filters["_specchat_concat"] = concat
        self.filters["_specchat_own"] = owned

    def _range(self, *args: int) -> range:
        values = range(*args)
        if len(values) > self.limits.max_range:
            raise limit_error(
                f"tried to loop over {len(values):,} items (the limit is {self.limits.max_range:,})"
            )
        return values

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        refusal = static_refusal(tree)
        if refusal is not None:
            raise refusal
        result = GuardTransformer(self).visit(tree)
        assert isinstance(result, nodes.Template)
        return result

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if is_forbidden(attr):
            return False
        if isinstance(obj, OwnList) and attr in METHODS:
            # The template's own list: append/pop as llama.cpp's Jinja allows (bounded in call)
            return SandboxedEnvironment.is_safe_attribute(self, obj, attr, value)
        return super().is_safe_attribute(obj, attr, value)

    def unsafe_undefined(self, obj: Any, attribute: str) -> jinja2.Undefined:
        if modifies_known_mutable(obj, attribute):
            kind = "list" if isinstance(obj, OwnList) else type(obj).__name__
            raise ChatTemplateError(
                ChatTemplateProblem.UNSAFE,
                f"{PREFIX} tried to modify a {kind} with {attribute!r}, which is "
                "not allowed; SpecChat refused to run it",
            )
        raise unsafe_error(attribute)

    def getattr(self, obj: Any, attribute: str) -> Any:
        current_budget().tick()
        if isinstance(attribute, str) and is_forbidden(attribute):
            # Refuse before Python's getattr runs: a property could act on being read.
            if isinstance(obj, Mapping) and attribute in obj:
                return obj[attribute]
            raise unsafe_error(attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        current_budget().tick()
        return super().getitem(obj, argument)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        if super().wrap_str_format(value) is None:
            return None
        subject: str = value.__self__
        formatter = _BoundedFormatter(self)
        is_map = value.__name__ == "format_map"

        def bounded_format(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                mapping: Mapping[str, Any] = args[0]
                args, kwargs = (), dict(mapping)
            budget = current_budget()
            # Bounded before it is built: '{0}{0}{0}…'.format(big) writes big once per field.
            budget.allow(format_bound(subject, [*args, *kwargs.values()], budget.limits.max_chars))
            result = type(subject)(formatter.vformat(subject, args, kwargs))
            current_budget().produced(result)
            return result

        return bounded_format

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget = current_budget()
        budget.tick()
        is_int = isinstance(left, int) and isinstance(right, int)
        if operator == "*":
            if is_int:
                budget.allow_int(abs(left).bit_length() + abs(right).bit_length())
            elif (isinstance(right, int) and value_size(left)) or (
                isinstance(left, int) and value_size(right)
            ):
                count, seq = (right, left) if isinstance(right, int) else (left, right)
                budget.allow(value_size(seq) * max(0, count), KINDS.get(type(seq), "a string of"))
        elif operator == "**" and is_int and right > 0 and abs(left) > 1:
            budget.allow_int(abs(left).bit_length() * right)
        elif operator == "+" and value_size(left) and value_size(right):
            budget.allow(value_size(left) + value_size(right), KINDS.get(type(left), "a string of"))
        elif operator == "%":
            check_percent(left, right)
        result = owned(self.binop_table[operator](left, right))
        if isinstance(result, int):
            budget.allow_int(abs(result).bit_length())
        budget.produced(result)
        return result

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        budget = current_budget()
        budget.tick()
        if not self.is_safe_callable(obj):
            raise unsafe_error(getattr(obj, "__name__", type(obj).__name__))
        subject = getattr(obj, "__self__", None)
        if isinstance(subject, (str, bytes)):
            budget.allow(method_bound(getattr(obj, "__name__", ""), subject, args, kwargs))
        elif isinstance(subject, OwnList) and getattr(obj, "__name__", "") == "append":
            # A list grows one item a call: held to the items any list may hold, and counted.
            budget.allow(len(subject) + 1, "a list of")
            budget.spend(1)
        if budget.depth >= self.limits.max_depth:
            raise limit_error(
                f"nested calls more than {self.limits.max_depth} deep (a runaway recursion?)"
            )
        budget.depth += 1
        try:
            result = context.call(obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        budget.produced(result)
        return result


def template_source(source: str | None) -> tuple[str, bool]:
    """The Jinja source to use for a model's `source`, and whether it is the fallback (the
    model had no usable template: none, or only white space)."""
    if source and source.strip():
        return str(source), False
    return FALLBACK_TEMPLATE, True


class SandboxTemplate:
    """A model's chat template, compiled once in the bounded sandbox, rendered in-process.

    `chat_template.ChatTemplate` runs this in the template host process, where a hard time
    and memory limit also stop the one long call no hook can interrupt.

    Compiling already refuses a template that spells out a forbidden attribute, so such a
    template is rejected before any of it runs; rendering enforces the rest at run time.

    Attributes:
        source: the Jinja source in use (the fallback when the model has none).
        is_fallback: whether the model had no usable template of its own.
        bos_token, eos_token: passed to the template, as transformers does.
        limits: the bounds of each rendering.
    """

    def __init__(
        self,
        source: str | None,
        *,
        bos_token: str = "",
        eos_token: str = "",
        limits: RenderLimits = RenderLimits(),
    ) -> None:
        self.source, self.is_fallback = template_source(source)
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.limits = limits
        self._environment = _ChatSandbox(limits=limits)
        outer = swap_budget(Budget(limits))  # compile-time folding runs guarded filters too
        try:
            self._template = self._environment.from_string(self.source)
        except ChatTemplateError:
            raise
        except TemplateSyntaxError as error:
            raise ChatTemplateError(
                ChatTemplateProblem.SYNTAX,
                f"{PREFIX} is not valid Jinja (line {error.lineno}: {shorten(str(error))})",
            ) from None
        except RecursionError:
            raise limit_error("is nested too deeply to compile") from None
        except TemplateError as error:
            raise ChatTemplateError(
                ChatTemplateProblem.SYNTAX,
                f"{PREFIX} could not be compiled: {shorten(str(error))}",
            ) from None
        finally:
            swap_budget(outer)

    def render(
        self,
        messages: Iterable[ChatMessage | Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
        now: datetime | None = None,
    ) -> str:
        """The prompt text for `messages`; raises ChatTemplateError with a readable message.

        `extra`: the request's own template variables (chat_template_kwargs, enable_thinking);
        `now`: the moment the template's dates read (the local time when not given)."""
        context = implicit_context(now or datetime.now(), strftime_now=_strftime_at)
        context.update(extra or {})
        context.update(
            messages=[as_mapping(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )
        if tools is not None:
            context["tools"] = [tool_for_template(t) for t in tools]
        budget = Budget(self.limits)
        outer = swap_budget(budget)
        chunks: list[str] = []
        length = 0
        stream = self._template.generate(context)
        assert isinstance(stream, Generator)
        try:
            # Streamed so the output limit is checked per chunk, not after a huge join.
            for chunk in stream:
                length += len(chunk)
                if length > self.limits.max_chars:
                    raise limit_error(
                        f"produced more than {self.limits.max_chars:,} characters of prompt"
                    )
                budget.tick()
                chunks.append(chunk)
        except ChatTemplateError:
            raise
        except SecurityError as error:
            raise ChatTemplateError(
                ChatTemplateProblem.UNSAFE,
                f"{PREFIX} did something the sandbox forbids ({shorten(str(error))}); "
                "SpecChat refused to run it",
            ) from None
        except TemplateRaised as error:
            raise ChatTemplateError(
                ChatTemplateProblem.RAISED,
                f"{PREFIX} rejected this conversation: {shorten(str(error))}",
            ) from None
        except UndefinedError as error:
            raise ChatTemplateError(
                ChatTemplateProblem.FAILED, f"{PREFIX} failed: {shorten(str(error))}"
            ) from None
        except RecursionError:
            raise limit_error("recursed too deeply") from None
        except MemoryError:
            raise limit_error("ran out of memory") from None
        except Exception as error:
            raise ChatTemplateError(
                ChatTemplateProblem.FAILED,
                f"{PREFIX} failed: {type(error).__name__}: {shorten(str(error))}",
            ) from None
        finally:
            stream.close()
            swap_budget(outer)
        return "".join(chunks)
