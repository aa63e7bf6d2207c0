"""Chat templates: real templates render, hostile ones are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from specchat.engine.templates.chat_template import (
    FALLBACK_TEMPLATE,
    ChatMessage,
    ChatTemplate,
    render_chat,
)
from specchat.engine.templates.guards import ChatTemplateError, ChatTemplateProblem, RenderLimits
from specchat.engine.templates.host import TemplateHost
from specchat.engine.templates.sandbox import SandboxTemplate
from specchat.tinymodels import TinySpec, write_tiny_model
from tests.helpers.chat_templates import (
    BOUNDED,
    BUILDERS,
    ONE_CALL,
    PAYLOADS,
    QWEN25_TEMPLATE,
    Payload,
)

CONVERSATION = [
    ChatMessage("system", "Be brief."),
    ChatMessage("user", "Hi"),
    ChatMessage("assistant", "Hello!"),
    ChatMessage("user", "2+2?"),
]

# --- real templates ------------------------------------------------------------------------


def test_qwen25_template_renders_roles_and_generation_prompt() -> None:
    prompt = render_chat(QWEN25_TEMPLATE, CONVERSATION)
    assert prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello!<|im_end|>\n"
        "<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    without = render_chat(QWEN25_TEMPLATE, CONVERSATION, add_generation_prompt=False)
    assert without == prompt.removesuffix("<|im_start|>assistant\n")


def test_qwen25_template_adds_its_default_system_prompt() -> None:
    prompt = render_chat(QWEN25_TEMPLATE, [ChatMessage("user", "Hi")])
    assert prompt.startswith(
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
        "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    )


def test_qwen25_template_with_tools_and_tool_calls() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Time <now> & zone",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
        },
    }
    messages: list[Any] = [
        ChatMessage("user", "What time is it?"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_time", "arguments": {"tz": "UTC"}}}],
        },
        {"role": "tool", "content": "12:00"},
    ]
    prompt = render_chat(QWEN25_TEMPLATE, messages, tools=[tool])
    # tojson as transformers does it: plain json.dumps, no HTML escaping of < and &.
    assert "\n<tools>\n" + json.dumps(tool) + "\n</tools>" in prompt
    assert '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>' in prompt
    assert "<|im_start|>user\n<tool_response>\n12:00\n</tool_response><|im_end|>\n" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_qwen3_style_constructs() -> None:
    """Namespaces, reversed slices, string methods and `is` tests, as Qwen3's template uses."""
    source = (
        "{%- set ns = namespace(last_query_index=messages|length - 1) %}"
        "{%- for message in messages[::-1] %}"
        "{%- if message.role == 'user' and message.content is string %}"
        "{%- set ns.last_query_index = (messages|length - 1) - loop.index0 %}{% break %}"
        "{%- endif %}{%- endfor %}"
        "{%- for message in messages %}"
        "{%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}"
        "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}"
        "{%- endfor %}"
        "{{- ns.last_query_index }}"
        "|{{ messages|selectattr('role', 'equalto', 'user')|list|length }}"
        "|{{ messages|map(attribute='role')|join(',') }}"
        "{%- if enable_thinking is defined and enable_thinking is false %}<think></think>"
        "{%- endif %}"
    )
    messages = [
        ChatMessage("user", "hi"),
        ChatMessage("assistant", "<think>hmm</think>\n\nyo"),
        ChatMessage("user", "q"),
    ]
    prompt = render_chat(source, messages, extra={"enable_thinking": False})
    assert prompt == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
        "<|im_start|>user\nq<|im_end|>\n2|2|user,assistant,user<think></think>"
    )


def test_fallback_template_when_model_has_none() -> None:
    for missing in (None, "", "   "):
        template = ChatTemplate(missing)
        assert template.is_fallback
        assert template.source == FALLBACK_TEMPLATE
    prompt = render_chat(None, CONVERSATION[:2])
    assert prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_hf_environment_features() -> None:
    source = (
        "{{ bos_token }}{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
        "{% generation %}{{ m.content | tojson }}{% endgeneration %}{% endfor %}"
        "|{{ strftime_now('%Y') }}{{ eos_token }}"
    )
    prompt = render_chat(source, CONVERSATION, bos_token="<s>", eos_token="</s>")
    assert prompt == f'<s>"Be brief."|{time.strftime("%Y")}</s>'


