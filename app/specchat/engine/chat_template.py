"""Chat-template rendering in a bounded Jinja sandbox, prefix reuse and context-overflow policy."""

from __future__ import annotations

import enum
import functools
import json
import re
import string
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError, TemplateError, TemplateSyntaxError, UndefinedError
from jinja2.ext import Extension
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedFormatter,
    modifies_known_mutable,
)
from jinja2.utils import Namespace, _PassArg
from jinja2.visitor import NodeTransformer

#: Used when a model ships no chat template: ChatML, what most small instruct models speak.
FALLBACK_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)

# Attribute names that lead from an ordinary object to interpreter internals (frames, code,
# globals). Names starting with "_" are refused as well.
_INTERNAL_NAMES = frozenset(
    {
        "mro", "func_globals", "func_code", "func_closure", "func_defaults",
        "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await",
        "ag_frame", "ag_code", "ag_await", "f_globals", "f_locals", "f_builtins",
        "f_code", "f_back", "tb_frame", "tb_next", "im_class", "im_func", "im_self",
    }
)  # fmt: skip

_PREFIX = "the model's chat template"
_MESSAGE_LIMIT = 300  # characters of a template-supplied text quoted in an error


def _forbidden(name: str) -> bool:
    return name.startswith("_") or name in _INTERNAL_NAMES


def _shorten(text: str) -> str:
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "…"


class ChatTemplateProblem(enum.Enum):
    """Why a chat template could not be rendered."""

    #: The template reached for Python internals; nothing was run.
    UNSAFE = enum.auto()
    #: The template exceeded the time, size, loop or nesting limits and was stopped.
    LIMIT = enum.auto()
    #: The template is not valid Jinja.
    SYNTAX = enum.auto()
    #: The template itself raised an error (raise_exception), usually about message order.
    RAISED = enum.auto()
    #: Any other failure while rendering (undefined names, type errors).
    FAILED = enum.auto()


class ChatTemplateError(Exception):
    """A chat template was refused or failed; the message is meant for the user.

    Attributes:
        problem: what kind of failure it was.
        message: the human-readable explanation.
    """

    def __init__(self, problem: ChatTemplateProblem, message: str) -> None:
        super().__init__(message)
        self.problem = problem
        self.message = message


def _unsafe_error(name: str) -> ChatTemplateError:
    return ChatTemplateError(
        ChatTemplateProblem.UNSAFE,
        f"{_PREFIX} tried to access {_shorten(name)!r}, which is not allowed; "
        "SpecChat refused to run it",
    )


def _limit_error(what: str) -> ChatTemplateError:
    return ChatTemplateError(ChatTemplateProblem.LIMIT, f"{_PREFIX} {what}; SpecChat stopped it")


class _TemplateRaised(TemplateError):
    """Raised by the template's own raise_exception()."""


@dataclass(frozen=True)
class ChatMessage:
    """One message of a conversation as the template sees it.

    Attributes:
        role: "system", "user", "assistant" or "tool".
        content: the text.
    """

    role: str
    content: str


@dataclass(frozen=True)
class RenderLimits:
    """Bounds on one rendering; real chat templates stay orders of magnitude below them.

    Attributes:
        time_s: wall-clock budget of one rendering.
        max_chars: longest output, and longest single string or list built on the way.
        max_work: total characters/items all checked operations may produce together, so a
            template cannot hoard many values each under `max_chars`.
        max_range: longest range() and longest slice/batch count.
        max_depth: deepest nesting of calls (macros calling macros).
        max_int_bits: largest integer arithmetic may produce.
    """

    time_s: float = 1.0
    max_chars: int = 4_000_000
    max_work: int = 64_000_000
    max_range: int = 100_000
    max_depth: int = 64
    max_int_bits: int = 10_000


