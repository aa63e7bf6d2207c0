"""Tool calls and tool results as the chat template sees them."""

from __future__ import annotations

from specchat.engine.templates.chat_message import as_mapping
from specchat.engine.templates.chat_template import ChatMessage, ChatTemplate, ToolCall
from tests.helpers.chat_templates import QWEN25_TEMPLATE


def _called(arguments: str) -> list[ChatMessage]:
    call = ToolCall("call_1", "write", arguments)
    return [
        ChatMessage("user", "hi"),
        ChatMessage("assistant", "", tool_calls=(call,)),
        ChatMessage("tool", "done", tool_call_id="call_1", name="write"),
    ]


def test_a_plain_message_is_its_role_and_content_alone() -> None:
    """A template that tests for the tool fields sees none on a message without them."""
    assert as_mapping(ChatMessage("user", "hi")) == {"role": "user", "content": "hi"}
    mapped = as_mapping(_called("{}")[2])
    assert mapped == {"role": "tool", "content": "done", "tool_call_id": "call_1", "name": "write"}


def test_a_calls_arguments_are_written_as_the_model_wrote_them() -> None:
    """An object is handed over parsed (templates write it with tojson); anything else as
    it is, never quoted as a JSON string, which the model would copy and quote again."""
    template = ChatTemplate(QWEN25_TEMPLATE)
    valid = template.render(_called('{"path": "a.py"}'))
    assert '{"name": "write", "arguments": {"path": "a.py"}}' in valid
    broken = '{"path": "a.py", "content": """doc"""}'
    assert f'{{"name": "write", "arguments": {broken}}}' in template.render(_called(broken))
    assert '"arguments": {}}' in template.render(_called(""))
    assert "<tool_response>\ndone\n</tool_response>" in valid
    # Other strings are still quoted by tojson.
    tool = {"type": "function", "function": {"name": "write", "description": 'say "hi"'}}
    assert '"description": "say \\"hi\\""' in template.render(_called("{}"), tools=[tool])