def test_template_raise_exception_is_reported() -> None:
    source = "{% if messages[-1].role != 'assistant' %}{{ raise_exception('Conversation must "
    source += "end with an answer') }}{% endif %}"
    with pytest.raises(ChatTemplateError) as caught:
        render_chat(source, CONVERSATION)
    assert caught.value.problem is ChatTemplateProblem.RAISED
    assert "Conversation must end with an answer" in str(caught.value)


def test_system_message_a_template_refuses_joins_the_next() -> None:
    # Gemma 2 refuses a system message; llama.cpp puts its text before the first user
    # message's (common_chat_templates_apply), and so does SpecChat
    source = "{% if messages[0].role == 'system' %}{{ raise_exception('System role not "
    source += "supported') }}{% endif %}{% for m in messages %}[{{ m.role }}]{{ m.content }}"
    source += "{% endfor %}"
    prompt = render_chat(source, CONVERSATION)
    assert prompt == "[user]Be brief.\nHi[assistant]Hello![user]2+2?"


def test_invalid_template_is_a_syntax_error() -> None:
    with pytest.raises(ChatTemplateError) as caught:
        ChatTemplate("{% for m in messages %}{{ m.content }}")
    assert caught.value.problem is ChatTemplateProblem.SYNTAX
    assert "not valid Jinja" in str(caught.value)
    assert "line 1" in str(caught.value)


def test_long_legitimate_conversation_renders() -> None:
    messages = [ChatMessage("system", "S")]
    for i in range(300):
        messages.append(ChatMessage("user", f"question {i} " + "x" * 2000))
        messages.append(ChatMessage("assistant", f"answer {i} " + "y" * 2000))
    prompt = render_chat(QWEN25_TEMPLATE, messages)
    assert prompt.count("<|im_start|>") == len(messages) + 1


def test_templates_render_concurrently_on_threads() -> None:
    template = ChatTemplate(QWEN25_TEMPLATE)
    slow = ChatTemplate(
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        limits=RenderLimits(time_s=0.5),
    )
    errors: list[BaseException] = []

    def run_slow() -> None:
        try:
            slow.render(CONVERSATION)
        except ChatTemplateError as error:
            errors.append(error)

    thread = threading.Thread(target=run_slow)
    thread.start()
    results = [template.render(CONVERSATION) for _ in range(50)]
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert len(set(results)) == 1
    assert len(errors) == 1
    assert isinstance(errors[0], ChatTemplateError)
    assert errors[0].problem is ChatTemplateProblem.LIMIT


# --- hostile templates -----------------------------------------------------------------------


