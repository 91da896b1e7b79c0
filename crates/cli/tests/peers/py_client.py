"""The official Python SDK's client against `mcp-harness serve`: over stdio it spawns the command
after `--`, over http it connects to the URL after `--`; it lists the tools, calls ECHO_TOOL,
calls CONFIRM_TOOL answering the approval form through its elicitation callback, and prints one
JSON line of what it saw. Used by crates/cli/tests/serve_peers.rs, run with the peers' Python
(`cargo xtask test` installs it).

Usage: py_client.py stdio|http ECHO_TOOL CONFIRM_TOOL -- CMD ARGS...|URL
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def run(mode: str, echo_tool: str, confirm_tool: str, target: list[str]) -> None:
    forms: list[str] = []

    async def elicit(context, params):
        forms.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "yes"})

    if mode == "http":
        transport = streamable_http_client(target[0])
    else:
        transport = stdio_client(StdioServerParameters(command=target[0], args=target[1:]), errlog=sys.stderr)
    async with transport as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            init = await session.initialize()
            tools: list[str] = []
            cursor = None
            while True:
                page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
                tools.extend(t.name for t in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break

            def text(result) -> str:
                return "".join(c.text for c in result.content if getattr(c, "type", None) == "text")

            echoed = await session.call_tool(echo_tool, {"text": "from the Python SDK"})
            confirmed = await session.call_tool(confirm_tool, {"a": 2, "b": 40})
            print(json.dumps({
                "server": init.server_info.name,
                "protocol": init.protocol_version,
                "tools": tools,
                "echo": text(echoed),
                "echoError": bool(echoed.is_error),
                "confirmed": text(confirmed),
                "confirmedError": bool(confirmed.is_error),
                "forms": forms,
            }), flush=True)


def main() -> int:
    args = sys.argv[1:]
    if len(args) < 5 or args[0] not in ("stdio", "http") or args[3] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    anyio.run(run, args[0], args[1], args[2], args[4:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
