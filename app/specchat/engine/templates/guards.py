"""Guards of the chat-template sandbox: its errors, resource limits and hostile-input checks."""

from __future__ import annotations

import enum
import functools
import re
import string
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.utils import _PassArg
from jinja2.visitor import NodeTransformer

from specchat.engine.templates.own_lists import OwnList, owned

# Attribute names that lead from an ordinary object to interpreter internals (frames, code,
# globals). Names starting with "_" are refused as well.
_INTERNAL_NAMES = frozenset(
    {
        "mro",
        "func_globals",
        "func_code",
        "func_closure",
        "func_defaults",
        "gi_frame",
        "gi_code",
        "gi_yieldfrom",
        "cr_frame",
        "cr_code",
        "cr_await",
        "ag_frame",
        "ag_code",
        "ag_await",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_code",
        "f_back",
        "tb_frame",
        "tb_next",
        "im_class",
        "im_func",
        "im_self",
    }
)

PREFIX = "the model's chat template"
_MESSAGE_LIMIT = 300  # characters of a template-supplied text quoted in an error


def is_forbidden(name: str) -> bool:
    return name.startswith("_") or name in _INTERNAL_NAMES


def shorten(text: str) -> str:
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


def unsafe_error(name: str) -> ChatTemplateError:
    return ChatTemplateError(
        ChatTemplateProblem.UNSAFE,
        f"{PREFIX} tried to access {shorten(name)!r}, which is not allowed; "
        "SpecChat refused to run it",
    )


def limit_error(what: str) -> ChatTemplateError:
    return ChatTemplateError(ChatTemplateProblem.LIMIT, f"{PREFIX} {what}; SpecChat stopped it")


class TemplateRaised(TemplateError):
    """Raised by the template's own raise_exception()."""


@dataclass(frozen=True)
class RenderLimits:
    """Bounds on one rendering; real chat templates stay orders of magnitude below them.

    Attributes:
        time_s: wall-clock budget of one rendering.
        max_chars: longest output, and longest single string or list built on the way.
        max_work: total characters/items all checked operations may produce together, so a
            template cannot hoard many values each under `max_chars`.
        max_range: longest range() and longest slice/batch count.
        max_items: most items a list, mapping or set may hold, checked before a filter
            builds one from a sized input and while it draws from an unsized one (an item
            costs tens of bytes where a character of a string costs one).
        max_depth: deepest nesting of calls (macros calling macros).
        max_int_bits: largest integer arithmetic may produce.
    """

    time_s: float = 1.0
    max_chars: int = 4_000_000
    max_work: int = 64_000_000
    max_range: int = 100_000
    max_items: int = 100_000
    max_depth: int = 64
    max_int_bits: int = 10_000


class Budget:
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
            raise limit_error(f"ran longer than {self.limits.time_s:g} s")

    def allow(self, size: int, what: str = "a string of") -> None:
        """Refuse, before it is built, a value of `size` characters or items."""
        text = "string" in what or "field" in what
        limit = self.limits.max_chars if text else self.limits.max_items
        if size > limit:
            unit = "characters" if text else "items"
            raise limit_error(f"tried to build {what} {size:,} {unit} (the limit is {limit:,})")

    def produced(self, value: object) -> None:
        size = value_size(value)
        if not size:
            return
        self.allow(size, KINDS.get(type(value), "a string of"))
        self.spend(size)

    def spend(self, size: int) -> None:
        """Count `size` characters or items built towards the rendering's total."""
        self.work += size
        if self.work > self.limits.max_work:
            raise limit_error(f"built more than {self.limits.max_work:,} characters in total")

    def allow_int(self, bits: int) -> None:
        if bits > self.limits.max_int_bits:
            raise limit_error(f"tried to compute a number of about {bits:,} bits")


KINDS: dict[type, str] = {
    list: "a list of",
    OwnList: "a list of",
    tuple: "a list of",
    dict: "a mapping of",
    set: "a set of",
    frozenset: "a set of",
    bytes: "a byte string of",
}


def value_size(value: object) -> int:
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return len(value)
    return 0


_local = threading.local()


def swap_budget(budget: Budget | None) -> Budget | None:
    """Make `budget` this thread's current one; returns the one it replaces, to restore after."""
    outer: Budget | None = getattr(_local, "budget", None)
    _local.budget = budget
    return outer


def current_budget() -> Budget:
    budget: Budget | None = getattr(_local, "budget", None)
    if budget is None:
        # Outside render() (jinja's compile-time constant folding): a fresh default budget.
        return Budget(RenderLimits())
    return budget


# --- bounds of operations that can multiply their input --------------------------------------

#: Nesting followed when estimating a value's text; deeper values count as too big.
_TEXT_DEPTH = 16
#: Characters json.dumps writes for one character needing an escape (\u001f, \ud83d\ude00).
_JSON_ESCAPE = 12
_JSON_SPECIAL = {code: None for code in range(32)} | {ord('"'): None, ord("\\"): None}