@pytest.fixture
def no_process_started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record any attempt to start a process; the test then fails on it."""
    attempts: list[str] = []

    def forbidden(name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> None:
            attempts.append(name)
            raise AssertionError(f"template started a process through {name}")

        return record

    monkeypatch.setattr(os, "system", forbidden("os.system"))
    monkeypatch.setattr(os, "popen", forbidden("os.popen"))
    monkeypatch.setattr(os, "posix_spawn", forbidden("os.posix_spawn"))
    monkeypatch.setattr(subprocess, "Popen", forbidden("subprocess.Popen"))
    return attempts


def _refuse(payload: Payload, sentinel: Path) -> tuple[ChatTemplateError, bool]:
    """Compile and render `payload`; returns the error and whether compiling refused it."""
    source = payload.source.replace("SENTINEL", str(sentinel))
    try:
        template = ChatTemplate(source)
    except ChatTemplateError as error:
        return error, True
    try:
        template.render(CONVERSATION)
    except ChatTemplateError as error:
        return error, False
    pytest.fail(f"payload {payload.name} rendered without an error")


@pytest.mark.parametrize("payload", PAYLOADS, ids=[p.name for p in PAYLOADS])
def test_hostile_template_is_refused(
    payload: Payload, tmp_path: Path, no_process_started: list[str]
) -> None:
    sentinel = tmp_path / "pwned"
    error, at_compile = _refuse(payload, sentinel)
    assert error.problem is payload.problem, str(error)
    # Spelled-out escapes are refused before any of the template runs.
    assert at_compile == payload.static
    assert str(error).startswith("the model's chat template ")
    if payload.problem is ChatTemplateProblem.UNSAFE:
        assert str(error).endswith("which is not allowed; SpecChat refused to run it")
    if payload.problem is ChatTemplateProblem.LIMIT:
        assert str(error).endswith("SpecChat stopped it")
    assert not sentinel.exists()
    assert no_process_started == []


@pytest.mark.parametrize("payload", BUILDERS, ids=[p.name for p in BUILDERS])
def test_builders_are_refused_before_they_build(payload: Payload) -> None:
    # Each payload's inputs (a 3 MB string, a list of twenty references to it) are within
    # the limits; what it asks for is 18 to 60 MB. Refused after building, it would show.
    tracemalloc.start()
    try:
        with pytest.raises(ChatTemplateError) as caught:
            # In this process, where tracemalloc sees it (ChatTemplate renders in the host).
            SandboxTemplate(payload.source).render(CONVERSATION)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.problem is ChatTemplateProblem.LIMIT
    assert peak < 12_000_000, f"{peak / 1e6:.0f} MB allocated before the refusal"


@pytest.mark.parametrize("payload", BOUNDED, ids=[p.name for p in BOUNDED])
def test_lists_printing_and_dates_are_bounded_as_they_are_built(payload: Payload) -> None:
    # Printing a list of big strings, the repr of a nested list, batch(1) or sort over
    # millions of items, the list of a long string's characters, a date in a 2,000,000-character
    # format: each reached hundreds of MB inside the host before its limit stopped it.
    tracemalloc.start()
    try:
        with pytest.raises(ChatTemplateError) as caught:
            SandboxTemplate(payload.source).render(CONVERSATION)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.problem is ChatTemplateProblem.LIMIT
    assert peak < 12_000_000, f"{peak / 1e6:.0f} MB allocated before the refusal"


@pytest.mark.parametrize("payload", ONE_CALL, ids=[p.name for p in ONE_CALL])
def test_one_long_call_is_stopped_by_its_process(payload: Payload) -> None:
    # No hook runs inside one filter call, so only killing the host process stops it. The
    # calls take seconds; a shorter limit makes each outlast it on a faster machine too
    # (what leads up to the call takes a fraction of it).
    host = TemplateHost(grace_s=0.1)
    try:
        # The sort's 4,000,000 items are refused before the call by the default max_items:
        # allowed here, so that the call runs and the process has to stop it.
        limits = RenderLimits(time_s=0.4, max_items=10_000_000)
        with pytest.raises(ChatTemplateError) as caught:
            ChatTemplate(payload.source, limits=limits, host=host).render(CONVERSATION)
        assert caught.value.problem is ChatTemplateProblem.LIMIT
        assert "ran longer than 0.4 s" in str(caught.value)
        assert host.restarts == 1
        # The host was killed; the next template gets a fresh one and renders.
        assert ChatTemplate(None, host=host).render(CONVERSATION).endswith("assistant\n")
        assert host.restarts == 2
    finally:
        host.close()


def test_the_host_process_has_a_memory_limit() -> None:
    # Eight distinct 3 MB strings: within every sandbox limit (48 M characters built of the
    # 64 M allowed), but not within a 40 MiB address space for the whole process.
    source = (
        "{% set ns = namespace(a=[]) %}{% for i in range(8) %}"
        "{% set ns.a = ns.a + [('a' * 3000000) ~ i] %}{% endfor %}{{ ns.a | length }}"
    )
    roomy = TemplateHost()
    tight = TemplateHost(memory_bytes=40 * 2**20)
    try:
        assert ChatTemplate(source, host=roomy).render(CONVERSATION) == "8"
        with pytest.raises(ChatTemplateError) as caught:
            ChatTemplate(source, host=tight).render(CONVERSATION)
        assert caught.value.problem is ChatTemplateProblem.LIMIT
        assert "memory" in str(caught.value)
        # The process survives (or is replaced) and renders the next conversation.
        assert ChatTemplate(None, host=tight).render(CONVERSATION).endswith("assistant\n")
    finally:
        roomy.close()
        tight.close()


def test_refusal_message_names_the_attribute() -> None:
    with pytest.raises(ChatTemplateError) as caught:
        ChatTemplate("{{ cycler.__init__.__globals__.os.popen('id').read() }}")
    assert str(caught.value) == (
        "the model's chat template tried to access '__globals__', which is not allowed; "
        "SpecChat refused to run it"
    )


def test_at_least_ten_payloads_of_each_family() -> None:
    unsafe = [p for p in PAYLOADS if p.problem is ChatTemplateProblem.UNSAFE]
    limits = [p for p in PAYLOADS if p.problem is ChatTemplateProblem.LIMIT]
    assert len(unsafe) >= 10
    assert len(limits) >= 10


def test_no_process_or_file_under_audit_hook(tmp_path: Path) -> None:
    """All payloads in a fresh interpreter whose audit hook logs process starts and writes."""
    sentinel_dir = tmp_path / "sentinels"
    sentinel_dir.mkdir()
    script = textwrap.dedent(
        """
        import json, os, sys
        from specchat.engine.templates.sandbox import ChatMessage, SandboxTemplate
        from specchat.engine.templates.guards import ChatTemplateError
        from tests.helpers.chat_templates import ONE_CALL, PAYLOADS

        # The sandbox in this process, so that the hook sees all it does (one-call payloads
        # aside: only the host process stops those in time).
        ChatTemplate = SandboxTemplate
        PAYLOADS = [p for p in PAYLOADS if p not in ONE_CALL]
        sentinel_dir = sys.argv[1]
        ChatTemplate(None).render([ChatMessage("user", "warm-up")])  # imports done before
        events = []
        WATCHED = ("os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.fork",
                   "os.forkpty", "os.spawn", "pty.spawn", "ctypes.dlopen", "socket.connect",
                   "os.remove", "os.rename", "os.mkdir", "shutil.rmtree")

        def hook(event, args):
            if event in WATCHED:
                events.append([event, repr(args)[:200]])
            elif event == "open" and len(args) > 1 and isinstance(args[1], str):
                if any(flag in args[1] for flag in "wax+"):
                    events.append([event, repr(args)[:200]])

        sys.addaudithook(hook)
        outcome = {}
        for payload in PAYLOADS:
            source = payload.source.replace("SENTINEL", os.path.join(sentinel_dir, payload.name))
            try:
                ChatTemplate(source).render([ChatMessage("user", "hi")])
                outcome[payload.name] = "rendered"
            except ChatTemplateError as error:
                outcome[payload.name] = error.problem.name
        print(json.dumps({"events": events, "outcome": outcome}))
        """
    )
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", script, str(sentinel_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=root,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["events"] == []
    assert report["outcome"] == {p.name: p.problem.name for p in PAYLOADS if p not in ONE_CALL}
    assert list(sentinel_dir.iterdir()) == []


def test_malicious_template_inside_a_gguf(tmp_path: Path, no_process_started: list[str]) -> None:
    """A model file carrying an escape: read its template like a loader would, refuse it."""
    import gguf

    sentinel = tmp_path / "pwned"
    evil = (
        "{% for m in messages %}{{ m.content }}{% endfor %}"
        f"{{{{ cycler.__init__.__globals__.os.popen('touch {sentinel}').read() }}}}"
    )
    model = write_tiny_model(tmp_path / "evil.gguf", TinySpec(chat_template=evil, name="evil"))
    reader = gguf.GGUFReader(model)
    field = reader.get_field(gguf.Keys.Tokenizer.CHAT_TEMPLATE)
    assert field is not None
    source = field.contents()
    assert source == evil
    with pytest.raises(ChatTemplateError) as caught:
        ChatTemplate(source).render(CONVERSATION)
    assert caught.value.problem is ChatTemplateProblem.UNSAFE
    assert "'__globals__'" in str(caught.value)
    assert not sentinel.exists()
    assert no_process_started == []


def test_output_limit_is_configurable() -> None:
    template = ChatTemplate(None, limits=RenderLimits(max_chars=100))
    template.render([ChatMessage("user", "x" * 40)])
    with pytest.raises(ChatTemplateError) as caught:
        template.render([ChatMessage("user", "x" * 200)])
    assert caught.value.problem is ChatTemplateProblem.LIMIT


def test_chat_template_does_not_import_qt() -> None:
    code = (
        "import sys, specchat.engine.templates.chat_template; assert 'PySide6' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
