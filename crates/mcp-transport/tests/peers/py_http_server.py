"""Interop peer on PyPI `mcp` 2.x (MCPServer): echo(text), add(a, b), announce(), greet().

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

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve

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