def text_bound(
    value: Any, limit: int, *, json: bool = False, ascii_only: bool = False, indent: int = 0
) -> int:
    """Upper bound of len(str(value)) (or of its JSON), counting what it holds.

    Stops counting once past `limit`: the caller refuses anything above it anyway. Items are
    counted once per reference, so a list of twenty copies of one string counts it twenty
    times, as joining it would write it.
    """
    total = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > _TEXT_DEPTH:
            return limit + 1
        if isinstance(item, str):
            size = len(item)
            if json:
                # Every character needing an escape grows, the rest stays as it is.
                size += 2 + (len(item) - len(item.translate(_JSON_SPECIAL))) * _JSON_ESCAPE
                if ascii_only and not item.isascii():
                    size += (len(item) - len(item.encode("ascii", "ignore"))) * _JSON_ESCAPE
        elif isinstance(item, bytes):
            size = 4 * len(item) + 3  # repr: b'\xff...'
        elif isinstance(item, bool) or item is None:
            size = 5
        elif isinstance(item, int):
            size = abs(item).bit_length() // 3 + 2
        elif isinstance(item, (list, tuple, set, frozenset, dict)):
            pad = 2 + (indent * (depth + 1) + 1 if indent else 0)
            size = 2 + pad * len(item)
            if isinstance(item, dict):
                size += 2 * len(item)  # ": " after every key
                stack.extend((part, depth + 1) for pair in item.items() for part in pair)
            else:
                stack.extend((part, depth + 1) for part in item)
        else:
            size = 32  # floats, undefined values; str() of other objects is checked after
        total += size
        if total > limit:
            return total
    return total


def format_bound(fmt: str, values: Sequence[Any], limit: int) -> int:
    """Upper bound of a str.format / % result: every field may take the largest value."""
    fields = fmt.count("{") + fmt.count("%")
    largest = max((text_bound(v, limit) for v in values), default=0)
    return len(fmt) + fields * largest


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
DIGITS = re.compile(r"\d+")


def check_percent(fmt: object, args: object) -> None:
    if not isinstance(fmt, str):
        return
    budget = current_budget()
    star = False
    for match in _PERCENT_SPEC.finditer(fmt):
        for group in match.groups():
            if group == "*":
                star = True
            elif group:
                budget.allow(int(group), "a formatted field of")
    values = args if isinstance(args, tuple) else (args,)
    if isinstance(args, Mapping):
        values = tuple(args.values())
    if star:
        for value in values:
            if isinstance(value, int):
                budget.allow(abs(value), "a formatted field of")
    budget.allow(format_bound(fmt, values, budget.limits.max_chars))


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


