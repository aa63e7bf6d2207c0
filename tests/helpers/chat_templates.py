"""Real chat templates and known Jinja sandbox-escape payloads, for the chat-template tests."""

from __future__ import annotations

from dataclasses import dataclass

from specchat.engine.template_guards import ChatTemplateProblem

#: Qwen2.5-Instruct's tokenizer.chat_template (with tool support), as shipped in its GGUFs.
QWEN25_TEMPLATE = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""  # noqa: E501 - the template is kept byte for byte


@dataclass(frozen=True)
class Payload:
    """One hostile template.

    Attributes:
        name: test id.
        source: the template; SENTINEL is replaced by a path the payload tries to create.
        problem: how SpecChat must stop it.
        static: refused while compiling, before any of it runs.
    """

    name: str
    source: str
    problem: ChatTemplateProblem
    static: bool = False


UNSAFE = ChatTemplateProblem.UNSAFE
LIMIT = ChatTemplateProblem.LIMIT
FAILED = ChatTemplateProblem.FAILED

#: Known escapes from Jinja sandboxes (SSTI write-ups, CVE-2024-34359, jinja2 advisories),
#: resource exhaustion and recursion. Every one must be refused or neutralised.
PAYLOADS: tuple[Payload, ...] = (
    Payload("mro-subclasses", "{{ ''.__class__.__mro__[1].__subclasses__() }}", UNSAFE, True),
    Payload(
        "subclasses-popen",
        "{% for c in ''.__class__.__base__.__subclasses__() %}{% if c.__name__ == 'Popen' %}"
        "{{ c(['touch', 'SENTINEL']) }}{% endif %}{% endfor %}",
        UNSAFE,
        True,
    ),
    Payload(
        "cycler-globals-os",
        "{{ cycler.__init__.__globals__.os.popen('touch SENTINEL').read() }}",
        UNSAFE,
        True,
    ),
    Payload(
        "template-reference-context",
        "{{ self._TemplateReference__context.cycler.__init__.__globals__.os.system("
        "'touch SENTINEL') }}",
        UNSAFE,
        True,
    ),
    Payload(
        "lipsum-globals",
        "{{ lipsum.__globals__['os'].popen('touch SENTINEL').read() }}",
        UNSAFE,
        True,
    ),
    Payload(
        "flask-request-application",
        "{{ request.application.__self__._get_data_for_json.__globals__['json'].JSONEncoder"
        ".default.__globals__['os'].popen('touch SENTINEL').read() }}",
        UNSAFE,
        True,
    ),
    Payload("flask-request-plain", "{{ request.application }}", FAILED),
    Payload(
        "flask-config-class",
        "{{ config.__class__.__init__.__globals__['os'].popen('touch SENTINEL').read() }}",
        UNSAFE,
        True,
    ),
    Payload(
        "format-method-walk",
        "{{ '{0.__class__.__init__.__globals__}'.format(cycler) }}",
        UNSAFE,
        True,
    ),
    Payload(
        "format-method-built-at-runtime",
        "{% set f = '{0._' ~ '_init__._' ~ '_globals__}' %}{{ f.format(cycler) }}",
        UNSAFE,
    ),
    Payload("format-map-walk", "{{ '{x.__class__}'.format_map({'x': cycler}) }}", UNSAFE, True),
    Payload("format-filter", "{{ '%s'|format(cycler.__init__.__globals__) }}", UNSAFE, True),
    Payload(
        "namespace-globals",
        "{{ namespace.__init__.__globals__.os.system('touch SENTINEL') }}",
        UNSAFE,
        True,
    ),
    Payload(
        "joiner-globals",
        "{{ joiner.__init__.__globals__.os.popen('touch SENTINEL').read() }}",
        UNSAFE,
        True,
    ),
    Payload("attr-filter", "{{ cycler|attr('__init__')|attr('__globals__') }}", UNSAFE, True),
    Payload(
        "attr-filter-built-at-runtime",
        "{% set a = '__in' ~ 'it__' %}{{ (cycler|attr(a))|attr('__glo' ~ 'bals__') }}",
        UNSAFE,
    ),
    Payload("getitem-built-at-runtime", "{% set k = '__cla' ~ 'ss__' %}{{ ''[k] }}", UNSAFE),
    Payload("map-attribute", "{{ messages|map(attribute='__class__')|list }}", UNSAFE, True),
    Payload("type-mro", "{{ dict.mro() }}", UNSAFE, True),
    Payload("mutate-list", "{{ messages.append({'role': 'system'}) }}", UNSAFE),
    Payload("mutate-dict", "{{ messages[0].update({'content': 'x'}) }}", UNSAFE),
    Payload("huge-range", "{% for x in range(10**9) %}{% endfor %}", LIMIT),
    Payload(
        "nested-loops",
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        LIMIT,
    ),
    Payload("string-times-huge", "{{ 'a'*10**10 }}", LIMIT),
    Payload("list-times-huge", "{{ [0]*10**10 }}", LIMIT),
    Payload("huge-power", "{{ 10**(10**10) }}", LIMIT),
    Payload("format-width", "{{ '{:>1000000000}'.format(1) }}", LIMIT),
    Payload("format-nested-width", "{{ '{:>{w}}'.format(1, w=10**9) }}", LIMIT),
    Payload("percent-width", "{{ '%1000000000d' % 1 }}", LIMIT),
    Payload("center-filter", "{{ 'x'|center(10**10) }}", LIMIT),
    Payload("str-method-ljust", "{{ 'x'.ljust(10**10) }}", LIMIT),
    Payload("replace-explosion", "{{ ('a'*1000000).replace('', 'b'*1000) }}", LIMIT),
    Payload(
        "namespace-doubling",
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        LIMIT,
    ),
    Payload(
        "deep-macro-recursion",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        LIMIT,
    ),
    Payload(
        "wide-macro-recursion",
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
        "{{ f(40) }}",
        LIMIT,
    ),
    Payload(
        "output-flood",
        "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
        LIMIT,
    ),
    # Builders whose inputs are each under the limits but whose result is not: refused
    # before anything is built (BUILDERS below lists them for the memory check).
    *(
        Payload(name, "{% set x = 'a' * 3000000 %}{% set xs = [x] * 20 %}" + body, LIMIT)
        for name, body in (
            ("join-filter-items", "{{ xs | join }}"),
            ("str-join-items", "{{ ''.join(xs) }}"),
            ("format-method-fields", "{{ '{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}'.format(x) }}"),
            ("format-map-fields", "{{ '{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}'.format_map({'a': x}) }}"),
            ("format-filter-fields", "{{ '%s%s%s%s%s%s%s%s%s%s' | format(x,x,x,x,x,x,x,x,x,x) }}"),
            ("percent-fields", "{{ '%s%s%s%s%s%s%s%s%s%s' % (x,x,x,x,x,x,x,x,x,x) }}"),
            ("tojson-items", "{{ xs | tojson }}"),
            ("tojson-escapes", "{{ ('\x01' * 3000000) | tojson }}"),
            ("string-filter-items", "{{ xs | string }}"),
            ("pprint-items", "{{ xs | pprint }}"),
        )
    ),
    # One long call into a filter, which no hook interrupts: the render's own process is
    # stopped when the time limit passes.
    Payload(
        "sort-one-call", "{{ (range(100000) | list * 40) | sort(reverse=true) | first }}", LIMIT
    ),
    Payload("urlize-one-call", "{{ ('see www.a.example ' * 200000) | urlize | length }}", LIMIT),
    Payload("include-file", "{% include '/etc/passwd' %}", UNSAFE, True),
    Payload(
        "import-module", "{% from 'os' import system %}{{ system('touch SENTINEL') }}", UNSAFE, True
    ),
    Payload("lipsum-huge", "{{ lipsum(n=10**9) }}", FAILED),
)

#: The payloads refused for what they would build: each must be refused before building it.
BUILDERS = tuple(p for p in PAYLOADS if p.source.startswith("{% set x = 'a' * 3000000 %}"))
#: The payloads only a hard stop ends: one call into a filter that runs for many seconds.
ONE_CALL = tuple(p for p in PAYLOADS if p.name.endswith("-one-call"))
