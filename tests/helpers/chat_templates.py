"""Real chat templates and known Jinja sandbox-escape payloads, for the chat-template tests."""

from __future__ import annotations

from dataclasses import dataclass

from specchat.engine.templates.guards import ChatTemplateProblem

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
#: resource exhaustion and recursion: one payload a line, its name, how SpecChat must stop
#: it (UNSAFE, LIMIT or FAILED, then "static" when refused while compiling, before any of it
#: runs) and the template. SENTINEL is replaced by a path the payload tries to create. A name
#: ending in "-one-call" is one long call only the host process's kill stops; one ending in
#: "-mem" must be refused before it allocates much (checked under tracemalloc).
_TABLE = """
mro-subclasses                  UNSAFE static {{ ''.__class__.__mro__[1].__subclasses__() }}
subclasses-popen                UNSAFE static {% for c in ''.__class__.__base__.__subclasses__() %}{% if c.__name__ == 'Popen' %}{{ c(['touch', 'SENTINEL']) }}{% endif %}{% endfor %}
cycler-globals-os               UNSAFE static {{ cycler.__init__.__globals__.os.popen('touch SENTINEL').read() }}
template-reference-context      UNSAFE static {{ self._TemplateReference__context.cycler.__init__.__globals__.os.system('touch SENTINEL') }}
lipsum-globals                  UNSAFE static {{ lipsum.__globals__['os'].popen('touch SENTINEL').read() }}
flask-request-application       UNSAFE static {{ request.application.__self__._get_data_for_json.__globals__['json'].JSONEncoder.default.__globals__['os'].popen('touch SENTINEL').read() }}
flask-request-plain             FAILED {{ request.application() }}
flask-config-class              UNSAFE static {{ config.__class__.__init__.__globals__['os'].popen('touch SENTINEL').read() }}
format-method-walk              UNSAFE static {{ '{0.__class__.__init__.__globals__}'.format(cycler) }}
format-method-built-at-runtime  UNSAFE {% set f = '{0._' ~ '_init__._' ~ '_globals__}' %}{{ f.format(cycler) }}
format-map-walk                 UNSAFE static {{ '{x.__class__}'.format_map({'x': cycler}) }}
format-filter                   UNSAFE static {{ '%s'|format(cycler.__init__.__globals__) }}
namespace-globals               UNSAFE static {{ namespace.__init__.__globals__.os.system('touch SENTINEL') }}
joiner-globals                  UNSAFE static {{ joiner.__init__.__globals__.os.popen('touch SENTINEL').read() }}
attr-filter                     UNSAFE static {{ cycler|attr('__init__')|attr('__globals__') }}
attr-filter-built-at-runtime    UNSAFE {% set a = '__in' ~ 'it__' %}{{ (cycler|attr(a))|attr('__glo' ~ 'bals__') }}
getitem-built-at-runtime        UNSAFE {% set k = '__cla' ~ 'ss__' %}{{ ''[k] }}
map-attribute                   UNSAFE static {{ messages|map(attribute='__class__')|list }}
type-mro                        UNSAFE static {{ dict.mro() }}
mutate-list                     UNSAFE {{ messages.append({'role': 'system'}) }}
mutate-dict                     UNSAFE {{ messages[0].update({'content': 'x'}) }}
mutate-list-pop                 UNSAFE {{ messages.pop() }}
mutate-sliced-message           UNSAFE {% set m = messages[0:1] %}{{ m[0].update({'content': 'x'}) }}
own-list-extend                 UNSAFE {% set xs = [] %}{{ xs.extend(messages) }}
huge-range                      LIMIT  {% for x in range(10**9) %}{% endfor %}
nested-loops                    LIMIT  {% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}
string-times-huge               LIMIT  {{ 'a'*10**10 }}
list-times-huge                 LIMIT  {{ [0]*10**10 }}
huge-power                      LIMIT  {{ 10**(10**10) }}
format-width                    LIMIT  {{ '{:>1000000000}'.format(1) }}
format-nested-width             LIMIT  {{ '{:>{w}}'.format(1, w=10**9) }}
percent-width                   LIMIT  {{ '%1000000000d' % 1 }}
center-filter                   LIMIT  {{ 'x'|center(10**10) }}
str-method-ljust                LIMIT  {{ 'x'.ljust(10**10) }}
replace-explosion               LIMIT  {{ ('a'*1000000).replace('', 'b'*1000) }}
namespace-doubling              LIMIT  {% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}
deep-macro-recursion            LIMIT  {% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}
wide-macro-recursion            LIMIT  {% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}
output-flood                    LIMIT  {% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}
print-list-of-big-strings-mem   LIMIT  {% set xs = ['x' * 3000000] * 20 %}{{ xs }}
own-list-holding-itself-mem     LIMIT  {% set xs = [] %}{% set _ = xs.append(xs) %}{{ xs | string }}
repr-nested-list-mem            LIMIT  {% set x = 'x' * 100000 %}{{ [[[[x] * 10] * 10] * 10] }}
batch-one-over-millions-mem     LIMIT  {{ ('x' * 3000000) | batch(1) | list | length }}
sort-millions-of-strings-mem    LIMIT  {{ ('ab' * 1500000) | list | sort | length }}
list-of-a-long-string-mem       LIMIT  {{ ('x' * 3000000) | list | length }}
strftime-huge-format-mem        LIMIT  {{ strftime_now('%c' * 1000000) | length }}
sort-one-call                   LIMIT  {{ (range(100000) | list * 40) | sort(reverse=true) | first }}
urlize-one-call                 LIMIT  {{ ('see www.a.example ' * 200000) | urlize | length }}
include-file                    UNSAFE static {% include '/etc/passwd' %}
import-module                   UNSAFE static {% from 'os' import system %}{{ system('touch SENTINEL') }}
lipsum-huge                     FAILED {{ lipsum(n=10**9) }}
"""  # noqa: E501 - one payload a line, however long


def _parse(table: str) -> tuple[Payload, ...]:
    payloads = []
    for line in table.strip().splitlines():
        name, problem, source = line.split(maxsplit=2)
        static = source.startswith("static ")
        source = source.removeprefix("static ").strip() if static else source
        payloads.append(Payload(name, source, ChatTemplateProblem[problem], static))
    return tuple(payloads)


#: Every payload: the table's, and builders whose inputs are each under the limits but
#: whose result is not, refused before anything is built (BUILDERS below lists them for the
#: memory check).
PAYLOADS: tuple[Payload, ...] = (
    *_parse(_TABLE),
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
)

#: The payloads refused for what they would build: each must be refused before building it.
BUILDERS = tuple(p for p in PAYLOADS if p.source.startswith("{% set x = 'a' * 3000000 %}"))
#: The payloads whose building the sandbox bounds as it goes (lists, printing, dates).
BOUNDED = tuple(p for p in PAYLOADS if p.name.endswith("-mem"))
#: The payloads only a hard stop ends: one call into a filter that runs for many seconds.
ONE_CALL = tuple(p for p in PAYLOADS if p.name.endswith("-one-call"))