def method_bound(
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
        return _replace_bound(
            subject, _arg(args, kw, 0, "old"), _arg(args, kw, 1, "new"), _arg(args, kw, 2, "count")
        )
    if name == "join":
        items = _arg(args, kw, 0, "iterable")
        if isinstance(items, (list, tuple, str, dict)):
            limit = current_budget().limits.max_chars
            return len(subject) * max(0, len(items) - 1) + _items_bound(items, limit)
    if name in ("format", "format_map") and isinstance(subject, str):
        values = [*args, *kw.values()]
        if name == "format_map" and args and isinstance(args[0], Mapping):
            values = list(args[0].values())
        return format_bound(subject, values, current_budget().limits.max_chars)
    return 0


def _items_bound(items: Any, limit: int) -> int:
    """What joining `items` writes, the separators aside."""
    if isinstance(items, str):
        return len(items)
    values = items.keys() if isinstance(items, dict) else items
    return text_bound(list(values), limit) - 2 - 2 * len(values)


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
        return _replace_bound(
            text, _arg(args, kw, 0, "old"), _arg(args, kw, 1, "new"), _arg(args, kw, 2, "count")
        )
    if name == "wordwrap":
        wrap = _arg(args, kw, 2, "wrapstring")
        return len(text) + (len(text) + 1) * (len(wrap) if isinstance(wrap, str) else 1)
    limit = current_budget().limits.max_chars
    if name == "join":
        sep = _arg(args, kw, 0, "d")
        sep = "" if sep is None else sep
        if isinstance(sep, str) and isinstance(subject, (list, tuple, str, dict)):
            return len(sep) * max(0, len(subject) - 1) + _items_bound(subject, limit)
    if name == "format":
        check_percent(subject, tuple(args) or dict(kw))
    if name in ("string", "list", "pprint"):
        return text_bound(subject, limit) if name != "list" else value_size(subject)
    if name == "tojson":
        indent = _arg(args, kw, 1, "indent")
        width = len(indent) if isinstance(indent, str) else _check_int_arg(indent)
        ascii_only = bool(_arg(args, kw, 0, "ensure_ascii"))
        return text_bound(subject, limit, json=True, ascii_only=ascii_only, indent=width)
    if name in ("batch", "slice"):
        count = _check_int_arg(_arg(args, kw, 0, "linecount" if name == "batch" else "slices"))
        if count > current_budget().limits.max_range:
            raise limit_error(
                f"asked for {count:,} groups (the limit is {current_budget().limits.max_range:,})"
            )
    return 0


def guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    # Filters are called directly by the compiled template, not through Environment.call, so
    # each one is wrapped to poll the deadline and bound what it builds.
    skip = 1 if _PassArg.from_obj(func) is not None else 0

    @functools.wraps(func)  # keeps jinja_pass_arg, so Jinja still passes the context
    def guarded(*args: Any, **kwargs: Any) -> Any:
        budget = current_budget()
        budget.tick()
        if len(args) > skip:
            subject = args[skip]
            budget.allow(_filter_bound(name, subject, args[skip + 1 :], kwargs))
            # A string's characters become items only where a filter lists them.
            listed = not isinstance(subject, str) or name in _ITEM_FILTERS
            if isinstance(subject, Sized) and listed:
                budget.allow(len(subject), "a list of")
            elif isinstance(subject, Iterator):
                args = (*args[:skip], _counted(subject, budget), *args[skip + 1 :])
        # A list a filter builds is the template's own (llama.cpp's filters give new arrays).
        result = owned(func(*args, **kwargs))
        budget.produced(result)
        return result

    return guarded


#: Filters that build a list of their input's items (a string's are its characters).
_ITEM_FILTERS = frozenset(
    {"list", "batch", "slice", "sort", "unique", "reverse", "map", "select", "reject"}
    | {"selectattr", "rejectattr", "groupby", "dictsort", "items"}
)


def _counted(items: Iterator[Any], budget: Budget) -> Iterator[Any]:
    """An unsized input (a filter's generator), refused once it yields more than a list may
    hold: what a filter builds from it is bounded while it is built, not after."""
    for count, item in enumerate(items, 1):
        if count > budget.limits.max_items:
            budget.allow(count, "a list of")
        if count % 1024 == 0:
            budget.tick()
        yield item


class _GuardedIterable:
    """A for-loop's iterable that polls the deadline on every item."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __len__(self) -> int:
        return len(self._inner)

    def __iter__(self) -> Iterator[Any]:
        budget = current_budget()
        for item in self._inner:
            budget.tick()
            yield item


def loop_guard(value: Any) -> Any:
    return _GuardedIterable(value)


def sized_guard(value: Any) -> Any:
    current_budget().produced(value)
    return value


class GuardTransformer(NodeTransformer):
    """Rewrites the parsed template so loops, `~` concatenations and list literals go through
    the sandbox's hooks.

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
        # Its operands made text as llama.cpp's `~` makes them, and the result size-checked.
        self.generic_visit(node)
        operands = nodes.Tuple(node.nodes, "load", lineno=node.lineno)
        operands.set_environment(self.environment)
        return self._wrap(self._wrap(operands, "_specchat_concat"), "_specchat_sized")

    def visit_List(self, node: nodes.List) -> nodes.Filter:
        # A list literal is the template's own, one it may append to.
        self.generic_visit(node)
        return self._wrap(node, "_specchat_own")

    def visit_Getitem(self, node: nodes.Getitem) -> nodes.Node:
        # So is a slice, a new list (Jinja compiles it to Python's subscript, no hook).
        self.generic_visit(node)
        return self._wrap(node, "_specchat_own") if isinstance(node.arg, nodes.Slice) else node


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
            if part and is_forbidden(part):
                return part
        if spec:
            inner = _format_field_refusal(spec)
            if inner:
                return inner
    return None


def static_refusal(tree: nodes.Template) -> ChatTemplateError | None:
    """Why the template must not run, if it spells out something forbidden; found before
    anything of it runs."""
    loads = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)
    for load in tree.find_all(loads):
        template = getattr(load, "template", None)
        target = template.value if isinstance(template, nodes.Const) else "…"
        return ChatTemplateError(
            ChatTemplateProblem.UNSAFE,
            f"{PREFIX} tried to load another template ({shorten(str(target))!r}), which is "
            "not allowed; SpecChat refused to run it",
        )
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter, nodes.Const)):
        if isinstance(node, nodes.Getattr) and is_forbidden(node.attr):
            return unsafe_error(node.attr)
        if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
            key = node.arg.value
            if isinstance(key, str) and key.startswith("__"):
                return unsafe_error(key)
        if isinstance(node, nodes.Filter):
            consts = [a for a in node.args if isinstance(a, nodes.Const)]
            consts += [k.value for k in node.kwargs if isinstance(k.value, nodes.Const)]
            for const in consts:
                if not isinstance(const.value, str):
                    continue
                if node.name == "attr" and is_forbidden(const.value):
                    return unsafe_error(const.value)
                # map(attribute='a.__class__') and friends walk dotted paths.
                if any(part.startswith("__") for part in const.value.split(".")):
                    return unsafe_error(const.value)
        if isinstance(node, nodes.Const) and isinstance(node.value, str):
            refused = _format_field_refusal(node.value)
            if refused:
                return unsafe_error(refused)
    return None
