"""The official Python SDK's client against `mcp-harness serve`: over stdio it spawns the command
after `--`, over http it connects to the URL after `--`; it lists the tools, calls ECHO_TOOL,
calls CONFIRM_TOOL answering the approval form through its elicitation callback, and prints one
JSON line of what it saw. With SERVE_NEXT_CONFIG (and SERVE_PREV_CONFIG) set, it then renames
that file over SERVE_CONFIG (a server added; then the other, the server removed) and after each
waits for `notifications/tools/list_changed` and a listing that differs. Used by crates/cli/tests/serve_peers.rs, run with the peers' Python
(`cargo xtask test` installs it).

Usage: py_client.py stdio|http ECHO_TOOL CONFIRM_TOOL -- CMD ARGS...|URL
"""

from __future__ import annotations

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def run(mode: str, echo_tool: str, confirm_tool: str, target: list[str]) -> None:
    forms: list[str] = []
    changes = 0

    async def on_message(message) -> None:
        nonlocal changes
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changes += 1

    async def elicit(context, params):
        forms.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "yes"})

    if mode == "http":
        transport = streamable_http_client(target[0])
    else:
        transport = stdio_client(StdioServerParameters(command=target[0], args=target[1:]), errlog=sys.stderr)
    async with transport as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicit, message_handler=on_message) as session:
            init = await session.initialize()
            async def listed() -> list[str]:
                names: list[str] = []
                cursor = None
                while True:
                    page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
                    names.extend(t.name for t in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        return names

            tools = await listed()

            def text(result) -> str:
                return "".join(c.text for c in result.content if getattr(c, "type", None) == "text")

            echoed = await session.call_tool(echo_tool, {"text": "from the Python SDK"})
            confirmed = await session.call_tool(confirm_tool, {"a": 2, "b": 40})

            async def after_rename(path: str, known: list[str]) -> list[str] | None:
                before = changes
                os.replace(path, os.environ["SERVE_CONFIG"])
                with anyio.move_on_after(20):
                    while True:
                        if changes > before:
                            names = await listed()
                            if len(names) != len(known):
                                return names
                        await anyio.sleep(0.05)
                return None

            after_change = None
            after_removal = None
            if os.environ.get("SERVE_NEXT_CONFIG"):
                after_change = await after_rename(os.environ["SERVE_NEXT_CONFIG"], tools)
                if after_change is not None and os.environ.get("SERVE_PREV_CONFIG"):
                    after_removal = await after_rename(os.environ["SERVE_PREV_CONFIG"], after_change)
            print(json.dumps({
                "afterChange": after_change,
                "afterRemoval": after_removal,
                "listChanged": changes,
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
