"""Interop peer on PyPI `mcp` 2.x (MCPServer): echo(text), add(a, b), announce(), greet();
the resources py://readme (text) and py://logo.png (a blob), the template py://notes/{name},
the prompt review(code, language?) (a user and an assistant message), and completion of
review's `language`.

`announce` sends notifications/tools/list_changed not tied to a request: over Streamable HTTP
on the GET stream in the handshake era, on the subscriptions/listen stream in 2026-07-28. `greet` asks the user for a name: under 2026-07-28 as an
input-required result (the client retries with inputResponses), before it as a mid-call
elicitation/create request.

  python py_http_server.py stdio
  python py_http_server.py streamable-http --port P [--json] [--stateless]
"""

from __future__ import annotations

import argparse

from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import AssistantMessage, Context, Elicit, MCPServer, Message, Resolve, UserMessage
from mcp_types import Completion, PromptReference

mcp = MCPServer("py-interop", version="0.1.0")


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
async def announce(ctx: Context) -> str:
    """Send tools/list_changed: on the standalone stream (handshake era) and to
    subscriptions/listen streams (2026-07-28); each era drops the other's."""
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "announced"


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@mcp.tool()
def greet(who: Annotated[Name, Resolve(ask_name)]) -> str:
    """Greet the user, asking for their name."""
    return f"Hello, {who.name}!"


@mcp.resource("py://readme", name="readme", description="A short text.", mime_type="text/plain")
def readme() -> str:
    return "Python readme.\nSecond line.\n"


@mcp.resource("py://logo.png", name="logo", description="The PNG signature.", mime_type="image/png")
def logo() -> bytes:
    return b"\x89PNG\r\n\x1a\n"


@mcp.resource("py://notes/{name}", name="note", description="A note by name.", mime_type="text/plain")
def note(name: str) -> str:
    return f"Note {name}."


@mcp.prompt(description="Review some code.")
def review(code: str, language: str = "python") -> list[Message]:
    return [
        UserMessage(f"Review this {language} code:\n{code}"),
        AssistantMessage("What should I look for?"),
    ]


@mcp.completion()
async def complete(ref, argument, context):
    if isinstance(ref, PromptReference) and ref.name == "review" and argument.name == "language":
        return Completion(values=[v for v in ["python", "ruby", "rust"] if v.startswith(argument.value)])
    return None


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("transport", choices=["stdio", "streamable-http"])
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--json", action="store_true")
    p.add_argument("--stateless", action="store_true")
    a = p.parse_args()
    if a.transport == "stdio":
        mcp.run("stdio")
    else:
        mcp.run("streamable-http", host="127.0.0.1", port=a.port, json_response=a.json, stateless_http=a.stateless)


if __name__ == "__main__":
    main()
