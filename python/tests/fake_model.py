"""A scripted model for the OpenAI Agents SDK: no network, canned responses in order."""

from __future__ import annotations

import itertools
import json
from typing import Any, List

from agents import Model, ModelProvider, ModelResponse, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

_ids = itertools.count(1)


def text(message: str) -> ResponseOutputMessage:
    """An assistant message saying ``message``."""
    return ResponseOutputMessage(
        id=f"msg_{next(_ids)}",
        role="assistant",
        status="completed",
        type="message",
        content=[ResponseOutputText(text=message, type="output_text", annotations=[])],
    )


def call(name: str, **arguments: Any) -> ResponseFunctionToolCall:
    """A function call with a fresh call id."""
    n = next(_ids)
    return ResponseFunctionToolCall(
        id=f"fc_{n}",
        call_id=f"call_{n}",
        name=name,
        arguments=json.dumps(arguments),
        type="function_call",
        status="completed",
    )


class ScriptedModel(Model):
    """Returns the scripted outputs one model call at a time; records every input it got."""

    def __init__(self, *turns: List[Any]) -> None:
        self.turns = list(turns)
        self.inputs: List[Any] = []

    def add(self, *turns: List[Any]) -> None:
        self.turns.extend(turns)

    async def get_response(self, system_instructions, input, model_settings, tools,
                           output_schema, handoffs, tracing, **kwargs) -> ModelResponse:
        self.inputs.append(input)
        if not self.turns:
            raise AssertionError("the model was called more often than scripted")
        output = self.turns.pop(0)
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):  # pragma: no cover - not used
        raise NotImplementedError("the scripted model does not stream")


class ScriptedProvider(ModelProvider):
    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    def get_model(self, model_name):
        return self.model