class _Budget:
    """What one rendering may still spend; checked from inside the sandbox's hooks."""

    __slots__ = ("deadline", "depth", "limits", "work")

    def __init__(self, limits: RenderLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.time_s
        self.work = 0
        self.depth = 0

    def tick(self) -> None:
        # A Python thread cannot be killed, so every hook polls the deadline itself.
        if time.monotonic() > self.deadline:
            raise _limit_error(f"ran longer than {self.limits.time_s:g} s")

    def allow(self, size: int, what: str = "a string of") -> None:
        """Refuse, before it is built, a value of `size` characters or items."""
        if size > self.limits.max_chars:
            unit = "characters" if "string" in what or "field" in what else "items"
            raise _limit_error(
                f"tried to build {what} {size:,} {unit} (the limit is {self.limits.max_chars:,})"
            )

    def produced(self, value: object) -> None:
        size = _size(value)
        if not size:
            return
        self.allow(size, _KINDS.get(type(value), "a string of"))
        self.work += size
        if self.work > self.limits.max_work:
            raise _limit_error(f"built more than {self.limits.max_work:,} characters in total")

    def allow_int(self, bits: int) -> None:
        if bits > self.limits.max_int_bits:
            raise _limit_error(f"tried to compute a number of about {bits:,} bits")


_KINDS: dict[type, str] = {
    list: "a list of",
    tuple: "a list of",
    dict: "a mapping of",
    set: "a set of",
    frozenset: "a set of",
    bytes: "a byte string of",
}


def _size(value: object) -> int:
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return len(value)
    return 0


_local = threading.local()


def _budget() -> _Budget:
    budget: _Budget | None = getattr(_local, "budget", None)
    if budget is None:
        # Outside render() (jinja's compile-time constant folding): a fresh default budget.
        return _Budget(RenderLimits())
    return budget


# --- bounds of operations that can multiply their input --------------------------------------

_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")


def _check_percent(fmt: object, args: object) -> None:
    if not isinstance(fmt, str):
        return
    budget = _budget()
    star = False
    for match in _PERCENT_SPEC.finditer(fmt):
        for group in match.groups():
            if group == "*":
                star = True
            elif group:
                budget.allow(int(group), "a formatted field of")
    if star:
        values = args if isinstance(args, tuple) else (args,)
        for value in values:
            if isinstance(value, int):
                budget.allow(abs(value), "a formatted field of")


def _check_int_arg(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _arg(args: Sequence[Any], kwargs: Mapping[str, Any], index: int, name: str) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name)


def _replace_bound(subject: str | bytes, old: Any, new: Any, count: Any) -> int:
    if not isinstance(old, (str, bytes)) or not isinstance(new, (str, bytes)):
        return len(subject)
    hits = len(subject) + 1 if not old else len(subject) // len(old)
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(subject) + hits * len(new)


def _method_bound(
    name: str, subject: str | bytes, args: Sequence[Any], kw: Mapping[str, Any]
) -> int:
    """Upper bound of the size of str/bytes method `name`'s result, for the expanding ones."""
    if name in ("center", "ljust", "rjust", "zfill"):
        return max(len(subject), _check_int_arg(_arg(args, kw, 0, "width")))
    if name == "expandtabs":
        tab = _arg(args, kw, 0, "tabsize")
        tab = 8 if tab is None else _check_int_arg(tab)
        tabs = subject.count("\t") if isinstance(subject, str) else subject.count(b"\t")
        return len(subject) + tabs * tab
    if name == "replace":
        return _replace_bound(subject, _arg(args, kw, 0, "old"), _arg(args, kw, 1, "new"),
                              _arg(args, kw, 2, "count"))  # fmt: skip
    if name == "join":
        items = _arg(args, kw, 0, "iterable")
        if isinstance(items, (list, tuple, str, dict)):
            return len(subject) * max(0, len(items) - 1)
    return 0


def _filter_bound(name: str, subject: Any, args: Sequence[Any], kw: Mapping[str, Any]) -> int:
    """Upper bound of the size of filter `name`'s result, for the expanding ones."""
    text = subject if isinstance(subject, str) else ""
    if name == "center":
        width = _arg(args, kw, 0, "width")
        return max(len(text), 80 if width is None else _check_int_arg(width))
    if name == "indent":
        width = _arg(args, kw, 0, "width")
        pad = (
            len(width) if isinstance(width, str) else _check_int_arg(4 if width is None else width)
        )
        return len(text) + pad * (text.count("\n") + 1)
    if name == "replace":
        return _replace_bound(text, _arg(args, kw, 0, "old"), _arg(args, kw, 1, "new"),
                              _arg(args, kw, 2, "count"))  # fmt: skip
    if name == "wordwrap":
        wrap = _arg(args, kw, 2, "wrapstring")
        return len(text) + (len(text) + 1) * (len(wrap) if isinstance(wrap, str) else 1)
    if name == "join":
        sep = _arg(args, kw, 0, "d")
        if isinstance(sep, str) and isinstance(subject, (list, tuple, str, dict)):
            return len(sep) * max(0, len(subject) - 1)
    if name == "format":
        _check_percent(subject, tuple(args) or dict(kw))
    if name in ("batch", "slice"):
        count = _check_int_arg(_arg(args, kw, 0, "linecount" if name == "batch" else "slices"))
        if count > _budget().limits.max_range:
            raise _limit_error(f"asked for {count:,} groups (the limit is "
                               f"{_budget().limits.max_range:,})")  # fmt: skip
    return 0


def _guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    # Filters are called directly by the compiled template, not through Environment.call, so
    # each one is wrapped to poll the deadline and bound what it builds.
    skip = 1 if _PassArg.from_obj(func) is not None else 0

    @functools.wraps(func)  # keeps jinja_pass_arg, so Jinja still passes the context
    def guarded(*args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        budget.tick()
        if len(args) > skip:
            budget.allow(_filter_bound(name, args[skip], args[skip + 1 :], kwargs))
        result = func(*args, **kwargs)
        budget.produced(result)
        return result

    return guarded


class _GuardedIterable:
    """A for-loop's iterable that polls the deadline on every item."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __len__(self) -> int:
        return len(self._inner)

    def __iter__(self) -> Iterator[Any]:
        budget = _budget()
        for item in self._inner:
            budget.tick()
            yield item


def _loop_guard(value: Any) -> Any:
    return _GuardedIterable(value)


def _sized_guard(value: Any) -> Any:
    _budget().produced(value)
    return value


class _GuardTransformer(NodeTransformer):
    """Rewrites the parsed template so loops and `~` concatenations go through the guards.

    An empty loop body makes no call, so without this a nested loop over two 100 000-item
    ranges would spin for minutes without touching any sandbox hook.
    """

    def __init__(self, environment: jinja2.Environment) -> None:
        self.environment = environment

    def _wrap(self, node: nodes.Node, name: str) -> nodes.Filter:
        wrapped = nodes.Filter(node, name, [], [], None, None, lineno=node.lineno)
        wrapped.set_environment(self.environment)
        return wrapped

    def visit_For(self, node: nodes.For) -> nodes.For:
        self.generic_visit(node)
        node.iter = self._wrap(node.iter, "_specchat_loop")
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Filter:
        self.generic_visit(node)
        return self._wrap(node, "_specchat_sized")


def _format_field_refusal(text: str) -> str | None:
    """The forbidden attribute a format string like '{0.__class__}' would walk to, if any."""
    if "{" not in text:
        return None
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return None
    for _literal, field, spec, _conversion in parsed:
        for part in re.split(r"[.\[\]]", field or ""):
            if part and _forbidden(part):
                return part
        if spec:
            inner = _format_field_refusal(spec)
            if inner:
                return inner
    return None


def _static_refusal(tree: nodes.Template) -> ChatTemplateError | None:
    """Why the template must not run, if it spells out something forbidden; found before
    anything of it runs."""
    loads = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)
    for load in tree.find_all(loads):
        template = getattr(load, "template", None)
        target = template.value if isinstance(template, nodes.Const) else "…"
        return ChatTemplateError(
            ChatTemplateProblem.UNSAFE,
            f"{_PREFIX} tried to load another template ({_shorten(str(target))!r}), which is "
            "not allowed; SpecChat refused to run it",
        )
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter, nodes.Const)):
        if isinstance(node, nodes.Getattr) and _forbidden(node.attr):
            return _unsafe_error(node.attr)
        if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
            key = node.arg.value
            if isinstance(key, str) and key.startswith("__"):
                return _unsafe_error(key)
        if isinstance(node, nodes.Filter):
            consts = [a for a in node.args if isinstance(a, nodes.Const)]
            consts += [k.value for k in node.kwargs if isinstance(k.value, nodes.Const)]
            for const in consts:
                if not isinstance(const.value, str):
                    continue
                if node.name == "attr" and _forbidden(const.value):
                    return _unsafe_error(const.value)
                # map(attribute='a.__class__') and friends walk dotted paths.
                if any(part.startswith("__") for part in const.value.split(".")):
                    return _unsafe_error(const.value)
        if isinstance(node, nodes.Const) and isinstance(node.value, str):
            refused = _format_field_refusal(node.value)
            if refused:
                return _unsafe_error(refused)
    return None


class _BoundedFormatter(SandboxedFormatter):
    """str.format inside the sandbox, with field widths and precisions bounded."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        budget = _budget()
        budget.tick()
        for digits in _DIGITS.findall(format_spec):
            if len(digits) > 9:
                raise _limit_error(f"asked for a formatted field {len(digits)} digits wide")
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
        budget = _budget()
        budget.tick()
        budget.produced(value)
        super().__setitem__(name, value)


def _raise_exception(message: object) -> None:
    raise _TemplateRaised(str(message))


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # transformers' tojson: plain json.dumps, unlike Jinja's HTML-escaping built-in.
    if (isinstance(indent, int) and indent > 16) or (isinstance(indent, str) and len(indent) > 16):
        raise _limit_error("asked for a JSON indent wider than 16")
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
        )
        self.limits = limits
        self.globals.pop("lipsum", None)  # lipsum(n=10**9) would loop inside Python
        self.globals["range"] = self._range
        self.globals["namespace"] = _SizedNamespace
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = _strftime_now
        self.filters["tojson"] = _tojson
        self.filters = {name: _guard_filter(name, f) for name, f in self.filters.items()}
        self.filters["_specchat_loop"] = _loop_guard
        self.filters["_specchat_sized"] = _sized_guard

    def _range(self, *args: int) -> range:
        values = range(*args)
        if len(values) > self.limits.max_range:
            raise _limit_error(
                f"tried to loop over {len(values):,} items (the limit is {self.limits.max_range:,})"
            )
        return values

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        refusal = _static_refusal(tree)
        if refusal is not None:
            raise refusal
        result = _GuardTransformer(self).visit(tree)
        assert isinstance(result, nodes.Template)
        return result

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return not _forbidden(attr) and super().is_safe_attribute(obj, attr, value)

    def unsafe_undefined(self, obj: Any, attribute: str) -> jinja2.Undefined:
        if modifies_known_mutable(obj, attribute):
            raise ChatTemplateError(
                ChatTemplateProblem.UNSAFE,
                f"{_PREFIX} tried to modify a {type(obj).__name__} with {attribute!r}, which is "
                "not allowed; SpecChat refused to run it",
            )
        raise _unsafe_error(attribute)

    def getattr(self, obj: Any, attribute: str) -> Any:
        _budget().tick()
        if isinstance(attribute, str) and _forbidden(attribute):
            # Refuse before Python's getattr runs: a property could act on being read.
            if isinstance(obj, Mapping) and attribute in obj:
                return obj[attribute]
            raise _unsafe_error(attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _budget().tick()
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
            result = type(subject)(formatter.vformat(subject, args, kwargs))
            _budget().produced(result)
            return result

        return bounded_format

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget = _budget()
        budget.tick()
        is_int = isinstance(left, int) and isinstance(right, int)
        if operator == "*":
            if is_int:
                budget.allow_int(abs(left).bit_length() + abs(right).bit_length())
            elif (isinstance(right, int) and _size(left)) or (
                isinstance(left, int) and _size(right)
            ):
                count, seq = (right, left) if isinstance(right, int) else (left, right)
                budget.allow(_size(seq) * max(0, count), _KINDS.get(type(seq), "a string of"))
        elif operator == "**" and is_int and right > 0 and abs(left) > 1:
            budget.allow_int(abs(left).bit_length() * right)
        elif operator == "+" and _size(left) and _size(right):
            budget.allow(_size(left) + _size(right), _KINDS.get(type(left), "a string of"))
        elif operator == "%":
            _check_percent(left, right)
        result = self.binop_table[operator](left, right)
        if isinstance(result, int):
            budget.allow_int(abs(result).bit_length())
        budget.produced(result)
        return result

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        budget.tick()
        if not self.is_safe_callable(obj):
            raise _unsafe_error(getattr(obj, "__name__", type(obj).__name__))
        subject = getattr(obj, "__self__", None)
        if isinstance(subject, (str, bytes)):
            budget.allow(_method_bound(getattr(obj, "__name__", ""), subject, args, kwargs))
        if budget.depth >= self.limits.max_depth:
            raise _limit_error(
                f"nested calls more than {self.limits.max_depth} deep (a runaway recursion?)"
            )
        budget.depth += 1
        try:
            result = context.call(obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        budget.produced(result)
        return result


def _as_mapping(message: ChatMessage | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(message, ChatMessage):
        return {"role": message.role, "content": message.content}
    return dict(message)


class ChatTemplate:
    """A model's chat template, compiled once in the bounded sandbox.

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
        self.is_fallback = not (source and source.strip())
        self.source = FALLBACK_TEMPLATE if self.is_fallback else str(source)
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.limits = limits
        self._environment = _ChatSandbox(limits=limits)
        outer = getattr(_local, "budget", None)
        _local.budget = _Budget(limits)  # compile-time folding runs guarded filters too
        try:
            self._template = self._environment.from_string(self.source)
        except ChatTemplateError:
            raise
        except TemplateSyntaxError as error:
            raise ChatTemplateError(
                ChatTemplateProblem.SYNTAX,
                f"{_PREFIX} is not valid Jinja (line {error.lineno}: {_shorten(str(error))})",
            ) from None
        except RecursionError:
            raise _limit_error("is nested too deeply to compile") from None
        except TemplateError as error:
            raise ChatTemplateError(
                ChatTemplateProblem.SYNTAX,
                f"{_PREFIX} could not be compiled: {_shorten(str(error))}",
            ) from None
        finally:
            _local.budget = outer

    def render(
        self,
        messages: Iterable[ChatMessage | Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """The prompt text for `messages`; raises ChatTemplateError with a readable message."""
        context: dict[str, Any] = dict(extra or {})
        context.update(
            messages=[_as_mapping(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )
        if tools is not None:
            context["tools"] = [dict(t) for t in tools]
        budget = _Budget(self.limits)
        outer = getattr(_local, "budget", None)
        _local.budget = budget
        chunks: list[str] = []
        length = 0
        stream = self._template.generate(context)
        assert isinstance(stream, Generator)
        try:
            # Streamed so the output limit is checked per chunk, not after a huge join.
            for chunk in stream:
                length += len(chunk)
                if length > self.limits.max_chars:
                    raise _limit_error(
                        f"produced more than {self.limits.max_chars:,} characters of prompt"
                    )
                budget.tick()
                chunks.append(chunk)
        except ChatTemplateError:
            raise
        except SecurityError as error:
            raise ChatTemplateError(
                ChatTemplateProblem.UNSAFE,
                f"{_PREFIX} did something the sandbox forbids ({_shorten(str(error))}); "
                "SpecChat refused to run it",
            ) from None
        except _TemplateRaised as error:
            raise ChatTemplateError(
                ChatTemplateProblem.RAISED,
                f"{_PREFIX} rejected this conversation: {_shorten(str(error))}",
            ) from None
        except UndefinedError as error:
            raise ChatTemplateError(
                ChatTemplateProblem.FAILED, f"{_PREFIX} failed: {_shorten(str(error))}"
            ) from None
        except RecursionError:
            raise _limit_error("recursed too deeply") from None
        except MemoryError:
            raise _limit_error("ran out of memory") from None
        except Exception as error:
            raise ChatTemplateError(
                ChatTemplateProblem.FAILED,
                f"{_PREFIX} failed: {type(error).__name__}: {_shorten(str(error))}",
            ) from None
        finally:
            stream.close()
            _local.budget = outer
        return "".join(chunks)


def render_chat(
    template: str | None,
    messages: Iterable[ChatMessage | Mapping[str, Any]],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
    tools: Sequence[Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
    limits: RenderLimits = RenderLimits(),
) -> str:
    """Compile `template` (None: the fallback) and render `messages` with it, in one call."""
    compiled = ChatTemplate(template, bos_token=bos_token, eos_token=eos_token, limits=limits)
    return compiled.render(
        messages, add_generation_prompt=add_generation_prompt, tools=tools, extra=extra
    )


# --- prefix reuse across turns -----------------------------------------------------------------


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass(frozen=True)
class PrefixReuse:
    """How much of a cached prompt the next prompt can keep.

    Attributes:
        keep: cached tokens whose KV entries stay; the cache is cut back to this length.
        evaluate: the tokens that still have to be decoded.
    """

    keep: int
    evaluate: tuple[int, ...]


def plan_prefix_reuse(cached: Sequence[int], prompt: Sequence[int]) -> PrefixReuse:
    """Keep the common prefix, but always re-evaluate at least the prompt's last token.

    The next token's logits come from decoding the last prompt token, so a prompt that is
    entirely cached still needs that one token decoded again.
    """
    keep = common_prefix_len(cached, prompt)
    if prompt and keep >= len(prompt):
        keep = len(prompt) - 1
    return PrefixReuse(keep=keep, evaluate=tuple(prompt[keep:]))


# --- context overflow ------------------------------------------------------------------------


class OverflowPolicy(enum.Enum):
    """What to do when a conversation no longer fits the context (setting chat.context_overflow)."""

    #: Drop whole oldest turns, keeping the system prompt and the latest user turn.
    DROP_OLDEST = enum.auto()
    #: Do not generate; tell the user the conversation is too long.
    REFUSE = enum.auto()

    @classmethod
    def from_setting(cls, value: str) -> OverflowPolicy:
        try:
            return cls[value.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown context overflow policy {value!r} (use drop_oldest or refuse)"
            ) from None


class ContextOverflowError(Exception):
    """The conversation does not fit the context window; the message is meant for the user.

    Attributes:
        needed: tokens the kept messages need.
        budget: tokens available.
    """

    def __init__(self, message: str, *, needed: int, budget: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.budget = budget


@dataclass(frozen=True)
class ContextPlan:
    """Which messages go into the prompt.

    Attributes:
        kept: indices of the messages to render, in order.
        dropped: indices of the messages left out, oldest first (to tell the user).
        tokens: tokens the kept messages need, as counted.
    """

    kept: tuple[int, ...]
    dropped: tuple[int, ...]
    tokens: int

    @property
    def truncated(self) -> bool:
        return bool(self.dropped)


def _turns(roles: Sequence[str]) -> tuple[range, list[range], range]:
    """Split message indices into pinned head (leading system), droppable turns, pinned tail."""
    n = len(roles)
    head = 0
    while head < n and roles[head] == "system":
        head += 1
    users = [i for i in range(head, n) if roles[i] == "user"]
    tail_start = users[-1] if users else max(head, n - 1)
    # A turn runs from one user message to the next, so assistant and tool replies leave
    # together with the question they answer and roles keep alternating for the template.
    starts = [head, *[u for u in users if head < u < tail_start]]
    turns = [range(a, b) for a, b in zip(starts, [*starts[1:], tail_start], strict=True) if a < b]
    return range(head), turns, range(tail_start, n)


def plan_context(
    token_counts: Sequence[int],
    roles: Sequence[str],
    *,
    budget: int,
    policy: OverflowPolicy = OverflowPolicy.DROP_OLDEST,
) -> ContextPlan:
    """Choose the messages that fit `budget` tokens, given each message's rendered token count.

    Raises ContextOverflowError under REFUSE when they do not all fit, and under either policy
    when even the system prompt and the latest user turn alone do not fit.
    """
    if len(token_counts) != len(roles):
        raise ValueError("token_counts and roles differ in length")
    total = sum(token_counts)
    everything = tuple(range(len(roles)))
    if total <= budget:
        return ContextPlan(kept=everything, dropped=(), tokens=total)
    if policy is OverflowPolicy.REFUSE:
        raise ContextOverflowError(
            f"this conversation needs {total:,} tokens but the context holds {budget:,}; "
            "start a new conversation or allow dropping old turns",
            needed=total,
            budget=budget,
        )
    _head, turns, _tail = _turns(roles)
    dropped: list[int] = []
    for turn in turns:
        if total <= budget:
            break
        dropped.extend(turn)
        total -= sum(token_counts[i] for i in turn)
    if total > budget:
        raise ContextOverflowError(
            f"the system prompt and the latest message alone need {total:,} tokens but the "
            f"context holds {budget:,}; shorten the message",
            needed=total,
            budget=budget,
        )
    gone = set(dropped)
    kept = tuple(i for i in everything if i not in gone)
    return ContextPlan(kept=kept, dropped=tuple(dropped), tokens=total)


def fit_messages(
    messages: Sequence[ChatMessage],
    *,
    budget: int,
    count_tokens: Callable[[Sequence[ChatMessage]], int],
    policy: OverflowPolicy = OverflowPolicy.DROP_OLDEST,
) -> tuple[list[ChatMessage], ContextPlan]:
    """Like plan_context, but measuring whole rendered prompts with `count_tokens`.

    A template adds its own tokens around each message, so per-message counts are only an
    estimate; this drops the fewest oldest turns (found by bisection) whose rendered prompt
    really fits.
    """
    _head, turns, _tail = _turns([m.role for m in messages])

    def keep_after(dropped_turns: int) -> list[int]:
        gone = {i for turn in turns[:dropped_turns] for i in turn}
        return [i for i in range(len(messages)) if i not in gone]

    def cost(indices: list[int]) -> int:
        return count_tokens([messages[i] for i in indices])

    total = cost(keep_after(0))
    if total <= budget:
        return list(messages), ContextPlan(tuple(range(len(messages))), (), total)
    if policy is OverflowPolicy.REFUSE:
        raise ContextOverflowError(
            f"this conversation needs {total:,} tokens but the context holds {budget:,}; "
            "start a new conversation or allow dropping old turns",
            needed=total,
            budget=budget,
        )
    minimal = cost(keep_after(len(turns)))
    if minimal > budget:
        raise ContextOverflowError(
            f"the system prompt and the latest message alone need {minimal:,} tokens but the "
            f"context holds {budget:,}; shorten the message",
            needed=minimal,
            budget=budget,
        )
    low, high = 1, len(turns)  # invariant: dropping `high` turns fits, dropping low-1 does not
    while low < high:
        middle = (low + high) // 2
        if cost(keep_after(middle)) <= budget:
            high = middle
        else:
            low = middle + 1
    kept = keep_after(high)
    gone = tuple(i for turn in turns[:high] for i in turn)
    plan = ContextPlan(kept=tuple(kept), dropped=gone, tokens=cost(kept))
    return [messages[i] for i in kept], plan
